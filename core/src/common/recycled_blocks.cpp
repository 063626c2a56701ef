#include "common/recycled_blocks.h"

namespace gk::recycled_detail {

constinit thread_local BlockCache block_cache;

namespace {

// Empties the calling thread's lists when it exits; constructed by the first block given back
// on the thread.
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
      block_cache.room[i] = 0;
    }
  }
};
thread_local BlockCacheDrain block_cache_drain;

}  // namespace

void give_back_slow(void* p, int index) noexcept {
  BlockCache& cache = block_cache;
  if (!cache.open && !cache.drained) {
    block_cache_drain.constructed = true;  // this first use constructs it
    cache.open = true;
    for (int& room : cache.room) room = kRecycledBlocksPerSize;
  }
  if (cache.room[index] > 0) {
    cache.head[index] = new (p) FreeBlock{cache.head[index]};
    --cache.room[index];
    return;
  }
  ::operator delete(p);
}

}  // namespace gk::recycled_detail
