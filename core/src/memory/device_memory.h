// Device memory for a runtime: stream-ordered allocation on CUDA devices
// (cuMemAllocAsync) and aligned host memory on the cpu device. An Allocation frees
// itself when its last owner (a buffer handle or a tensor) lets go.
#pragma once

#include <cstdint>
#include <memory>

#include "device/device.h"

namespace gk {

class Runtime;

constexpr uint64_t kAllocationAlignment = 256;

class DeviceMemory {
 public:
  explicit DeviceMemory(const DeviceSet& devices) : devices_(devices) {}

  // Throws RESOURCE_EXHAUSTED naming the request and the device's total and free memory.
  void* allocate(const Device& device, uint64_t bytes, cuda::CUstream stream) const;
  void deallocate(const Device& device, void* ptr, cuda::CUstream stream) const noexcept;

 private:
  const DeviceSet& devices_;
};

struct Allocation {
  Allocation(std::shared_ptr<Runtime> runtime, const Device& device, uint64_t size,
             cuda::CUstream stream);
  ~Allocation();
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  std::shared_ptr<Runtime> runtime;  // keeps the runtime (and its driver context) alive
  const Device& device;
  uint64_t size;
  void* ptr = nullptr;
  cuda::CUstream free_stream;        // the stream whose order the memory is freed in
};

}  // namespace gk
