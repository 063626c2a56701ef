#include "memory/memory_pool.h"

#include <algorithm>
#include <cstddef>

#include "common/bytes.h"
#include "common/error.h"
#include "common/recycled_blocks.h"
#include "memory/address_text.h"
#include "memory/buffer_table.h"
#include "memory/memory_pool_inline.h"

namespace gk {

using pool_detail::kClassCount;
using pool_detail::kClassSizes;
using pool_detail::round_up;
using pool_detail::size_class_of_inline;

int size_class_of(uint64_t bytes) {
  return size_class_of_inline(bytes);
}

uint64_t size_class_size(int size_class) {
  return kClassSizes[size_t(size_class)];
}

int size_class_count() { return kClassCount; }

uint64_t pool_rounded_size(uint64_t bytes) {
  if (bytes <= kSmallLimit) return kClassSizes[size_t(size_class_of_inline(bytes))];
  return round_up(bytes, kLargeRounding);
}

MemoryPool::MemoryPool(std::string label, std::unique_ptr<PoolBackend> backend)
    : order_(*backend),
      lock_(take_lasting_lock()),
      label_(std::move(label)),
      backend_(std::move(backend)) {
#if defined(__GLIBCXX__) && UINTPTR_MAX == UINT64_MAX
  // The layout memory_pool.h describes ("Layout"), where the standard library's map size is
  // known: line 1 runs from StreamOrder's counters to the ledger's budget and reservation sum.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"
  static_assert(offsetof(MemoryPool, order_) + sizeof(StreamOrder) == 64 + 16);
  static_assert(offsetof(MemoryPool, ledger_) == 128 - 16);
#pragma GCC diagnostic pop
#endif
  spare_nodes_.reserve(kSpareNodes);
  // The legacy default stream lives as long as the device's context, which outlives the
  // pool: frees there need no event at once.
  track_stream(nullptr);
}

MemoryPool::~MemoryPool() {
  // Every allocation holds the runtime, so none is live here: release what is left.
  for (EvictRecord* r : eviction_.spilled_records()) backend_->host_free(r->host);
  for (PoolSegment* s : segments_) {
    if (s->small) {
      for (PoolBlock* b : s->carved) {
        if (b->event) backend_->release_event(b->event);
        delete b;
      }
    } else {
      for (PoolBlock* b = s->first; b;) {
        PoolBlock* next = b->next;
        if (b->event) backend_->release_event(b->event);
        delete b;
        b = next;
      }
    }
    backend_->unmap_segment(reinterpret_cast<void*>(s->base), s->size);
    delete s;
  }
  for (PoolBlock* b : spare_blocks_) delete b;
  order_.release_events();
  BufferTable::instance().give_back_slots(free_buffer_slots_);
  while (void* p = spare_storage_) {
    spare_storage_ = *static_cast<void**>(p);
    delete_storage(p);
  }
  give_back_lasting_lock(lock_);
}

void MemoryPool::fail_oom(uint64_t bytes, uint64_t rounded, MemoryOwner* owner,
                          const std::string& limit, const EvictionReport& report) {
  ++stats_.failure_count;
  ++owner->failure_count;
  const uint64_t budget = ledger_.budget();
  std::string message =
      label_ + ": cannot allocate " + std::to_string(bytes) + " bytes (" + human_bytes(rounded) +
      " in the pool) for owner '" + owner->name + "': " + limit + "; device total " +
      human_bytes(backend_->total_memory()) + ", free " + human_bytes(backend_->free_memory()) +
      "; pool reserved " + human_bytes(stats_.bytes_reserved) + ", in use " +
      human_bytes(stats_.bytes_in_use) + ", budget " + (budget ? human_bytes(budget) : "none") +
      "; largest holders: " + ledger_.holders_text() + "; " + report.text();
  fail(GK_RESOURCE_EXHAUSTED, message);
}

void MemoryPool::fail_too_large(uint64_t bytes, MemoryOwner* owner) {
  ++stats_.failure_count;
  ++owner->failure_count;
  fail(GK_RESOURCE_EXHAUSTED, label_ + ": cannot allocate " + std::to_string(bytes) +
                                  " bytes for owner '" + owner->name +
                                  "': more than the largest allocation, 2^62 bytes; device total " +
                                  human_bytes(backend_->total_memory()));
}

// A limit is near (`limits_near`: make room for it, evicting, then try the free blocks), or
// no free block was at hand: grows the pool (find_after_miss).
PoolBlock* MemoryPool::allocate_after_miss(uint64_t bytes, uint64_t rounded, int size_class,
                                           cuda::CUstream stream, MemoryOwner* owner,
                                           bool limits_near) {
  EvictionReport report;
  // Within its request an owner may spill Burstable memory above request too, not only
  // BestEffort buffers.
  bool within_request = owner->in_use + rounded <= owner->request;
  PoolBlock* b = nullptr;
  if (limits_near) {
    within_request = make_room(bytes, rounded, owner, report);
    b = size_class >= 0 ? try_small(size_class, stream) : try_large(rounded, stream);
  }
  if (!b) b = find_after_miss(bytes, rounded, size_class, stream, owner, within_request, report);
  return b;
}

// Within the owner's quota, the device budget and what scheduler tasks reserved: evicts
// what it may to get there, else fails with RESOURCE_EXHAUSTED. Returns whether the owner
// is within its request once its quota is met (what eviction may spill for it).
bool MemoryPool::make_room(uint64_t bytes, uint64_t rounded, MemoryOwner* owner,
                           EvictionReport& report) {
  if (owner->quota && owner->in_use + rounded > owner->quota) {
    eviction_.evict_until([&] { return owner->in_use + rounded <= owner->quota; }, owner,
                          [this](EvictRecord* r, EvictionReport& rep) { return spill(r, rep); },
                          report);
    if (owner->in_use + rounded > owner->quota) {
      fail_oom(bytes, rounded, owner,
               "the quota of owner '" + owner->name + "' is " + human_bytes(owner->quota) + " and " +
                   human_bytes(owner->in_use) + " of it is in use",
               report);
    }
  }
  const bool within_request = owner->in_use + rounded <= owner->request;
  const uint64_t budget = ledger_.budget();
  if (budget && stats_.bytes_in_use + rounded > budget) {
    evict_for(owner, within_request, [&] { return stats_.bytes_in_use + rounded <= budget; },
              report);
    if (stats_.bytes_in_use + rounded > budget) {
      fail_oom(bytes, rounded, owner,
               "the device budget is " + human_bytes(budget) + " and " + human_bytes(stats_.bytes_in_use) +
                   " of it is in use",
               report);
    }
  }
  // What scheduler tasks reserved and do not use yet is kept for them.
  if (ledger_.unused_reservations() > 0) {
    const uint64_t capacity = budget ? budget : backend_->total_memory();
    auto fits = [&] {
      return stats_.bytes_in_use + rounded + ledger_.held_for_others(owner) <= capacity;
    };
    if (!fits()) {
      evict_for(owner, within_request, fits, report);
      if (!fits()) {
        fail_oom(bytes, rounded, owner,
                 "of the device's " + human_bytes(capacity) + ", " + human_bytes(stats_.bytes_in_use) +
                     " is in use and " + human_bytes(ledger_.held_for_others(owner)) +
                     " is reserved for other tasks' requests",
                 report);
      }
    }
  }
  return within_request;
}

// No free block fits: coalesces, grows the pool, gives segments back, spills evictable
// buffers, trying again after each step that may have made room; fails when none did.
PoolBlock* MemoryPool::find_after_miss(uint64_t bytes, uint64_t rounded, int size_class,
                                       cuda::CUstream stream, MemoryOwner* owner,
                                       bool within_request, EvictionReport& report) {
  bool trimmed = false;
  bool coalesced = false;
  // One step that may make room; false when none is left.
  auto make_more_room = [&] {
    if (!coalesced && size_class < 0) {
      coalesced = true;
      if (coalesce_settled()) return true;
    }
    release_idle_for(rounded);
    if (grow(rounded, false) || grow(rounded, true)) return true;
    // Under pressure: give free segments back to the driver, then spill evictable buffers.
    if (!trimmed) {
      trimmed = true;
      if (release_free_segments() > 0) return true;
    }
    int before = report.spilled;
    evict_for(owner, within_request, [&] { return report.spilled > before; }, report);
    if (report.spilled == before) return false;
    trimmed = false;
    return true;
  };
  while (make_more_room()) {
    PoolBlock* b = size_class >= 0 ? try_small(size_class, stream) : try_large(rounded, stream);
    if (b) return b;
  }
  fail_oom(bytes, rounded, owner, "the device is out of memory", report);
}

// ---- eviction: spilling and restoring -------------------------------------------------

template <typename Done>
void MemoryPool::evict_for(MemoryOwner* requester, bool within_request, Done done,
                           EvictionReport& report) {
  eviction_.evict_for(requester, within_request, ledger_, done,
                      [this](EvictRecord* r, EvictionReport& rep) { return spill(r, rep); },
                      report);
}

bool MemoryPool::spill(EvictRecord* r, EvictionReport& report) {
  PoolBlock* b = r->block;
  void* host = backend_->host_alloc(std::max<uint64_t>(r->requested, 1));
  if (!host) {
    ++report.host_short;
    return false;
  }
  // Ordered after the record's last use; complete on return, so the block is free at once.
  if (r->requested) backend_->copy_to_host(host, address(b), r->requested, r->stream);
  eviction_.remove_resident(r);
  uint64_t size = b->size;
  uncharge(b);
  b->record = nullptr;
  free_locked(b, r->stream, true);
  eviction_.spilled(r, host);
  stats_.bytes_spilled += r->requested;
  ++stats_.spill_count;
  ++report.spilled;
  report.spilled_bytes += size;
  return true;
}

void MemoryPool::restore(EvictRecord* r, cuda::CUstream stream) {
  PoolBlock* b = allocate_locked(r->requested, stream, r->owner);
  b->record = r;
  if (r->requested) backend_->copy_to_device(address(b), r->host, r->requested, stream);
  backend_->host_free(r->host);
  eviction_.restored(r, b);
  stats_.bytes_spilled -= r->requested;
  ++stats_.restore_count;
}

// ---- public entry points ---------------------------------------------------------------

void MemoryPool::hold() noexcept {
  holder_ = holder_source_.lock();
  holding_ = holder_ != nullptr;
}

void MemoryPool::let_go(std::shared_ptr<void>& holder) noexcept {
  holder = std::move(holder_);
  holding_ = false;
}

PoolBlock* MemoryPool::allocate(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner,
                                void** address) {
  std::lock_guard<SpinLock> guard(lock_);
  return allocate_counted(bytes, stream, owner, address);
}

void MemoryPool::free(PoolBlock* b, cuda::CUstream stream) noexcept {
  if (!b) return;
  std::shared_ptr<void> holder;  // released after the lock: it may own this pool
  std::lock_guard<SpinLock> guard(lock_);
  free_counted(b, stream, holder);
}

void* MemoryPool::new_storage() {
  return ::operator new(kRecycledBlockSizes[0], kRecycledBlockAlignment);
}

void MemoryPool::delete_storage(void* p) noexcept {
  ::operator delete(p, kRecycledBlockAlignment);
}

void MemoryPool::order_free_on(PoolBlock* b, cuda::CUstream stream) noexcept {
  std::lock_guard<SpinLock> guard(lock_);
  b->stream = stream;
}

void MemoryPool::order_free_on(EvictRecord* r, cuda::CUstream stream) noexcept {
  std::lock_guard<SpinLock> guard(lock_);
  r->stream = stream;
}

void MemoryPool::order_free_on_held(PoolBlock* b, cuda::CUstream stream) noexcept {
  b->stream = stream;
}

void MemoryPool::order_free_on_held(EvictRecord* r, cuda::CUstream stream) noexcept {
  r->stream = stream;
}

EvictRecord* MemoryPool::allocate_evictable(uint64_t bytes, cuda::CUstream stream,
                                            MemoryOwner* owner, void** address) {
  std::lock_guard<SpinLock> guard(lock_);
  return allocate_evictable_held(bytes, stream, owner, address);
}

EvictRecord* MemoryPool::allocate_evictable_held(uint64_t bytes, cuda::CUstream stream,
                                                 MemoryOwner* owner, void** address) {
  auto r = std::make_unique<EvictRecord>();
  PoolBlock* b = allocate_locked(bytes, stream, owner);
  ++stats_.alloc_count;
  ++b->owner->alloc_count;
  eviction_.add(r.get(), b, bytes, b->owner, stream);
  b->record = r.get();
  if (address) *address = MemoryPool::address(b);
  count_allocation();
  return r.release();
}

void MemoryPool::free(EvictRecord* r, cuda::CUstream stream) noexcept {
  if (!r) return;
  std::shared_ptr<void> holder;  // released after the lock: it may own this pool
  std::lock_guard<SpinLock> guard(lock_);
  free_held(r, stream, holder);
}

void MemoryPool::free_held(EvictRecord* r, cuda::CUstream stream,
                           std::shared_ptr<void>& holder) noexcept {
  ++stats_.free_count;
  uncount_allocation(holder);
  if (r->block) {
    eviction_.remove_resident(r);
    r->block->record = nullptr;
    uncharge(r->block);
    free_locked(r->block, stream == kOwnStream ? r->stream : stream, false);
  } else {
    backend_->host_free(r->host);
    eviction_.remove_spilled(r);
    stats_.bytes_spilled -= r->requested;
  }
  delete r;
}

void* MemoryPool::locate(EvictRecord* r, cuda::CUstream stream, bool pin) {
  std::lock_guard<SpinLock> guard(lock_);
  return locate_held(r, stream, pin);
}

void* MemoryPool::locate_held(EvictRecord* r, cuda::CUstream stream, bool pin) {
  if (stream == kOwnStream) stream = r->stream;
  if (!r->block) {
    restore(r, stream);
  } else {
    eviction_.touch(r);
  }
  r->stream = stream;
  if (pin) ++r->pins;
  return address(r->block);
}

void MemoryPool::unpin(EvictRecord* r) noexcept {
  std::lock_guard<SpinLock> guard(lock_);
  unpin_held(r);
}

void MemoryPool::unpin_held(EvictRecord* r) noexcept {
  if (r->pins > 0) --r->pins;
}

bool MemoryPool::is_spilled(const EvictRecord* r) {
  std::lock_guard<SpinLock> guard(lock_);
  return r->block == nullptr;
}

void* MemoryPool::allocate_raw(uint64_t bytes, cuda::CUstream stream, MemoryOwner* owner) {
  std::lock_guard<SpinLock> guard(lock_);
  PoolBlock* b = allocate_locked(bytes, stream, owner);
  try {
    raw_live_.emplace(b->addr, b);
  } catch (...) {
    uncharge(b);
    free_locked(b, stream, true);
    throw;
  }
  b->raw = true;
  ++stats_.alloc_count;
  ++b->owner->alloc_count;
  return address(b);
}

void MemoryPool::free_raw(void* ptr, cuda::CUstream stream, const char* function) {
  if (!ptr) return;
  std::lock_guard<SpinLock> guard(lock_);
  auto it = raw_live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == raw_live_.end()) {
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": " +
                                  address_text(reinterpret_cast<uintptr_t>(ptr)) +
                                  " is not a live allocation of the " + label_ +
                                  " pool (a foreign pointer, or freed already)");
  }
  PoolBlock* b = it->second;
  raw_live_.erase(it);
  b->raw = false;
  ++stats_.free_count;
  uncharge(b);
  free_locked(b, stream, false);
}

