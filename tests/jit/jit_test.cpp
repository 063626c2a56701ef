// The JIT without a GPU: NVRTC compiles for an explicit SM, the in-process and disk caches,
// invalidation, corrupt entries, many processes at once, the size limit, compile errors and
// the cpu device's refusal to launch.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpukit/gpukit.h"
#include "jit/compile.h"
#include "jit/disk_cache.h"
#include "jit/nvrtc.h"
#include "test_runtime.h"

extern char** environ;

namespace gk::test {
namespace {
namespace fs = std::filesystem;

const char* kScaleSource = R"(
extern "C" __global__ void scale(float* x, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
)";

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_all(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

bool nvrtc_present() { return jit::Nvrtc::get(nullptr) != nullptr; }

// A unique source each call, so earlier tests' caches never answer for it.
std::string unique_source(const std::string& tag) {
  static std::mt19937_64 rng{std::random_device{}()};
  return std::string(kScaleSource) + "// " + tag + " " + std::to_string(rng()) + "\n";
}

struct ModuleDeleter {
  void operator()(gk_jit_module* m) const { gk_jit_module_release(m); }
};
using ModulePtr = std::unique_ptr<gk_jit_module, ModuleDeleter>;

gk_jit_module_info info_of(const gk_jit_module* m) {
  gk_jit_module_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(gk_jit_module_info_get(m, &info), GK_OK) << gk_last_error();
  return info;
}

// Each test gets its own cache folder through GPUKIT_CACHE_DIR, a cpu runtime, and an empty
// process image table, so a compile goes to the disk cache or NVRTC.
class Jit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!nvrtc_present()) {
      std::string why;
      jit::Nvrtc::get(&why);
      GTEST_SKIP() << "NVRTC unavailable: " << why;
    }
    dir_ = fs::temp_directory_path() /
           ("gpukit-jit-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    setenv("GPUKIT_CACHE_DIR", dir_.c_str(), 1);
    unsetenv("GPUKIT_CACHE_MAX_BYTES");
    jit::forget_process_images();
    rt_ = make_runtime(test_options(&log_));
  }
  void TearDown() override {
    rt_.reset();
    unsetenv("GPUKIT_CACHE_DIR");
    unsetenv("GPUKIT_CACHE_MAX_BYTES");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  ModulePtr compile(const std::string& source, int32_t sm, gk_status expect = GK_OK,
                    std::vector<const char*> options = {},
                    std::vector<const char*> names = {}) {
    gk_jit_options o = GK_JIT_OPTIONS_INIT;
    o.sm_version = sm;
    o.options = options.data();
    o.num_options = int32_t(options.size());
    o.name_expressions = names.data();
    o.num_name_expressions = int32_t(names.size());
    gk_jit_module* m = nullptr;
    gk_status s = gk_jit_compile(rt_.get(), 0, source.c_str(), &o, &m);
    EXPECT_EQ(s, expect) << gk_last_error();
    return ModulePtr(m);
  }

  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      if (e.path().extension() == ".gkjit") out.push_back(e.path());
    }
    return out;
  }

  LogCapture log_;
  fs::path dir_;
  RuntimePtr rt_;
};

TEST_F(Jit, compiles_cubin_and_ptx_for_sm80_and_sm90_without_a_gpu) {
  const std::string source = unique_source("archs");
  for (int32_t sm : {80, 90}) {
    ModulePtr m = compile(source, sm);
    ASSERT_TRUE(m);
    gk_jit_module_info info = info_of(m.get());
    EXPECT_EQ(info.sm_version, sm);
    EXPECT_EQ(info.origin, GK_JIT_ORIGIN_COMPILED);
    EXPECT_EQ(info.loaded, 0);  // the cpu device: compile only
    ASSERT_GT(info.cubin_size, 4u);
    EXPECT_EQ(std::string(static_cast<const char*>(info.cubin), 4), "\x7f" "ELF");
    ASSERT_GT(info.ptx_size, 0u);
    EXPECT_NE(std::string(info.ptx).find(".target sm_" + std::to_string(sm)), std::string::npos)
        << info.ptx;
    EXPECT_NE(std::string(info.ptx).find("scale"), std::string::npos);
    EXPECT_EQ(std::string(info.key).size(), 64u);
    EXPECT_TRUE(fs::exists(info.cache_path)) << info.cache_path;
  }
  // One entry per SM: the SM is part of the key.
  EXPECT_EQ(entries().size(), 2u);
}

