// Device memory for a runtime: one stream-ordered MemoryPool per device (memory_pool.h),
// over the CUDA driver (cuMemAlloc segments) or aligned host memory for the cpu device. An
// Allocation frees itself when its last owner (a buffer handle or a tensor) lets go.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "device/device.h"
#include "memory/memory_pool.h"

namespace gk {

class Runtime;

constexpr uint64_t kAllocationAlignment = kPoolAlignment;

class DeviceMemory {
 public:
  explicit DeviceMemory(const DeviceSet& devices);
  ~DeviceMemory();

  MemoryPool& pool(const Device& device) const { return *pools_[size_t(device.id)]; }

  // Raw memory for plugins' scratch (host services). allocate throws RESOURCE_EXHAUSTED
  // naming the request, the device and the pool; deallocate throws INVALID_ARGUMENT for a
  // pointer this pool did not hand out or already took back.
  void* allocate(const Device& device, uint64_t bytes, cuda::CUstream stream) const;
  void deallocate(const Device& device, void* ptr, cuda::CUstream stream) const;

 private:
  const DeviceSet& devices_;
  std::vector<std::unique_ptr<MemoryPool>> pools_;
};

// The backends: exposed for tests that need a pool over plain host memory.
std::unique_ptr<PoolBackend> make_host_backend(const DeviceSet& devices, const Device& device);
std::unique_ptr<PoolBackend> make_cuda_backend(const DeviceSet& devices, const Device& device);

struct Allocation;

// A new Allocation (see its constructor). Use this rather than std::make_shared: the
// Allocation and its reference counts share one heap block, recycled per thread, so the hot
// path (gk_buffer_alloc + gk_buffer_free) makes no malloc for it.
std::shared_ptr<Allocation> make_allocation(Runtime& runtime, const Device& device,
                                            uint64_t size, cuda::CUstream stream,
                                            MemoryOwner* owner = nullptr, bool evictable = false);

struct Allocation {
  // `evictable`: may be spilled to host memory while not pinned (GK_BUFFER_EVICTABLE).
  // The memory is freed when the last holder lets go, in the order of `stream` unless
  // free_on() names another (the pool keeps the runtime alive until then).
  Allocation(Runtime& runtime, const Device& device, uint64_t size, cuda::CUstream stream,
             MemoryOwner* owner = nullptr, bool evictable = false);
  ~Allocation();
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  // Lets go of `allocation`; the memory is freed in `stream`'s order, once its last holder
  // (a tensor viewing it, say) lets go too.
  static void free_on(std::shared_ptr<Allocation> allocation, cuda::CUstream stream);

  bool evictable() const { return record != nullptr; }
  // The current device address, restoring a spilled evictable allocation first (in
  // `stream`'s order; kOwnStream: the stream its free is ordered in). With `pin`, it stays
  // resident there until unpin().
  void* locate(cuda::CUstream stream, bool pin);
  void unpin() noexcept;

  Runtime& runtime;
  const Device& device;
  uint64_t size;
  // The address at allocation. Stays valid for a non-evictable allocation; an evictable one
  // may move: use locate().
  void* ptr = nullptr;
  MemoryPool& pool;
  PoolBlock* block = nullptr;        // non-evictable
  EvictRecord* record = nullptr;     // evictable

 private:
  cuda::CUstream free_stream_ = kOwnStream;  // set by free_on for the last holder
};

}  // namespace gk
