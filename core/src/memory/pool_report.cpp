// What the pool reports: gk_memory_stats's counters (with the largest free block and the
// fragmentation worked out on demand) and the JSON snapshot of segments, blocks and owners.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "memory/address_text.h"
#include "memory/memory_pool.h"

namespace gk {

PoolStats MemoryPool::stats() {
  std::lock_guard<SpinLock> guard(lock_);
  PoolStats s = stats_;
  s.budget = ledger_.budget();
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
    json j{{"address", address_text(b->addr)},
           {"size", b->size},
           {"stream", address_text(reinterpret_cast<uintptr_t>(b->stream))}};
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
    json j{{"address", address_text(s->base)},
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
  ledger_.for_each([&](const MemoryOwner& o) { owners.push_back(owner_json(o)); });
  json spilled = json::array();
  for (const EvictRecord* r : eviction_.spilled_records()) {
    spilled.push_back(json{{"id", r->id}, {"size", r->requested}, {"owner", r->owner->name}});
  }
  json j{{"device", label_},
         {"bytes_in_use", stats_.bytes_in_use},
         {"bytes_requested", stats_.bytes_requested},
         {"bytes_reserved", stats_.bytes_reserved},
         {"peak_bytes_in_use", stats_.peak_bytes_in_use},
         {"peak_bytes_reserved", stats_.peak_bytes_reserved},
         {"budget", ledger_.budget()},
         {"bytes_spilled", stats_.bytes_spilled},
         {"owners", std::move(owners)},
         {"segments", std::move(segments)},
         {"spilled", std::move(spilled)}};
  return json_text(j);
}

}  // namespace gk
