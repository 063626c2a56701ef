// Fuzz target: plugin manifests. The input is written as the only manifest of a plugin folder
// and read twice: by the manifest reader directly (gk::read_manifest, as the white-box core
// tests do), which may only throw gk::Error, and by a runtime created on that folder alone,
// which must skip a broken plugin with its reason and never fail, then describe itself as
// JSON. The folder's plugins/ holds a link to the real cpu plugin, so a manifest naming
// ../plugins/libgpukit_cpu.so (as the seeds do) loads it with whatever ops and priority the
// input says.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "fuzz_runtime.h"
#include "gpukit/gpukit.h"
#include "plugin/manifest.h"

namespace gk::fuzz {
namespace {

namespace fs = std::filesystem;

// <tmp>/gk_fuzz_manifest_<pid>/{manifests/fuzz.yaml, plugins/libgpukit_cpu.so -> the build's}
class PluginFolder {
 public:
  PluginFolder() {
    root_ = fs::temp_directory_path() / ("gk_fuzz_manifest_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "manifests");
    fs::create_directories(root_ / "plugins");
    fs::create_symlink(GPUKIT_FUZZ_CPU_PLUGIN, root_ / "plugins" / "libgpukit_cpu.so");
    // Held for the process, so that each runtime's unload leaves the library mapped:
    // libFuzzer keeps reading the coverage counters of every instrumented module it saw.
    if (!::dlopen(GPUKIT_FUZZ_CPU_PLUGIN, RTLD_NOW | RTLD_LOCAL)) {
      std::fprintf(stderr, "fuzz setup: %s\n", ::dlerror());
      std::abort();
    }
    manifests_ = (root_ / "manifests").string();
    manifest_ = (root_ / "manifests" / "fuzz.yaml").string();
  }
  ~PluginFolder() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  const std::string& manifests() const { return manifests_; }
  const std::string& manifest() const { return manifest_; }

 private:
  fs::path root_;
  std::string manifests_;
  std::string manifest_;
};

const PluginFolder& folder() {
  static PluginFolder f;
  return f;
}

void read_directly(const std::string& path) {
  try {
    Manifest m = read_manifest(path);
    (void)m.sm_text();
    (void)m.matches_sm(90);
  } catch (const Error&) {
    // A refused manifest: the reason is the reader's to word.
  }
}

// The runtime's own view of the folder: created, listed, described, asked to dispatch.
void load_in_runtime(const std::string& manifests) {
  gk_runtime_options o = GK_RUNTIME_OPTIONS_INIT;
  o.flags = GK_RUNTIME_IGNORE_ENVIRONMENT | GK_RUNTIME_NO_DEFAULT_PLUGINS;
  o.devices = "cpu";
  o.plugin_path = manifests.c_str();
  o.log_fn = &drop_log_line;
  o.log_level = GK_LOG_DEBUG;  // the log lines carry the manifest's text too
  gk_runtime* rt = nullptr;
  if (gk_runtime_create(&o, &rt) != GK_OK) {
    contract_broken("gk_runtime_create failed on a folder with one broken plugin");
  }
  for (int32_t i = 0; i < gk_plugin_count(rt); ++i) {
    gk_plugin_info info{};
    info.struct_size = sizeof(info);
    if (gk_plugin_get(rt, i, &info) != GK_OK) contract_broken("gk_plugin_get failed");
    if (!info.name || !info.reason) contract_broken("gk_plugin_get left a string NULL");
  }
  char* json = nullptr;
  if (gk_runtime_info_json(rt, &json) != GK_OK || !json) {
    contract_broken("gk_runtime_info_json failed");
  }
  gk_string_free(json);
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = GK_DTYPE_F32;
  d.ndim = 1;
  d.shape[0] = 4;
  gk_tensor_desc inputs[2] = {d, d};
  if (gk_explain(rt, "add", 0, inputs, 2, nullptr, 0, nullptr, 0, &json) != GK_OK || !json) {
    contract_broken("gk_explain failed for a well-formed add");
  }
  gk_string_free(json);
  gk_runtime_destroy(rt);
}

void run_one(const uint8_t* data, size_t size) {
  const PluginFolder& f = folder();
  {
    std::ofstream out(f.manifest(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  read_directly(f.manifest());
  load_in_runtime(f.manifests());
}

}  // namespace
}  // namespace gk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gk::fuzz::run_one(data, size);
  return 0;
}
