// The process-wide table behind gk_buffer handles. A handle encodes a slot and the slot's
// generation, so a handle used after gk_buffer_free is recognised as stale instead of
// reaching freed memory.
//
// A live slot is guarded by the lock of the pool its memory comes from, not by a lock of the
// table: gk_buffer_alloc makes the block and the handle, and gk_buffer_free retires the
// handle and gives the block back, each in one critical section of the pool (one atomic
// read-modify-write per call). Each pool keeps a list of free slots of its own (refilled from
// the table in batches, under the table's lock, and given back when the pool goes), and a
// slot records the lock of the pool whose list or buffer it is in. To use a handle, a thread
// reads the slot's state (the live handle, or the next generation while free) and its lock
// without a lock, takes that lock and reads the state again: when it still matches, the
// slot cannot have changed meanwhile (every change of a live slot is made under that lock,
// and a free bumps the generation), so the lock is the one that guards it. The locks are
// lasting (spin_lock.h): a thread whose handle went stale meanwhile, the pool gone with it,
// still takes a valid lock and then finds the handle stale.
//
// Slots sit in chunks that never move or go away, so the lock-free reads stay valid.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/spin_lock.h"
#include "gpukit/gpukit.h"
#include "memory/device_memory.h"
#include "memory/memory_pool_inline.h"

namespace gk {

// The pool's storage for a buffer's Allocation is a recycled block (MemoryPool::
// take_storage_held): the one a tensor's last release gives back through RecycledStorage.
static_assert(recycled_size_index(sizeof(Allocation)) == 0);

struct BufferEntry {
  AllocationRef allocation;
  int32_t map_count = 0;

 private:
  friend class BufferTable;
  // While the slot is free: the next free slot's index + 1 in its list (0: none). Here, in
  // the padding, so that a slot is 32 bytes and never straddles two cache lines.
  uint32_t next_free_ = 0;
};

class BufferTable {
 public:
  static BufferTable& instance();

  // gk_buffer_alloc, under pool.lock(): a new buffer of `size` bytes on `device` (whose pool
  // `pool` is), usable in `stream`'s order and charged to `owner` (nullptr: none), evictable or
  // not, with the maker's `context` (make_allocation's arguments), and its handle. Its
  // Allocation lives in storage the pool keeps for it (no thread-local lookup); like
  // make_allocation's, it may outlive the handle (a tensor over the buffer). Inline: the hot
  // path makes one call, into the pool.
  gk_buffer* insert_new_held(MemoryPool& pool, void* context, const Device& device, uint64_t size,
                             cuda::CUstream stream, MemoryOwner* owner, bool evictable) {
    // Before the memory, so that a failure here has nothing to undo.
    if (!pool.free_buffer_slots()) refill(pool);
    void* storage = pool.take_storage_held();
    Allocation* a = ::new (storage) Allocation(context, device, size, pool);
    try {
      // The address is read under the pool's lock: another thread may spill it right after.
      if (evictable) {
        a->record = pool.allocate_evictable_held(size, stream, owner, &a->ptr);
      } else {
        a->block = pool.allocate_held(size, stream, owner, &a->ptr);
      }
    } catch (...) {
      a->~Allocation();  // frees nothing: its block and record are null
      pool.give_back_storage_held(storage);
      throw;
    }
    uint32_t& head = pool.free_buffer_slots();
    uint32_t slot_plus_one = head;
    Slot& slot = slot_at(slot_plus_one);
    head = slot.entry.next_free_;
    new (&slot.entry.allocation) AllocationRef(a);  // the slot's is empty: nothing to drop
    uint64_t handle = (slot.state.load(std::memory_order_relaxed) & kGenerationMask) | slot_plus_one;
    slot.state.store(handle, std::memory_order_release);
    return reinterpret_cast<gk_buffer*>(handle);
  }

  // Runs fn(entry) under the lock of the buffer's pool: fn must not call into that pool
  // (Allocation's _held functions are for that). Throws INVALID_ARGUMENT, naming `function`,
  // for a NULL, unknown or stale handle.
  template <typename Fn>
  auto with(const gk_buffer* handle, const char* function, Fn&& fn) {
    Slot& slot = lock_live_slot(handle, function);
    std::lock_guard<SpinLock> guard(*slot.lock.load(std::memory_order_relaxed), std::adopt_lock);
    return fn(slot.entry);
  }

  // Takes the entry out of the table (the handle becomes stale) and returns its
  // allocation. FAILED_PRECONDITION while the buffer is mapped. `check(entry)` runs first,
  // under the same lock; when it throws, nothing changes.
  template <typename Check>
  AllocationRef remove(const gk_buffer* handle, const char* function, Check&& check) {
    Slot& slot = lock_live_slot(handle, function);
    std::lock_guard<SpinLock> guard(*slot.lock.load(std::memory_order_relaxed), std::adopt_lock);
    check(slot.entry);
    if (slot.entry.map_count > 0) fail_mapped(handle, function, slot.entry.map_count);
    AllocationRef allocation = std::move(slot.entry.allocation);
    retire_held(allocation->pool, slot, handle);
    return allocation;
  }
  AllocationRef remove(const gk_buffer* handle, const char* function) {
    return remove(handle, function, [](BufferEntry&) {});
  }

