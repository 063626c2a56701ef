// A stream-ordered memory pool for one device: the façade over the parts it is made of.
//
// Small requests (<= kSmallLimit) are rounded to a size class and served from per-class
// free lists, carved by bumping through 2 MiB small segments. Larger requests are rounded
// to 4 KiB and served best-fit, splitting a block when the remainder is worth keeping and
// coalescing neighbours on free: medium requests (< kHugeMin) from shared 20 MiB segments,
// huge ones from segments of their own size, and only from a free huge block at most
// kHugeFitFactor times their size (so a small request never pins a huge segment, and a huge
// segment comes free whole). Segments come from a PoolBackend (pool_backend.h: the CUDA
// driver, or aligned host memory for the cpu device: the same logic serves both, so the
// accounting and eviction code runs in CI). Before the pool grows past kReserveHeadroom over
// the most it has had in use, it gives idle segments back; all of them go on trim() or under
// pressure.
//
// The parts, each in its own file pair:
//   - allocation (this class; memory_pool.cpp for the entry points and the paths after a
//     miss, pool_blocks.cpp for free lists, splitting, merging, growth and release, and
//     memory_pool_inline.h for the fast paths): blocks and segments (pool_block.h).
//   - StreamOrder (stream_order.h): stream-ordered frees, when a block freed on one stream
//     may be reused on another. kOwnStream below names "the stream the pool knows".
//   - OwnerLedger (owner_ledger.h): owners, quotas, requests, the device budget; every
//     block is charged to an owner.
//   - Eviction (eviction.h): evictable allocations (GK_BUFFER_EVICTABLE) in LRU order and the
//     victim order. When a request would pass a quota, the device budget or the device's
//     memory, the least recently used evictable allocations that are not pinned (mapped or in
//     use by an op) are copied to host memory and their blocks freed; the next locate()
//     copies them back, possibly at a new address. The pool does the copying (spill,
//     restore); Eviction picks who goes.
//   - PoolStats (pool_stats.h): the counters; stats() and snapshot_json() report them
//     (pool_report.cpp).
//
// Locking: one lock per pool (a SpinLock: short critical sections) guards the pool and every
// part above; none of the parts locks anything. Each public function takes it, except the
// *_held ones, whose caller holds lock() (the buffer table). Nothing here calls out of the
// pool with it held other than the backend (which takes no pool lock). A holder the pool
// lets go of (hold_while_live) is released only after unlocking: it may own the pool.
//
// Layout: the pool is cache-line aligned and its members are ordered so that a call on a
// host whose caches went cold meanwhile touches few lines. Line 1 holds everything every
// allocation and free reads or writes: StreamOrder's two counters (the end of that object,
// whose map fills line 0), the lock, the buffer table's fields, the live count, and the
// ledger's budget and reservation sum (the start of that object, whose unowned account
// then fills line 2). Then the statistics and the small free lists, each on its own lines.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/spin_lock.h"
#include "device/cuda_driver.h"
#include "memory/eviction.h"
#include "memory/owner_ledger.h"
#include "memory/pool_backend.h"
#include "memory/pool_block.h"
#include "memory/pool_stats.h"
#include "memory/stream_order.h"

