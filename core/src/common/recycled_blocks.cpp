#include "common/recycled_blocks.h"

namespace gk::recycled_detail {
namespace {

// Empties the calling thread's lists when it exits; constructed by the first block given back
// on the thread.
struct BlockCacheDrain {
  bool constructed = false;
  ~BlockCacheDrain() {
    BlockCache& cache = thread_state.blocks;
    cache.open = false;  // from now on, blocks given back on this thread are deleted
    cache.drained = true;
    for (int i = 0; i < kRecycledBlockSizeCount; ++i) {
      while (FreeBlock* b = cache.head[i]) {
        cache.head[i] = b->next;
        ::operator delete(b, kRecycledBlockAlignment);
      }
      cache.room[i] = 0;
    }
  }
};
thread_local BlockCacheDrain block_cache_drain;

}  // namespace

void give_back_slow(void* p, int index) noexcept {
  BlockCache& cache = thread_state.blocks;
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
  ::operator delete(p, kRecycledBlockAlignment);
}

}  // namespace gk::recycled_detail
