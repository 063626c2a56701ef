#include "memory/device_memory.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>

#include "common/error.h"
#include "memory/charge_scope.h"

namespace gk {
namespace {

// The cpu device: segments of aligned host memory; streams run synchronously, so every
// free is complete at once and no event is needed.
class HostBackend final : public PoolBackend {
 public:
  HostBackend(const DeviceSet& devices, const Device& device)
      : devices_(devices), device_(device) {}
  void* map_segment(uint64_t bytes) override {
    return std::aligned_alloc(kPoolAlignment, bytes);
  }
  void unmap_segment(void* base, uint64_t) noexcept override { std::free(base); }
  void* record_event(cuda::CUstream) noexcept override { return nullptr; }
  bool event_complete(void*) override { return true; }
  void stream_wait_event(cuda::CUstream, void*) override {}
  void synchronize_event(void*) noexcept override {}
  void release_event(void*) noexcept override {}
  void* host_alloc(uint64_t bytes) override { return std::malloc(bytes); }
  void host_free(void* ptr) noexcept override { std::free(ptr); }
  void copy_to_host(void* dst, const void* src, uint64_t bytes, cuda::CUstream) override {
    std::memcpy(dst, src, bytes);
  }
  void copy_to_device(void* dst, const void* src, uint64_t bytes, cuda::CUstream) override {
    std::memcpy(dst, src, bytes);
  }
  uint64_t total_memory() override { return device_.total_memory; }
  uint64_t free_memory() override { return devices_.free_memory(device_); }

 private:
  const DeviceSet& devices_;
  const Device& device_;
};

// A CUDA device: cuMemAlloc segments, events from a small cache, pinned spill storage.
class CudaBackend final : public PoolBackend {
 public:
  CudaBackend(const DeviceSet& devices, const Device& device)
      : devices_(devices), device_(device), driver_(*devices.driver()), api_(driver_.api()) {}
  ~CudaBackend() override {
    release_host_cache();
    if (api_.cuCtxPushCurrent(device_.context) != cuda::kSuccess) return;
    for (cuda::CUevent e : spare_events_) api_.cuEventDestroy(e);
    pop();
  }