namespace gk {

// Where a stream is expected: the stream the allocation's free is ordered in, as the pool
// knows it (its allocation stream, or the one order_free_on named; for an evictable one, the
// stream of its last use). A stream destroyed meanwhile reads as the legacy default stream.
inline const cuda::CUstream kOwnStream = reinterpret_cast<cuda::CUstream>(~uintptr_t(0));

constexpr uint64_t kPoolAlignment = 256;
constexpr uint64_t kSmallLimit = uint64_t(1) << 20;         // largest small class
constexpr uint64_t kSmallSegmentSize = uint64_t(2) << 20;   // small segments
constexpr uint64_t kLargeRounding = 4096;                   // large requests round to this
constexpr uint64_t kLargeSegmentMin = uint64_t(20) << 20;   // segment for a medium request
constexpr uint64_t kHugeMin = kLargeSegmentMin / 2;         // huge: a segment of its own
constexpr uint64_t kSegmentRounding = uint64_t(2) << 20;    // huge segments round to this
// A huge request takes a free huge block only when the block is at most this many times its
// size; otherwise it gets a new segment (after idle ones were given back, see below). Cutting
// a huge free block for a much smaller request strands the rest until its neighbour comes
// back, and on the bench_pool trace (perf/memory/pool_trace.h) that was most of the gap to the
// live peak: with the headroom rule below, factor 2 keeps peak reserved / peak live at
// 1.05-1.09 there (other seeds: 1.05-1.10; 1.22 before), for about four times the segment
// maps (195 against 52 on the cpu pool).
constexpr uint64_t kHugeFitFactor = 2;
// The pool grows past max(the most it has had in use, in use now + the request) plus this
// fraction (1/20) only after giving back idle segments (largest first), so that segments
// freed by one phase of a program do not stay reserved beside those of the next.
constexpr uint64_t kReserveHeadroomDivisor = 20;
// A large block is always split to the rounded request (every large size is a multiple of
// kLargeRounding), so accounting, quotas and the budget see exactly the rounded size; a
// remainder too small for any large request becomes usable again when a neighbour is freed.
constexpr uint64_t kMinSplitRemainder = kLargeRounding;

// The size classes: multiples of 256 B up to 4 KiB, then four classes per power of two up
// to 1 MiB. Returns the class index of `bytes` (<= kSmallLimit) and its size.
constexpr int kSmallClassCount = 16 + 4 * (20 - 12);
int size_class_of(uint64_t bytes);
uint64_t size_class_size(int size_class);
int size_class_count();
// What a request of `bytes` is rounded to (a class size, or a 4 KiB multiple).
uint64_t pool_rounded_size(uint64_t bytes);

// Aligned to a cache line: see "Layout" above.
class alignas(64) MemoryPool {
 public:
  MemoryPool(std::string label, std::unique_ptr<PoolBackend> backend);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  const std::string& label() const { return label_; }

  // A block of at least `bytes` usable in `stream`'s order, charged to `owner` (nullptr:
  // the pool's unowned account); *address receives its address. Throws RESOURCE_EXHAUSTED
  // naming the request, the device, the pool, the largest holders by owner and what eviction
  // tried.
  PoolBlock* allocate(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner,
                      void** address = nullptr);
  // Returns the block in `stream`'s order (kOwnStream: see above). Makes no driver call
  // when that stream is tracked.
  void free(PoolBlock* block, cuda::CUstream stream) noexcept;

  // The pool's lock, for a caller that does more in the same critical section (the buffer
  // table: a buffer's handle and its memory change together, one lock per gk_buffer_alloc and
  // per gk_buffer_free). Lasting (spin_lock.h): a thread holding a handle that went stale may
  // still take it after the pool is gone. The *_held functions below are those above, for a
  // caller that holds it. A held free may set `holder` to what the pool let go of (its
  // runtime, after its last allocation): reset it after unlocking, and touch the pool no more.
  SpinLock& lock() const { return lock_; }
  // Inline, in memory_pool_inline.h (so are the block-level fast paths they share with the
  // functions above).
  inline PoolBlock* allocate_held(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner,
                                  void** address);
  inline void free_held(PoolBlock* block, cuda::CUstream stream,
                        std::shared_ptr<void>& holder) noexcept;
  EvictRecord* allocate_evictable_held(uint64_t bytes, cuda::CUstream stream,
                                       MemoryOwner* owner, void** address);
  void free_held(EvictRecord* record, cuda::CUstream stream,
                 std::shared_ptr<void>& holder) noexcept;
  void order_free_on_held(PoolBlock* block, cuda::CUstream stream) noexcept;
  void order_free_on_held(EvictRecord* record, cuda::CUstream stream) noexcept;
  void* locate_held(EvictRecord* record, cuda::CUstream stream, bool pin);
  void unpin_held(EvictRecord* record) noexcept;
  // The buffer table's free slots kept for this pool's buffers (a list through the slots, 0:
  // none), guarded by lock(). The table fills it and takes it back when the pool goes.
  uint32_t& free_buffer_slots() { return free_buffer_slots_; }
  // Storage for a buffer's Allocation, taken and given back under lock(): a block of
  // recycled_blocks.h's first size, so that one given back through RecycledStorage (when a
  // tensor over the buffer lets go last) joins the recycled lists like any other. Up to
  // kSpareStorage are kept for the next buffer; the pool deletes them when it goes.
  void* take_storage_held() {
    void* p = spare_storage_;
    if (!p) return new_storage();
    spare_storage_ = *static_cast<void**>(p);
    --spare_storage_count_;
    return p;
  }
  void give_back_storage_held(void* p) noexcept {
    if (spare_storage_count_ == kSpareStorage) return delete_storage(p);
    *static_cast<void**>(p) = spare_storage_;
    spare_storage_ = p;
    ++spare_storage_count_;
  }
  // From now on the block's (or record's) free is ordered in `stream`.
  void order_free_on(PoolBlock* block, cuda::CUstream stream) noexcept;
  void order_free_on(EvictRecord* record, cuda::CUstream stream) noexcept;
  static void* address(const PoolBlock* block);
  static uint64_t block_size(const PoolBlock* block);