TEST_F(Jit, second_compile_is_served_from_memory_then_from_disk_without_nvrtc) {
  const std::string source = unique_source("hits");
  const int64_t before = jit::Nvrtc::compile_count();
  ModulePtr first = compile(source, 80);
  EXPECT_EQ(jit::Nvrtc::compile_count(), before + 1);
  // While the first is alive: the same module, from memory.
  ModulePtr second = compile(source, 80);
  EXPECT_EQ(info_of(second.get()).origin, GK_JIT_ORIGIN_MEMORY);
  EXPECT_EQ(info_of(second.get()).cubin, info_of(first.get()).cubin);
  first.reset();
  second.reset();
  // A new process would find only the disk: forget what this one holds.
  jit::forget_process_images();
  ModulePtr third = compile(source, 80);
  EXPECT_EQ(info_of(third.get()).origin, GK_JIT_ORIGIN_DISK_CACHE);
  EXPECT_EQ(jit::Nvrtc::compile_count(), before + 1);
  // Whitespace around options is normalised away: the same key.
  const std::string key = info_of(third.get()).key;
  ModulePtr spaced = compile(source, 80, GK_OK, {"  -std=c++17 "});
  ModulePtr plain = compile(source, 80, GK_OK, {"-std=c++17"});
  EXPECT_EQ(std::string(info_of(spaced.get()).key), info_of(plain.get()).key);
  EXPECT_NE(std::string(info_of(plain.get()).key), key);  // another option: another key
}

TEST_F(Jit, an_included_header_change_recompiles) {
  const fs::path include = dir_ / "include";
  fs::create_directories(include / "sub");
  write_all(include / "defs.h", "#include \"sub/inner.h\"\n");
  write_all(include / "sub" / "inner.h", "#define FACTOR 2.0f\n");
  const std::string source = R"(#include "defs.h"
extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= FACTOR; }
)";
  const std::string option = "-I" + include.string();
  const int64_t before = jit::Nvrtc::compile_count();
  ModulePtr a = compile(source, 80, GK_OK, {option.c_str()});
  const std::string key_a = info_of(a.get()).key;
  jit::forget_process_images();
  ModulePtr same = compile(source, 80, GK_OK, {option.c_str()});
  EXPECT_EQ(info_of(same.get()).origin, GK_JIT_ORIGIN_MEMORY);  // module a is alive
  a.reset();
  same.reset();
  // The header two levels down changes: a new key, and NVRTC runs again.
  write_all(include / "sub" / "inner.h", "#define FACTOR 3.0f\n");
  ModulePtr b = compile(source, 80, GK_OK, {option.c_str()});
  EXPECT_NE(std::string(info_of(b.get()).key), key_a);
  EXPECT_EQ(info_of(b.get()).origin, GK_JIT_ORIGIN_COMPILED);
  EXPECT_EQ(jit::Nvrtc::compile_count(), before + 2);
  EXPECT_NE(std::string(info_of(b.get()).ptx).find("0f40400000"), std::string::npos)
      << "the PTX should multiply by 3.0f";
}

