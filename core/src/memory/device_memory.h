// Device memory for a runtime: one stream-ordered MemoryPool per device (memory_pool.h),
// over the CUDA driver (cuMemAlloc segments) or aligned host memory for the cpu device. An
// Allocation frees itself when its last owner (a buffer handle or a tensor) lets go.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/recycled_blocks.h"
#include "common/ref_count.h"
#include "device/device.h"
#include "memory/charge_scope.h"
#include "memory/memory_pool.h"

namespace gk {

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

  // While `stream` is captured into a CUDA graph (plugin/graph_services.h), the memory freed
  // on it through deallocate stays allocated: the graph's kernels keep using it on every
  // replay. end_capture hands those pointers to the graph, which frees them when released.
  // FAILED_PRECONDITION when the stream is being captured already.
  void begin_capture(cuda::CUstream stream) const;
  std::vector<void*> end_capture(cuda::CUstream stream) const;

 private:
  const DeviceSet& devices_;
  std::vector<std::unique_ptr<MemoryPool>> pools_;
  // Checked by every deallocate: a capture is rare, so the map is looked at only during one.
  mutable std::atomic<int> captures_{0};
  mutable std::mutex capture_mu_;
  mutable std::unordered_map<cuda::CUstream, std::vector<void*>> captured_;
};

// The backends: exposed for tests that need a pool over plain host memory.
std::unique_ptr<PoolBackend> make_host_backend(const DeviceSet& devices, const Device& device);
std::unique_ptr<PoolBackend> make_cuda_backend(const DeviceSet& devices, const Device& device);

struct Allocation;

// A counted reference to an Allocation, as a std::shared_ptr would be, with the count in the
// Allocation itself: the buffer table's entry and each tensor over the memory hold one, and
// the memory goes back to the pool when the last one goes.
class AllocationRef {
 public:
  AllocationRef() = default;
  // Adopts the reference a new Allocation starts with.
  explicit AllocationRef(Allocation* allocation) noexcept : a_(allocation) {}
  AllocationRef(const AllocationRef& other) noexcept;
  AllocationRef(AllocationRef&& other) noexcept : a_(std::exchange(other.a_, nullptr)) {}
  AllocationRef& operator=(AllocationRef other) noexcept {
    std::swap(a_, other.a_);
    return *this;
  }
  ~AllocationRef();

  Allocation* get() const noexcept { return a_; }
  // Gives up the reference without dropping it: the caller drops it (drop_reference on the
  // allocation's count) or adopts it into another AllocationRef.
  Allocation* release() noexcept { return std::exchange(a_, nullptr); }
  Allocation* operator->() const noexcept { return a_; }
  explicit operator bool() const noexcept { return a_ != nullptr; }

 private:
  Allocation* a_ = nullptr;
};

// A new allocation of `size` bytes on `device`, from its pool `pool`, usable in `stream`'s order
// and charged to `owner` (nullptr: the current ChargeScope's, else none). `evictable`: it may be
// spilled to host memory while not pinned (GK_BUFFER_EVICTABLE). `context` is the maker's, kept
// in Allocation::context. The memory is freed when the last reference goes, in the order of the
// stream the pool has for it (`stream`, unless order_free_on named another; the pool keeps the
// runtime alive until then). Defined below. gk_buffer_alloc does the same, with the buffer's
// handle made under the same lock (buffer_table.h).
inline AllocationRef make_allocation(MemoryPool& pool, void* context, const Device& device,
                                     uint64_t size, cuda::CUstream stream,
                                     MemoryOwner* owner = nullptr, bool evictable = false);

// In recycled storage: the hot path (gk_buffer_alloc + gk_buffer_free) makes and drops one per
// call, with no malloc for it.
struct Allocation : RecycledStorage {
  // Holds no memory yet: make_allocation takes it from the pool.
  Allocation(void* context, const Device& device, uint64_t size, MemoryPool& pool) noexcept
      : context(context), device(device), size(size), pool(pool) {}
  // Inline: the last holder frees the memory, on the hot path.
  // The buffer table frees the memory itself, under the pool's lock, and clears `block` and
  // `record` before the delete.
  ~Allocation() {
    // The pool may let go of the runtime here (its last allocation): nothing is read after.
    if (record) {
      pool.free(record, kOwnStream);
    } else if (block) {
      pool.free(block, kOwnStream);
    }
  }
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  bool evictable() const { return record != nullptr; }
  // The current device address, restoring a spilled evictable allocation first (in
  // `stream`'s order; kOwnStream: the stream its free is ordered in). With `pin`, it stays
  // resident there until unpin(). The _held forms: the caller holds the pool's lock.
  void* locate(cuda::CUstream stream, bool pin);
  void unpin() noexcept;
  void* locate_held(cuda::CUstream stream, bool pin) {
    return record ? pool.locate_held(record, stream, pin) : ptr;
  }
  void unpin_held() noexcept {
    if (record) pool.unpin_held(record);
  }

  // The maker's, carried for it and never read here: the C API's Runtime, which a buffer's
  // handle leads back to (gk_tensor_from_buffer, gk_buffer_free).
  void* const context;
  const Device& device;
  uint64_t size;
  // The address at allocation. Stays valid for a non-evictable allocation; an evictable one
  // may move: use locate().
  void* ptr = nullptr;
  MemoryPool& pool;
  PoolBlock* block = nullptr;     // non-evictable
  EvictRecord* record = nullptr;  // evictable

 private:
  friend class AllocationRef;
  friend class BufferTable;
  std::atomic<int32_t> refs_{1};  // AllocationRefs
};

inline AllocationRef::AllocationRef(const AllocationRef& other) noexcept : a_(other.a_) {
  if (a_) a_->refs_.fetch_add(1, std::memory_order_relaxed);
}

inline AllocationRef::~AllocationRef() {
  if (a_ && drop_reference(a_->refs_)) delete a_;
}

inline AllocationRef make_allocation(MemoryPool& pool, void* context, const Device& device,
                                     uint64_t size, cuda::CUstream stream, MemoryOwner* owner,
                                     bool evictable) {
  // Read whether needed or not, right before the new: the recycled block's thread-local
  // lookup then serves both.
  MemoryOwner* scope_owner = ChargeScope::current();
  // Destroyed on a failure below, it frees nothing: its block and record are still null.
  AllocationRef a(new Allocation(context, device, size, pool));
  if (!owner) owner = scope_owner;
  // The address is read under the pool's lock: another thread may spill it right after.
  if (evictable) {
    a->record = pool.allocate_evictable(size, stream, owner, &a->ptr);
  } else {
    a->block = pool.allocate(size, stream, owner, &a->ptr);
  }
  return a;
}

}  // namespace gk
