// The pool's blocks: small free lists and carving, large free sets, splitting and merging,
// and the segments they come from (growth, release of idle ones, trim). The fast paths that
// share these live in memory_pool_inline.h.
#include <algorithm>

#include "memory/memory_pool.h"
#include "memory/memory_pool_inline.h"

namespace gk {

using pool_detail::round_up;

bool MemoryPool::BySize::operator()(const PoolBlock* a, const PoolBlock* b) const {
  if (a->size != b->size) return a->size < b->size;
  return a->addr < b->addr;
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

// Makes a free block safe to use on `stream`: waits there for its free when it was freed
// on another stream and that has not completed (no host blocking), and takes it.
void MemoryPool::take_for(PoolBlock* b, cuda::CUstream stream) {
  if (!order_.usable_on(b, stream, stats_)) order_.wait_for(b, stream, stats_);
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
    if (order_.usable_on(b, stream, stats_)) {
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
    if (b->size == rounded && b->segment->huge == huge && order_.usable_on(b, stream, stats_)) {
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
    if (order_.usable_on(*it, stream, stats_)) {  // may find its free complete
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
  if (!usable) order_.wait_for(chosen, stream, stats_);
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
      if (!order_.settled(b, stats_)) return false;
    }
    return true;
  }
  for (PoolBlock* b : s->carved) {
    if (!order_.settled(b, stats_)) return false;
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
      if (!b->free || !high->free || !order_.settled(b, stats_) || !order_.settled(high, stats_)) {
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
      order_.wait_settled(b, stats_);
      delete_block(b);
    }
    if (small_current_ == s) small_current_ = nullptr;
  } else {
    for (PoolBlock* b = s->first; b;) {
      PoolBlock* next = b->next;
      free_erase(b);
      order_.wait_settled(b, stats_);
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

}  // namespace gk