TEST_F(Jit, a_corrupt_or_torn_entry_is_ignored_and_rebuilt) {
  const std::string source = unique_source("corrupt");
  std::string path;
  {
    ModulePtr m = compile(source, 80);
    path = info_of(m.get()).cache_path;
  }
  const std::string good = read_all(path);
  for (int variant = 0; variant < 3; ++variant) {
    std::string bad = good;
    if (variant == 0) bad[bad.size() / 2] ^= 0x5a;  // a flipped byte: checksum mismatch
    if (variant == 1) bad.resize(bad.size() / 3);    // torn
    if (variant == 2) bad = "";                      // empty
    write_all(path, bad);
    jit::forget_process_images();
    log_.lines.clear();
    const int64_t before = jit::Nvrtc::compile_count();
    ModulePtr m = compile(source, 80);
    ASSERT_TRUE(m);
    EXPECT_EQ(info_of(m.get()).origin, GK_JIT_ORIGIN_COMPILED) << "variant " << variant;
    EXPECT_EQ(jit::Nvrtc::compile_count(), before + 1);
    EXPECT_TRUE(log_.contains("cache entry ignored and rebuilt")) << "variant " << variant;
    // The rebuilt entry is whole again.
    std::string why;
    auto decoded = jit::decode_entry(read_all(path), &why);
    ASSERT_TRUE(decoded) << why;
    EXPECT_EQ(decoded->key, std::string(info_of(m.get()).key));
  }
}

TEST_F(Jit, eight_processes_compiling_one_source_at_once_leave_one_valid_entry) {
  const fs::path source_file = dir_ / "shared.cu";
  fs::create_directories(dir_);
  write_all(source_file, unique_source("storm"));
  const fs::path start_file = dir_ / "go";
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    std::vector<std::string> args = {self, "--jit-child", "compile", source_file.string(),
                                     start_file.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    children.push_back(pid);
  }
  write_all(start_file, "go");  // every child waits for this, so they compile together
  int compiled = 0, from_disk = 0;
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    if (code == GK_JIT_ORIGIN_COMPILED) ++compiled;
    else if (code == GK_JIT_ORIGIN_DISK_CACHE) ++from_disk;
    else ADD_FAILURE() << "child exit code " << code;
  }
  EXPECT_EQ(compiled, 1) << "the lock lets one process compile";
  EXPECT_EQ(from_disk, 7);
  ASSERT_EQ(entries().size(), 1u);
  std::string why;
  EXPECT_TRUE(jit::decode_entry(read_all(entries()[0]), &why)) << why;
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
}

TEST_F(Jit, threads_compiling_one_source_at_once_share_one_compile) {
  const std::string source = unique_source("threads");
  const int64_t before = jit::Nvrtc::compile_count();
  std::vector<std::thread> threads;
  std::vector<gk_jit_module*> modules(8, nullptr);
  std::vector<gk_status> statuses(8, GK_UNKNOWN);
  for (size_t i = 0; i < modules.size(); ++i) {
    threads.emplace_back([&, i] {
      gk_jit_options o = GK_JIT_OPTIONS_INIT;
      o.sm_version = 80;
      statuses[i] = gk_jit_compile(rt_.get(), 0, source.c_str(), &o, &modules[i]);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < modules.size(); ++i) ASSERT_EQ(statuses[i], GK_OK) << i;
  const std::string key = info_of(modules[0]).key;
  for (gk_jit_module* m : modules) {
    EXPECT_EQ(std::string(info_of(m).key), key);
    gk_jit_module_release(m);
  }
  EXPECT_EQ(jit::Nvrtc::compile_count(), before + 1);
  EXPECT_EQ(entries().size(), 1u);
}

TEST_F(Jit, the_size_limit_removes_the_least_recently_used_entries) {
  const std::string a = unique_source("lru-a"), b = unique_source("lru-b"),
                    c = unique_source("lru-c");
  std::string path_a, path_b, path_c;
  {
    ModulePtr m = compile(a, 80);
    path_a = info_of(m.get()).cache_path;
  }
  {
    ModulePtr m = compile(b, 80);
    path_b = info_of(m.get()).cache_path;
  }
  // a is older than b; then a is used (a disk hit refreshes it), so b is the LRU one.
  auto age = [](const std::string& p, int seconds) {
    struct timespec times[2];
    clock_gettime(CLOCK_REALTIME, &times[0]);
    times[0].tv_sec -= seconds;
    times[1] = times[0];
    ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), times, 0), 0);
  };
  age(path_a, 200);
  age(path_b, 100);
  jit::forget_process_images();
  { ModulePtr m = compile(a, 80); EXPECT_EQ(info_of(m.get()).origin, GK_JIT_ORIGIN_DISK_CACHE); }
  const auto size_a = fs::file_size(path_a), size_b = fs::file_size(path_b);
  // Room for about two entries: writing c must remove b only.
  setenv("GPUKIT_CACHE_MAX_BYTES", std::to_string(size_a + size_b + size_b / 2).c_str(), 1);
  {
    ModulePtr m = compile(c, 80);
    path_c = info_of(m.get()).cache_path;
  }
  EXPECT_TRUE(fs::exists(path_a));
  EXPECT_FALSE(fs::exists(path_b));
  EXPECT_TRUE(fs::exists(path_c));
  gk_jit_cache_stats stats{};
  stats.struct_size = sizeof(stats);
  ASSERT_EQ(gk_jit_cache_stats_get(&stats), GK_OK) << gk_last_error();
  EXPECT_EQ(stats.entries, 2);
  EXPECT_EQ(std::string(stats.dir), dir_.string());
  EXPECT_LE(stats.bytes, stats.limit_bytes);
  int64_t removed = -1;
  ASSERT_EQ(gk_jit_cache_clear(&removed), GK_OK) << gk_last_error();
  EXPECT_EQ(removed, 2);
  ASSERT_EQ(gk_jit_cache_stats_get(&stats), GK_OK);
  EXPECT_EQ(stats.entries, 0);
}

