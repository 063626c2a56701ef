// Per-pair timing of an allocator's alloc+free, shared by bench_pool (GPUkit, the CUDA
// runtime) and bench_torch_alloc (PyTorch), so every column is measured alike: after a
// warm-up, batches of pairs timed on the host clock; p50 and p99 over the batches.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace gk::perf {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Percentiles {
  double p50, p99;
};

// Nanoseconds per call of pair() (one alloc and its free).
template <typename Fn>
Percentiles per_pair_ns(Fn&& pair, int batches = 300, int per_batch = 64) {
  for (int i = 0; i < 200; ++i) pair();  // warm: segments, events, module load
  std::vector<double> ns;
  for (int b = 0; b < batches; ++b) {
    auto t0 = Clock::now();
    for (int k = 0; k < per_batch; ++k) pair();
    auto t1 = Clock::now();
    ns.push_back(seconds(t0, t1) * 1e9 / per_batch);
  }
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], ns[ns.size() * 99 / 100]};
}

// Nanoseconds per call of pair() when the caches do not hold what it touches: before each
// timed call, `evict` bytes are written (more than the L2 of the hosts we measure on, less
// than their L3), as other work between two allocations would. Each call is timed alone, so
// the clock's own cost (about 20-40 ns for two reads) is included: compare rows of one run.
template <typename Fn>
Percentiles cold_pair_ns(Fn&& pair, int calls = 1000, size_t evict = size_t(8) << 20) {
  std::vector<unsigned char> sweep(evict);
  for (int i = 0; i < 50; ++i) pair();
  std::vector<double> ns;
  for (int c = 0; c < calls; ++c) {
    for (size_t i = 0; i < sweep.size(); i += 64) sweep[i] = static_cast<unsigned char>(c + i);
    auto t0 = Clock::now();
    pair();
    auto t1 = Clock::now();
    ns.push_back(seconds(t0, t1) * 1e9);
  }
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], ns[ns.size() * 99 / 100]};
}

}  // namespace gk::perf
