// The process-wide table behind gk_buffer handles. A handle encodes a slot and the slot's
// generation, so a handle used after gk_buffer_free is recognised as stale instead of
// reaching freed memory.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "common/spin_lock.h"
#include "gpukit/gpukit.h"
#include "memory/device_memory.h"

namespace gk {

struct BufferEntry {
  AllocationRef allocation;
  int32_t map_count = 0;
};

class BufferTable {
 public:
  static BufferTable& instance();

  // A new handle for `allocation`. Inline, as are the lookups below: the hot path makes no
  // call under the table's lock.
  gk_buffer* insert(AllocationRef&& allocation) {
    std::lock_guard<SpinLock> guard(lock_);
    if (!free_head_) add_slot_locked();
    uint32_t index = free_head_ - 1;
    Slot& slot = slots_[index];
    free_head_ = slot.next_free;
    slot.live = true;
    slot.entry.allocation = std::move(allocation);
    return reinterpret_cast<gk_buffer*>((uint64_t(slot.generation) << 32) | (uint64_t(index) + 1));
  }

  // Runs fn(entry) under the table's lock. Throws INVALID_ARGUMENT, naming `function`,
  // for a NULL, unknown or stale handle.
  template <typename Fn>
  auto with(const gk_buffer* handle, const char* function, Fn&& fn) {
    std::lock_guard<SpinLock> guard(lock_);
    return fn(slot_locked(handle, function).entry);
  }

  // Takes the entry out of the table (the handle becomes stale) and returns its
  // allocation. FAILED_PRECONDITION while the buffer is mapped. `check(entry)` runs first,
  // under the same lock (one lock per free on the hot path); when it throws, nothing changes.
  template <typename Check>
  AllocationRef remove(const gk_buffer* handle, const char* function, Check&& check) {
    std::lock_guard<SpinLock> guard(lock_);
    Slot& slot = slot_locked(handle, function);
    check(slot.entry);
    return remove_locked(handle, function, slot);
  }
  AllocationRef remove(const gk_buffer* handle, const char* function) {
    return remove(handle, function, [](BufferEntry&) {});
  }

 private:
  struct Slot {
    uint32_t generation = 1;
    bool live = false;
    uint32_t next_free = 0;  // while free: the next free slot's index + 1 (0: none)
    BufferEntry entry;
  };

  // Appends a free slot (the free list is empty).
  void add_slot_locked();
  Slot& slot_locked(const gk_buffer* handle, const char* function) {
    if (!handle) fail_null_handle(function);
    uint64_t value = reinterpret_cast<uint64_t>(handle);
    uint64_t slot_plus_one = value & 0xffffffffu;
    uint32_t generation = uint32_t(value >> 32);
    if (slot_plus_one == 0 || slot_plus_one > slots_.size()) fail_not_a_handle(handle, function);
    Slot& slot = slots_[slot_plus_one - 1];
    if (!slot.live || slot.generation != generation) fail_stale_handle(handle, function);
    return slot;
  }
  AllocationRef remove_locked(const gk_buffer* handle, const char* function, Slot& slot) {
    if (slot.entry.map_count > 0) fail_mapped(handle, function, slot.entry.map_count);
    AllocationRef allocation = std::move(slot.entry.allocation);
    slot.live = false;
    ++slot.generation;
    // The slot is reused first, through a list in the slots themselves: a free needs no
    // memory of its own.
    slot.next_free = free_head_;
    free_head_ = uint32_t(reinterpret_cast<uint64_t>(handle));  // the slot's index + 1
    return allocation;
  }
  [[noreturn]] static void fail_null_handle(const char* function);
  [[noreturn]] static void fail_not_a_handle(const gk_buffer* handle, const char* function);
  [[noreturn]] static void fail_stale_handle(const gk_buffer* handle, const char* function);
  [[noreturn]] static void fail_mapped(const gk_buffer* handle, const char* function,
                                       int32_t map_count);

  SpinLock lock_;
  std::vector<Slot> slots_;
  uint32_t free_head_ = 0;  // the first free slot's index + 1 (0: none)
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
