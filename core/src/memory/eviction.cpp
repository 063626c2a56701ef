#include "memory/eviction.h"

#include <algorithm>

namespace gk {

std::string EvictionReport::text() const {
  if (candidates == 0 && spilled == 0) return "eviction: no evictable buffer to spill";
  std::string t = "eviction: spilled " + std::to_string(spilled) + " evictable buffer(s) (" +
                  human_bytes(spilled_bytes) + ")";
  if (skipped_pinned) t += ", skipped " + std::to_string(skipped_pinned) + " mapped or in use";
  if (host_short) t += ", " + std::to_string(host_short) + " could not get host memory";
  return t;
}

Eviction::~Eviction() {
  for (EvictRecord* r : spilled_) delete r;
}

void Eviction::add(EvictRecord* r, PoolBlock* block, uint64_t requested, MemoryOwner* owner,
                   cuda::CUstream stream) noexcept {
  r->block = block;
  r->requested = requested;
  r->owner = owner;
  r->stream = stream;
  r->id = next_record_id_++;
  lru_push_front(r);
}

void Eviction::spilled(EvictRecord* r, void* host) {
  r->block = nullptr;
  r->host = host;
  spilled_.push_back(r);
}

void Eviction::restored(EvictRecord* r, PoolBlock* block) noexcept {
  r->host = nullptr;
  r->block = block;
  spilled_.erase(std::find(spilled_.begin(), spilled_.end(), r));
  lru_push_front(r);
}

void Eviction::remove_spilled(EvictRecord* r) noexcept {
  spilled_.erase(std::find(spilled_.begin(), spilled_.end(), r));
}

void Eviction::lru_unlink(EvictRecord* r) noexcept {
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

void Eviction::lru_push_front(EvictRecord* r) noexcept {
  r->lru_prev = nullptr;
  r->lru_next = lru_head_;
  if (lru_head_) lru_head_->lru_prev = r;
  lru_head_ = r;
  if (!lru_tail_) lru_tail_ = r;
}

}  // namespace gk
