// A stream-ordered memory pool for one device.
//
// Small requests (<= kSmallLimit) are rounded to a size class and served from per-class
// free lists, carved by bumping through 2 MiB small segments. Larger requests are rounded
// to 4 KiB and served best-fit, splitting a block when the remainder is worth keeping and
// coalescing neighbours on free: medium requests (< kHugeMin) from shared 20 MiB segments,
// huge ones from segments of their own size, and only from a free huge block at most
// kHugeFitFactor times their size (so a small request never pins a huge segment, and a huge
// segment comes free whole). Segments come from a PoolBackend (the CUDA driver, or aligned
// host memory for the cpu device: the same logic serves both, so the accounting and
// eviction code runs in CI). Before the pool grows past kReserveHeadroom over the most it
// has had in use, it gives idle segments back; all of them go on trim() or under pressure.
//
// Stream order: a block freed on stream S is reusable on S at once. On another stream T it
// must wait for the work queued on S before the free. For streams the pool tracks (those
// made by gk_stream_create and the legacy default stream: their destruction is announced
// through forget_stream()), free records nothing: when T first wants such a block, the
// pool records one event on S *then* (it covers every free made on S so far, a superset of
// the work at free time, so it is conservative but correct) and shares it among all of S's
// pending blocks. For a stream it does not track (a wrapped foreign stream, which may be
// destroyed without notice), free records an event at once, as the only moment the stream
// is known to exist. T reuses a pending block once that event has completed, or after
// being made to wait on it (cuStreamWaitEvent): the host never blocks on the alloc path.
//
// Accounting: every block is charged to an owner (a quota in bytes on this device, 0 for
// none). Evictable allocations (GK_BUFFER_EVICTABLE) are kept in an LRU list; when a
// request would pass a quota, the device budget or the device's memory, the least recently
// used evictable allocations that are not pinned (mapped or in use by an op) are copied to
// host memory and their blocks freed; the next locate() copies them back, possibly at a new
// address.
//
// Thread-safe: one lock per pool (a SpinLock: short critical sections) guards everything below.
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

struct PoolSegment;
struct PoolBlock;
struct PoolStream;

// Pool-wide counters, as gk_memory_stats reports them.
struct PoolStats {
  uint64_t bytes_in_use = 0;      // live blocks, rounded sizes
  uint64_t bytes_requested = 0;   // live blocks, requested sizes
  uint64_t bytes_reserved = 0;    // segments held from the backend
  uint64_t peak_bytes_in_use = 0;
  uint64_t peak_bytes_reserved = 0;
  uint64_t alloc_count = 0;
  uint64_t free_count = 0;
  uint64_t failure_count = 0;
  uint64_t segment_count = 0;
  uint64_t largest_free_block = 0;
  double fragmentation = 0;       // 1 - largest free block / free bytes in segments
  uint64_t budget = 0;
  uint64_t bytes_spilled = 0;     // evictable bytes now in host memory
  uint64_t spill_count = 0;
  uint64_t restore_count = 0;
  uint64_t cross_stream_waits = 0;
  uint64_t segment_releases = 0;
  uint64_t segment_maps = 0;      // segments taken from the backend, ever
  uint64_t events_recorded = 0;   // free events recorded (at free, or later for tracked streams)
};

// MemoryOwner::eviction_class values.
constexpr int32_t kEvictFirst = 0;        // BestEffort tasks, plain owners, no owner
constexpr int32_t kEvictAboveRequest = 1; // Burstable: only memory above its request
constexpr int32_t kEvictNever = 2;        // Guaranteed: only for its own quota
constexpr size_t kOwnerEventLimit = 64;

struct OwnerEvent {
  uint64_t t_ns;  // steady clock
  std::string text;
};

// An owner's quota and usage on one pool. Lives as long as the pool. What every allocation
// and free reads or writes comes first, on one cache line.
struct MemoryOwner {
  uint64_t quota = 0;       // 0: none
  uint64_t in_use = 0;
  uint64_t peak = 0;
  uint64_t alloc_count = 0;
  // Set by the scheduler for a task's owner. The class orders eviction: BestEffort (and
  // owners of no task) first, then Burstable memory above its request; Guaranteed memory is
  // never spilled for another owner. The request is held back from every other owner.
  uint64_t request = 0;
  int32_t eviction_class = kEvictFirst;
  bool closed = false;      // its handle was destroyed; blocks still charged stay charged
  uint64_t failure_count = 0;
  std::string name;
  // What eviction did to or for this owner (the latest kOwnerEventLimit), oldest first.
  std::vector<OwnerEvent> events;
  uint64_t events_dropped = 0;
};

// The pool-side state of an evictable allocation: resident in `block`, or spilled to
// `host`. Stable for the allocation's lifetime, unlike the block it occupies.
struct EvictRecord {
  PoolBlock* block = nullptr;  // nullptr while spilled
  void* host = nullptr;        // the spilled copy
  uint64_t requested = 0;
  uint64_t id = 0;
  MemoryOwner* owner = nullptr;
  cuda::CUstream stream = nullptr;  // the stream of its last use, its free's order
  int32_t pins = 0;                 // maps and ops in flight: never evicted while > 0
  EvictRecord* lru_prev = nullptr;  // towards the most recently used
  EvictRecord* lru_next = nullptr;
};

struct EvictionReport;

