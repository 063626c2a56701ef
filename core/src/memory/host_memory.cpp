#include "memory/host_memory.h"

#include <bit>
#include <cstdlib>
#include <sstream>

#include "common/error.h"
#include "common/limits.h"

namespace gk {

HostMemory::HostMemory(const cuda::Driver* driver, cuda::CUcontext context)
    : driver_(driver), context_(context) {}

HostMemory::~HostMemory() {
  for (auto& [ptr, size] : live_) unmap(ptr);
  for (auto& [size, blocks] : cached_) {
    for (void* p : blocks) unmap(p);
  }
}

uint64_t HostMemory::block_size(uint64_t bytes) {
  constexpr uint64_t kMin = 4096;
  if (bytes <= kMin) return kMin;
  uint64_t power = std::bit_floor(bytes - 1);  // bytes lies in (power, 2 * power]
  uint64_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

void* HostMemory::map(uint64_t bytes) {
  // aligned_alloc wants a multiple of the alignment; the classes below 16 KiB are not.
  if (!driver_) return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  cuda::ContextGuard guard(*driver_, context_);
  void* p = nullptr;
  cuda::CUresult r = driver_->api().cuMemHostAlloc(&p, bytes, cuda::kMemHostAllocPortable);
  return r == cuda::kSuccess ? p : nullptr;
}

void HostMemory::unmap(void* ptr) noexcept {
  if (!driver_) {
    std::free(ptr);
    return;
  }
  const auto& api = driver_->api();
  if (api.cuCtxPushCurrent(context_) != cuda::kSuccess) return;
  api.cuMemFreeHost(ptr);
  cuda::CUcontext popped;
  api.cuCtxPopCurrent(&popped);
}

void* HostMemory::allocate(uint64_t bytes) {
  if (bytes > uint64_t(kMaxTensorBytes)) {
    fail(GK_RESOURCE_EXHAUSTED, "gk_host_alloc: cannot allocate " + std::to_string(bytes) +
                                    " bytes: more than the largest allocation, 2^62 bytes");
  }
  uint64_t size = block_size(bytes);
  std::unique_lock<std::mutex> lock(mutex_);
  auto cached = cached_.find(size);
  if (cached != cached_.end() && !cached->second.empty()) {
    void* p = cached->second.back();
    cached->second.pop_back();
    usage_.bytes_cached -= size;
    live_.emplace(p, size);
    usage_.bytes_in_use += size;
    return p;
  }
  lock.unlock();  // pinning takes long: other threads may reuse cached blocks meanwhile
  void* p = map(size);
  if (!p && trim() > 0) p = map(size);
  if (!p) {
    std::ostringstream m;
    m << "gk_host_alloc: cannot allocate " << bytes << " bytes (" << size << " with rounding) of "
      << (driver_ ? "pinned host memory; " : "host memory; ") << usage().bytes_in_use
      << " bytes are allocated through gk_host_alloc";
    fail(GK_RESOURCE_EXHAUSTED, m.str());
  }
  lock.lock();
  try {
    live_.emplace(p, size);
  } catch (...) {
    unmap(p);
    throw;
  }
  usage_.bytes_in_use += size;
  return p;
}

void HostMemory::free(void* ptr) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    std::ostringstream m;
    m << "gk_host_free: " << ptr
      << " is not memory from gk_host_alloc of this runtime, or was freed already";
    fail(GK_INVALID_ARGUMENT, m.str());
  }
  uint64_t size = it->second;
  live_.erase(it);
  usage_.bytes_in_use -= size;
  if (usage_.bytes_cached + size <= kCacheBytes) {
    try {
      cached_[size].push_back(ptr);
      usage_.bytes_cached += size;
      return;
    } catch (...) {
      // No room to remember it: give it back instead.
    }
  }
  lock.unlock();
  unmap(ptr);
}

uint64_t HostMemory::trim() {
  std::unordered_map<uint64_t, std::vector<void*>> released;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    released.swap(cached_);
    bytes = usage_.bytes_cached;
    usage_.bytes_cached = 0;
  }
  for (auto& [size, blocks] : released) {
    for (void* p : blocks) unmap(p);
  }
  return bytes;
}

HostMemory::Usage HostMemory::usage() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return usage_;
}

}  // namespace gk
