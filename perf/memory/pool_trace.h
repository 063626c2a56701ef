// The random allocation trace that bench_pool replays (section 2) and that the pool's unit
// test replays on the cpu pool (tests/core/memory_pool_test.cpp): sizes log-uniform in
// 256 B..256 MiB, mixed lifetimes (55% allocations while anything is live), two streams,
// and 20% of the frees on the stream the block was not allocated on. Header-only, so the
// benchmark and the test replay exactly the same events for a seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace gk::perf {

struct TraceEvent {
  bool alloc;
  uint64_t size;
  int stream;       // alloc: the stream (0 or 1)
  int free_stream;  // free: 0 = the allocation's stream, 1 = the other one
  size_t slot;      // which allocation: alloc and free of one buffer share it
};

// The seed and event count bench_pool uses (4228 events, peak live 5368.1 MiB), fixed so
// that runs on different days and devices replay the same trace.
constexpr uint64_t kTraceSeed = 20261122;
constexpr int kTraceEvents = 4000;
// The live-bytes cap the trace is drawn under. bench_pool used min(device memory / 4,
// 16 GiB), which is 16 GiB on an 80 GB H100 and never binds for the default seed.
constexpr uint64_t kTraceLiveCap = uint64_t(16) << 30;

// Allocations that are still live after `events` draws are freed at the end, so the trace
// returns to zero.
inline std::vector<TraceEvent> make_pool_trace(uint64_t seed = kTraceSeed,
                                               int events = kTraceEvents,
                                               uint64_t live_cap = kTraceLiveCap) {
  std::mt19937_64 rng(seed);
  std::vector<TraceEvent> trace;
  std::vector<std::pair<size_t, uint64_t>> live;  // slot, size
  uint64_t live_bytes = 0;
  size_t next_slot = 0;
  std::uniform_real_distribution<double> logu(std::log(256.0), std::log(256.0 * 1024 * 1024));
  for (int i = 0; i < events; ++i) {
    bool do_alloc = live.empty() || rng() % 100 < 55;
    uint64_t size = uint64_t(std::exp(logu(rng)));
    if (do_alloc && live_bytes + size <= live_cap) {
      int s = int(rng() % 2);
      trace.push_back({true, size, s, s, next_slot});
      live.emplace_back(next_slot++, size);
      live_bytes += size;
    } else if (!live.empty()) {
      size_t k = rng() % live.size();
      int fs = rng() % 100 < 20 ? 1 : 0;
      trace.push_back({false, live[k].second, 0, fs, live[k].first});
      live_bytes -= live[k].second;
      live.erase(live.begin() + long(k));
    }
  }
  for (auto& [slot, size] : live) trace.push_back({false, size, 0, 0, slot});
  return trace;
}

// How many allocation slots the trace uses (the size of a slot -> buffer table).
inline size_t trace_slots(const std::vector<TraceEvent>& trace) {
  size_t slots = 0;
  for (const TraceEvent& e : trace) slots = std::max(slots, e.slot + 1);
  return slots;
}

// The most bytes (as requested) live at once.
inline uint64_t trace_peak_live(const std::vector<TraceEvent>& trace) {
  uint64_t live = 0, peak = 0;
  for (const TraceEvent& e : trace) {
    live = e.alloc ? live + e.size : live - e.size;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace gk::perf
