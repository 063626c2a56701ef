// tuning.cpp — timing a plan's candidate algorithms at its first call (see plugin.cpp's top
// comment for why, and from a cold L2).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "l2_flush.h"
#include "plan.h"

namespace gk::cublaslt {

using gk::matmul::MatmulProblem;

namespace {

// Timed runs per candidate, in rounds that take every candidate in turn (so a clock that
// ramps up during timing favours none), after one warm-up run each; the median counts.
// First kTuneRounds; then, while the candidates' timed runs stay within kTuneBudgetUs in
// all, more rounds up to kTuneMaxRounds. Short calls are noisy relative to their length:
// on the H100, bf16 128×14336×4096's two fastest candidates (44.5 and 44.1 µs over 5
// rounds) kept either one from process to process, though they are 2-8% apart in situ.
// There a 44 µs call got 21 rounds and 4096³ (180 µs) kept 5.
constexpr int kTuneRounds = 5;
constexpr int kTuneMaxRounds = 25;
constexpr float kTuneBudgetUs = 8000.0f;
// Another candidate replaces the heuristic's first only when at least this much faster:
// closer than that is timing noise, and the first is what PyTorch would run.
constexpr float kTuneMargin = 0.98f;

std::string microseconds(float us) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f µs", double(us));
  return text;
}

}  // namespace

void time_candidates(const LtLibrary& lt, const gk_host_services* host, Plan* plan,
                     const MatmulProblem& p, const Mapping& m, int32_t device, int ordinal,
                     cudaStream_t stream, const void* alpha, const void* beta, void* workspace,
                     size_t workspace_bytes) {
  const LtApi& api = lt.api();
  plan->timed = true;
  const size_t osz = gk::matmul::dtype_bytes(p.out_dtype);
  const int64_t batches = std::max<int64_t>(p.batch_count, 1);
  const uint64_t elements =
      uint64_t((batches - 1) * m.d_bs + (m.cols - 1) * m.ldd + m.rows);
  void* scratch = nullptr;
  if (host->alloc(host->host_context, device, elements * osz, stream, &scratch) != GK_OK) {
    plan->note = "cuBLASLt: the heuristic's first algorithm (not timed: no scratch memory for " +
                 std::to_string(elements * osz) + " bytes)";
    return;
  }
  // The flush buffer; without it (no memory, or L2 size unknown) the runs are timed warm.
  int l2_bytes = 0;
  size_t flush_bytes = 0;
  void* flush = nullptr;
  if (cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, ordinal) == cudaSuccess &&
      l2_bytes > 0) {
    flush_bytes = 2 * size_t(l2_bytes);
    if (host->alloc(host->host_context, device, flush_bytes, stream, &flush) != GK_OK ||
        cudaMemsetAsync(flush, 0, flush_bytes, stream) != cudaSuccess) {
      if (flush) host->free(host->host_context, device, flush, stream);
      flush = nullptr;
    }
  }
  const char* const warmth =
      flush ? " from a cold L2" : " with operands warm in L2 (no buffer to flush it)";
  const size_t n = plan->candidates.size();
  auto run = [&](Candidate& c) {
    return api.matmul(lt.handle(), plan->desc, alpha, m.x_ptr, plan->layout[0], m.y_ptr,
                      plan->layout[1], beta, p.c, plan->layout[2], scratch, plan->layout[3],
                      &c.algo, workspace, c.workspace, stream) == CUBLAS_STATUS_SUCCESS;
  };
  // A warm-up run each, which also checks that it runs here.
  std::vector<bool> usable(n, false);
  for (size_t i = 0; i < n; ++i) {
    usable[i] = plan->candidates[i].workspace <= workspace_bytes && run(plan->candidates[i]);
  }
  // events[2 * (round * n + i)] and the next bracket candidate i's run in that round.
  std::vector<cudaEvent_t> events(2 * kTuneMaxRounds * n, nullptr);
  bool ok = true;
  for (cudaEvent_t& e : events) ok = ok && cudaEventCreate(&e) == cudaSuccess;
  std::vector<std::vector<float>> times(n);
  // Runs rounds [first, last) and appends their times; clears `ok` on any failure.
  auto time_rounds = [&](int first, int last) {
    for (int round = first; round < last; ++round) {
      for (size_t i = 0; i < n; ++i) {
        if (!usable[i]) continue;
        cudaEvent_t* e = &events[2 * (size_t(round) * n + i)];
        if (flush) {
          ok = gk::cublaslt::read_through(flush, flush_bytes, stream) == cudaSuccess && ok;
        }
        cudaEventRecord(e[0], stream);
        usable[i] = run(plan->candidates[i]);
        cudaEventRecord(e[1], stream);
      }
    }
    ok = cudaStreamSynchronize(stream) == cudaSuccess && ok;
    for (int round = first; ok && round < last; ++round) {
      for (size_t i = 0; i < n; ++i) {
        float ms = 0;
        const cudaEvent_t* e = &events[2 * (size_t(round) * n + i)];
        if (usable[i] && cudaEventElapsedTime(&ms, e[0], e[1]) == cudaSuccess) {
          times[i].push_back(ms * 1000.0f);
        }
      }
    }
  };
  auto median = [](std::vector<float> t) {
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    return t[t.size() / 2];
  };
  int rounds = 0;
  if (ok) {
    time_rounds(0, kTuneRounds);
    rounds = kTuneRounds;
  }
  // One round of every candidate, from the first rounds' medians.
  float round_us = 0;
  for (size_t i = 0; ok && i < n; ++i) {
    if (usable[i] && times[i].size() == size_t(rounds)) round_us += median(times[i]);
  }
  if (ok && round_us > 0) {
    const int more = std::min(kTuneMaxRounds, int(kTuneBudgetUs / round_us)) - rounds;
    if (more > 0) {
      time_rounds(rounds, rounds + more);
      rounds += more;
    }
  }
  for (cudaEvent_t e : events) {
    if (e) cudaEventDestroy(e);
  }
  for (size_t i = 0; i < n; ++i) {
    if (usable[i] && rounds > 0 && times[i].size() == size_t(rounds)) {
      plan->candidates[i].us = median(times[i]);
    }
  }
  size_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    const float us = plan->candidates[i].us;
    if (us >= 0 && (plan->candidates[best].us < 0 || us < plan->candidates[best].us)) best = i;
  }
  const float first = plan->candidates[0].us;
  if (best != 0 && first >= 0 && plan->candidates[best].us > kTuneMargin * first) best = 0;
  if (!ok) {
    plan->note = "cuBLASLt: the heuristic's first algorithm (not timed: a CUDA event or the "
                 "L2 flush failed)";
  } else if (plan->candidates[best].us < 0) {
    plan->note = "cuBLASLt: the heuristic's first algorithm (timing failed for every one)";
  } else {
    plan->chosen = best;
    plan->note = "cuBLASLt: algorithm " + std::to_string(best + 1) + " of " + std::to_string(n) +
                 " in the heuristic's order, " + microseconds(plan->candidates[best].us) +
                 " per call (median of " + std::to_string(rounds) +
                 " runs) when timed at the first call" + warmth +
                 (best == 0 ? std::string(" (no other was 2% faster)")
                            : " (the heuristic's first: " +
                                  (first < 0 ? std::string("failed") : microseconds(first)) + ")");
  }
  host->free(host->host_context, device, scratch, stream);
  if (flush) host->free(host->host_context, device, flush, stream);
}

}  // namespace gk::cublaslt
