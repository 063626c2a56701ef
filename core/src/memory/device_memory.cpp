#include "memory/device_memory.h"

#include <cstdlib>

#include "common/error.h"
#include "runtime/runtime.h"

namespace gk {
namespace {

std::string mib(uint64_t bytes) {
  return std::to_string(bytes / (1024 * 1024)) + " MiB";
}

}  // namespace

void* DeviceMemory::allocate(const Device& device, uint64_t bytes, cuda::CUstream stream) const {
  // Zero-byte requests still get a unique, freeable address.
  uint64_t rounded = (std::max<uint64_t>(bytes, 1) + kAllocationAlignment - 1) /
                     kAllocationAlignment * kAllocationAlignment;
  if (!device.is_cuda()) {
    void* p = std::aligned_alloc(kAllocationAlignment, rounded);
    if (!p) {
      fail(GK_RESOURCE_EXHAUSTED, "cpu: cannot allocate " + std::to_string(bytes) +
                                      " bytes of host memory (total " + mib(device.total_memory) +
                                      ", free " + mib(devices_.free_memory(device)) + ")");
    }
    return p;
  }
  const cuda::Driver& driver = *devices_.driver();
  cuda::ContextGuard guard(driver, device.context);
  cuda::CUdeviceptr ptr = 0;
  cuda::CUresult r = driver.api().cuMemAllocAsync(&ptr, rounded, stream);
  if (r != cuda::kSuccess) {
    gk_status status = r == 2 ? GK_RESOURCE_EXHAUSTED : GK_INTERNAL;
    fail(status, device.label() + ": cannot allocate " + std::to_string(bytes) + " bytes (" +
                     driver.error_text(r) + "; device total " + mib(device.total_memory) +
                     ", free " + mib(devices_.free_memory(device)) + ")");
  }
  return reinterpret_cast<void*>(ptr);
}

void DeviceMemory::deallocate(const Device& device, void* ptr, cuda::CUstream stream) const noexcept {
  if (!ptr) return;
  if (!device.is_cuda()) {
    std::free(ptr);
    return;
  }
  const cuda::Driver& driver = *devices_.driver();
  const auto& api = driver.api();
  if (api.cuCtxPushCurrent(device.context) != cuda::kSuccess) return;
  api.cuMemFreeAsync(reinterpret_cast<cuda::CUdeviceptr>(ptr), stream);
  cuda::CUcontext popped;
  api.cuCtxPopCurrent(&popped);
}

Allocation::Allocation(std::shared_ptr<Runtime> rt, const Device& dev, uint64_t bytes,
                       cuda::CUstream stream)
    : runtime(std::move(rt)), device(dev), size(bytes), free_stream(stream) {
  ptr = runtime->memory().allocate(device, size, stream);
}

Allocation::~Allocation() { runtime->memory().deallocate(device, ptr, free_stream); }

}  // namespace gk