TEST_F(Jit, a_compile_error_quotes_the_offending_source_line) {
  const std::string source =
      "extern \"C\" __global__ void broken(float* x) {\n"
      "  int i = threadIdx.x;\n"
      "  x[i] = undeclared_value * 2.0f;\n"
      "}\n";
  ModulePtr m = compile(source, 80, GK_INVALID_ARGUMENT);
  EXPECT_FALSE(m);
  const std::string message = gk_last_error();
  EXPECT_NE(message.find("gpukit_jit.cu did not compile"), std::string::npos) << message;
  EXPECT_NE(message.find("gpukit_jit.cu(3): error"), std::string::npos) << message;
  EXPECT_NE(message.find("undeclared_value"), std::string::npos) << message;
  EXPECT_NE(message.find(">     3 |   x[i] = undeclared_value * 2.0f;"), std::string::npos)
      << message;
  EXPECT_NE(message.find("      2 |   int i = threadIdx.x;"), std::string::npos) << message;
  EXPECT_TRUE(entries().empty());  // nothing cached for a failed compile
}

TEST_F(Jit, the_cpu_device_refuses_to_run_kernels) {
  // No SM given on the cpu device: nothing to compile for.
  ModulePtr none = compile(kScaleSource, 0, GK_UNAVAILABLE);
  EXPECT_NE(std::string(gk_last_error()).find("cpu runs no JIT kernels"), std::string::npos)
      << gk_last_error();
  // Compiled for an SM: the module is not loaded, so it has no kernel to launch.
  ModulePtr m = compile(kScaleSource, 80);
  ASSERT_TRUE(m);
  gk_jit_kernel* k = nullptr;
  EXPECT_EQ(gk_jit_get_kernel(m.get(), "scale", &k), GK_UNAVAILABLE);
  EXPECT_EQ(k, nullptr);
  EXPECT_NE(std::string(gk_last_error()).find("not loaded on cpu"), std::string::npos)
      << gk_last_error();
  gk_jit_launch_args args{};
  args.struct_size = sizeof(args);
  EXPECT_EQ(gk_jit_launch(nullptr, &args), GK_INVALID_ARGUMENT);
}

