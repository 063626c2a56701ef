#include "common/json_text.h"
#include "memory/memory_pool.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/bytes.h"
#include "common/error.h"
#include "common/recycled_blocks.h"
#include "memory/buffer_table.h"
#include "memory/memory_pool_inline.h"

namespace gk {

using pool_detail::kClassCount;
using pool_detail::kClassSizes;
using pool_detail::round_up;
using pool_detail::size_class_of_inline;

struct EvictionReport {
  int spilled = 0;
  uint64_t spilled_bytes = 0;
  int skipped_pinned = 0;
  int host_short = 0;
  int candidates = 0;

  std::string text() const;
};

namespace {

std::string hex(uintptr_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%" PRIxPTR, value);
  return text;
}

// Stream-order helpers for PoolStream: the first `n` events are known complete.
void complete_through(PoolStream* ps, size_t n, PoolBackend& backend) noexcept {
  if (n == 0) return;
  ps->completed_seq = std::max(ps->completed_seq, ps->events[n - 1].seq);
  for (size_t i = 0; i < n; ++i) backend.release_event(ps->events[i].event);
  ps->events.erase(ps->events.begin(), ps->events.begin() + long(n));
}

}  // namespace

std::string EvictionReport::text() const {
  if (candidates == 0 && spilled == 0) return "eviction: no evictable buffer to spill";
  std::string t = "eviction: spilled " + std::to_string(spilled) + " evictable buffer(s) (" +
                  human_bytes(spilled_bytes) + ")";
  if (skipped_pinned) t += ", skipped " + std::to_string(skipped_pinned) + " mapped or in use";
  if (host_short) t += ", " + std::to_string(host_short) + " could not get host memory";
  return t;
}

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

bool MemoryPool::BySize::operator()(const PoolBlock* a, const PoolBlock* b) const {
  if (a->size != b->size) return a->size < b->size;
  return a->addr < b->addr;
}

MemoryPool::MemoryPool(std::string label, std::unique_ptr<PoolBackend> backend)
    : lock_(take_lasting_lock()), label_(std::move(label)), backend_(std::move(backend)) {
  unowned_.name = "(no owner)";
  spare_nodes_.reserve(kSpareNodes);
  // The legacy default stream lives as long as the device's context, which outlives the
  // pool: frees there need no event at once.
  track_stream(nullptr);
}

MemoryPool::~MemoryPool() {
  // Every allocation holds the runtime, so none is live here: release what is left.
  for (EvictRecord* r : spilled_) {
    backend_->host_free(r->host);
    delete r;
  }
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
  for (auto& [stream, ps] : streams_) {
    for (const PoolStream::Epoch& e : ps->events) backend_->release_event(e.event);
  }
  BufferTable::instance().give_back_slots(free_buffer_slots_);
  while (void* p = spare_storage_) {
    spare_storage_ = *static_cast<void**>(p);
    delete_storage(p);
  }
  give_back_lasting_lock(lock_);
}

PoolBlock* MemoryPool::new_block() {
  if (spare_blocks_.empty()) return new PoolBlock();
  PoolBlock* b = spare_blocks_.back();
  spare_blocks_.pop_back();
  *b = PoolBlock{};
  return b;
}

void MemoryPool::delete_block(PoolBlock* b) noexcept {
  if (b->event) backend_->release_event(b->event);
  b->event = nullptr;
  if (spare_blocks_.size() < 4096) {
    try {
      spare_blocks_.push_back(b);
      return;
    } catch (...) {
    }
  }
  delete b;
}

void* MemoryPool::address(const PoolBlock* block) { return reinterpret_cast<void*>(block->addr); }

uint64_t MemoryPool::block_size(const PoolBlock* block) { return block->size; }

// ---- usability across streams ---------------------------------------------------------

PoolStream* MemoryPool::tracked_lookup(cuda::CUstream stream) noexcept {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return nullptr;
  last_stream_ = it->second.get();
  return last_stream_;
}

// An event on ps's stream that completes after every free made there numbered up to `seq`:
// the oldest outstanding one that covers it, else one recorded now (recording later than
// the free only captures more work, never less). nullptr when that work is complete.
void* MemoryPool::covering_event(PoolStream* ps, uint64_t seq) noexcept {
  if (seq <= ps->completed_seq) return nullptr;
  for (const PoolStream::Epoch& e : ps->events) {
    if (e.seq >= seq) return e.event;
  }
  void* event = backend_->record_event(ps->stream);
  ++stats_.events_recorded;
  if (event) {
    try {
      ps->events.push_back({event, free_seq_});
      return event;
    } catch (...) {
      backend_->synchronize_event(event);  // no room to keep it: wait for it here instead
      backend_->release_event(event);
    }
  }
  // Complete already: so is every older event of the stream.
  complete_through(ps, ps->events.size(), *backend_);
  ps->completed_seq = free_seq_;
  return nullptr;
}

// Whether every free made on ps's stream up to `seq` is complete, without blocking.
bool MemoryPool::stream_complete(PoolStream* ps, uint64_t seq) {
  if (seq <= ps->completed_seq) return true;
  size_t done = 0;
  while (done < ps->events.size() && backend_->event_complete(ps->events[done].event)) ++done;
  complete_through(ps, done, *backend_);
  if (seq <= ps->completed_seq) return true;
  // Nothing outstanding covers it: record an event now, so that a later look can find it
  // complete. While an older event is outstanding, a newer one cannot have completed, so
  // one probe per stream at a time is enough.
  if (ps->events.empty()) covering_event(ps, seq);
  return seq <= ps->completed_seq;
}

// Whether a free block's free is complete on the device (so it is usable on every stream
// and may go back to the backend), without blocking; marks it ready when it is.
bool MemoryPool::settled(PoolBlock* b) {
  if (b->ready) return true;
  if (b->lazy ? !stream_complete(b->lazy, b->free_seq) : !backend_->event_complete(b->event)) {
    return false;
  }
  if (b->event) backend_->release_event(b->event);
  b->event = nullptr;
  b->lazy = nullptr;
  b->ready = true;
  return true;
}

// Blocks the host until a free block's free is complete (trim, release under pressure).
void MemoryPool::wait_settled(PoolBlock* b) noexcept {
  if (b->ready) return;
  if (PoolStream* ps = b->lazy) {
    if (void* e = covering_event(ps, b->free_seq)) {
      backend_->synchronize_event(e);
      size_t n = 0;
      while (ps->events[n].event != e) ++n;
      complete_through(ps, n + 1, *backend_);  // and every older event of the stream
    }
  } else {
    backend_->synchronize_event(b->event);
    backend_->release_event(b->event);
  }
  b->event = nullptr;
  b->lazy = nullptr;
  b->ready = true;
}

bool MemoryPool::usable_on(PoolBlock* b, cuda::CUstream stream) {
  // A lazy block's stream is alive (forget_stream settles them all before a tracked stream
  // goes), so its handle cannot name another stream yet.
  if (b->ready || b->stream == stream) return true;
  return settled(b);
}

// Makes `stream` wait, on the device, for the free of a block freed on another stream.
void MemoryPool::wait_for(PoolBlock* b, cuda::CUstream stream) {
  void* e = b->lazy ? covering_event(b->lazy, b->free_seq) : b->event;
  if (!e) return;  // complete meanwhile
  backend_->stream_wait_event(stream, e);
  ++stats_.cross_stream_waits;
}

// Makes a free block safe to use on `stream`: waits there for its free when it was freed
// on another stream and that has not completed (no host blocking), and takes it.
void MemoryPool::take_for(PoolBlock* b, cuda::CUstream stream) {
  if (!usable_on(b, stream)) wait_for(b, stream);
  take(b, stream);
}

// ---- small blocks ----------------------------------------------------------------------

void MemoryPool::bin_remove(PoolBlock* b) {
  if (b->bin_prev) {
    b->bin_prev->bin_next = b->bin_next;
  } else {
    small_bins_[size_t(b->size_class)] = b->bin_next;
  }
  if (b->bin_next) b->bin_next->bin_prev = b->bin_prev;
  b->bin_prev = b->bin_next = nullptr;
}

PoolBlock* MemoryPool::try_small_rest(int size_class, cuda::CUstream stream) {
  // A free block of the class usable on this stream (look at a few, most recent first).
  PoolBlock* pending = nullptr;
  int looked = 0;
  for (PoolBlock* b = small_bins_[size_t(size_class)]; b && looked < 8; b = b->bin_next, ++looked) {
    if (usable_on(b, stream)) {
      bin_remove(b);
      take(b, stream);
      ++b->segment->live;
      return b;
    }
    if (!pending) pending = b;
  }
  // Carve from the current small segment.
  uint64_t size = size_class_size(size_class);
  PoolSegment* s = small_current_;
  if (s && s->bump + size <= s->size) {
    PoolBlock* b = new_block();
    b->addr = s->base + s->bump;
    b->size = size;
    b->segment = s;
    b->size_class = size_class;
    b->free = false;
    b->stream = stream;
    s->bump += size;
    ++s->live;
    s->carved.push_back(b);
    return b;
  }
  // Reuse one freed on another stream, ordered after its free event.
  if (pending) {
    bin_remove(pending);
    take_for(pending, stream);
    ++pending->segment->live;
    return pending;
  }
  return nullptr;
}

// ---- large blocks ----------------------------------------------------------------------

MemoryPool::FreeSet& MemoryPool::free_set(const PoolBlock* b) {
  return b->segment->huge ? huge_free_ : medium_free_;
}

void MemoryPool::free_insert(PoolBlock* b) {
  FreeSet& set = free_set(b);
  if (spare_nodes_.empty()) {
    set.insert(b);
    return;
  }
  FreeSet::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.value() = b;
  set.insert(std::move(node));
}

void MemoryPool::free_erase(PoolBlock* b) noexcept {
  if (b == recent_large_) {
    recent_large_ = nullptr;
    return;
  }
  FreeSet::node_type node = free_set(b).extract(b);
  if (node && spare_nodes_.size() < kSpareNodes) spare_nodes_.push_back(std::move(node));
}

PoolBlock* MemoryPool::try_large(uint64_t rounded, cuda::CUstream stream) {
  bool huge = rounded >= kHugeMin;
  // The block the last large free kept aside (see free_large), when it is just the size asked
  // for: no tree search, erase or split.
  if (PoolBlock* b = recent_large_) {
    if (b->size == rounded && b->segment->huge == huge && usable_on(b, stream)) {
      recent_large_ = nullptr;
      take(b, stream);
      return b;
    }
    free_insert(b);  // where the search below sees it (kept aside if this throws)
    recent_large_ = nullptr;
  }
  auto& set = huge ? huge_free_ : medium_free_;
  // A huge request is not cut from a block much larger than itself (kHugeFitFactor).
  uint64_t largest = huge && rounded <= UINT64_MAX / kHugeFitFactor ? rounded * kHugeFitFactor
                                                                    : UINT64_MAX;
  PoolBlock key;
  key.size = rounded;
  key.addr = 0;
  PoolBlock* chosen = nullptr;
  PoolBlock* pending = nullptr;
  int looked = 0;
  for (auto it = set.lower_bound(&key); it != set.end() && looked < 16 && (*it)->size <= largest;
       ++it, ++looked) {
    if (usable_on(*it, stream)) {  // may find its free complete
      chosen = *it;
      break;
    }
    if (!pending) pending = *it;
  }
  bool usable = chosen != nullptr;
  if (!chosen) chosen = pending;
  if (!chosen) return nullptr;
  free_erase(chosen);
  // Ordered after the free before the split: the remainder keeps the same pending state.
  if (!usable) wait_for(chosen, stream);
  if (chosen->size - rounded >= kMinSplitRemainder) {
    PoolBlock* rest = new_block();
    rest->addr = chosen->addr + rounded;
    rest->size = chosen->size - rounded;
    rest->segment = chosen->segment;
    rest->prev = chosen;
    rest->next = chosen->next;
    if (chosen->next) chosen->next->prev = rest;
    chosen->next = rest;
    rest->stream = chosen->stream;
    rest->ready = chosen->ready;
    rest->lazy = chosen->lazy;
    rest->event = chosen->event;  // an eager event moves to the part that stays free
    rest->free_seq = chosen->free_seq;
    rest->free = true;
    chosen->size = rounded;
    chosen->event = nullptr;
    free_insert(rest);
  }
  take(chosen, stream);
  return chosen;
}

// Merges two free neighbours when their stream states allow it; returns the survivor
// (`low`) or nullptr when they stay apart.
PoolBlock* MemoryPool::merge(PoolBlock* low, PoolBlock* high) {
  if (!low || !high || !low->free || !high->free) return nullptr;
  if (!low->ready && !high->ready && (low->lazy != high->lazy || low->stream != high->stream)) {
    return nullptr;
  }
  // Ready + pending: the merged block is pending on the pending one's stream. Two pending on
  // one stream: the later free covers the earlier (stream order).
  PoolBlock* keep_state = low->ready ? high : high->ready ? low
                                      : (low->free_seq > high->free_seq ? low : high);
  PoolBlock* drop_state = keep_state == low ? high : low;
  if (drop_state->event) backend_->release_event(drop_state->event);
  drop_state->event = nullptr;
  void* event = keep_state->event;
  cuda::CUstream stream = keep_state->stream;
  bool ready = keep_state->ready;
  PoolStream* lazy = keep_state->lazy;
  uint64_t seq = keep_state->free_seq;
  keep_state->event = nullptr;
  free_erase(low);
  free_erase(high);
  low->size += high->size;
  low->next = high->next;
  if (high->next) high->next->prev = low;
  low->event = event;
  low->stream = stream;
  low->ready = ready;
  low->lazy = lazy;
  low->free_seq = seq;
  delete_block(high);
  return low;
}

// ---- growth and release ----------------------------------------------------------------

uint64_t MemoryPool::segment_size_for(uint64_t rounded, bool exact) const {
  if (rounded <= kSmallLimit) return kSmallSegmentSize;
  if (!exact && rounded < kHugeMin) return kLargeSegmentMin;
  return round_up(rounded, kSegmentRounding);
}

bool MemoryPool::grow(uint64_t rounded, bool exact) {
  bool small = rounded <= kSmallLimit;
  uint64_t size = segment_size_for(rounded, exact);
  void* base = backend_->map_segment(size);
  if (!base) return false;
  auto* s = new PoolSegment();
  s->base = reinterpret_cast<uintptr_t>(base);
  s->size = size;
  s->small = small;
  s->huge = !small && rounded >= kHugeMin;
  segments_.push_back(s);
  stats_.bytes_reserved += size;
  stats_.peak_bytes_reserved = std::max(stats_.peak_bytes_reserved, stats_.bytes_reserved);
  ++stats_.segment_count;
  ++stats_.segment_maps;
  if (small) {
    small_current_ = s;
  } else {
    PoolBlock* b = new_block();
    b->addr = s->base;
    b->size = size;
    b->segment = s;
    s->first = b;
    free_insert(b);
  }
  return true;
}

// Every block free. A large segment may still hold several: neighbours freed on different
// streams stay apart while either free is pending.
bool MemoryPool::segment_idle(const PoolSegment* s) const {
  if (s->small) return s->live == 0;
  for (const PoolBlock* b = s->first; b; b = b->next) {
    if (!b->free) return false;
  }
  return true;
}

// Whether every block of an idle segment is settled (see settled()), without blocking.
bool MemoryPool::segment_settled(PoolSegment* s) {
  if (!s->small) {
    for (PoolBlock* b = s->first; b; b = b->next) {
      if (!settled(b)) return false;
    }
    return true;
  }
  for (PoolBlock* b : s->carved) {
    if (!settled(b)) return false;
  }
  return true;
}

// Free neighbours kept apart by pending frees on different streams merge once those are
// complete, which nothing notices on its own (free makes no driver call). Before the pool
// grows, looks for such pairs (a query per pending stream, no host blocking) and merges
// them. Returns whether any merged.
bool MemoryPool::coalesce_settled() {
  bool merged_any = false;
  for (PoolSegment* s : segments_) {
    if (s->small) continue;
    for (PoolBlock* b = s->first; b && b->next;) {
      PoolBlock* high = b->next;
      if (!b->free || !high->free || !settled(b) || !settled(high)) {
        b = high;
        continue;
      }
      merge(b, high);  // both ready now: they merge, b survives
      free_insert(b);
      merged_any = true;
    }
  }
  return merged_any;
}

// Before a segment is added for `rounded`: when it would take the reserve past the headroom
// over max(the peak in use, in use now + the request), gives back idle, settled segments,
// largest first, until it fits or none is left. Never blocks the host: a segment whose free
// is still pending on its stream stays (its stream gets an event, so a later call may find
// it settled). Returns whether any was given back.
bool MemoryPool::release_idle_for(uint64_t rounded) {
  uint64_t need = segment_size_for(rounded, false);
  uint64_t base = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use + rounded);
  uint64_t limit = base + base / kReserveHeadroomDivisor;
  if (stats_.bytes_reserved + need <= limit) return false;
  std::vector<PoolSegment*> idle;
  for (PoolSegment* s : segments_) {
    if (segment_idle(s) && segment_settled(s)) idle.push_back(s);
  }
  std::sort(idle.begin(), idle.end(),
            [](const PoolSegment* a, const PoolSegment* b) { return a->size > b->size; });
  bool released = false;
  for (PoolSegment* s : idle) {
    if (stats_.bytes_reserved + need <= limit) break;
    release_segment(s);
    released = true;
  }
  return released;
}