  // An evictable allocation: may be spilled to host memory while not pinned.
  // *address receives its address now (it may move once the call returns: use locate()).
  EvictRecord* allocate_evictable(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner,
                                  void** address = nullptr);
  void free(EvictRecord* record, cuda::CUstream stream) noexcept;
  // The record's device address, restoring it first (in `stream`'s order; kOwnStream: its
  // last use's) when spilled, and marking it most recently used. `pin` keeps it resident at that address until unpin().
  void* locate(EvictRecord* record, cuda::CUstream stream, bool pin);
  void unpin(EvictRecord* record) noexcept;
  bool is_spilled(const EvictRecord* record);

  // Raw pointers for plugins (host services): checked against the live table, so a
  // foreign pointer or a second free fails with INVALID_ARGUMENT naming `function`.
  void* allocate_raw(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner = nullptr);
  void free_raw(void* ptr, cuda::CUstream stream, const char* function);

  // Streams whose destruction the pool is told of (forget_stream), so that a free there
  // needs no event at once (see the top of this file). The legacy default stream (nullptr)
  // is tracked from the start and never forgotten. A stream tracked twice is still tracked
  // once; forgetting an untracked stream does nothing.
  void track_stream(cuda::CUstream stream);
  // Before `stream` is destroyed: waits for the frees still pending on it (the caller has
  // synchronized the stream, so this returns at once) and stops tracking it; later frees on
  // that handle record their event at once. Live allocations whose free was ordered there
  // are ordered in the legacy default stream instead: the handle may soon name another
  // stream, or none.
  void forget_stream(cuda::CUstream stream) noexcept;

  // Allocations (allocate, allocate_evictable) point into the runtime that owns the pool,
  // and may outlive its handle: while any is live, the pool holds `holder`. Holding it costs
  // nothing per allocation (it is taken when the first one is made and kept), so the hot
  // path has no reference count to touch. close(): the handle is gone; the pool lets go of
  // `holder` as soon as nothing is live.
  void hold_while_live(std::weak_ptr<void> holder);
  void close() noexcept;

  MemoryOwner* create_owner(const std::string& name, uint64_t quota);
  // Makes `owner` a scheduler task's: its eviction class and the request reserved for it.
  void set_owner_class(MemoryOwner* owner, int32_t eviction_class, uint64_t request);
  std::vector<OwnerEvent> owner_events(const MemoryOwner* owner);
  void close_owner(MemoryOwner* owner) noexcept;
  MemoryOwner owner_usage(const MemoryOwner* owner);

  // A limit on bytes in use on this device (0: none); passing it evicts, then fails.
  void set_budget(uint64_t bytes);
  // Releases every free segment to the backend; returns the bytes released.
  uint64_t trim();
  PoolStats stats();
  std::string snapshot_json();

