// Who is charged what on one pool: its owners (a quota, the usage, the eviction class and
// request a scheduler task sets, what eviction did to or for them), the account of allocations
// made for no owner, the device budget, and the sum of what requests hold beyond their use.
//
// Not locked by itself: the pool's lock guards it (see memory_pool.h). The pool keeps the
// first two fields (budget, reservations) on its hot cache line and the unowned account on
// the next one, so the ledger's layout is part of the allocation fast path.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gk {

// MemoryOwner::eviction_class values.
constexpr int32_t kEvictFirst = 0;        // BestEffort tasks, plain owners, no owner
constexpr int32_t kEvictAboveRequest = 1; // Burstable: only memory above its request
constexpr int32_t kEvictNever = 2;        // Guaranteed: only for its own quota
constexpr size_t kOwnerEventLimit = 64;

struct OwnerEvent {
  uint64_t t_ns;  // steady clock
  std::string text;
};

// An owner's quota and usage on one pool. Lives as long as the pool. What every allocation
// and free reads or writes comes first, on one cache line.
struct MemoryOwner {
  uint64_t quota = 0;       // 0: none
  uint64_t in_use = 0;
  uint64_t peak = 0;
  uint64_t alloc_count = 0;
  // Set by the scheduler for a task's owner. The class orders eviction: BestEffort (and
  // owners of no task) first, then Burstable memory above its request; Guaranteed memory is
  // never spilled for another owner. The request is held back from every other owner.
  uint64_t request = 0;
  int32_t eviction_class = kEvictFirst;
  bool closed = false;      // its handle was destroyed; blocks still charged stay charged
  uint64_t failure_count = 0;
  std::string name;
  // What eviction did to or for this owner (the latest kOwnerEventLimit), oldest first.
  std::vector<OwnerEvent> events;
  uint64_t events_dropped = 0;
};

class OwnerLedger {
 public:
  OwnerLedger();
  OwnerLedger(const OwnerLedger&) = delete;
  OwnerLedger& operator=(const OwnerLedger&) = delete;

  // The account of allocations made for no owner (nullptr).
  MemoryOwner* resolve(MemoryOwner* owner) { return owner ? owner : &unowned_; }
  const MemoryOwner& unowned() const { return unowned_; }

  // A limit on bytes in use on the device (0: none).
  uint64_t budget() const { return budget_; }
  void set_budget(uint64_t bytes) { budget_ = bytes; }

  // Σ over owners of what their request holds beyond their use.
  uint64_t unused_reservations() const { return unused_reservations_; }
  // What other owners' requests hold beyond their use: kept from `owner`.
  uint64_t held_for_others(const MemoryOwner* owner) const {
    return unused_reservations_ - unused_reservation(owner);
  }

  // Inline: every allocation and free charges. Only a scheduler task's owner has a request,
  // so the sum of unused reservations changes only for those.
  void charge(MemoryOwner* owner, uint64_t bytes) {
    if (owner->request) {
      unused_reservations_ -= unused_reservation(owner);
      owner->in_use += bytes;
      unused_reservations_ += unused_reservation(owner);
    } else {
      owner->in_use += bytes;
    }
    owner->peak = std::max(owner->peak, owner->in_use);
  }
  void uncharge(MemoryOwner* owner, uint64_t bytes) noexcept {
    if (owner->request) {
      unused_reservations_ -= unused_reservation(owner);
      owner->in_use -= bytes;
      unused_reservations_ += unused_reservation(owner);
    } else {
      owner->in_use -= bytes;
    }
  }

  MemoryOwner* create(const std::string& name, uint64_t quota);
  // Its handle is gone: it keeps what is charged to it, but no reservation.
  void close(MemoryOwner* owner) noexcept;
  // Makes `owner` a scheduler task's: its eviction class and the request reserved for it.
  void set_class(MemoryOwner* owner, int32_t eviction_class, uint64_t request);
  // Records what eviction did to or for `owner` (nothing for the unowned account).
  void note(MemoryOwner* owner, std::string text);
  // The largest holders, for an out-of-memory message: "'name' 1.0 GiB (quota …), …".
  std::string holders_text() const;

  // Calls `visit(const MemoryOwner&)` for the unowned account, then every owner in creation
  // order.
  template <typename Visit>
  void for_each(Visit visit) const {
    visit(unowned_);
    for (const auto& o : owners_) visit(*o);
  }

 private:
  static uint64_t unused_reservation(const MemoryOwner* owner) {
    return owner->request > owner->in_use ? owner->request - owner->in_use : 0;
  }

  uint64_t budget_ = 0;
  uint64_t unused_reservations_ = 0;
  MemoryOwner unowned_;
  std::vector<std::unique_ptr<MemoryOwner>> owners_;
};

}  // namespace gk