void MemoryPool::release_segment(PoolSegment* s) noexcept {
  if (s->small) {
    for (PoolBlock* b : s->carved) {
      bin_remove(b);
      wait_settled(b);
      delete_block(b);
    }
    if (small_current_ == s) small_current_ = nullptr;
  } else {
    for (PoolBlock* b = s->first; b;) {
      PoolBlock* next = b->next;
      free_erase(b);
      wait_settled(b);
      delete_block(b);
      b = next;
    }
  }
  backend_->unmap_segment(reinterpret_cast<void*>(s->base), s->size);
  stats_.bytes_reserved -= s->size;
  --stats_.segment_count;
  ++stats_.segment_releases;
  segments_.erase(std::find(segments_.begin(), segments_.end(), s));
  delete s;
}

uint64_t MemoryPool::release_free_segments() noexcept {
  uint64_t released = 0;
  std::vector<PoolSegment*> idle;
  for (PoolSegment* s : segments_) {
    if (segment_idle(s)) idle.push_back(s);
  }
  for (PoolSegment* s : idle) {
    released += s->size;
    release_segment(s);
  }
  return released;
}

// ---- accounting ------------------------------------------------------------------------

std::string MemoryPool::holders_text() {
  std::vector<const MemoryOwner*> all{&unowned_};
  for (auto& o : owners_) all.push_back(o.get());
  std::sort(all.begin(), all.end(),
            [](const MemoryOwner* a, const MemoryOwner* b) { return a->in_use > b->in_use; });
  std::string t;
  int shown = 0;
  for (const MemoryOwner* o : all) {
    if (o->in_use == 0 || shown == 5) continue;
    t += (shown++ ? ", '" : "'") + o->name + "' " + human_bytes(o->in_use);
    if (o->quota) t += " (quota " + human_bytes(o->quota) + ")";
  }
  return shown ? t : "none";
}

