// The CUDA driver API, opened at run time (libcuda.so.1) so libgpukit links neither
// libcuda nor libcudart and loads on machines without a GPU. The few types and
// constants used are declared here with the driver's values, so the core also builds
// without the CUDA toolkit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace gk::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

constexpr CUresult kSuccess = 0;
constexpr CUresult kErrorNotReady = 600;
constexpr int kAttrMultiprocessorCount = 16;
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventDefault = 0x0;
constexpr unsigned kEventDisableTiming = 0x2;
constexpr CUresult kResultOutOfMemory = 2;
// The JIT's module and launch calls.
constexpr CUresult kErrorInvalidValue = 1;
constexpr CUresult kErrorInvalidImage = 200;
constexpr CUresult kErrorNoBinaryForGpu = 209;
constexpr CUresult kErrorNotFound = 500;
constexpr CUresult kErrorLaunchOutOfResources = 701;
// The transfer engine: which host memory the DMA engines reach directly, and pinning.
constexpr int kPointerAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeUnregistered = 0;  // what cuPointerGetAttributes reports
constexpr unsigned kMemHostAllocPortable = 0x1;  // CU_MEMHOSTALLOC_PORTABLE
// Graph capture (plugin/graph_services.h): CU_STREAM_CAPTURE_MODE_RELAXED, and the
// CUstreamCaptureStatus of a stream that is not capturing.
constexpr int kStreamCaptureModeRelaxed = 2;
constexpr int kStreamCaptureStatusNone = 0;

// Entry points GPUkit calls, resolved by name (the _v2 names are what cuda.h maps the
// plain names to).
struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext*);
  CUresult (*cuCtxGetStreamPriorityRange)(int*, int*);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
                                CUstream);
  CUresult (*cuStreamCreateWithPriority)(CUstream*, unsigned, int);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  // The memory pool's segments and spill storage.
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  // The transfer engine (memory/transfer_engine.h).
  CUresult (*cuPointerGetAttributes)(unsigned, int*, void**, CUdeviceptr);
  CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  // CUDA graphs of op calls (plugin/graph_services.h).
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuStreamIsCapturing)(CUstream, int*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
};

// The opened driver. Created once per process; lives until exit (unloading libcuda
// while other libraries in the process use it would break them).
class Driver {
 public:
  // The process's driver, or nullptr with *why set when it cannot be opened or
  // initialised (no libcuda, cuInit failed).
  static const Driver* get(std::string* why);

  const DriverApi& api() const { return api_; }
  int version() const { return version_; }
  // Address of any driver function by name (for plugins), or nullptr.
  void* symbol(const char* name) const;
  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string error_text(CUresult result) const;

 private:
  void* handle_ = nullptr;
  DriverApi api_{};
  int version_ = 0;
};

// The installed NVRTC's version as major*1000+minor*10 (e.g. 13000), or 0 when absent.
int nvrtc_version();

// Throws gk::Error(GK_INTERNAL or RESOURCE_EXHAUSTED) naming the call, its result and
// file:line when `result` is not success.
void check(const Driver& driver, CUresult result, const char* call, const char* file, int line);

// Makes `context` current on this thread for the guard's lifetime.
class ContextGuard {
 public:
  ContextGuard(const Driver& driver, CUcontext context);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;

 private:
  const Driver& driver_;
};

}  // namespace gk::cuda

#define GK_CU_CHECK(driver, call) \
  ::gk::cuda::check((driver), (driver).api().call, #call, __FILE__, __LINE__)
