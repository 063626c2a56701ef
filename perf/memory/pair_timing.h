// Per-pair timing of an allocator's alloc+free, shared by bench_pool (GPUkit, the CUDA
// runtime) and bench_torch_alloc (PyTorch), so every column is measured alike: after a
// warm-up, batches of pairs timed on the host clock; p50 and p99 over the batches.
#pragma once

#include <algorithm>
#include <chrono>
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

}  // namespace gk::perf
