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

void BufferTable::add_slot_locked() {
  slots_.emplace_back();
  free_head_ = uint32_t(slots_.size());
}

}  // namespace gk
