// Eviction: the evictable allocations (GK_BUFFER_EVICTABLE) of one pool, in least recently
// used order while resident, the list of those spilled to host memory, and the order in which
// victims are chosen when a request would pass a quota, the device budget or the device's
// memory. The pool does the spilling and restoring itself (copies, blocks, charges); this part
// decides who goes and keeps the lists.
//
// Not locked by itself: the pool's lock guards it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "device/cuda_driver.h"
#include "memory/owner_ledger.h"
#include "memory/pool_block.h"

namespace gk {

// The pool-side state of an evictable allocation: resident in `block`, or spilled to
// `host`. Stable for the allocation's lifetime, unlike the block it occupies.
struct EvictRecord {
  PoolBlock* block = nullptr;  // nullptr while spilled
  void* host = nullptr;        // the spilled copy
  uint64_t requested = 0;
  uint64_t id = 0;
  MemoryOwner* owner = nullptr;
  cuda::CUstream stream = nullptr;  // the stream of its last use, its free's order
  int32_t pins = 0;                 // maps and ops in flight: never evicted while > 0
  EvictRecord* lru_prev = nullptr;  // towards the most recently used
  EvictRecord* lru_next = nullptr;
};

// What eviction tried for one request, for the out-of-memory message.
struct EvictionReport {
  int spilled = 0;
  uint64_t spilled_bytes = 0;
  int skipped_pinned = 0;
  int host_short = 0;
  int candidates = 0;

  std::string text() const;
};

class Eviction {
 public:
  Eviction() = default;
  Eviction(const Eviction&) = delete;
  Eviction& operator=(const Eviction&) = delete;
  // Spilled records still held (their host copies are the pool's to free first).
  ~Eviction();

  // Makes `r` the record of `block`, resident and most recently used.
  void add(EvictRecord* r, PoolBlock* block, uint64_t requested, MemoryOwner* owner,
           cuda::CUstream stream) noexcept;
  // Marks a resident record most recently used.
  void touch(EvictRecord* r) noexcept {
    if (lru_head_ == r) return;
    lru_unlink(r);
    lru_push_front(r);
  }
  // A resident record leaves the LRU list: freed, or about to be spilled (then spilled()).
  void remove_resident(EvictRecord* r) noexcept { lru_unlink(r); }
  // Its contents are in `host` now.
  void spilled(EvictRecord* r, void* host);
  // Its contents are back in `block`; most recently used.
  void restored(EvictRecord* r, PoolBlock* block) noexcept;
  // A spilled record is freed (the caller frees its host copy).
  void remove_spilled(EvictRecord* r) noexcept;
  const std::vector<EvictRecord*>& spilled_records() const { return spilled_; }

  // Spills `owner`'s records (every owner's when nullptr), least recently used first, until
  // `done()`. `spill(record, report)` does the spilling and returns whether it did.
  template <typename Done, typename Spill>
  void evict_until(Done done, MemoryOwner* owner, Spill spill, EvictionReport& report);
  // Spills for `requester` in class order: BestEffort (and unowned) buffers first, least
  // recently used first; then, only for a requester within its request, Burstable memory
  // above its owner's request. Guaranteed memory is never spilled for another owner. Notes
  // in the ledger what was done to and for whom.
  template <typename Done, typename Spill>
  void evict_for(MemoryOwner* requester, bool within_request, OwnerLedger& ledger, Done done,
                 Spill spill, EvictionReport& report);

 private:
  void lru_unlink(EvictRecord* r) noexcept;
  void lru_push_front(EvictRecord* r) noexcept;

  EvictRecord* lru_head_ = nullptr;  // most recently used resident record
  EvictRecord* lru_tail_ = nullptr;
  std::vector<EvictRecord*> spilled_;
  uint64_t next_record_id_ = 1;
};

template <typename Done, typename Spill>
void Eviction::evict_until(Done done, MemoryOwner* owner, Spill spill, EvictionReport& report) {
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

template <typename Done, typename Spill>
void Eviction::evict_for(MemoryOwner* requester, bool within_request, OwnerLedger& ledger,
                         Done done, Spill spill, EvictionReport& report) {
  const int before = report.spilled;
  const uint64_t bytes_before = report.spilled_bytes;
  for (int32_t victims = kEvictFirst; victims <= kEvictAboveRequest && !done(); ++victims) {
    if (victims == kEvictAboveRequest && !within_request) break;
    EvictRecord* r = lru_tail_;
    while (r && !done()) {
      EvictRecord* newer = r->lru_prev;
      MemoryOwner* o = ledger.resolve(r->owner);
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
          ledger.note(o, "spilled " + human_bytes(size) + " (buffer #" + std::to_string(r->id) +
                             ") to host memory to make room for '" + requester->name + "'" +
                             (victims == kEvictAboveRequest ? " (memory above this task's request)"
                                                            : ""));
        }
      }
      r = newer;
    }
  }
  if (report.spilled > before) {
    ledger.note(requester, "made room by spilling " + std::to_string(report.spilled - before) +
                               " buffer(s) (" + human_bytes(report.spilled_bytes - bytes_before) +
                               ") of lower classes to host memory");
  }
}

}  // namespace gk
