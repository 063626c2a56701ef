// A pool's statistics: the counters every allocation, free, growth, release, spill and
// restore updates, as gk_memory_stats reports them. Guarded by the pool's lock.
#pragma once

#include <cstdint>

namespace gk {

// Pool-wide counters, as gk_memory_stats reports them.
struct PoolStats {
  uint64_t bytes_in_use = 0;      // live blocks, rounded sizes
  uint64_t bytes_requested = 0;   // live blocks, requested sizes
  uint64_t bytes_reserved = 0;    // segments held from the backend
  uint64_t peak_bytes_in_use = 0;
  uint64_t peak_bytes_reserved = 0;
  uint64_t alloc_count = 0;
  uint64_t free_count = 0;
  uint64_t failure_count = 0;
  uint64_t segment_count = 0;
  uint64_t largest_free_block = 0;
  double fragmentation = 0;       // 1 - largest free block / free bytes in segments
  uint64_t budget = 0;
  uint64_t bytes_spilled = 0;     // evictable bytes now in host memory
  uint64_t spill_count = 0;
  uint64_t restore_count = 0;
  uint64_t cross_stream_waits = 0;
  uint64_t segment_releases = 0;
  uint64_t segment_maps = 0;      // segments taken from the backend, ever
  uint64_t events_recorded = 0;   // free events recorded (at free, or later for tracked streams)
};

}  // namespace gk
