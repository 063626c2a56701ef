// Host memory handed to users by gk_host_alloc: pinned (page-locked, portable to every CUDA
// context) when the runtime has a CUDA device, plain page-aligned memory otherwise, so the same
// code runs on both. Pinning costs far more than copying (about 0.85 s per GiB on an H100
// host), so freed blocks are kept by size class and handed out again, up to kCacheBytes.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "device/cuda_driver.h"

namespace gk {

class HostMemory {
 public:
  // With `driver`, memory is pinned through `context` (any CUDA device's primary context).
  HostMemory(const cuda::Driver* driver, cuda::CUcontext context);
  ~HostMemory();  // frees everything, allocated or cached
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  // At least `bytes` (> 0), 4096-byte aligned. Throws RESOURCE_EXHAUSTED naming the request.
  void* allocate(uint64_t bytes);
  // Throws INVALID_ARGUMENT for a pointer allocate() did not return or that was freed already.
  void free(void* ptr);
  // Gives every cached block back to the system; returns the bytes released.
  uint64_t trim();

  struct Usage {
    uint64_t bytes_in_use = 0;  // block sizes of live allocations
    uint64_t bytes_cached = 0;  // freed blocks kept for reuse
  };
  Usage usage() const;
  bool pinned() const { return driver_ != nullptr; }

  // What a request is rounded up to: 4 KiB at least, then four size classes per power of two
  // (so at most a quarter is padding), the unit freed blocks are matched by.
  static uint64_t block_size(uint64_t bytes);
  static constexpr uint64_t kCacheBytes = uint64_t(4) << 30;

 private:
  void* map(uint64_t bytes);
  void unmap(void* ptr) noexcept;

  const cuda::Driver* driver_;
  cuda::CUcontext context_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, uint64_t> live_;                 // pointer -> block size
  std::unordered_map<uint64_t, std::vector<void*>> cached_;  // block size -> free blocks
  Usage usage_;
};

}  // namespace gk
