// The JIT's compile path (compile.h): options checked and keyed, images found in this
// process, in the disk cache, or compiled with NVRTC.
#include "jit/compile.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/environment.h"
#include "common/error.h"
#include "common/log.h"
#include "jit/disk_cache.h"
#include "jit/nvrtc.h"

namespace gk::jit {
namespace {

// Compiled images of this process by key: a second runtime, or a module compiled again
// after its release, loads without reading the disk.
struct ProcessImages {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const ModuleImage>> images;
};

ProcessImages& process_images() {
  static ProcessImages* t = new ProcessImages();  // never destroyed: used until exit
  return *t;
}

std::vector<std::string> string_list(const char* const* list, int32_t count, const char* what) {
  if (count < 0) fail(GK_INVALID_ARGUMENT, std::string("gk_jit_compile: num_") + what + " is negative");
  if (count > 0 && !list) fail(GK_INVALID_ARGUMENT, std::string("gk_jit_compile: ") + what + " is NULL");
  std::vector<std::string> out;
  for (int32_t i = 0; i < count; ++i) {
    if (!list[i]) {
      fail(GK_INVALID_ARGUMENT, std::string("gk_jit_compile: ") + what + "[" + std::to_string(i) +
                                    "] is NULL");
    }
    out.emplace_back(list[i]);
  }
  return out;
}

std::string sm_list(const std::vector<int>& sms) {
  std::string out;
  for (int sm : sms) out += (out.empty() ? "sm_" : ", sm_") + std::to_string(sm);
  return out;
}

// The CUDA toolkit's include folder: $CUDA_PATH/include, $CUDA_HOME/include or
// /usr/local/cuda/include, the first that holds cuda_fp16.h.
std::optional<std::string> find_toolkit_include_dir() {
  std::vector<std::string> roots;
  if (auto p = env_value("CUDA_PATH")) roots.push_back(*p);
  if (auto p = env_value("CUDA_HOME")) roots.push_back(*p);
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    std::error_code ec;
    const std::filesystem::path include = std::filesystem::path(root) / "include";
    if (std::filesystem::is_regular_file(include / "cuda_fp16.h", ec)) {
      return std::filesystem::weakly_canonical(include, ec).string();
    }
  }
  return std::nullopt;
}

// The same, looked for once per process and set of variables: the file system walk costs
// as much as the rest of a warm cache hit.
std::optional<std::string> toolkit_include_dir() {
  static std::mutex mutex;
  static std::map<std::pair<std::optional<std::string>, std::optional<std::string>>,
                  std::optional<std::string>>
      found;
  auto variables = std::make_pair(env_value("CUDA_PATH"), env_value("CUDA_HOME"));
  std::lock_guard<std::mutex> lock(mutex);
  auto it = found.find(variables);
  if (it == found.end()) it = found.emplace(variables, find_toolkit_include_dir()).first;
  return it->second;
}


// NVRTC's options for `spec`: the toolkit's include folder is passed even when the key
// left it out (a source without #include lines), for an `#include MACRO`.
std::vector<std::string> compile_options(const ProgramSpec& spec) {
  ProgramSpec with_toolkit = spec;
  auto toolkit = toolkit_include_dir();
  const auto& paths = spec.include_paths;
  if (toolkit && std::find(paths.begin(), paths.end(), *toolkit) == paths.end()) {
    with_toolkit.include_paths.push_back(*toolkit);
  }
  return nvrtc_options(with_toolkit);
}

// NVRTC, opened for a compile that missed the caches. `remembered_version` (0: none) is the
// version the key was made with.
const Nvrtc& nvrtc_for_compile(const Nvrtc* opened, int remembered_version) {
  if (opened) return *opened;
  std::string why;
  const Nvrtc* nvrtc = Nvrtc::get(&why);
  if (!nvrtc) fail(GK_UNAVAILABLE, why);
  if (nvrtc->version() != remembered_version) throw RememberedVersionWrong{};
  return *nvrtc;
}

// `nvrtc` may be null when its facts were remembered: it is then opened only to compile.
std::shared_ptr<const ModuleImage> find_or_compile(const Logger& logger,
                                                   const Nvrtc* opened_nvrtc, int nvrtc_version,
                                                   const ProgramSpec& spec, const std::string& key,
                                                   bool use_disk, bool force, int32_t& origin,
                                                   std::string& cache_path) {
  ProcessImages& t = process_images();
  if (!force) {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.images.find(key);
    if (it != t.images.end()) {
      origin = GK_JIT_ORIGIN_MEMORY;
      if (use_disk) cache_path = DiskCache(cache_settings()).entry_path(key);
      return it->second;
    }
  }
  auto remember = [&](ModuleImage&& image) {
    auto shared = std::make_shared<const ModuleImage>(std::move(image));
    std::lock_guard<std::mutex> lock(t.mutex);
    t.images[key] = shared;
    return shared;
  };
  auto compile = [&] {
    const Nvrtc& nvrtc = nvrtc_for_compile(opened_nvrtc, nvrtc_version);
    const auto start = std::chrono::steady_clock::now();
    CompileOutput out = nvrtc.compile(spec.source, spec.program_name, compile_options(spec),
                                      spec.name_expressions);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count();
    logger.info("jit: compiled " + spec.program_name + " for sm_" +
                std::to_string(spec.sm_version) + " in " + std::to_string(int64_t(ms)) +
                " ms (key " + key.substr(0, 12) + ")");
    ModuleImage image;
    image.key = key;
    image.sm_version = spec.sm_version;
    image.nvrtc_version = nvrtc.version();
    image.cubin = std::move(out.cubin);
    image.ptx = std::move(out.ptx);
    image.log = std::move(out.log);
    for (size_t i = 0; i < spec.name_expressions.size(); ++i) {
      image.lowered_names.emplace_back(spec.name_expressions[i], out.lowered_names[i]);
    }
    origin = GK_JIT_ORIGIN_COMPILED;
    return image;
  };
  if (!use_disk) return remember(compile());

  DiskCache disk(cache_settings());
  cache_path = disk.entry_path(key);
  auto try_read = [&]() -> std::optional<ModuleImage> {
    if (force) return std::nullopt;
    std::string why;
    auto image = disk.read(key, &why);
    if (!image && !why.empty()) logger.warning("jit: cache entry ignored and rebuilt: " + why);
    if (image) origin = GK_JIT_ORIGIN_DISK_CACHE;
    return image;
  };
  if (auto image = try_read()) return remember(std::move(*image));
  // One process compiles; the others wait here and then read its entry.
  DiskCache::KeyLock lock(disk, key);
  if (auto image = try_read()) return remember(std::move(*image));
  ModuleImage image = compile();
  try {
    disk.write(image);
  } catch (const Error& e) {
    logger.warning("jit: " + e.message() + "; the module is used without being cached");
    cache_path.clear();
  }
  return remember(std::move(image));
}

// Writes nvrtc.facts in `dir` the first time this process compiles into it.
void remember_once(const std::string& dir, const Nvrtc& nvrtc) {
  static std::mutex mutex;
  static std::vector<std::string> done;
  std::lock_guard<std::mutex> lock(mutex);
  if (std::find(done.begin(), done.end(), dir) != done.end()) return;
  done.push_back(dir);
  remember_nvrtc(dir, nvrtc);
}

}  // namespace