  void* map_segment(uint64_t bytes) override {
    cuda::ContextGuard guard(driver_, device_.context);
    cuda::CUdeviceptr ptr = 0;
    cuda::CUresult r = api_.cuMemAlloc(&ptr, bytes);
    if (r == cuda::kResultOutOfMemory) return nullptr;
    cuda::check(driver_, r, "cuMemAlloc_v2", __FILE__, __LINE__);
    return reinterpret_cast<void*>(ptr);
  }
  void unmap_segment(void* base, uint64_t) noexcept override {
    if (api_.cuCtxPushCurrent(device_.context) != cuda::kSuccess) return;
    api_.cuMemFree(reinterpret_cast<cuda::CUdeviceptr>(base));
    pop();
  }
  // Called at a free on a stream the pool does not track, and when another stream first
  // wants blocks freed on a tracked one.
  void* record_event(cuda::CUstream stream) noexcept override {
    CurrentContext current(*this);
    if (!current.ok) return nullptr;
    cuda::CUevent e = nullptr;
    if (!spare_events_.empty()) {
      e = spare_events_.back();
      spare_events_.pop_back();
    } else if (api_.cuEventCreate(&e, cuda::kEventDisableTiming) != cuda::kSuccess) {
      e = nullptr;
    }
    if (e && api_.cuEventRecord(e, stream) != cuda::kSuccess) {
      api_.cuEventDestroy(e);
      e = nullptr;
    }
    // No event: wait for the stream here, so the block is free for every stream.
    if (!e) api_.cuStreamSynchronize(stream);
    return e;
  }
  bool event_complete(void* event) override {
    cuda::CUresult r = api_.cuEventQuery(static_cast<cuda::CUevent>(event));
    return r != cuda::kErrorNotReady;
  }
  void stream_wait_event(cuda::CUstream stream, void* event) override {
    // The legacy default stream (nullptr) is the current context's.
    CurrentContext current(*this);
    if (!current.ok) cuda::check(driver_, current.result, "cuCtxPushCurrent_v2", __FILE__, __LINE__);
    // A capturing stream cannot wait for work queued outside its capture (the graph would not
    // hold the dependency): the host waits for that work instead, once, while capturing.
    int capture = cuda::kStreamCaptureStatusNone;
    if (stream && api_.cuStreamIsCapturing(stream, &capture) == cuda::kSuccess &&
        capture != cuda::kStreamCaptureStatusNone) {
      GK_CU_CHECK(driver_, cuEventSynchronize(static_cast<cuda::CUevent>(event)));
      return;
    }
    GK_CU_CHECK(driver_, cuStreamWaitEvent(stream, static_cast<cuda::CUevent>(event), 0));
  }
  void synchronize_event(void* event) noexcept override {
    api_.cuEventSynchronize(static_cast<cuda::CUevent>(event));
  }
  void release_event(void* event) noexcept override {
    try {
      spare_events_.push_back(static_cast<cuda::CUevent>(event));
    } catch (...) {
      api_.cuEventDestroy(static_cast<cuda::CUevent>(event));
    }
  }
  // Pinned spill storage. Pinning costs far more than the copy (about 0.85 s for 1 GiB on an
  // H100 host), so freed storage is cached for the next spill, up to kPinnedCacheBytes.
  void* host_alloc(uint64_t bytes) override {
    auto it = pinned_cache_.lower_bound(bytes);
    if (it != pinned_cache_.end() && it->first <= 2 * bytes) {
      void* p = it->second;
      pinned_size_[p] = it->first;
      cached_bytes_ -= it->first;
      pinned_cache_.erase(it);
      return p;
    }
    cuda::ContextGuard guard(driver_, device_.context);
    void* p = nullptr;
    if (api_.cuMemHostAlloc(&p, bytes, 0) != cuda::kSuccess) {
      if (release_host_cache() == 0 || api_.cuMemHostAlloc(&p, bytes, 0) != cuda::kSuccess) {
        return nullptr;
      }
    }
    pinned_size_[p] = bytes;
    return p;
  }
  void host_free(void* ptr) noexcept override {
    auto it = pinned_size_.find(ptr);
    uint64_t size = it == pinned_size_.end() ? 0 : it->second;
    if (it != pinned_size_.end()) pinned_size_.erase(it);
    if (size && cached_bytes_ + size <= kPinnedCacheBytes) {
      try {
        pinned_cache_.emplace(size, ptr);
        cached_bytes_ += size;
        return;
      } catch (...) {
      }
    }
    if (api_.cuCtxPushCurrent(device_.context) != cuda::kSuccess) return;
    api_.cuMemFreeHost(ptr);
    pop();
  }
  uint64_t release_host_cache() noexcept override {
    uint64_t released = cached_bytes_;
    if (pinned_cache_.empty() || api_.cuCtxPushCurrent(device_.context) != cuda::kSuccess) return 0;
    for (auto& [size, p] : pinned_cache_) api_.cuMemFreeHost(p);
    pop();
    pinned_cache_.clear();
    cached_bytes_ = 0;
    return released;
  }
  void copy_to_host(void* dst, const void* src, uint64_t bytes, cuda::CUstream stream) override {
    cuda::ContextGuard guard(driver_, device_.context);
    GK_CU_CHECK(driver_, cuMemcpyDtoHAsync(dst, reinterpret_cast<cuda::CUdeviceptr>(src), bytes,
                                           stream));
    GK_CU_CHECK(driver_, cuStreamSynchronize(stream));
  }
  void copy_to_device(void* dst, const void* src, uint64_t bytes,
                      cuda::CUstream stream) override {
    cuda::ContextGuard guard(driver_, device_.context);
    GK_CU_CHECK(driver_, cuMemcpyHtoDAsync(reinterpret_cast<cuda::CUdeviceptr>(dst), src, bytes,
                                           stream));
    // The host copy is freed next: the transfer must be done with it.
    GK_CU_CHECK(driver_, cuStreamSynchronize(stream));
  }
  uint64_t total_memory() override { return device_.total_memory; }
  uint64_t free_memory() override { return devices_.free_memory(device_); }