void MemoryPool::track_stream(cuda::CUstream stream) {
  std::lock_guard<SpinLock> guard(lock_);
  order_.track(stream);
}

void MemoryPool::forget_stream(cuda::CUstream stream) noexcept {
  if (!stream) return;  // the legacy default stream lives as long as the context
  std::lock_guard<SpinLock> guard(lock_);
  // Tracked or not (a scheduler task's stream is not), live blocks must stop naming it.
  unbind_stream(stream);
  PoolStream* ps = order_.drain(stream, stats_);
  if (!ps) return;
  // Every block pending on it is complete now.
  auto settle = [ps](PoolBlock* b) {
    if (b->lazy != ps) return;
    b->lazy = nullptr;
    b->ready = true;
  };
  for (PoolBlock* head : small_bins_) {
    for (PoolBlock* b = head; b; b = b->bin_next) settle(b);
  }
  for (PoolBlock* b : medium_free_) settle(b);
  for (PoolBlock* b : huge_free_) settle(b);
  if (recent_large_) settle(recent_large_);
  order_.forget(ps);
}

// Live allocations whose free was ordered in `stream` (about to be destroyed, its work
// complete) are ordered in the legacy default stream from now on.
void MemoryPool::unbind_stream(cuda::CUstream stream) noexcept {
  auto unbind = [stream](PoolBlock* b) {
    if (b->free) return;
    if (b->stream == stream) b->stream = nullptr;
    if (b->record && b->record->stream == stream) b->record->stream = nullptr;
  };
  for (PoolSegment* s : segments_) {
    if (s->small) {
      for (PoolBlock* b : s->carved) unbind(b);
    } else {
      for (PoolBlock* b = s->first; b; b = b->next) unbind(b);
    }
  }
  for (EvictRecord* r : eviction_.spilled_records()) {
    if (r->stream == stream) r->stream = nullptr;
  }
}