CompileRequest prepare_compile(const char* source, const gk_jit_options& o, int32_t sm_version,
                               bool trust_remembered) {
  CompileRequest r;
  r.force = o.flags & GK_JIT_FORCE_COMPILE;
  r.use_disk = !(o.flags & GK_JIT_NO_DISK_CACHE);
  // A hit needs NVRTC's version and SMs, not NVRTC: opening it (a dlopen of ~100 MB) is left
  // to a compile when an earlier process remembered them in the cache folder.
  r.cache_dir = r.use_disk ? cache_settings().dir : std::string();
  std::optional<NvrtcFacts> facts;
  if (trust_remembered && !r.force) facts = remembered_nvrtc(r.cache_dir);
  if (!facts) {
    std::string why;
    r.nvrtc = Nvrtc::get(&why);
    if (!r.nvrtc) fail(GK_UNAVAILABLE, "gk_jit_compile: " + why);
    facts = NvrtcFacts{r.nvrtc->version(), r.nvrtc->supported_sms()};
  }
  r.nvrtc_version = facts->version;

  ProgramSpec& spec = r.spec;
  spec.source = source;
  spec.program_name = o.program_name && *o.program_name ? o.program_name : "gpukit_jit.cu";
  spec.sm_version = sm_version;
  spec.name_expressions = string_list(o.name_expressions, o.num_name_expressions,
                                      "name_expressions");
  with_context("gk_jit_compile", [&] {
    normalise_options(string_list(o.options, o.num_options, "options"),
                      string_list(o.include_paths, o.num_include_paths, "include_paths"), spec);
  });
  // NVRTC ships no CUDA headers of its own in CUDA 13 (cuda_fp16.h, cuda_bf16.h, ...): the
  // toolkit's include folder goes last, as CuPy adds it. A source that includes nothing
  // leaves it out of the key, so a warm cache hit looks for no toolkit.
  if (has_include_directive(spec.source)) {
    if (auto toolkit = toolkit_include_dir()) spec.include_paths.push_back(*toolkit);
  }
  const auto& sms = facts->supported_sms;
  if (!sms.empty() && std::find(sms.begin(), sms.end(), spec.sm_version) == sms.end()) {
    fail(GK_INVALID_ARGUMENT, "gk_jit_compile: NVRTC " + std::to_string(facts->version / 1000) +
                                  "." + std::to_string(facts->version % 1000 / 10) +
                                  " cannot compile for sm_" + std::to_string(spec.sm_version) +
                                  "; it supports " + sm_list(sms));
  }
  r.key = program_key(spec, facts->version, gk_abi_version());
  return r;
}

std::shared_ptr<const ModuleImage> build_image(const Logger& logger, const CompileRequest& r,
                                               int32_t& origin, std::string& cache_path) {
  auto image = with_context("gk_jit_compile", [&] {
    return find_or_compile(logger, r.nvrtc, r.nvrtc_version, r.spec, r.key, r.use_disk, r.force,
                           origin, cache_path);
  });
  // Opened here, NVRTC's facts are remembered for the next process (once per folder).
  if (r.nvrtc && r.use_disk && !cache_path.empty()) remember_once(r.cache_dir, *r.nvrtc);
  return image;
}

void forget_process_images() {
  std::lock_guard<std::mutex> lock(process_images().mutex);
  process_images().images.clear();
}

}  // namespace gk::jit
