// The JIT's C entry points (gpukit_jit.h): compile through the caches, get kernels, launch
// them (the launch itself is in jit_launch.cpp).
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <mutex>
#include <unordered_map>

#include "capi/capi_util.h"
#include "capi/op_call.h"
#include "common/environment.h"
#include "jit/disk_cache.h"
#include "jit/jit_module.h"
#include "jit/nvrtc.h"

namespace gk::jit {
namespace {

const ModuleDriverApi* module_driver_api(const cuda::Driver& driver) {
  static std::once_flag once;
  static ModuleDriverApi api;
  static bool complete = false;
  std::call_once(once, [&] {
    api.cuModuleLoadData =
        reinterpret_cast<decltype(api.cuModuleLoadData)>(driver.symbol("cuModuleLoadData"));
    api.cuModuleUnload =
        reinterpret_cast<decltype(api.cuModuleUnload)>(driver.symbol("cuModuleUnload"));
    api.cuModuleGetFunction =
        reinterpret_cast<decltype(api.cuModuleGetFunction)>(driver.symbol("cuModuleGetFunction"));
    api.cuLaunchKernel =
        reinterpret_cast<decltype(api.cuLaunchKernel)>(driver.symbol("cuLaunchKernel"));
    api.cuFuncGetParamInfo =
        reinterpret_cast<decltype(api.cuFuncGetParamInfo)>(driver.symbol("cuFuncGetParamInfo"));
    complete = api.cuModuleLoadData && api.cuModuleUnload && api.cuModuleGetFunction &&
               api.cuLaunchKernel;
  });
  if (!complete) {
    fail(GK_UNAVAILABLE, "the CUDA driver lacks the module calls (cuModuleLoadData, "
                         "cuModuleGetFunction, cuLaunchKernel) the JIT needs");
  }
  return &api;
}

// Compiled images of this process by key: a second runtime, or a module compiled again
// after its release, loads without reading the disk.
struct ProcessTables {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const ModuleImage>> images;
  // "<runtime address>/<device>/<key>" -> the module loaded there, while some handle holds it.
  std::unordered_map<std::string, std::weak_ptr<LoadedModule>> modules;
};

ProcessTables& tables() {
  static ProcessTables* t = new ProcessTables();  // never destroyed: used until exit
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

// A miss when the key was made with a remembered NVRTC version (remembered_nvrtc) that the
// NVRTC opened to compile does not have: compile_module starts again with NVRTC open.
struct RememberedVersionWrong {};

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
std::shared_ptr<const ModuleImage> build_image(const Logger& logger, const Nvrtc* opened_nvrtc,
                                               int nvrtc_version, const ProgramSpec& spec,
                                               const std::string& key, bool use_disk, bool force,
                                               int32_t& origin, std::string& cache_path) {
  ProcessTables& t = tables();
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
    CompileOutput out = nvrtc.compile(spec.source, spec.program_name, nvrtc_options(spec),
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

// `trust_remembered`: use NVRTC facts remembered in the cache folder (see build_image).
gk_jit_module* compile_module(Runtime& rt, int32_t device_id, const char* source,
                              const gk_jit_options* given, bool trust_remembered) {
  require_arg(source, "gk_jit_compile", "source");
  gk_jit_options o = GK_JIT_OPTIONS_INIT;
  if (given) {
    require_struct(given->struct_size, GK_JIT_OPTIONS_SIZE, "gk_jit_compile", "gk_jit_options");
    std::memcpy(&o, given, std::min(given->struct_size, sizeof(o)));
  }
  const Device& device = rt.devices().at(device_id);
  if (o.sm_version == 0 && !device.is_cuda()) {
    fail(GK_UNAVAILABLE, "gk_jit_compile: " + device.label() +
                             " runs no JIT kernels (they need a CUDA device); set "
                             "gk_jit_options.sm_version to compile for an SM without loading");
  }
  if (o.sm_version != 0 && (o.sm_version < 10 || o.sm_version > 1000)) {
    fail(GK_INVALID_ARGUMENT, "gk_jit_compile: sm_version " + std::to_string(o.sm_version) +
                                  " is not an SM (write 90 for sm_90)");
  }
  const bool force = o.flags & GK_JIT_FORCE_COMPILE;
  const bool use_disk = !(o.flags & GK_JIT_NO_DISK_CACHE);
  // A hit needs NVRTC's version and SMs, not NVRTC: opening it (a dlopen of ~100 MB) is left
  // to a compile when an earlier process remembered them in the cache folder.
  const std::string cache_dir = use_disk ? cache_settings().dir : std::string();
  const Nvrtc* nvrtc = nullptr;
  std::optional<NvrtcFacts> facts;
  if (trust_remembered && !force) facts = remembered_nvrtc(cache_dir);
  if (!facts) {
    std::string why;
    nvrtc = Nvrtc::get(&why);
    if (!nvrtc) fail(GK_UNAVAILABLE, "gk_jit_compile: " + why);
    facts = NvrtcFacts{nvrtc->version(), nvrtc->supported_sms()};
  }

  ProgramSpec spec;
  spec.source = source;
  spec.program_name = o.program_name && *o.program_name ? o.program_name : "gpukit_jit.cu";
  spec.sm_version = o.sm_version ? o.sm_version : device.sm_version;
  spec.name_expressions = string_list(o.name_expressions, o.num_name_expressions,
                                      "name_expressions");
  with_context("gk_jit_compile", [&] {
    normalise_options(string_list(o.options, o.num_options, "options"),
                      string_list(o.include_paths, o.num_include_paths, "include_paths"), spec);
  });
  // NVRTC ships no CUDA headers of its own in CUDA 13 (cuda_fp16.h, cuda_bf16.h, ...): the
  // toolkit's include folder goes last, as CuPy adds it.
  if (auto toolkit = toolkit_include_dir()) spec.include_paths.push_back(*toolkit);
  const auto& sms = facts->supported_sms;
  if (!sms.empty() && std::find(sms.begin(), sms.end(), spec.sm_version) == sms.end()) {
    fail(GK_INVALID_ARGUMENT, "gk_jit_compile: NVRTC " + std::to_string(facts->version / 1000) +
                                  "." + std::to_string(facts->version % 1000 / 10) +
                                  " cannot compile for sm_" + std::to_string(spec.sm_version) +
                                  "; it supports " + sm_list(sms));
  }
  const std::string key = program_key(spec, facts->version, gk_abi_version());
  const bool load = device.is_cuda() && spec.sm_version == device.sm_version;

  ProcessTables& t = tables();
  const std::string module_key = std::to_string(reinterpret_cast<uintptr_t>(&rt)) + "/" +
                                 std::to_string(device.id) + "/" + key;
  if (!force) {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.modules.find(module_key);
    if (it != t.modules.end()) {
      if (auto alive = it->second.lock()) {
        auto* handle = new gk_jit_module();
        handle->loaded = std::move(alive);
        handle->origin = GK_JIT_ORIGIN_MEMORY;
        return handle;
      }
    }
  }
  int32_t origin = GK_JIT_ORIGIN_COMPILED;
  auto loaded = std::make_shared<LoadedModule>();
  loaded->runtime = rt.shared_from_this();
  loaded->device = &device;
  loaded->image = with_context("gk_jit_compile", [&] {
    return build_image(rt.logger(), nvrtc, facts->version, spec, key, use_disk, force, origin,
                       loaded->cache_path);
  });
  // Opened here, NVRTC's facts are remembered for the next process (once per folder).
  if (nvrtc && use_disk && !loaded->cache_path.empty()) remember_once(cache_dir, *nvrtc);
  if (load) {
    const cuda::Driver& driver = *rt.devices().driver();
    loaded->api = module_driver_api(driver);
    cuda::ContextGuard guard(driver, device.context);
    cuda::CUresult r = loaded->api->cuModuleLoadData(&loaded->native, loaded->image->cubin.data());
    if (r != cuda::kSuccess) {
      loaded->native = nullptr;
      const bool wrong_image = r == cuda::kErrorInvalidImage || r == cuda::kErrorNoBinaryForGpu;
      fail(wrong_image ? GK_FAILED_PRECONDITION : GK_INTERNAL,
           "gk_jit_compile: loading the sm_" + std::to_string(spec.sm_version) + " cubin of " +
               spec.program_name + " on " + device.label() + " failed: cuModuleLoadData returned " +
               driver.error_text(r));
    }
  }
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    // Forget modules no handle holds any more, so the table does not grow without bound.
    for (auto it = t.modules.begin(); it != t.modules.end();) {
      it = it->second.expired() ? t.modules.erase(it) : std::next(it);
    }
    t.modules[module_key] = loaded;
  }
  auto* handle = new gk_jit_module();
  handle->loaded = std::move(loaded);
  handle->origin = origin;
  return handle;
}

gk_jit_kernel* get_kernel(gk_jit_module& module, const char* name) {
  const LoadedModule& m = *module.loaded;
  if (!m.native) {
    fail(GK_UNAVAILABLE, "gk_jit_get_kernel: the module was compiled for sm_" +
                             std::to_string(m.image->sm_version) + " and is not loaded on " +
                             m.device->label() +
                             (m.device->is_cuda()
                                  ? " (sm_" + std::to_string(m.device->sm_version) + ")"
                                  : std::string(": the cpu device runs no JIT kernels")) +
                             "; compile it with sm_version 0 for a CUDA device to launch it");
  }
  std::string symbol = name;
  for (const auto& [expression, lowered] : m.image->lowered_names) {
    if (expression == name) symbol = lowered;
  }
  auto kernel = std::make_unique<gk_jit_kernel>();
  kernel->loaded = module.loaded;
  kernel->name = name;
  const cuda::Driver& driver = *m.runtime->devices().driver();
  cuda::ContextGuard guard(driver, m.device->context);
  cuda::CUresult r = m.api->cuModuleGetFunction(&kernel->function, m.native, symbol.c_str());
  if (r == cuda::kErrorNotFound) {
    std::string expressions;
    for (const auto& entry : m.image->lowered_names) {
      expressions += (expressions.empty() ? "" : ", ") + entry.first;
    }
    fail(GK_NOT_FOUND, "gk_jit_get_kernel: the module has no kernel '" + std::string(name) +
                           "' (name expressions: " + (expressions.empty() ? "none" : expressions) +
                           "; a C++ kernel is found by its name expression or mangled name, an "
                           "extern \"C\" one by its name)");
  }
  if (r != cuda::kSuccess) {
    fail(GK_INTERNAL, "gk_jit_get_kernel: cuModuleGetFunction('" + symbol + "') returned " +
                          driver.error_text(r));
  }
  if (m.api->cuFuncGetParamInfo) {
    // The driver answers INVALID_VALUE past the last parameter; any other refusal (a driver
    // that cannot say) leaves the parameters unchecked.
    for (size_t i = 0;; ++i) {
      size_t offset = 0, size = 0;
      const cuda::CUresult info = m.api->cuFuncGetParamInfo(kernel->function, i, &offset, &size);
      if (info != cuda::kSuccess) {
        kernel->params_known = info == cuda::kErrorInvalidValue;
        break;
      }
      kernel->param_sizes.push_back(size);
    }
    if (!kernel->params_known) kernel->param_sizes.clear();
  }
  return kernel.release();
}

}  // namespace

LoadedModule::~LoadedModule() {
  if (!native || !api) return;
  const cuda::Driver* driver = runtime->devices().driver();
  if (!driver) return;
  try {
    cuda::ContextGuard guard(*driver, device->context);
    api->cuModuleUnload(native);
  } catch (const Error&) {
    // The context is gone (process exit): the driver freed the module with it.
  }
}

void forget_process_images() {
  std::lock_guard<std::mutex> lock(tables().mutex);
  tables().images.clear();
}

}  // namespace gk::jit

extern "C" {

GK_API gk_status gk_jit_compile(gk_runtime* runtime, int32_t device, const char* source,
                                const gk_jit_options* options, gk_jit_module** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_jit_compile");
    gk::require_arg(out, "gk_jit_compile", "out");
    try {
      *out = gk::jit::compile_module(rt, device, source, options, true);
    } catch (const gk::jit::RememberedVersionWrong&) {
      // The remembered NVRTC version was not the one opened: the key was wrong; again.
      *out = gk::jit::compile_module(rt, device, source, options, false);
    }
  });
}

GK_API void gk_jit_module_retain(gk_jit_module* module) {
  if (module) module->refs.fetch_add(1, std::memory_order_relaxed);
}

GK_API void gk_jit_module_release(gk_jit_module* module) {
  if (module && module->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete module;
}

GK_API gk_status gk_jit_module_info_get(const gk_jit_module* module, gk_jit_module_info* info) {
  return gk::c_guard([&] {
    gk::require_arg(module, "gk_jit_module_info_get", "module");
    gk::require_arg(info, "gk_jit_module_info_get", "info");
    gk::require_struct(info->struct_size, GK_JIT_MODULE_INFO_SIZE, "gk_jit_module_info_get",
                       "gk_jit_module_info");
    const gk::jit::LoadedModule& m = *module->loaded;
    gk_jit_module_info full{};
    full.struct_size = info->struct_size;
    full.device = m.device->id;
    full.sm_version = m.image->sm_version;
    full.origin = module->origin;
    full.loaded = m.native ? 1 : 0;
    full.nvrtc_version = m.image->nvrtc_version;
    full.key = m.image->key.c_str();
    full.cubin = m.image->cubin.data();
    full.cubin_size = m.image->cubin.size();
    full.ptx = m.image->ptx.c_str();
    full.ptx_size = m.image->ptx.size();
    full.log = m.image->log.c_str();
    full.cache_path = m.cache_path.c_str();
    std::memcpy(info, &full, std::min(info->struct_size, sizeof(full)));
  });
}

GK_API gk_status gk_jit_lowered_name(const gk_jit_module* module, const char* name_expression,
                                     const char** out) {
  return gk::c_guard([&] {
    gk::require_arg(module, "gk_jit_lowered_name", "module");
    gk::require_arg(name_expression, "gk_jit_lowered_name", "name_expression");
    gk::require_arg(out, "gk_jit_lowered_name", "out");
    std::string known;
    for (const auto& [expression, lowered] : module->loaded->image->lowered_names) {
      if (expression == name_expression) {
        *out = lowered.c_str();
        return;
      }
      known += (known.empty() ? "'" : ", '") + expression + "'";
    }
    gk::fail(GK_NOT_FOUND, std::string("gk_jit_lowered_name: '") + name_expression +
                               "' is no name expression of the module's compile (it has " +
                               (known.empty() ? "none" : known) + ")");
  });
}

GK_API gk_status gk_jit_get_kernel(gk_jit_module* module, const char* name, gk_jit_kernel** out) {
  return gk::c_guard([&] {
    gk::require_arg(module, "gk_jit_get_kernel", "module");
    gk::require_arg(name, "gk_jit_get_kernel", "name");
    gk::require_arg(out, "gk_jit_get_kernel", "out");
    *out = gk::jit::get_kernel(*module, name);
  });
}

GK_API void gk_jit_kernel_release(gk_jit_kernel* kernel) {
  if (kernel && kernel->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete kernel;
}

GK_API gk_status gk_jit_launch(gk_jit_kernel* kernel, const gk_jit_launch_args* args) {
  return gk::c_guard([&] {
    gk::require_arg(kernel, "gk_jit_launch", "kernel");
    gk::jit::launch(*kernel, args);
  });
}

GK_API gk_status gk_jit_cache_stats_get(gk_jit_cache_stats* stats) {
  return gk::c_guard([&] {
    gk::require_arg(stats, "gk_jit_cache_stats_get", "stats");
    gk::require_struct(stats->struct_size, GK_JIT_CACHE_STATS_SIZE, "gk_jit_cache_stats_get",
                       "gk_jit_cache_stats");
    thread_local std::string dir;
    gk::jit::DiskCache cache(gk::jit::cache_settings());
    dir = cache.settings().dir;
    const auto totals = cache.totals();
    gk_jit_cache_stats full{};
    full.struct_size = stats->struct_size;
    full.dir = dir.c_str();
    full.entries = totals.entries;
    full.bytes = totals.bytes;
    full.limit_bytes = cache.settings().limit_bytes;
    std::memcpy(stats, &full, std::min(stats->struct_size, sizeof(full)));
  });
}

GK_API gk_status gk_jit_cache_clear(int64_t* out_removed) {
  return gk::c_guard([&] {
    const int64_t removed = gk::jit::DiskCache(gk::jit::cache_settings()).clear();
    if (out_removed) *out_removed = removed;
  });
}

}  // extern "C"
