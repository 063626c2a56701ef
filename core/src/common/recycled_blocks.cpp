#include "common/recycled_blocks.h"

namespace gk {
namespace {

struct FreeBlock {
  FreeBlock* next;
};

struct BlockCache {
  FreeBlock* head[kRecycledBlockSizeCount] = {};
  int count[kRecycledBlockSizeCount] = {};
  // block_cache_drain is constructed (so it runs at thread exit) and has not run yet.
  bool open = false;
  bool drained = false;  // it has run: the thread is exiting
};

// Trivially destructible, so it stays usable while the thread exits: other thread_local
// destructors (and, on the main thread, static destructors) may give blocks back after the
// drain below has run.
constinit thread_local BlockCache block_cache;

struct BlockCacheDrain {
  bool constructed = false;
  ~BlockCacheDrain() {
    block_cache.open = false;  // from now on, blocks given back on this thread are deleted
    block_cache.drained = true;
    for (int i = 0; i < kRecycledBlockSizeCount; ++i) {
      while (FreeBlock* b = block_cache.head[i]) {
        block_cache.head[i] = b->next;
        ::operator delete(b);
      }
      block_cache.count[i] = 0;
    }
  }
};
thread_local BlockCacheDrain block_cache_drain;

// The first block given back on a thread, a full list, or a thread that is exiting.
[[gnu::noinline]] void give_back_slow(void* p, int index) noexcept {
  BlockCache& cache = block_cache;
  if (!cache.open && !cache.drained) {
    block_cache_drain.constructed = true;  // this first use constructs it
    cache.open = true;
  }
  if (cache.open && cache.count[index] < kRecycledBlocksPerSize) {
    cache.head[index] = new (p) FreeBlock{cache.head[index]};
    ++cache.count[index];
    return;
  }
  ::operator delete(p);
}

}  // namespace

void* take_recycled_block(int index) {
  // One thread-local lookup per call (each costs a __tls_get_addr call).
  BlockCache& cache = block_cache;
  if (FreeBlock* b = cache.head[index]) {
    cache.head[index] = b->next;
    --cache.count[index];
    return b;
  }
  return ::operator new(kRecycledBlockSizes[index]);
}

void give_back_recycled_block(void* p, int index) noexcept {
  BlockCache& cache = block_cache;
  if (cache.open && cache.count[index] < kRecycledBlocksPerSize) {
    cache.head[index] = new (p) FreeBlock{cache.head[index]};
    ++cache.count[index];
    return;
  }
  give_back_slow(p, index);
}

}  // namespace gk