 private:
  void pop() noexcept {
    cuda::CUcontext popped;
    api_.cuCtxPopCurrent(&popped);
  }

  // Makes the device's context current for a scope, pushing it only when another (or none)
  // is current: threads that use cudart, PyTorch or CuPy on the device have it already.
  // `ok` is false when it could not be made current.
  struct CurrentContext {
    explicit CurrentContext(CudaBackend& backend) : b(backend) {
      cuda::CUcontext now = nullptr;
      if (b.api_.cuCtxGetCurrent(&now) == cuda::kSuccess && now == b.device_.context) return;
      result = b.api_.cuCtxPushCurrent(b.device_.context);
      pushed = result == cuda::kSuccess;
      ok = pushed;
    }
    ~CurrentContext() {
      if (pushed) b.pop();
    }
    CurrentContext(const CurrentContext&) = delete;
    CurrentContext& operator=(const CurrentContext&) = delete;
    CudaBackend& b;
    cuda::CUresult result = cuda::kSuccess;
    bool pushed = false;
    bool ok = true;
  };

  const DeviceSet& devices_;
  const Device& device_;
  const cuda::Driver& driver_;
  const cuda::DriverApi& api_;
  // Guarded by the pool's mutex.
  std::vector<cuda::CUevent> spare_events_;
  static constexpr uint64_t kPinnedCacheBytes = uint64_t(8) << 30;
  std::multimap<uint64_t, void*> pinned_cache_;      // size -> free pinned storage
  std::unordered_map<void*, uint64_t> pinned_size_;  // storage in use -> size
  uint64_t cached_bytes_ = 0;
};

}  // namespace

std::unique_ptr<PoolBackend> make_host_backend(const DeviceSet& devices, const Device& device) {
  return std::make_unique<HostBackend>(devices, device);
}

std::unique_ptr<PoolBackend> make_cuda_backend(const DeviceSet& devices, const Device& device) {
  return std::make_unique<CudaBackend>(devices, device);
}

DeviceMemory::DeviceMemory(const DeviceSet& devices) : devices_(devices) {
  for (const Device& d : devices_.devices()) {
    pools_.push_back(std::make_unique<MemoryPool>(
        d.label(), d.is_cuda() ? make_cuda_backend(devices_, d) : make_host_backend(devices_, d)));
  }
}

DeviceMemory::~DeviceMemory() = default;

void* DeviceMemory::allocate(const Device& device, uint64_t bytes, cuda::CUstream stream) const {
  return pool(device).allocate_raw(bytes, stream, ChargeScope::current());
}

void DeviceMemory::deallocate(const Device& device, void* ptr, cuda::CUstream stream) const {
  if (stream && captures_.load(std::memory_order_acquire) > 0) {
    std::lock_guard<std::mutex> lock(capture_mu_);
    auto it = captured_.find(stream);
    if (it != captured_.end()) {
      it->second.push_back(ptr);
      return;
    }
  }
  pool(device).free_raw(ptr, stream, "host.free");
}

void DeviceMemory::begin_capture(cuda::CUstream stream) const {
  std::lock_guard<std::mutex> lock(capture_mu_);
  if (!captured_.emplace(stream, std::vector<void*>{}).second) {
    fail(GK_FAILED_PRECONDITION, "host.graph_begin: the stream is being captured already");
  }
  captures_.fetch_add(1, std::memory_order_release);
}

std::vector<void*> DeviceMemory::end_capture(cuda::CUstream stream) const {
  std::lock_guard<std::mutex> lock(capture_mu_);
  auto it = captured_.find(stream);
  if (it == captured_.end()) return {};
  std::vector<void*> held = std::move(it->second);
  captured_.erase(it);
  captures_.fetch_sub(1, std::memory_order_release);
  return held;
}

void* Allocation::locate(cuda::CUstream stream, bool pin) {
  if (!record) return ptr;
  return pool.locate(record, stream, pin);
}

void Allocation::unpin() noexcept {
  if (record) pool.unpin(record);
}

}  // namespace gk