// Aligned to a cache line: the fields that every allocation and free touches come first,
// on two lines (a call on a host whose caches went cold meanwhile misses on each line).
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
  PoolBlock* try_small(int size_class, cuda::CUstream stream);
  PoolBlock* try_small_rest(int size_class, cuda::CUstream stream);
  PoolBlock* try_large(uint64_t rounded, cuda::CUstream stream);
  PoolStream* tracked(cuda::CUstream stream) noexcept;
  PoolStream* tracked_lookup(cuda::CUstream stream) noexcept;
  bool stream_complete(PoolStream* ps, uint64_t seq);
  void* covering_event(PoolStream* ps, uint64_t seq) noexcept;
  bool settled(PoolBlock* b);
  void wait_settled(PoolBlock* b) noexcept;
  bool usable_on(PoolBlock* b, cuda::CUstream stream);
  void wait_for(PoolBlock* b, cuda::CUstream stream);
  void take(PoolBlock* b, cuda::CUstream stream) noexcept;
  void take_for(PoolBlock* b, cuda::CUstream stream);
  uint64_t segment_size_for(uint64_t rounded, bool exact) const;
  static void* new_storage();
  static void delete_storage(void* storage) noexcept;
  void hold() noexcept;
  void let_go(std::shared_ptr<void>& holder) noexcept;
  bool grow(uint64_t rounded, bool exact);
  bool release_idle_for(uint64_t rounded);
  bool segment_settled(PoolSegment* s);
  bool coalesce_settled();
  void free_locked(PoolBlock* block, cuda::CUstream stream, bool ready) noexcept;
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
  template <typename Done>
  void evict_until(Done done, MemoryOwner* owner, EvictionReport& report);
  template <typename Done>
  void evict_for(MemoryOwner* requester, bool within_request, Done done, EvictionReport& report);
  static uint64_t unused_reservation(const MemoryOwner* owner);
  uint64_t held_for_others(const MemoryOwner* owner) const;
  void note(MemoryOwner* owner, std::string text);
  bool spill(EvictRecord* record, EvictionReport& report);
  void restore(EvictRecord* record, cuda::CUstream stream);
  void lru_unlink(EvictRecord* r) noexcept;
  void lru_push_front(EvictRecord* r) noexcept;
  [[noreturn]] void fail_oom(uint64_t bytes, uint64_t rounded, MemoryOwner* owner,
                             const std::string& limit, const EvictionReport& report);
  [[noreturn, gnu::cold, gnu::noinline]] void fail_too_large(uint64_t bytes, MemoryOwner* owner);
  PoolBlock* new_block();
  void delete_block(PoolBlock* b) noexcept;
  void charge(PoolBlock* b, uint64_t requested, MemoryOwner* owner);
  void uncharge(PoolBlock* b) noexcept;
  std::string holders_text();
  void count_allocation() noexcept;
  // Sets `holder` to the holder to let go of (after unlocking) when this was the last live
  // allocation of a closed pool.
  void uncount_allocation(std::shared_ptr<void>& holder) noexcept;
  void unbind_stream(cuda::CUstream stream) noexcept;

  // Every allocation and free: the lock, what they count and the limits they check.
  SpinLock& lock_;
  uint32_t free_buffer_slots_ = 0;
  bool closed_ = false;
  bool holding_ = false;           // holder_ is set
  uint16_t spare_storage_count_ = 0;
  static constexpr uint16_t kSpareStorage = 64;
  void* spare_storage_ = nullptr;  // take_storage_held's blocks, linked through their first word
  uint64_t live_allocations_ = 0;  // hold_while_live: allocations live now
  uint64_t free_seq_ = 0;
  PoolStream* last_stream_ = nullptr;  // the tracked stream looked up last (frees come in runs)
  uint64_t budget_ = 0;
  // Σ over owners of what their request holds beyond their use (kept as usage changes, so
  // the allocation path reads it instead of walking every owner).
  uint64_t unused_reservations_ = 0;
  alignas(64) PoolStats stats_;  // its first line: bytes in use and requested, peaks, counts
  std::array<PoolBlock*, kSmallClassCount> small_bins_{};  // heads of per-class free lists
  alignas(64) MemoryOwner unowned_;
  std::string label_;
  std::unique_ptr<PoolBackend> backend_;
  uint64_t next_record_id_ = 1;
  std::vector<std::unique_ptr<MemoryOwner>> owners_;
  std::vector<PoolSegment*> segments_;
  FreeSet medium_free_;                             // free blocks of medium segments
  FreeSet huge_free_;                               // free blocks of huge segments
  PoolBlock* recent_large_ = nullptr;  // a free large block kept out of its set (free_large)
  std::vector<FreeSet::node_type> spare_nodes_;     // capacity kSpareNodes, reserved
  // Tracked streams by handle.
  std::unordered_map<cuda::CUstream, std::unique_ptr<PoolStream>> streams_;
  PoolSegment* small_current_ = nullptr;            // the small segment being carved
  std::unordered_map<uintptr_t, PoolBlock*> raw_live_;
  std::vector<EvictRecord*> spilled_;               // for the snapshot
  EvictRecord* lru_head_ = nullptr;                 // most recently used resident record
  EvictRecord* lru_tail_ = nullptr;
  std::vector<PoolBlock*> spare_blocks_;            // recycled PoolBlock structs
  // hold_while_live: the holder kept while any allocation is live.
  std::weak_ptr<void> holder_source_;
  std::shared_ptr<void> holder_;
};

}  // namespace gk
