// The objects behind gk_jit_module and gk_jit_kernel: a compiled image (jit/compile.h) loaded
// on a device of one runtime.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device/cuda_driver.h"
#include "gpukit/gpukit.h"
#include "jit/module_image.h"

namespace gk {
class Runtime;
struct Device;
}  // namespace gk

namespace gk::jit {

using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;

// Driver calls the JIT needs beyond cuda::DriverApi, resolved by name once per process.
struct ModuleDriverApi {
  cuda::CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  cuda::CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  cuda::CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  cuda::CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, cuda::CUstream, void**, void**) = nullptr;
  // CUDA 12.4+: the kernel's parameter layout, to check launch arguments (optional).
  cuda::CUresult (*cuFuncGetParamInfo)(CUfunction, size_t, size_t*, size_t*) = nullptr;
};

// A module loaded (or not: compile-only) for one device of one runtime. Shared by every
// gk_jit_module handle of the same key in that runtime.
struct LoadedModule {
  std::shared_ptr<Runtime> runtime;
  const Device* device = nullptr;
  std::shared_ptr<const ModuleImage> image;
  std::string cache_path;
  CUmodule native = nullptr;  // null when not loaded
  const ModuleDriverApi* api = nullptr;
  ~LoadedModule();
};

// Makes a device's context current for a launch, pushing it only when it is not current
// already (a thread that works with CuPy or PyTorch has it current): the check costs less
// than a push and a pop.
class LaunchContext {
 public:
  LaunchContext(const cuda::Driver& driver, cuda::CUcontext context) : driver_(driver) {
    cuda::CUcontext current = nullptr;
    if (driver.api().cuCtxGetCurrent(&current) != cuda::kSuccess || current != context) {
      GK_CU_CHECK(driver, cuCtxPushCurrent(context));
      pushed_ = true;
    }
  }
  ~LaunchContext() {
    cuda::CUcontext popped = nullptr;
    if (pushed_) driver_.api().cuCtxPopCurrent(&popped);
  }
  LaunchContext(const LaunchContext&) = delete;
  LaunchContext& operator=(const LaunchContext&) = delete;

 private:
  const cuda::Driver& driver_;
  bool pushed_ = false;
};

// gk_jit_launch: queues `kernel` with `args` (jit_launch.cpp); throws gk::Error.
void launch(gk_jit_kernel& kernel, const gk_jit_launch_args* args);

}  // namespace gk::jit

struct gk_jit_module {
  std::atomic<int32_t> refs{1};
  std::shared_ptr<gk::jit::LoadedModule> loaded;
  int32_t origin = GK_JIT_ORIGIN_COMPILED;
};

struct gk_jit_kernel {
  std::atomic<int32_t> refs{1};
  std::shared_ptr<gk::jit::LoadedModule> loaded;
  gk::jit::CUfunction function = nullptr;
  std::string name;
  // Each parameter's size, when the driver reports them (cuFuncGetParamInfo); else empty.
  std::vector<size_t> param_sizes;
  bool params_known = false;
};
