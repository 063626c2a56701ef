#include "memory/buffer_table.h"

#include <cstdio>

#include "common/error.h"

namespace gk {
namespace {

uint64_t encode(uint32_t slot, uint32_t generation) {
  return (uint64_t(generation) << 32) | (uint64_t(slot) + 1);
}

std::string handle_text(const gk_buffer* handle) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", static_cast<const void*>(handle));
  return text;
}

// The messages are built out of line, so that the checks on the hot path stay short.
[[noreturn, gnu::cold, gnu::noinline]] void fail_null_handle(const char* function) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": buffer handle is NULL");
}

[[noreturn, gnu::cold, gnu::noinline]] void fail_not_a_handle(const gk_buffer* handle,
                                                             const char* function) {
  fail(GK_INVALID_ARGUMENT,
       std::string(function) + ": " + handle_text(handle) + " is not a gk_buffer handle");
}

[[noreturn, gnu::cold, gnu::noinline]] void fail_stale_handle(const gk_buffer* handle,
                                                             const char* function) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": gk_buffer " + handle_text(handle) +
                                " is stale: it was already freed");
}

[[noreturn, gnu::cold, gnu::noinline]] void fail_mapped(const gk_buffer* handle,
                                                       const char* function, int32_t map_count) {
  fail(GK_FAILED_PRECONDITION, std::string(function) + ": gk_buffer " + handle_text(handle) +
                                   " is still mapped (" + std::to_string(map_count) +
                                   " gk_buffer_map without gk_buffer_unmap)");
}

}  // namespace

gk_buffer* BufferTable::insert(std::shared_ptr<Allocation> allocation) {
  std::lock_guard<SpinLock> guard(lock_);
  uint32_t index;
  if (!free_slots_.empty()) {
    index = free_slots_.back();
    free_slots_.pop_back();
  } else {
    index = uint32_t(slots_.size());
    slots_.emplace_back();
  }
  Slot& slot = slots_[index];
  slot.live = true;
  slot.entry = BufferEntry{std::move(allocation), 0};
  return reinterpret_cast<gk_buffer*>(encode(index, slot.generation));
}

BufferEntry& BufferTable::entry_locked(const gk_buffer* handle, const char* function) {
  if (!handle) fail_null_handle(function);
  uint64_t value = reinterpret_cast<uint64_t>(handle);
  uint64_t slot_plus_one = value & 0xffffffffu;
  uint32_t generation = uint32_t(value >> 32);
  if (slot_plus_one == 0 || slot_plus_one > slots_.size()) fail_not_a_handle(handle, function);
  Slot& slot = slots_[slot_plus_one - 1];
  if (!slot.live || slot.generation != generation) fail_stale_handle(handle, function);
  return slot.entry;
}

std::shared_ptr<Allocation> BufferTable::remove_locked(const gk_buffer* handle,
                                                      const char* function, BufferEntry& entry) {
  if (entry.map_count > 0) fail_mapped(handle, function, entry.map_count);
  uint32_t index = uint32_t((reinterpret_cast<uint64_t>(handle) & 0xffffffffu) - 1);
  Slot& slot = slots_[index];
  std::shared_ptr<Allocation> allocation = std::move(slot.entry.allocation);
  slot.entry.map_count = 0;
  slot.live = false;
  ++slot.generation;
  free_slots_.push_back(index);
  return allocation;
}

}  // namespace gk
