#include "common/spin_lock.h"

#include <mutex>
#include <new>
#include <vector>

namespace gk {
namespace {

// The locks given back, for the next taker. Constant-initialised and never destroyed: pools
// (the takers) may be destroyed by static destructors after this file's would have run.
struct LastingLocks {
  SpinLock lock;
  SpinLock* free_head = nullptr;  // chained through the spare lines of each 64-byte block
};
constinit LastingLocks lasting_locks;

// Each lock has a cache line of its own (its owner's hot fields are elsewhere); the rest of
// the line links the free ones.
struct alignas(64) LastingLock {
  SpinLock lock;
  SpinLock* next_free = nullptr;
};

}  // namespace

SpinLock& take_lasting_lock() {
  std::lock_guard<SpinLock> guard(lasting_locks.lock);
  if (SpinLock* l = lasting_locks.free_head) {
    lasting_locks.free_head = reinterpret_cast<LastingLock*>(l)->next_free;
    return *l;
  }
  return (new LastingLock)->lock;
}

void give_back_lasting_lock(SpinLock& l) noexcept {
  std::lock_guard<SpinLock> guard(lasting_locks.lock);
  reinterpret_cast<LastingLock*>(&l)->next_free = lasting_locks.free_head;
  lasting_locks.free_head = &l;
}

}  // namespace gk
