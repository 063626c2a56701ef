// The JIT's C entry points (gpukit_jit.h): compile through the caches (jit/compile.h) and
// load on the runtime's device, get kernels, launch them (the launch itself is in
// jit_launch.cpp).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "capi/capi_util.h"
#include "capi/jit_handles.h"
#include "capi/op_call.h"
#include "jit/compile.h"
#include "jit/disk_cache.h"

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

// The modules loaded in this process, by "<runtime address>/<device>/<key>", while some
// handle holds them.
struct LoadedModules {
  std::mutex mutex;
  std::unordered_map<std::string, std::weak_ptr<LoadedModule>> modules;
};

LoadedModules& loaded_modules() {
  static LoadedModules* t = new LoadedModules();  // never destroyed: used until exit
  return *t;
}

// `trust_remembered`: use NVRTC facts remembered in the cache folder (see prepare_compile).
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
  const CompileRequest request = prepare_compile(
      source, o, o.sm_version ? o.sm_version : device.sm_version, trust_remembered);
  const ProgramSpec& spec = request.spec;
  const bool load = device.is_cuda() && spec.sm_version == device.sm_version;

  LoadedModules& t = loaded_modules();
  const std::string module_key = std::to_string(reinterpret_cast<uintptr_t>(&rt)) + "/" +
                                 std::to_string(device.id) + "/" + request.key;
  if (!request.force) {
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
  loaded->image = build_image(rt.logger(), request, origin, loaded->cache_path);
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