void MemoryPool::fail_oom(uint64_t bytes, uint64_t rounded, MemoryOwner* owner,
                          const std::string& limit, const EvictionReport& report) {
  ++stats_.failure_count;
  ++owner->failure_count;
  std::string message =
      label_ + ": cannot allocate " + std::to_string(bytes) + " bytes (" + human_bytes(rounded) +
      " in the pool) for owner '" + owner->name + "': " + limit + "; device total " +
      human_bytes(backend_->total_memory()) + ", free " + human_bytes(backend_->free_memory()) +
      "; pool reserved " + human_bytes(stats_.bytes_reserved) + ", in use " +
      human_bytes(stats_.bytes_in_use) + ", budget " + (budget_ ? human_bytes(budget_) : "none") +
      "; largest holders: " + holders_text() + "; " + report.text();
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
    evict_until([&] { return owner->in_use + rounded <= owner->quota; }, owner, report);
    if (owner->in_use + rounded > owner->quota) {
      fail_oom(bytes, rounded, owner,
               "the quota of owner '" + owner->name + "' is " + human_bytes(owner->quota) + " and " +
                   human_bytes(owner->in_use) + " of it is in use",
               report);
    }
  }
  const bool within_request = owner->in_use + rounded <= owner->request;
  if (budget_ && stats_.bytes_in_use + rounded > budget_) {
    evict_for(owner, within_request, [&] { return stats_.bytes_in_use + rounded <= budget_; },
              report);
    if (stats_.bytes_in_use + rounded > budget_) {
      fail_oom(bytes, rounded, owner,
               "the device budget is " + human_bytes(budget_) + " and " + human_bytes(stats_.bytes_in_use) +
                   " of it is in use",
               report);
    }
  }
  // What scheduler tasks reserved and do not use yet is kept for them.
  if (unused_reservations_ > 0) {
    const uint64_t capacity = budget_ ? budget_ : backend_->total_memory();
    auto fits = [&] {
      return stats_.bytes_in_use + rounded + held_for_others(owner) <= capacity;
    };
    if (!fits()) {
      evict_for(owner, within_request, fits, report);
      if (!fits()) {
        fail_oom(bytes, rounded, owner,
                 "of the device's " + human_bytes(capacity) + ", " + human_bytes(stats_.bytes_in_use) +
                     " is in use and " + human_bytes(held_for_others(owner)) +
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

// ---- eviction --------------------------------------------------------------------------

void MemoryPool::lru_unlink(EvictRecord* r) noexcept {
  if (r->lru_prev) {
    r->lru_prev->lru_next = r->lru_next;
  } else if (lru_head_ == r) {
    lru_head_ = r->lru_next;
  }
  if (r->lru_next) {
    r->lru_next->lru_prev = r->lru_prev;
  } else if (lru_tail_ == r) {
    lru_tail_ = r->lru_prev;
  }
  r->lru_prev = r->lru_next = nullptr;
}

void MemoryPool::lru_push_front(EvictRecord* r) noexcept {
  r->lru_prev = nullptr;
  r->lru_next = lru_head_;
  if (lru_head_) lru_head_->lru_prev = r;
  lru_head_ = r;
  if (!lru_tail_) lru_tail_ = r;
}

template <typename Done>
void MemoryPool::evict_until(Done done, MemoryOwner* owner, EvictionReport& report) {
  EvictRecord* r = lru_tail_;
  while (r && !done()) {
    EvictRecord* newer = r->lru_prev;
    if (!owner || r->owner == owner) {
      ++report.candidates;
      if (r->pins > 0) {
        ++report.skipped_pinned;
      } else {
        spill(r, report);
      }
    }
    r = newer;
  }
}

// Spills for `requester` in class order: BestEffort (and unowned) buffers first, least
// recently used first; then, only for a requester within its request, Burstable memory
// above its owner's request. Guaranteed memory is never spilled for another owner.
template <typename Done>
void MemoryPool::evict_for(MemoryOwner* requester, bool within_request, Done done,
                           EvictionReport& report) {
  const int before = report.spilled;
  const uint64_t bytes_before = report.spilled_bytes;
  for (int32_t victims = kEvictFirst; victims <= kEvictAboveRequest && !done(); ++victims) {
    if (victims == kEvictAboveRequest && !within_request) break;
    EvictRecord* r = lru_tail_;
    while (r && !done()) {
      EvictRecord* newer = r->lru_prev;
      MemoryOwner* o = r->owner ? r->owner : &unowned_;
      bool victim = o->eviction_class == victims;
      if (victim && victims == kEvictAboveRequest) {
        victim = o != requester && o->in_use >= o->request + r->block->size;
      }
      if (victim) {
        ++report.candidates;
        uint64_t size = r->block->size;
        if (r->pins > 0) {
          ++report.skipped_pinned;
        } else if (spill(r, report) && o != requester) {
          note(o, "spilled " + human_bytes(size) + " (buffer #" + std::to_string(r->id) +
                      ") to host memory to make room for '" + requester->name + "'" +
                      (victims == kEvictAboveRequest ? " (memory above this task's request)" : ""));
        }
      }
      r = newer;
    }
  }
  if (report.spilled > before) {
    note(requester, "made room by spilling " + std::to_string(report.spilled - before) +
                        " buffer(s) (" + human_bytes(report.spilled_bytes - bytes_before) +
                        ") of lower classes to host memory");
  }
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
  lru_unlink(r);
  uint64_t size = b->size;
  uncharge(b);
  b->record = nullptr;
  free_locked(b, r->stream, true);
  r->block = nullptr;
  r->host = host;
  spilled_.push_back(r);
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
  r->host = nullptr;
  r->block = b;
  spilled_.erase(std::find(spilled_.begin(), spilled_.end(), r));
  stats_.bytes_spilled -= r->requested;
  ++stats_.restore_count;
  lru_push_front(r);
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

void MemoryPool::free_large(PoolBlock* b) noexcept {
  PoolBlock* merged = b;
  if (PoolBlock* m = merge(b->prev, merged)) merged = m;
  if (PoolBlock* m = merge(merged, merged->next)) merged = m;
  if (!merged->prev) merged->segment->first = merged;
  if (merged != b) {
    free_insert(merged);
    return;
  }
  // No neighbour merged (a huge request's own segment, typically): the block stays out of its
  // free set until the next large request, which takes it at once when it is the same size.
  // A program that allocates and frees one size in a loop then makes no tree operation.
  // free_erase knows the block; whatever searches or lists the free sets puts it back first.
  if (recent_large_) free_insert(recent_large_);
  recent_large_ = b;
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
  r->block = b;
  r->requested = bytes;
  r->owner = b->owner;
  r->stream = stream;
  r->id = next_record_id_++;
  b->record = r.get();
  lru_push_front(r.get());
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
    lru_unlink(r);
    r->block->record = nullptr;
    uncharge(r->block);
    free_locked(r->block, stream == kOwnStream ? r->stream : stream, false);
  } else {
    backend_->host_free(r->host);
    spilled_.erase(std::find(spilled_.begin(), spilled_.end(), r));
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
  } else if (lru_head_ != r) {
    lru_unlink(r);
    lru_push_front(r);
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
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": " + hex(reinterpret_cast<uintptr_t>(ptr)) +
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
  if (streams_.count(stream)) return;
  auto ps = std::make_unique<PoolStream>();
  ps->stream = stream;
  streams_.emplace(stream, std::move(ps));
}

void MemoryPool::forget_stream(cuda::CUstream stream) noexcept {
  if (!stream) return;  // the legacy default stream lives as long as the context
  std::lock_guard<SpinLock> guard(lock_);
  // Tracked or not (a scheduler task's stream is not), live blocks must stop naming it.
  unbind_stream(stream);
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  PoolStream* ps = it->second.get();
  // The handle may name another stream once this one is destroyed: every block pending on
  // it must be complete first. The caller synchronized the stream, so this is quick; it
  // does not rely on that having succeeded.
  if (void* e = covering_event(ps, ps->last_free_seq)) backend_->synchronize_event(e);
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
  for (const PoolStream::Epoch& e : ps->events) backend_->release_event(e.event);
  if (last_stream_ == ps) last_stream_ = nullptr;
  streams_.erase(it);
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
  for (EvictRecord* r : spilled_) {
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
  auto o = std::make_unique<MemoryOwner>();
  o->name = name;
  o->quota = quota;
  owners_.push_back(std::move(o));
  return owners_.back().get();
}

void MemoryPool::close_owner(MemoryOwner* owner) noexcept {
  std::lock_guard<SpinLock> guard(lock_);
  owner->closed = true;
  unused_reservations_ -= unused_reservation(owner);
  owner->request = 0;  // a closed owner holds no reservation
}

void MemoryPool::set_owner_class(MemoryOwner* owner, int32_t eviction_class, uint64_t request) {
  std::lock_guard<SpinLock> guard(lock_);
  unused_reservations_ -= unused_reservation(owner);
  owner->eviction_class = eviction_class;
  owner->request = owner->closed ? 0 : request;
  unused_reservations_ += unused_reservation(owner);
}

std::vector<OwnerEvent> MemoryPool::owner_events(const MemoryOwner* owner) {
  std::lock_guard<SpinLock> guard(lock_);
  return owner->events;
}

void MemoryPool::note(MemoryOwner* owner, std::string text) {
  if (owner == &unowned_) return;
  if (owner->events.size() == kOwnerEventLimit) {
    owner->events.erase(owner->events.begin());
    ++owner->events_dropped;
  }
  uint64_t now = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count());
  owner->events.push_back({now, std::move(text)});
}

uint64_t MemoryPool::unused_reservation(const MemoryOwner* owner) {
  return owner->request > owner->in_use ? owner->request - owner->in_use : 0;
}

uint64_t MemoryPool::held_for_others(const MemoryOwner* owner) const {
  return unused_reservations_ - unused_reservation(owner);
}

MemoryOwner MemoryPool::owner_usage(const MemoryOwner* owner) {
  std::lock_guard<SpinLock> guard(lock_);
  return *owner;
}

void MemoryPool::set_budget(uint64_t bytes) {
  std::lock_guard<SpinLock> guard(lock_);
  budget_ = bytes;
}

uint64_t MemoryPool::trim() {
  std::lock_guard<SpinLock> guard(lock_);
  backend_->release_host_cache();
  return release_free_segments();
}

PoolStats MemoryPool::stats() {
  std::lock_guard<SpinLock> guard(lock_);
  PoolStats s = stats_;
  s.budget = budget_;
  s.largest_free_block = std::max(medium_free_.empty() ? 0 : (*medium_free_.rbegin())->size,
                                  huge_free_.empty() ? 0 : (*huge_free_.rbegin())->size);
  if (recent_large_) s.largest_free_block = std::max(s.largest_free_block, recent_large_->size);
  uint64_t free_bytes = s.bytes_reserved - s.bytes_in_use;
  if (free_bytes == 0) {
    s.fragmentation = 0;
  } else {
    // Small segments' uncarved tails count as one free run each.
    for (PoolSegment* seg : segments_) {
      if (seg->small) s.largest_free_block = std::max(s.largest_free_block, seg->size - seg->bump);
    }
    s.fragmentation = 1.0 - double(s.largest_free_block) / double(free_bytes);
  }
  return s;
}

std::string MemoryPool::snapshot_json() {
  std::lock_guard<SpinLock> guard(lock_);
  using nlohmann::json;
  auto block_json = [&](const PoolBlock* b) {
    json j{{"address", hex(b->addr)},
           {"size", b->size},
           {"stream", hex(reinterpret_cast<uintptr_t>(b->stream))}};
    if (b->free) {
      // Pending: freed on a stream whose work up to the free is not known to be complete.
      j["state"] = b->ready ? "free" : "free_pending";
    } else {
      j["state"] = "allocated";
      j["requested"] = b->requested;
      j["owner"] = b->owner->name;
      j["evictable"] = b->record != nullptr;
      if (b->record) j["pinned"] = b->record->pins > 0;
      j["kind"] = b->raw ? "plugin" : "handle";
    }
    return j;
  };
  json segments = json::array();
  std::vector<PoolSegment*> ordered = segments_;
  std::sort(ordered.begin(), ordered.end(),
            [](const PoolSegment* a, const PoolSegment* b) { return a->base < b->base; });
  for (const PoolSegment* s : ordered) {
    json blocks = json::array();
    if (s->small) {
      std::vector<PoolBlock*> carved = s->carved;
      std::sort(carved.begin(), carved.end(),
                [](const PoolBlock* a, const PoolBlock* b) { return a->addr < b->addr; });
      for (const PoolBlock* b : carved) blocks.push_back(block_json(b));
    } else {
      for (const PoolBlock* b = s->first; b; b = b->next) blocks.push_back(block_json(b));
    }
    json j{{"address", hex(s->base)},
           {"size", s->size},
           {"kind", s->small ? "small" : "large"},
           {"blocks", std::move(blocks)}};
    if (s->small) j["uncarved"] = s->size - s->bump;
    if (!s->small) j["huge"] = s->huge;
    segments.push_back(std::move(j));
  }
  json owners = json::array();
  auto owner_json = [](const MemoryOwner& o) {
    return json{{"name", o.name},         {"quota", o.quota},
                {"in_use", o.in_use},     {"peak", o.peak},
                {"allocs", o.alloc_count}, {"failures", o.failure_count},
                {"closed", o.closed}};
  };
  owners.push_back(owner_json(unowned_));
  for (const auto& o : owners_) owners.push_back(owner_json(*o));
  json spilled = json::array();
  for (const EvictRecord* r : spilled_) {
    spilled.push_back(json{{"id", r->id}, {"size", r->requested}, {"owner", r->owner->name}});
  }
  json j{{"device", label_},
         {"bytes_in_use", stats_.bytes_in_use},
         {"bytes_requested", stats_.bytes_requested},
         {"bytes_reserved", stats_.bytes_reserved},
         {"peak_bytes_in_use", stats_.peak_bytes_in_use},
         {"peak_bytes_reserved", stats_.peak_bytes_reserved},
         {"budget", budget_},
         {"bytes_spilled", stats_.bytes_spilled},
         {"owners", std::move(owners)},
         {"segments", std::move(segments)},
         {"spilled", std::move(spilled)}};
  return json_text(j);
}

}  // namespace gk
