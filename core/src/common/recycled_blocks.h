// Heap blocks of a few fixed sizes, recycled per thread: the small objects made and dropped on
// the hot paths (an Allocation, a gk_tensor, a DLPack export) take
// a freed block of the calling thread instead of a malloc + free each.
//
// The free lists are per thread, not per pool or runtime: a block is given back after its
// object's destructor, when the pool (and the runtime) may already be gone. A block given
// back on another thread than the one that took it just joins that thread's list; blocks
// come from operator new (aligned to a cache line, so that an object of up to 64 bytes, an
// Allocation say, is one line), so any thread may delete them. Each thread keeps at most
// kRecycledBlocksPerSize blocks of each size; its lists are emptied when it exits, and
// blocks given back after that (by other thread_local destructors, or static destructors on
// the main thread) go straight to operator delete.
#pragma once

#include <cstddef>
#include <iterator>
#include <new>

#include "common/thread_state.h"

#if defined(__SANITIZE_ADDRESS__)
#define GK_RECYCLE_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GK_RECYCLE_BLOCKS 0
#endif
#endif
#ifndef GK_RECYCLE_BLOCKS
#define GK_RECYCLE_BLOCKS 1
#endif

namespace gk {

// Under AddressSanitizer every block goes straight back to operator delete, so that a use
// after release or a double release (of a gk_tensor, say) is reported where it happens
// instead of corrupting a free list.
inline constexpr bool kRecycleBlocks = GK_RECYCLE_BLOCKS;

// The block sizes, smallest first. An object takes a block of the smallest size that holds it.
inline constexpr size_t kRecycledBlockSizes[] = {128, 256};
static_assert(std::size(kRecycledBlockSizes) == kRecycledBlockSizeCount);
inline constexpr int kRecycledBlocksPerSize = 32;
inline constexpr std::align_val_t kRecycledBlockAlignment{64};

// The index in kRecycledBlockSizes of the blocks for `bytes`, or -1 when it is larger.
constexpr int recycled_size_index(size_t bytes) {
  for (int i = 0; i < kRecycledBlockSizeCount; ++i) {
    if (bytes <= kRecycledBlockSizes[i]) return i;
  }
  return -1;
}

namespace recycled_detail {
// The first block given back on a thread, a full list, or a thread that is exiting.
void give_back_slow(void* block, int index) noexcept;
}  // namespace recycled_detail

// A block of kRecycledBlockSizes[index] bytes; throws std::bad_alloc like operator new.
// Inline, as is give_back_recycled_block: the hot paths pay the thread-local lookup and no
// call around it.
inline void* take_recycled_block(int index) {
  if constexpr (!kRecycleBlocks) {
    return ::operator new(kRecycledBlockSizes[index], kRecycledBlockAlignment);
  }
  recycled_detail::BlockCache& cache = thread_state.blocks;
  if (recycled_detail::FreeBlock* b = cache.head[index]) {
    cache.head[index] = b->next;
    ++cache.room[index];
    return b;
  }
  return ::operator new(kRecycledBlockSizes[index], kRecycledBlockAlignment);
}

// Gives back a block that take_recycled_block(index) returned (on any thread).
inline void give_back_recycled_block(void* block, int index) noexcept {
  if constexpr (!kRecycleBlocks) {
    ::operator delete(block, kRecycledBlockAlignment);
    return;
  }
  recycled_detail::BlockCache& cache = thread_state.blocks;
  if (cache.room[index] > 0) {
    cache.head[index] = new (block) recycled_detail::FreeBlock{cache.head[index]};
    --cache.room[index];
    return;
  }
  recycled_detail::give_back_slow(block, index);
}

// Storage of `bytes`: a recycled block when one is large enough, else operator new.
inline void* take_storage(size_t bytes) {
  int index = recycled_size_index(bytes);
  return index >= 0 ? take_recycled_block(index) : ::operator new(bytes);
}
inline void give_back_storage(void* p, size_t bytes) noexcept {
  int index = recycled_size_index(bytes);
  if (index >= 0) {
    give_back_recycled_block(p, index);
  } else {
    ::operator delete(p);
  }
}

// A base that gives a class recycled storage for `new` and `delete`. The size `delete` sees
// is that of the static type: use it only for classes deleted through their own type.
struct RecycledStorage {
  static void* operator new(size_t bytes) { return take_storage(bytes); }
  static void operator delete(void* p, size_t bytes) noexcept { give_back_storage(p, bytes); }
};

// For std::allocate_shared: the object and its shared_ptr counts in one recycled block.
template <typename T>
struct RecyclingAllocator {
  using value_type = T;
  RecyclingAllocator() = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    static_assert(recycled_size_index(sizeof(T)) >= 0, "add a larger recycled block size");
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    return static_cast<T*>(take_storage(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { give_back_storage(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace gk