TEST_F(Jit, name_expressions_of_templates_have_lowered_names) {
  const std::string source = R"(
template <typename T, int N> __global__ void fill(T* x, T v) {
  for (int i = 0; i < N; ++i) x[threadIdx.x * N + i] = v;
}
)";
  ModulePtr m = compile(source, 90, GK_OK, {}, {"fill<float, 4>", "fill<double, 2>"});
  ASSERT_TRUE(m);
  const char* lowered = nullptr;
  ASSERT_EQ(gk_jit_lowered_name(m.get(), "fill<float, 4>", &lowered), GK_OK) << gk_last_error();
  EXPECT_EQ(std::string(lowered), "_Z4fillIfLi4EEvPT_S0_");
  ASSERT_EQ(gk_jit_lowered_name(m.get(), "fill<double, 2>", &lowered), GK_OK);
  EXPECT_EQ(std::string(lowered), "_Z4fillIdLi2EEvPT_S0_");
  EXPECT_EQ(gk_jit_lowered_name(m.get(), "fill<int, 1>", &lowered), GK_NOT_FOUND);
  EXPECT_NE(std::string(gk_last_error()).find("'fill<float, 4>', 'fill<double, 2>'"),
            std::string::npos)
      << gk_last_error();
  // The names survive the disk cache.
  m.reset();
  jit::forget_process_images();
  ModulePtr again = compile(source, 90, GK_OK, {}, {"fill<float, 4>", "fill<double, 2>"});
  EXPECT_EQ(info_of(again.get()).origin, GK_JIT_ORIGIN_DISK_CACHE);
  ASSERT_EQ(gk_jit_lowered_name(again.get(), "fill<double, 2>", &lowered), GK_OK);
  EXPECT_EQ(std::string(lowered), "_Z4fillIdLi2EEvPT_S0_");
}

TEST_F(Jit, bad_options_and_arguments_say_what_is_wrong) {
  compile(kScaleSource, 80, GK_INVALID_ARGUMENT, {"-arch=sm_90"});
  EXPECT_NE(std::string(gk_last_error()).find("sets the architecture"), std::string::npos);
  compile(kScaleSource, 80, GK_INVALID_ARGUMENT, {"   "});
  EXPECT_NE(std::string(gk_last_error()).find("option 0 is empty"), std::string::npos);
  compile(kScaleSource, 5, GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("sm_version 5 is not an SM"), std::string::npos);
  compile(kScaleSource, 61, GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("cannot compile for sm_61; it supports"),
            std::string::npos)
      << gk_last_error();
  compile(kScaleSource, 80, GK_INVALID_ARGUMENT, {"--no-such-option"});
  EXPECT_NE(std::string(gk_last_error()).find("--no-such-option"), std::string::npos)
      << gk_last_error();
  compile(kScaleSource, 80, GK_INVALID_ARGUMENT, {}, {"missing_kernel<int>"});

  gk_jit_options o = GK_JIT_OPTIONS_INIT;
  o.sm_version = 80;
  const char* with_null[] = {"-std=c++17", nullptr};
  o.options = with_null;
  o.num_options = 2;
  gk_jit_module* m = nullptr;
  EXPECT_EQ(gk_jit_compile(rt_.get(), 0, kScaleSource, &o, &m), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("options[1] is NULL"), std::string::npos);
  o.num_options = -1;
  EXPECT_EQ(gk_jit_compile(rt_.get(), 0, kScaleSource, &o, &m), GK_INVALID_ARGUMENT);
  o.num_options = 0;
  o.struct_size = 8;
  EXPECT_EQ(gk_jit_compile(rt_.get(), 0, kScaleSource, &o, &m), GK_INVALID_ARGUMENT);
  o.struct_size = sizeof(o);
  EXPECT_EQ(gk_jit_compile(rt_.get(), 0, nullptr, &o, &m), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_jit_compile(rt_.get(), 7, kScaleSource, &o, &m), GK_OUT_OF_RANGE);
  EXPECT_EQ(gk_jit_compile(nullptr, 0, kScaleSource, &o, &m), GK_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
}

TEST_F(Jit, an_unwritable_cache_folder_still_compiles) {
  setenv("GPUKIT_CACHE_DIR", "/proc/gpukit-no-such-cache", 1);
  ModulePtr m = compile(unique_source("readonly"), 80);
  ASSERT_TRUE(m);
  EXPECT_EQ(std::string(info_of(m.get()).cache_path), "");
  EXPECT_TRUE(log_.contains("without being cached")) << (log_.lines.empty() ? "" : log_.lines[0]);
}

TEST_F(Jit, cuda_headers_of_the_toolkit_are_found) {
  // NVRTC 13 has no built-in cuda_fp16.h: the toolkit's include folder is searched last.
  ModulePtr m = compile(R"(#include <cuda_fp16.h>
extern "C" __global__ void halve(__half* x) { x[threadIdx.x] = __hmul(x[threadIdx.x], __float2half(0.5f)); }
)",
                        80);
  ASSERT_TRUE(m);
  EXPECT_NE(std::string(info_of(m.get()).ptx).find("halve"), std::string::npos);
}

