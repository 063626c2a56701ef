// The process-wide table behind gk_buffer handles. A handle encodes a slot and the slot's
// generation, so a handle used after gk_buffer_free is recognised as stale instead of
// reaching freed memory.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/spin_lock.h"
#include "gpukit/gpukit.h"
#include "memory/device_memory.h"

namespace gk {

struct BufferEntry {
  std::shared_ptr<Allocation> allocation;
  int32_t map_count = 0;
};

class BufferTable {
 public:
  static BufferTable& instance() {
    static BufferTable* table = new BufferTable();  // outlives every static destructor
    return *table;
  }

  gk_buffer* insert(std::shared_ptr<Allocation> allocation);

  // Runs fn(entry) under the table's lock. Throws INVALID_ARGUMENT, naming `function`,
  // for a NULL, unknown or stale handle.
  template <typename Fn>
  auto with(const gk_buffer* handle, const char* function, Fn&& fn) {
    std::lock_guard<SpinLock> guard(lock_);
    return fn(entry_locked(handle, function));
  }

  // Takes the entry out of the table (the handle becomes stale) and returns its
  // allocation. FAILED_PRECONDITION while the buffer is mapped. `check(entry)` runs first,
  // under the same lock (one lock per free on the hot path); when it throws, nothing changes.
  template <typename Check>
  std::shared_ptr<Allocation> remove(const gk_buffer* handle, const char* function,
                                     Check&& check) {
    std::lock_guard<SpinLock> guard(lock_);
    BufferEntry& entry = entry_locked(handle, function);
    check(entry);
    return remove_locked(handle, function, entry);
  }
  std::shared_ptr<Allocation> remove(const gk_buffer* handle, const char* function) {
    return remove(handle, function, [](BufferEntry&) {});
  }

 private:
  struct Slot {
    uint32_t generation = 1;
    bool live = false;
    BufferEntry entry;
  };
  BufferEntry& entry_locked(const gk_buffer* handle, const char* function);
  std::shared_ptr<Allocation> remove_locked(const gk_buffer* handle, const char* function,
                                            BufferEntry& entry);

  SpinLock lock_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
};

}  // namespace gk
