// A pool's blocks and the segments they are cut from. Blocks are the unit every part of the
// pool works on: the façade allocates and frees them, StreamOrder tracks when a freed one is
// safe to reuse on another stream, eviction moves a record's contents between them.
#pragma once

#include <cstdint>
#include <vector>

#include "device/cuda_driver.h"

namespace gk {

struct PoolBlock;
struct PoolStream;
struct MemoryOwner;
struct EvictRecord;

struct PoolSegment {
  uintptr_t base = 0;
  uint64_t size = 0;
  bool small = false;
  bool huge = false;  // made for one huge request: its blocks live in huge_free_
  // Small segments: bytes carved so far, blocks not free, every block carved.
  uint64_t bump = 0;
  uint64_t live = 0;
  std::vector<PoolBlock*> carved;
  // Large segments: the lowest block (blocks chain by address through prev/next).
  PoolBlock* first = nullptr;
};

// Two cache lines, aligned.
struct alignas(64) PoolBlock {
  uintptr_t addr = 0;
  uint64_t size = 0;
  uint64_t requested = 0;
  PoolSegment* segment = nullptr;
  PoolBlock* prev = nullptr;  // address neighbours in a large segment
  PoolBlock* next = nullptr;
  PoolBlock* bin_prev = nullptr;  // a small class's free list
  PoolBlock* bin_next = nullptr;
  // Live: the stream it was allocated in. Free: the stream it was freed in; unless `ready`,
  // either `lazy` (a tracked stream: complete once an event recorded there after free_seq
  // has completed) or `event` (recorded at free on a stream the pool does not track).
  cuda::CUstream stream = nullptr;
  void* event = nullptr;
  PoolStream* lazy = nullptr;
  uint64_t free_seq = 0;
  bool ready = true;  // free and usable on any stream
  int size_class = -1;
  MemoryOwner* owner = nullptr;
  EvictRecord* record = nullptr;
  // Not beside `ready`: two neighbouring flags written together become one 16-bit store of a
  // constant, which GCC loads from memory (a cache line more on a cold call).
  bool free = true;
  bool raw = false;
};

}  // namespace gk
