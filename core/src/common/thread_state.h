// The per-thread state that the hot paths read, in one thread_local. libgpukit is a shared
// library that may be dlopen'ed (from Python), so its thread-locals use the general-dynamic
// TLS model: each access is a __tls_get_addr call, but a function that reads several parts of
// one thread_local pays one (the compiler reuses the address). Constant-initialised and
// trivially destructible, so other files reach it with no init wrapper and it stays usable
// while the thread exits (other thread_local destructors, and static destructors on the main
// thread, may still give back recycled blocks).
#pragma once

namespace gk {

struct MemoryOwner;

inline constexpr int kRecycledBlockSizeCount = 2;

namespace recycled_detail {

struct FreeBlock {
  FreeBlock* next;
};

// The calling thread's free lists of recycled blocks (recycled_blocks.h).
struct BlockCache {
  FreeBlock* head[kRecycledBlockSizeCount] = {};
  // How many more blocks each list takes. 0 until the first block given back on the thread
  // opens the lists (recycled_blocks.cpp registers their emptying at thread exit then), and 0
  // again once they were emptied: the fast path of give_back_recycled_block is this one test.
  int room[kRecycledBlockSizeCount] = {};
  bool open = false;     // the emptying at thread exit is registered and has not run yet
  bool drained = false;  // it has run: the thread is exiting
};

}  // namespace recycled_detail

struct ThreadState {
  recycled_detail::BlockCache blocks;
  MemoryOwner* charge_owner = nullptr;  // the innermost ChargeScope's owner
};

extern constinit thread_local ThreadState thread_state;

}  // namespace gk
