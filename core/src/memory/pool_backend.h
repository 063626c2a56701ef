// What a memory pool needs from a device: segments, events, spill storage and copies. Both
// backends, the CUDA driver's and the cpu device's (aligned host memory, streams that run
// synchronously), live in device_memory.cpp.
#pragma once

#include <cstdint>

#include "device/cuda_driver.h"

namespace gk {

// What the pool needs from a device. Calls are made with the pool's lock held.
class PoolBackend {
 public:
  virtual ~PoolBackend() = default;
  // A new segment of `bytes`, kPoolAlignment aligned, or nullptr when the device is out of
  // memory. Throws for any other failure.
  virtual void* map_segment(uint64_t bytes) = 0;
  virtual void unmap_segment(void* base, uint64_t bytes) noexcept = 0;
  // An event capturing the work queued on `stream` so far, or nullptr when that work is
  // already complete (the cpu device runs streams synchronously; a backend that cannot
  // record waits for the stream instead). Called at free for streams the pool does not
  // track, and at the first cross-stream use (or release) of blocks freed on tracked ones.
  virtual void* record_event(cuda::CUstream stream) noexcept = 0;
  virtual bool event_complete(void* event) = 0;
  // Makes later work on `stream` wait for `event`, without blocking the host.
  virtual void stream_wait_event(cuda::CUstream stream, void* event) = 0;
  virtual void synchronize_event(void* event) noexcept = 0;
  virtual void release_event(void* event) noexcept = 0;
  // Spill storage (pinned host memory on CUDA) and the copies in and out of it, complete
  // on return. host_alloc returns nullptr when host memory is short.
  virtual void* host_alloc(uint64_t bytes) = 0;
  virtual void host_free(void* ptr) noexcept = 0;
  virtual void copy_to_host(void* dst, const void* src, uint64_t bytes,
                            cuda::CUstream stream) = 0;
  virtual void copy_to_device(void* dst, const void* src, uint64_t bytes,
                              cuda::CUstream stream) = 0;
  virtual uint64_t total_memory() = 0;
  virtual uint64_t free_memory() = 0;
  // Spill storage kept for reuse, given back on trim(); returns the bytes released.
  virtual uint64_t release_host_cache() noexcept { return 0; }
};

}  // namespace gk
