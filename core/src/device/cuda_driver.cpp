#include "device/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "common/error.h"
#include "jit/disk_cache.h"
#include "jit/nvrtc.h"
#include "plugin/library_search.h"

namespace gk::cuda {
namespace {

struct Symbol {
  const char* name;
  void** slot;
};

}  // namespace

const Driver* Driver::get(std::string* why) {
  static std::once_flag once;
  static Driver* driver = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      failure = std::string("no CUDA driver (libcuda.so.1 could not be opened: ") +
                (err ? err : "unknown reason") + ")";
      return;
    }
    auto* d = new Driver();
    d->handle_ = handle;
    DriverApi& a = d->api_;
    const Symbol symbols[] = {
        {"cuInit", reinterpret_cast<void**>(&a.cuInit)},
        {"cuDriverGetVersion", reinterpret_cast<void**>(&a.cuDriverGetVersion)},
        {"cuDeviceGetCount", reinterpret_cast<void**>(&a.cuDeviceGetCount)},
        {"cuDeviceGet", reinterpret_cast<void**>(&a.cuDeviceGet)},
        {"cuDeviceGetName", reinterpret_cast<void**>(&a.cuDeviceGetName)},
        {"cuDeviceGetAttribute", reinterpret_cast<void**>(&a.cuDeviceGetAttribute)},
        {"cuDeviceTotalMem_v2", reinterpret_cast<void**>(&a.cuDeviceTotalMem)},
        {"cuDevicePrimaryCtxRetain", reinterpret_cast<void**>(&a.cuDevicePrimaryCtxRetain)},
        {"cuDevicePrimaryCtxRelease_v2",
         reinterpret_cast<void**>(&a.cuDevicePrimaryCtxRelease)},
        {"cuCtxPushCurrent_v2", reinterpret_cast<void**>(&a.cuCtxPushCurrent)},
        {"cuCtxPopCurrent_v2", reinterpret_cast<void**>(&a.cuCtxPopCurrent)},
        {"cuCtxGetStreamPriorityRange",
         reinterpret_cast<void**>(&a.cuCtxGetStreamPriorityRange)},
        {"cuMemGetInfo_v2", reinterpret_cast<void**>(&a.cuMemGetInfo)},
        {"cuMemAllocAsync", reinterpret_cast<void**>(&a.cuMemAllocAsync)},
        {"cuMemFreeAsync", reinterpret_cast<void**>(&a.cuMemFreeAsync)},
        {"cuMemcpyHtoDAsync_v2", reinterpret_cast<void**>(&a.cuMemcpyHtoDAsync)},
        {"cuMemcpyDtoHAsync_v2", reinterpret_cast<void**>(&a.cuMemcpyDtoHAsync)},
        {"cuMemcpyDtoDAsync_v2", reinterpret_cast<void**>(&a.cuMemcpyDtoDAsync)},
        {"cuMemcpyPeerAsync", reinterpret_cast<void**>(&a.cuMemcpyPeerAsync)},
        {"cuStreamCreateWithPriority", reinterpret_cast<void**>(&a.cuStreamCreateWithPriority)},
        {"cuStreamDestroy_v2", reinterpret_cast<void**>(&a.cuStreamDestroy)},
        {"cuStreamSynchronize", reinterpret_cast<void**>(&a.cuStreamSynchronize)},
        {"cuStreamWaitEvent", reinterpret_cast<void**>(&a.cuStreamWaitEvent)},
        {"cuEventCreate", reinterpret_cast<void**>(&a.cuEventCreate)},
        {"cuEventDestroy_v2", reinterpret_cast<void**>(&a.cuEventDestroy)},
        {"cuEventRecord", reinterpret_cast<void**>(&a.cuEventRecord)},
        {"cuEventSynchronize", reinterpret_cast<void**>(&a.cuEventSynchronize)},
        {"cuEventQuery", reinterpret_cast<void**>(&a.cuEventQuery)},
        {"cuEventElapsedTime", reinterpret_cast<void**>(&a.cuEventElapsedTime)},
        {"cuGetErrorName", reinterpret_cast<void**>(&a.cuGetErrorName)},
        {"cuGetErrorString", reinterpret_cast<void**>(&a.cuGetErrorString)},
        {"cuMemAlloc_v2", reinterpret_cast<void**>(&a.cuMemAlloc)},
        {"cuMemFree_v2", reinterpret_cast<void**>(&a.cuMemFree)},
        {"cuMemHostAlloc", reinterpret_cast<void**>(&a.cuMemHostAlloc)},
        {"cuMemFreeHost", reinterpret_cast<void**>(&a.cuMemFreeHost)},
        {"cuStreamQuery", reinterpret_cast<void**>(&a.cuStreamQuery)},
        {"cuCtxGetCurrent", reinterpret_cast<void**>(&a.cuCtxGetCurrent)},
        {"cuPointerGetAttributes", reinterpret_cast<void**>(&a.cuPointerGetAttributes)},
        {"cuMemcpyAsync", reinterpret_cast<void**>(&a.cuMemcpyAsync)},
        {"cuStreamBeginCapture_v2", reinterpret_cast<void**>(&a.cuStreamBeginCapture)},
        {"cuStreamEndCapture", reinterpret_cast<void**>(&a.cuStreamEndCapture)},
        {"cuStreamIsCapturing", reinterpret_cast<void**>(&a.cuStreamIsCapturing)},
        {"cuGraphInstantiateWithFlags",
         reinterpret_cast<void**>(&a.cuGraphInstantiateWithFlags)},
        {"cuGraphLaunch", reinterpret_cast<void**>(&a.cuGraphLaunch)},
        {"cuGraphExecDestroy", reinterpret_cast<void**>(&a.cuGraphExecDestroy)},
        {"cuGraphDestroy", reinterpret_cast<void**>(&a.cuGraphDestroy)},
    };
    for (const Symbol& s : symbols) {
      *s.slot = dlsym(handle, s.name);
      if (!*s.slot) {
        failure = std::string("the CUDA driver in libcuda.so.1 lacks ") + s.name +
                  " (driver too old: GPUkit needs CUDA 12 or newer)";
        dlclose(handle);
        delete d;
        return;
      }
    }
    CUresult r = a.cuInit(0);
    if (r != kSuccess) {
      failure = "the CUDA driver failed to initialise: cuInit returned " + d->error_text(r);
      delete d;  // keep libcuda loaded: other libraries of the process may use it
      return;
    }
    a.cuDriverGetVersion(&d->version_);
    driver = d;
  });
  if (!driver && why) *why = failure;
  return driver;
}

