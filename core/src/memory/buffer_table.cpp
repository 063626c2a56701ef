#include "memory/buffer_table.h"

#include <cstdio>

#include "common/error.h"

namespace gk {
namespace {

std::string handle_text(const gk_buffer* handle) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", static_cast<const void*>(handle));
  return text;
}

}  // namespace

constinit BufferTableStorage buffer_table_storage;

// The messages are built out of line, so that the checks on the hot path stay short.
[[gnu::cold, gnu::noinline]] void BufferTable::fail_null_handle(const char* function) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": buffer handle is NULL");
}

[[gnu::cold, gnu::noinline]] void BufferTable::fail_not_a_handle(const gk_buffer* handle,
                                                                 const char* function) {
  fail(GK_INVALID_ARGUMENT,
       std::string(function) + ": " + handle_text(handle) + " is not a gk_buffer handle");
}

[[gnu::cold, gnu::noinline]] void BufferTable::fail_stale_handle(const gk_buffer* handle,
                                                                 const char* function) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": gk_buffer " + handle_text(handle) +
                                " is stale: it was already freed");
}

[[gnu::cold, gnu::noinline]] void BufferTable::fail_mapped(const gk_buffer* handle,
                                                           const char* function,
                                                           int32_t map_count) {
  fail(GK_FAILED_PRECONDITION, std::string(function) + ": gk_buffer " + handle_text(handle) +
                                   " is still mapped (" + std::to_string(map_count) +
                                   " gk_buffer_map without gk_buffer_unmap)");
}

void BufferTable::refill(MemoryPool& pool) {
  std::lock_guard<SpinLock> guard(lock_);
  uint32_t& head = pool.free_buffer_slots();
  SpinLock* pool_lock = &pool.lock();
  for (uint32_t n = 0; n < kRefillSlots; ++n) {
    uint32_t slot_plus_one = free_head_;
    if (slot_plus_one) {
      free_head_ = slot_at(slot_plus_one).entry.next_free_;
    } else {
      uint32_t made = made_.load(std::memory_order_relaxed);
      if (made == uint32_t(kMaxChunks) * kChunkSlots) {
        if (n > 0) break;
        fail(GK_RESOURCE_EXHAUSTED, "gk_buffer_alloc: " + std::to_string(made) +
                                        " buffer handles are live, the most there can be");
      }
      if (made % kChunkSlots == 0) {
        chunks_[made >> kChunkBits].store(new Slot[kChunkSlots], std::memory_order_release);
      }
      slot_plus_one = made + 1;
      made_.store(slot_plus_one, std::memory_order_release);
    }
    Slot& slot = slot_at(slot_plus_one);
    slot.lock.store(pool_lock, std::memory_order_relaxed);
    slot.entry.next_free_ = head;
    head = slot_plus_one;
  }
}

void BufferTable::give_back_slots(uint32_t head) noexcept {
  if (!head) return;
  std::lock_guard<SpinLock> guard(lock_);
  while (head) {
    Slot& slot = slot_at(head);
    uint32_t next = slot.entry.next_free_;
    slot.entry.next_free_ = free_head_;
    free_head_ = head;
    head = next;
  }
}

}  // namespace gk
