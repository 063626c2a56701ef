// The plugin loader against fixtures: every broken plugin is skipped with a reason that
// names its cause, the valid ones load, priorities decide dispatch, and the cpu plugin
// and its ops keep working beside them.
//
// Reason keywords are checked case-insensitively as substrings (see kBroken below); the
// exact wording is the loader's.
#include <gpukit/gpukit.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool contains_ci(const std::string& haystack, const std::string& needle) {
  return lower(haystack).find(lower(needle)) != std::string::npos;
}

// `word` occurs with no letter right before or after it ("SM 90", "sm_min", "SM100"
// count; "/home/smith" does not).
bool contains_word_ci(const std::string& haystack, const std::string& word) {
  const std::string h = lower(haystack), w = lower(word);
  for (size_t at = h.find(w); at != std::string::npos; at = h.find(w, at + 1)) {
    const bool left = at == 0 || !std::isalpha(static_cast<unsigned char>(h[at - 1]));
    const size_t end = at + w.size();
    const bool right = end >= h.size() || !std::isalpha(static_cast<unsigned char>(h[end]));
    if (left && right) return true;
  }
  return false;
}

struct PluginRow {
  std::string name, manifest_path, library_path, reason;
  bool loaded = false;
  int32_t priority = 0, device_kind = 0, sm_min = 0, sm_max = 0;
};

std::string str(const char* s) {
  return s ? s : "";
}

class LoaderTest : public ::testing::Test {
 protected:
  // The search for a manifest's `requires` libraries reads GPUKIT_CUDA_LIBRARY_PATH once per
  // process (ctest runs each test in its own), whatever the runtime's options say.
  void SetUp() override {
    setenv("GPUKIT_CUDA_LIBRARY_PATH", GPUKIT_FIXTURE_DEPS, 1);
    open(nullptr);
  }
  void TearDown() override { gk_runtime_destroy(rt_); }

  void open(const char* disable) {
    gk_runtime_destroy(rt_);
    rt_ = nullptr;
    gk_runtime_options options = GK_RUNTIME_OPTIONS_INIT;
    options.flags = GK_RUNTIME_IGNORE_ENVIRONMENT;
    options.plugin_path = GPUKIT_FIXTURE_MANIFESTS;
    options.plugins_disable = disable;
    options.log_level = GK_LOG_ERROR;
    ASSERT_EQ(gk_runtime_create(&options, &rt_), GK_OK) << gk_last_error();
  }

  std::vector<PluginRow> plugins() const {
    std::vector<PluginRow> rows;
    const int32_t count = gk_plugin_count(rt_);
    for (int32_t i = 0; i < count; ++i) {
      gk_plugin_info info{};
      info.struct_size = sizeof info;
      EXPECT_EQ(gk_plugin_get(rt_, i, &info), GK_OK) << gk_last_error();
      rows.push_back({str(info.name), str(info.manifest_path), str(info.library_path),
                      str(info.reason), info.loaded != 0, info.priority, info.device_kind,
                      info.sm_min, info.sm_max});
    }
    return rows;
  }

  // The candidate whose manifest file is `file` (e.g. "fx_bad_yaml.yaml").
  PluginRow by_manifest(const std::string& file) const {
    std::vector<PluginRow> found;
    for (const auto& p : plugins()) {
      const std::string& path = p.manifest_path;
      if (path.size() >= file.size() &&
          path.compare(path.size() - file.size(), file.size(), file) == 0) {
        found.push_back(p);
      }
    }
    EXPECT_EQ(found.size(), 1u) << "manifest " << file << " listed " << found.size() << " times";
    return found.empty() ? PluginRow{} : found[0];
  }

  nlohmann::json explain(const char* op, int32_t dtype, int32_t num_inputs) {
    gk_tensor_desc d{};
    d.struct_size = sizeof d;
    d.dtype = dtype;
    d.ndim = 1;
    d.shape[0] = 8;
    std::vector<gk_tensor_desc> inputs(num_inputs, d);
    char* json = nullptr;
    EXPECT_EQ(gk_explain(rt_, op, 0, inputs.data(), num_inputs, &d, 1, nullptr, 0, &json), GK_OK)
        << gk_last_error();
    if (!json) return nlohmann::json();
    nlohmann::json j = nlohmann::json::parse(json);
    gk_string_free(json);
    return j;
  }