void* Driver::symbol(const char* name) const { return dlsym(handle_, name); }

std::string Driver::error_text(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName) api_.cuGetErrorName(result, &name);
  if (api_.cuGetErrorString) api_.cuGetErrorString(result, &text);
  std::string out = name ? name : ("CUDA error " + std::to_string(result));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

int nvrtc_version() {
  // Opening NVRTC is a dlopen of ~100 MB (tens of milliseconds, on every process that reads
  // device properties): the JIT's open NVRTC, else the facts its cache folder remembers, are
  // asked first (jit/nvrtc.h).
  if (const jit::Nvrtc* open = jit::Nvrtc::opened()) return open->version();
  try {
    if (auto facts = jit::remembered_nvrtc(jit::cache_settings().dir)) return facts->version;
  } catch (const Error&) {
    // A bad $GPUKIT_CACHE_MAX_BYTES: the JIT's calls report it; here NVRTC is opened.
  }
  static const int version = [] {
    const char* names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    for (const char* name : names) {
      void* h = open_runtime_library(name).handle;
      if (!h) continue;
      using VersionFn = int (*)(int*, int*);
      auto fn = reinterpret_cast<VersionFn>(dlsym(h, "nvrtcVersion"));
      int major = 0, minor = 0;
      if (fn && fn(&major, &minor) == 0) return major * 1000 + minor * 10;
    }
    return 0;
  }();
  return version;
}

void check(const Driver& driver, CUresult result, const char* call, const char* file, int line) {
  if (result == kSuccess) return;
  // Out of memory is a resource state, not a bug; everything else is internal.
  constexpr CUresult kErrorOutOfMemory = 2;
  gk_status status = result == kErrorOutOfMemory ? GK_RESOURCE_EXHAUSTED : GK_INTERNAL;
  std::string where = file;
  where = where.substr(where.find_last_of('/') + 1);
  fail(status, std::string(call) + " failed with " + driver.error_text(result) + " at " + where +
                   ":" + std::to_string(line));
}

ContextGuard::ContextGuard(const Driver& driver, CUcontext context) : driver_(driver) {
  GK_CU_CHECK(driver_, cuCtxPushCurrent(context));
}

ContextGuard::~ContextGuard() {
  CUcontext popped = nullptr;
  driver_.api().cuCtxPopCurrent(&popped);
}

}  // namespace gk::cuda