TEST_F(Jit, a_toolkit_header_named_by_a_macro_is_found) {
  // A source without #include lines keeps the toolkit's folder out of its key, yet NVRTC
  // still searches it: `#include MACRO` is not scanned but must compile.
  ModulePtr m = compile(R"(#define FP16_HEADER <cuda_fp16.h>
#include FP16_HEADER
extern "C" __global__ void halve(__half* x) { x[threadIdx.x] = __hmul(x[threadIdx.x], __float2half(0.5f)); }
)",
                        80);
  ASSERT_TRUE(m) << gk_last_error();
  EXPECT_NE(std::string(info_of(m.get()).ptx).find("halve"), std::string::npos);
}

TEST(JitWithoutNvrtc, compiling_says_nvrtc_is_missing) {
  // Another process: NVRTC is opened once per process.
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {self, "--jit-child", "no-nvrtc"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) env_text.emplace_back(*e);
  env_text.emplace_back("GPUKIT_NVRTC_LIBRARY=/nonexistent/libnvrtc.so.99");
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child prints what it saw on stderr";
}

}  // namespace

int run_jit_child(int argc, char** argv) {
  if (argc < 3 || std::string(argv[1]) != "--jit-child") return -1;
  const std::string mode = argv[2];
  gk_runtime_options options = test_options();
  gk_runtime* rt = nullptr;
  if (gk_runtime_create(&options, &rt) != GK_OK) {
    fprintf(stderr, "child: %s\n", gk_last_error());
    return 100;
  }
  int code = 101;
  if (mode == "compile" && argc == 5) {
    const std::string source = read_all(argv[3]);
    while (!fs::exists(argv[4])) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    gk_jit_options o = GK_JIT_OPTIONS_INIT;
    o.sm_version = 80;
    gk_jit_module* m = nullptr;
    if (gk_jit_compile(rt, 0, source.c_str(), &o, &m) == GK_OK) {
      code = info_of(m).origin;
      gk_jit_module_release(m);
    } else {
      fprintf(stderr, "child: %s\n", gk_last_error());
    }
  } else if (mode == "no-nvrtc") {
    gk_jit_options o = GK_JIT_OPTIONS_INIT;
    o.sm_version = 80;
    gk_jit_module* m = nullptr;
    const gk_status s = gk_jit_compile(rt, 0, kScaleSource, &o, &m);
    const std::string message = gk_last_error();
    fprintf(stderr, "child: status %d: %s\n", int(s), message.c_str());
    code = s == GK_UNAVAILABLE && message.find("NVRTC is not installed") != std::string::npos &&
                   message.find("libnvrtc.so.99") != std::string::npos
               ? 0
               : 1;
  }
  gk_runtime_destroy(rt);
  return code;
}

}  // namespace gk::test

int main(int argc, char** argv) {
  const int child = gk::test::run_jit_child(argc, argv);
  if (child >= 0) return child;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