void MemoryPool::hold_while_live(std::weak_ptr<void> holder) {
  std::lock_guard<SpinLock> guard(lock_);
  holder_source_ = std::move(holder);
  if (live_allocations_ > 0 && !holding_) hold();
}

void MemoryPool::close() noexcept {
  std::shared_ptr<void> holder;  // released after the lock: it may own this pool
  std::lock_guard<SpinLock> guard(lock_);
  closed_ = true;
  if (live_allocations_ == 0) let_go(holder);
}

MemoryOwner* MemoryPool::create_owner(const std::string& name, uint64_t quota) {
  std::lock_guard<SpinLock> guard(lock_);
  return ledger_.create(name, quota);
}

void MemoryPool::close_owner(MemoryOwner* owner) noexcept {
  std::lock_guard<SpinLock> guard(lock_);
  ledger_.close(owner);
}

void MemoryPool::set_owner_class(MemoryOwner* owner, int32_t eviction_class, uint64_t request) {
  std::lock_guard<SpinLock> guard(lock_);
  ledger_.set_class(owner, eviction_class, request);
}

std::vector<OwnerEvent> MemoryPool::owner_events(const MemoryOwner* owner) {
  std::lock_guard<SpinLock> guard(lock_);
  return owner->events;
}

MemoryOwner MemoryPool::owner_usage(const MemoryOwner* owner) {
  std::lock_guard<SpinLock> guard(lock_);
  return *owner;
}

void MemoryPool::set_budget(uint64_t bytes) {
  std::lock_guard<SpinLock> guard(lock_);
  ledger_.set_budget(bytes);
}

uint64_t MemoryPool::trim() {
  std::lock_guard<SpinLock> guard(lock_);
  backend_->release_host_cache();
  return release_free_segments();
}

}  // namespace gk