  // gk_buffer_free: remove() and, when the handle held the only reference, the memory's
  // return to its pool in `stream`'s order (kOwnStream: the stream the pool has for it), under
  // one lock. When a tensor still views the memory, it goes back once that lets go, in
  // `stream`'s order. Inline: the hot path makes one call, into the pool.
  template <typename Check>
  void free(const gk_buffer* handle, const char* function, cuda::CUstream stream, Check&& check) {
    Slot& slot = lock_live_slot(handle, function);
    std::shared_ptr<void> holder;  // what the pool lets go of: after the unlock
    std::lock_guard<SpinLock> guard(*slot.lock.load(std::memory_order_relaxed), std::adopt_lock);
    check(slot.entry);
    if (slot.entry.map_count > 0) fail_mapped(handle, function, slot.entry.map_count);
    Allocation* a = slot.entry.allocation.release();
    MemoryPool& pool = a->pool;
    retire_held(pool, slot, handle);
    // The handle's reference is the only one: no other can be added meanwhile (a tensor over
    // the buffer is made under this lock).
    if (a->refs_.load(std::memory_order_acquire) != 1) {
      if (stream != kOwnStream) {
        if (a->record) {
          pool.order_free_on_held(a->record, stream);
        } else {
          pool.order_free_on_held(a->block, stream);
        }
        stream = kOwnStream;
      }
      // Unless a tensor let go meanwhile, the last holder frees it, later.
      if (a->refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    }
    if (a->record) {
      pool.free_held(a->record, stream, holder);
      a->record = nullptr;
    } else {
      pool.free_held(a->block, stream, holder);
      a->block = nullptr;
    }
    a->~Allocation();  // frees nothing more
    pool.give_back_storage_held(a);
  }

  // A pool's free slots go back to the table (the pool is going).
  void give_back_slots(uint32_t head) noexcept;

 private:
  static constexpr uint32_t kChunkBits = 10;
  static constexpr uint32_t kChunkSlots = uint32_t(1) << kChunkBits;
  static constexpr uint32_t kMaxChunks = uint32_t(1) << 16;  // 64 Mi slots
  static constexpr uint32_t kRefillSlots = 32;
  static constexpr uint64_t kGenerationMask = ~uint64_t(0xffffffffu);

  struct alignas(32) Slot {
    // Live: its handle (generation << 32 | index + 1). Free: the next generation << 32.
    std::atomic<uint64_t> state{uint64_t(1) << 32};
    // The lock of the pool whose buffer or free list it is in; it changes only while free.
    std::atomic<SpinLock*> lock{nullptr};
    BufferEntry entry;  // guarded by *lock
  };
  static_assert(sizeof(Slot) == 32);

  Slot& slot_at(uint64_t slot_plus_one) {
    uint64_t index = slot_plus_one - 1;
    return chunks_[index >> kChunkBits].load(std::memory_order_acquire)[index & (kChunkSlots - 1)];
  }
  // The live slot of `handle`, with its lock taken. Throws INVALID_ARGUMENT (no lock held).
  Slot& lock_live_slot(const gk_buffer* handle, const char* function) {
    if (!handle) fail_null_handle(function);
    uint64_t value = reinterpret_cast<uint64_t>(handle);
    uint64_t slot_plus_one = value & 0xffffffffu;
    if (slot_plus_one == 0 || slot_plus_one > made_.load(std::memory_order_acquire)) {
      fail_not_a_handle(handle, function);
    }
    Slot& slot = slot_at(slot_plus_one);
    if (slot.state.load(std::memory_order_acquire) != value) fail_stale_handle(handle, function);
    SpinLock* lock = slot.lock.load(std::memory_order_relaxed);
    lock->lock();
    // Unchanged since: the handle is live and `lock` guards it.
    if (slot.state.load(std::memory_order_relaxed) != value) {
      lock->unlock();
      fail_stale_handle(handle, function);
    }
    return slot;
  }
  // Under the pool's lock: the handle goes stale and its slot to the front of the pool's list.
  void retire_held(MemoryPool& pool, Slot& slot, const gk_buffer* handle) noexcept {
    uint64_t value = reinterpret_cast<uint64_t>(handle);
    slot.state.store((value & kGenerationMask) + (uint64_t(1) << 32), std::memory_order_release);
    uint32_t& head = pool.free_buffer_slots();
    slot.entry.next_free_ = head;
    head = uint32_t(value);  // the slot's index + 1
  }
  // Gives pool's empty list up to kRefillSlots slots: freed ones first, then new ones.
  void refill(MemoryPool& pool);
  [[noreturn]] static void fail_null_handle(const char* function);
  [[noreturn]] static void fail_not_a_handle(const gk_buffer* handle, const char* function);
  [[noreturn]] static void fail_stale_handle(const gk_buffer* handle, const char* function);
  [[noreturn]] static void fail_mapped(const gk_buffer* handle, const char* function,
                                       int32_t map_count);

  SpinLock lock_;            // guards the chunks' growth and the list below
  uint32_t free_head_ = 0;   // slots no pool holds (their pools went), index + 1 (0: none)
  std::atomic<uint32_t> made_{0};  // slots handed to pools so far: a handle past them is no handle
  std::atomic<Slot*> chunks_[kMaxChunks] = {};
};

// The table lives in constant-initialised storage (no guard on the hot paths) that is never
// destroyed: static destructors may still free buffers after buffer_table.cpp's would have run.
union BufferTableStorage {
  BufferTable table;
  constexpr BufferTableStorage() : table() {}
  ~BufferTableStorage() {}
};
extern constinit BufferTableStorage buffer_table_storage;

inline BufferTable& BufferTable::instance() {
  return buffer_table_storage.table;
}

}  // namespace gk
