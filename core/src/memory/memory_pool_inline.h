// The pool's fast paths: a small block reused from the head of its class's list, and its
// free. Inline, so that the buffer table's gk_buffer_alloc and gk_buffer_free (buffer_table.h)
// make no call into the pool in the common case, and memory_pool.cpp's entry points share
// them. Everything else (growth, limits, eviction, large blocks, other streams) stays out of
// line in memory_pool.cpp and pool_blocks.cpp. Include this only where those calls are made.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <vector>

#include "common/limits.h"
#include "memory/memory_pool.h"
#include "memory/pool_block.h"

namespace gk {

namespace pool_detail {

inline constexpr uint64_t round_up(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

// Class sizes: 256 .. 4096 by 256 (16 classes), then 4 per power of two up to kSmallLimit.
// A constant table: the hot path reads it without a guard for a function-local static.
inline constexpr int kClassCount = 16 + 4 * (std::bit_width(kSmallLimit) - std::bit_width(uint64_t(4096)));
static_assert(kClassCount == kSmallClassCount);
inline constexpr std::array<uint64_t, kClassCount> kClassSizes = [] {
  std::array<uint64_t, kClassCount> s{};
  int i = 0;
  for (uint64_t v = 256; v <= 4096; v += 256) s[size_t(i++)] = v;
  for (uint64_t p = 4096; p < kSmallLimit; p *= 2) {
    for (uint64_t k = 1; k <= 4; ++k) s[size_t(i++)] = p + p / 4 * k;
  }
  return s;
}();

// Inline (here and in allocate_locked): every allocation computes its class.
[[gnu::always_inline]] inline int size_class_of_inline(uint64_t bytes) {
  if (bytes <= 4096) return int((std::max<uint64_t>(bytes, 1) + 255) / 256) - 1;
  // p < bytes <= 2p for a power of two p >= 4096: the classes there are p + k * p / 4.
  int log2_p = std::bit_width(bytes - 1) - 1;
  uint64_t quarter = (uint64_t(1) << log2_p) / 4;
  // 1..4; a shift, as quarter is a power of two (a 64-bit division costs tens of cycles).
  int k = int((bytes - (uint64_t(1) << log2_p) + quarter - 1) >> (log2_p - 2));
  return 16 + 4 * (log2_p - 12) + k - 1;
}

}  // namespace pool_detail

inline void MemoryPool::take(PoolBlock* b, cuda::CUstream stream) noexcept {
  if (b->event) backend_->release_event(b->event);
  b->event = nullptr;
  b->lazy = nullptr;
  b->ready = true;
  b->free = false;
  b->stream = stream;
}

inline void MemoryPool::bin_push(PoolBlock* b) {
  PoolBlock*& head = small_bins_[size_t(b->size_class)];
  b->bin_prev = nullptr;
  b->bin_next = head;
  if (head) head->bin_prev = b;
  head = b;
}

// The common case, inlined into allocate_locked: the most recently freed block of the class
// (the head of its list) is usable on this stream.
[[gnu::always_inline]] inline PoolBlock* MemoryPool::try_small(int size_class,
                                                               cuda::CUstream stream) {
  PoolBlock* b = small_bins_[size_t(size_class)];
  if (!b || !(b->ready || b->stream == stream)) return try_small_rest(size_class, stream);
  small_bins_[size_t(size_class)] = b->bin_next;
  if (b->bin_next) b->bin_next->bin_prev = nullptr;
  b->bin_next = nullptr;
  take(b, stream);
  ++b->segment->live;
  return b;
}

// Inline: every allocation and free charges.
inline void MemoryPool::charge(PoolBlock* b, uint64_t requested, MemoryOwner* owner) {
  b->owner = owner;
  b->requested = requested;
  ledger_.charge(owner, b->size);
  stats_.bytes_in_use += b->size;
  stats_.bytes_requested += requested;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
}

inline void MemoryPool::uncharge(PoolBlock* b) noexcept {
  ledger_.uncharge(b->owner, b->size);
  stats_.bytes_in_use -= b->size;
  stats_.bytes_requested -= b->requested;
  b->owner = nullptr;
}

// The common case stays short: no limit is near (one compare each) and a free block is at
// hand. Evicting for a limit and growing the pool are out of line (allocate_after_miss).
// Inlined into each entry point, so that the hot one (allocate) makes no call under its lock.
[[gnu::always_inline]] inline PoolBlock* MemoryPool::allocate_locked(uint64_t bytes,
                                                                     cuda::CUstream stream,
                                                                     MemoryOwner* owner) {
  owner = ledger_.resolve(owner);
  // Up to 4 KiB, the class size is computed rather than read from the table (one cache line
  // fewer on a cold call).
  int size_class = -1;
  uint64_t rounded;
  if (bytes <= 4096) {
    size_class = pool_detail::size_class_of_inline(bytes);
    rounded = uint64_t(size_class + 1) * 256;
  } else if (bytes <= kSmallLimit) {
    size_class = pool_detail::size_class_of_inline(bytes);
    rounded = pool_detail::kClassSizes[size_t(size_class)];
  } else {
    if (bytes > uint64_t(kMaxTensorBytes)) fail_too_large(bytes, owner);  // rounding would wrap
    rounded = pool_detail::round_up(bytes, kLargeRounding);
  }
  const uint64_t budget = ledger_.budget();
  const bool limits_near = (owner->quota && owner->in_use + rounded > owner->quota) ||
                           (budget && stats_.bytes_in_use + rounded > budget) ||
                           ledger_.unused_reservations() > 0;
  PoolBlock* b = nullptr;
  if (!limits_near) {
    b = size_class >= 0 ? try_small(size_class, stream) : try_large(rounded, stream);
  }
  if (!b) b = allocate_after_miss(bytes, rounded, size_class, stream, owner, limits_near);
  charge(b, bytes, owner);
  return b;
}

inline void MemoryPool::count_allocation() noexcept {
  if (live_allocations_++ == 0 && !holding_) hold();
}

inline void MemoryPool::uncount_allocation(std::shared_ptr<void>& holder) noexcept {
  if (--live_allocations_ == 0 && closed_) let_go(holder);
}

[[gnu::always_inline]] inline PoolBlock* MemoryPool::allocate_counted(uint64_t bytes,
                                                                      cuda::CUstream stream,
                                                                      MemoryOwner* owner,
                                                                      void** address) {
  PoolBlock* b = allocate_locked(bytes, stream, owner);
  ++stats_.alloc_count;
  ++b->owner->alloc_count;
  count_allocation();
  if (address) *address = reinterpret_cast<void*>(b->addr);
  return b;
}

inline PoolBlock* MemoryPool::allocate_held(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner,
                                     void** address) {
  return allocate_counted(bytes, stream, owner, address);
}

// Inline for a small block (the common case); a large one merges with its free neighbours
// out of line (free_large).
inline void MemoryPool::free_locked(PoolBlock* b, cuda::CUstream stream, bool ready) noexcept {
  order_.note_free(b, stream, ready, stats_);
  if (b->size_class >= 0) {
    --b->segment->live;
    bin_push(b);
    return;
  }
  free_large(b);
}

[[gnu::always_inline]] inline void MemoryPool::free_counted(PoolBlock* b, cuda::CUstream stream,
                                                            std::shared_ptr<void>& holder) noexcept {
  ++stats_.free_count;
  uncharge(b);
  free_locked(b, stream == kOwnStream ? b->stream : stream, false);
  uncount_allocation(holder);
}

inline void MemoryPool::free_held(PoolBlock* b, cuda::CUstream stream,
                                  std::shared_ptr<void>& holder) noexcept {
  free_counted(b, stream, holder);
}

}  // namespace gk