  // Runs `op` on the cpu device over f32 inputs, returns the output.
  std::vector<float> run(const char* op, const std::vector<std::vector<float>>& inputs) {
    gk_tensor_desc d{};
    d.struct_size = sizeof d;
    d.dtype = GK_DTYPE_F32;
    d.ndim = 1;
    d.shape[0] = static_cast<int64_t>(inputs[0].size());
    std::vector<gk_tensor*> in;
    for (const auto& host : inputs) {
      gk_tensor* t = nullptr;
      EXPECT_EQ(gk_tensor_create(rt_, 0, &d, nullptr, &t), GK_OK) << gk_last_error();
      EXPECT_EQ(gk_copy_from_host(t, host.data(), host.size() * sizeof(float), nullptr), GK_OK)
          << gk_last_error();
      in.push_back(t);
    }
    gk_tensor* out = nullptr;
    EXPECT_EQ(gk_tensor_create(rt_, 0, &d, nullptr, &out), GK_OK) << gk_last_error();
    gk_op_args args{};
    args.struct_size = sizeof args;
    args.inputs = in.data();
    args.num_inputs = static_cast<int32_t>(in.size());
    args.outputs = &out;
    args.num_outputs = 1;
    EXPECT_EQ(gk_op_call(rt_, op, &args), GK_OK) << gk_last_error();
    std::vector<float> result(inputs[0].size());
    EXPECT_EQ(gk_copy_to_host(out, result.data(), result.size() * sizeof(float), nullptr), GK_OK)
        << gk_last_error();
    for (gk_tensor* t : in) gk_tensor_release(t);
    gk_tensor_release(out);
    return result;
  }

  gk_runtime* rt_ = nullptr;
};

// A skip-reason keyword: a case-insensitive substring, or a whole word when `word`.
struct Keyword {
  std::string text;
  bool word = false;
};

// A broken fixture and the keywords its skip reason must contain (any one of `any_of`).
struct Broken {
  const char* manifest;
  std::vector<Keyword> any_of;
};

const Broken kBroken[] = {
    {"fx_bad_yaml.yaml", {{"yaml"}}},
    {"fx_unknown_field.yaml", {{"unknown field"}}},
    {"fx_missing_lib.yaml", {{"not found"}, {"missing"}, {"no such file"}}},
    {"fx_no_entry.yaml", {{"gk_plugin_entry"}}},
    {"fx_wrong_abi.yaml", {{"abi", true}}},
    {"fx_manifest_abi.yaml", {{"abi", true}}},
    {"fx_init_fails.yaml", {{"init"}}},
    {"fx_undefined_symbol.yaml", {{"undefined symbol: gk_fixture_symbol_nobody_defines"}}},
    // With CUDA devices the range excludes them all ("SM 100-120 matches no device");
    // without any, the cause is that there is no CUDA device.
    {"fx_cuda_future.yaml", {{"sm", true}, {"cuda device"}}},
    {"fx_requires_missing.yaml", {{"requires libgpukit_fixture_absent.so.7 not found"}}},
};

TEST_F(LoaderTest, broken_plugins_are_skipped_with_a_reason_naming_the_cause) {
  for (const Broken& b : kBroken) {
    SCOPED_TRACE(b.manifest);
    const PluginRow p = by_manifest(b.manifest);
    EXPECT_FALSE(p.loaded) << b.manifest << " was loaded";
    EXPECT_FALSE(p.reason.empty()) << b.manifest << " skipped without a reason";
    bool matched = false;
    for (const auto& k : b.any_of) {
      matched =
          matched || (k.word ? contains_word_ci(p.reason, k.text) : contains_ci(p.reason, k.text));
    }
    std::string expected;
    for (const auto& k : b.any_of) expected += (expected.empty() ? "'" : " or '") + k.text + "'";
    EXPECT_TRUE(matched) << b.manifest << ": reason \"" << p.reason << "\" lacks " << expected;
  }
}

TEST_F(LoaderTest, unknown_field_reason_names_the_field) {
  const PluginRow p = by_manifest("fx_unknown_field.yaml");
  EXPECT_TRUE(contains_ci(p.reason, "colour")) << p.reason;
}

TEST_F(LoaderTest, init_failure_reason_carries_the_plugins_own_message) {
  const PluginRow p = by_manifest("fx_init_fails.yaml");
  EXPECT_TRUE(contains_ci(p.reason, "fixture init failure")) << p.reason;
}