 private:
  struct BySize {
    bool operator()(const PoolBlock* a, const PoolBlock* b) const;
  };
  // Allocation entry points and the paths after a miss (memory_pool.cpp, inline ones in
  // memory_pool_inline.h).
  PoolBlock* allocate_locked(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner);
  PoolBlock* allocate_counted(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner,
                              void** address);
  void free_counted(PoolBlock* b, cuda::CUstream stream, std::shared_ptr<void>& holder) noexcept;
  PoolBlock* allocate_after_miss(uint64_t bytes, uint64_t rounded, int size_class,
                                 cuda::CUstream stream, MemoryOwner* owner, bool limits_near);
  bool make_room(uint64_t bytes, uint64_t rounded, MemoryOwner* owner, EvictionReport& report);
  PoolBlock* find_after_miss(uint64_t bytes, uint64_t rounded, int size_class,
                             cuda::CUstream stream, MemoryOwner* owner, bool within_request,
                             EvictionReport& report);
  void free_locked(PoolBlock* block, cuda::CUstream stream, bool ready) noexcept;
  void charge(PoolBlock* b, uint64_t requested, MemoryOwner* owner);
  void uncharge(PoolBlock* b) noexcept;
  void take(PoolBlock* b, cuda::CUstream stream) noexcept;
  void take_for(PoolBlock* b, cuda::CUstream stream);
  // Free lists, splitting, merging, growth and release (pool_blocks.cpp).
  PoolBlock* try_small(int size_class, cuda::CUstream stream);
  PoolBlock* try_small_rest(int size_class, cuda::CUstream stream);
  PoolBlock* try_large(uint64_t rounded, cuda::CUstream stream);
  uint64_t segment_size_for(uint64_t rounded, bool exact) const;
  bool grow(uint64_t rounded, bool exact);
  bool release_idle_for(uint64_t rounded);
  bool segment_settled(PoolSegment* s);
  bool coalesce_settled();
  void free_large(PoolBlock* block) noexcept;
  void bin_push(PoolBlock* b);
  void bin_remove(PoolBlock* b);
  using FreeSet = std::set<PoolBlock*, BySize>;
  static constexpr size_t kSpareNodes = 64;
  FreeSet& free_set(const PoolBlock* b);
  // Free-set changes reuse the tree nodes of earlier erases (spare_nodes_), so a large
  // allocation and its free make no heap allocation for them.
  void free_insert(PoolBlock* b);
  void free_erase(PoolBlock* b) noexcept;
  PoolBlock* merge(PoolBlock* low, PoolBlock* high);
  bool segment_idle(const PoolSegment* s) const;
  uint64_t release_free_segments() noexcept;
  void release_segment(PoolSegment* segment) noexcept;
  PoolBlock* new_block();
  void delete_block(PoolBlock* b) noexcept;
  // Spilling and restoring an evictable allocation's contents (memory_pool.cpp).
  template <typename Done>
  void evict_for(MemoryOwner* requester, bool within_request, Done done, EvictionReport& report);
  bool spill(EvictRecord* record, EvictionReport& report);
  void restore(EvictRecord* record, cuda::CUstream stream);
  [[noreturn]] void fail_oom(uint64_t bytes, uint64_t rounded, MemoryOwner* owner,
                             const std::string& limit, const EvictionReport& report);
  [[noreturn, gnu::cold, gnu::noinline]] void fail_too_large(uint64_t bytes, MemoryOwner* owner);
  // Lifetime (hold_while_live) and the buffer table's storage.
  static void* new_storage();
  static void delete_storage(void* storage) noexcept;
  void hold() noexcept;
  void let_go(std::shared_ptr<void>& holder) noexcept;
  void count_allocation() noexcept;
  // Sets `holder` to the holder to let go of (after unlocking) when this was the last live
  // allocation of a closed pool.
  void uncount_allocation(std::shared_ptr<void>& holder) noexcept;
  void unbind_stream(cuda::CUstream stream) noexcept;

  // Line 0 and the first half of line 1 (see "Layout" above): it ends with the free count and
  // the last tracked stream that every free reads.
  StreamOrder order_;
  // Every allocation and free: the lock, the buffer table's fields and the live count.
  SpinLock& lock_;
  uint32_t free_buffer_slots_ = 0;
  bool closed_ = false;
  bool holding_ = false;           // holder_ is set
  uint16_t spare_storage_count_ = 0;
  static constexpr uint16_t kSpareStorage = 64;
  void* spare_storage_ = nullptr;  // take_storage_held's blocks, linked through their first word
  uint64_t live_allocations_ = 0;  // hold_while_live: allocations live now
  // Ends line 1 with the limits every allocation checks; its unowned account fills line 2.
  OwnerLedger ledger_;
  alignas(64) PoolStats stats_;  // its first line: bytes in use and requested, peaks, counts
  std::array<PoolBlock*, kSmallClassCount> small_bins_{};  // heads of per-class free lists
  std::string label_;
  std::unique_ptr<PoolBackend> backend_;
  Eviction eviction_;
  std::vector<PoolSegment*> segments_;
  FreeSet medium_free_;                             // free blocks of medium segments
  FreeSet huge_free_;                               // free blocks of huge segments
  PoolBlock* recent_large_ = nullptr;  // a free large block kept out of its set (free_large)
  std::vector<FreeSet::node_type> spare_nodes_;     // capacity kSpareNodes, reserved
  PoolSegment* small_current_ = nullptr;            // the small segment being carved
  std::unordered_map<uintptr_t, PoolBlock*> raw_live_;
  std::vector<PoolBlock*> spare_blocks_;            // recycled PoolBlock structs
  // hold_while_live: the holder kept while any allocation is live.
  std::weak_ptr<void> holder_source_;
  std::shared_ptr<void> holder_;
};

}  // namespace gk
