// Intrusive reference counts (gk_tensor, Allocation).
#pragma once

#include <atomic>
#include <cstdint>

namespace gk {

// Drops one reference from `refs`; true when it was the last, and the caller deletes the
// object. The only reference (no other holder can add one meanwhile) goes without an atomic
// read-modify-write; the acquire load orders the other holders' releases before the delete.
inline bool drop_reference(std::atomic<int32_t>& refs) noexcept {
  return refs.load(std::memory_order_acquire) == 1 ||
         refs.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

}  // namespace gk
