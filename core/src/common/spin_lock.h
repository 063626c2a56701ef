// A lock for critical sections that are almost always short and uncontended (the memory
// pool's hot path): taking it is one atomic exchange and releasing it a plain store, where
// std::mutex costs two atomic read-modify-writes. A waiter spins briefly, then yields,
// then sleeps in growing steps (up to 50 µs), so a holder that is slow for once (a driver
// call, a spill) does not burn another core for long. Not fair, not recursive.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GK_SPIN_PAUSE() _mm_pause()
#else
#define GK_SPIN_PAUSE() std::this_thread::yield()
#endif

namespace gk {

class SpinLock {
 public:
  void lock() noexcept {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    wait_and_lock();
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  // Out of line (rarely taken): inlined, its waits made every locking function keep a frame
  // pointer and save more registers.
  [[gnu::noinline, gnu::cold]] void wait_and_lock() noexcept {
    for (int round = 0;; ++round) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (round < 64) {
          GK_SPIN_PAUSE();
        } else if (round < 128) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(round < 256 ? 1 : 50));
        }
        ++round;
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

// A SpinLock whose memory is never freed: one given back goes to a later take_lasting_lock().
// For a lock that a thread may still take after the object it guarded is gone, having found
// it through a handle that went stale meanwhile (a buffer handle freed twice at once, say):
// under the lock that thread sees the handle stale, whatever the lock guards by then.
SpinLock& take_lasting_lock();
void give_back_lasting_lock(SpinLock& lock) noexcept;

}  // namespace gk