TEST_F(LoaderTest, a_missing_required_library_reason_names_the_folders_and_the_fix) {
  const PluginRow p = by_manifest("fx_requires_missing.yaml");
  EXPECT_TRUE(contains_ci(p.reason, GPUKIT_FIXTURE_DEPS)) << p.reason;
  EXPECT_TRUE(contains_ci(p.reason, "GPUKIT_CUDA_LIBRARY_PATH")) << p.reason;
  EXPECT_TRUE(contains_ci(p.reason, "pip install gpukit[cuda]")) << p.reason;
}

TEST_F(LoaderTest, a_required_library_is_opened_first_from_the_search_folders) {
  const PluginRow p = by_manifest("fx_requires_dep.yaml");
  EXPECT_TRUE(p.loaded) << p.reason;
  EXPECT_EQ(p.reason, "");
}

TEST_F(LoaderTest, readable_manifests_report_their_fields_even_when_skipped) {
  const PluginRow cuda = by_manifest("fx_cuda_future.yaml");
  EXPECT_EQ(cuda.name, "fx_cuda_future");
  EXPECT_EQ(cuda.device_kind, GK_DEVICE_KIND_CUDA);
  EXPECT_EQ(cuda.sm_min, 100);
  EXPECT_EQ(cuda.sm_max, 120);
  EXPECT_EQ(cuda.priority, 9);
  const PluginRow init = by_manifest("fx_init_fails.yaml");
  EXPECT_EQ(init.name, "fx_init_fails");
}

TEST_F(LoaderTest, valid_fixtures_load) {
  for (const char* name : {"fx_neg_p5", "fx_neg_p7"}) {
    SCOPED_TRACE(name);
    const PluginRow p = by_manifest(std::string(name) + ".yaml");
    EXPECT_TRUE(p.loaded) << p.reason;
    EXPECT_EQ(p.reason, "");
    EXPECT_EQ(p.name, name);
    EXPECT_EQ(p.device_kind, GK_DEVICE_KIND_CPU);
    EXPECT_NE(p.library_path.find(std::string("lib") + name + ".so"), std::string::npos)
        << p.library_path;
  }
  EXPECT_EQ(by_manifest("fx_neg_p5.yaml").priority, 5);
  EXPECT_EQ(by_manifest("fx_neg_p7.yaml").priority, 7);
}

TEST_F(LoaderTest, the_cpu_plugin_still_loads) {
  bool cpu_loaded = false;
  for (const auto& p : plugins()) cpu_loaded = cpu_loaded || (p.name == "cpu" && p.loaded);
  EXPECT_TRUE(cpu_loaded);
}

TEST_F(LoaderTest, neg_dispatches_to_the_highest_priority_fixture) {
  const nlohmann::json j = explain("neg", GK_DTYPE_F32, 1);
  ASSERT_TRUE(j.contains("chosen")) << j.dump();
  EXPECT_EQ(j["chosen"], "fx_neg_p7") << j.dump(2);
  std::vector<std::string> candidates;
  for (const auto& c : j.value("candidates", nlohmann::json::array())) {
    candidates.push_back(c.value("plugin", ""));
  }
  for (const char* expected : {"fx_neg_p7", "fx_neg_p5", "cpu"}) {
    EXPECT_NE(std::find(candidates.begin(), candidates.end(), expected), candidates.end())
        << expected << " missing from candidates: " << j.dump(2);
  }
  EXPECT_EQ(run("neg", {{1.f, -2.f, 3.5f, 0.f}}), (std::vector<float>{-1.f, 2.f, -3.5f, -0.f}));
}

TEST_F(LoaderTest, disabling_the_winner_falls_back_to_the_next_priority) {
  open("fx_neg_p7");
  const nlohmann::json j = explain("neg", GK_DTYPE_F32, 1);
  EXPECT_EQ(j.value("chosen", nlohmann::json()), "fx_neg_p5") << j.dump(2);
  open("fx_neg_*");
  EXPECT_EQ(explain("neg", GK_DTYPE_F32, 1).value("chosen", nlohmann::json()), "cpu");
}

TEST_F(LoaderTest, ops_the_fixtures_do_not_serve_go_to_the_cpu_plugin) {
  EXPECT_EQ(explain("neg", GK_DTYPE_F64, 1).value("chosen", nlohmann::json()), "cpu");
  EXPECT_EQ(explain("add", GK_DTYPE_F32, 2).value("chosen", nlohmann::json()), "cpu");
  EXPECT_EQ(run("add", {{1.f, 2.f}, {10.f, 20.f}}), (std::vector<float>{11.f, 22.f}));
}

}  // namespace
