// sample: one block of 1024 threads per row. The row stays in global memory (L2): a vocab
// of 150k f32 is 600 KB, more than shared memory, and each pass below reads it once.
//
//   block b (grid.x = B):
//     pass 1: the first largest logit (NaN read as -inf)              block argmax
//     temperature 0 (or an infinite max): ids[b] = that index, done
//     top_k:  bisect the ordered bits t of f32 logits (32 passes):
//             the smallest t with count(logit > t) < top_k; keep logit >= t
//     weights w = exp((logit - max) / temperature), recomputed per pass (f32)
//     top_p:  bisect the bits t of nonnegative f32 weights (31 passes):
//             the smallest t with Σ(kept, w > t) < top_p · Σ(kept, w); keep w >= t
//     min_p:  keep w >= min_p (the largest weight is 1)
//     draw:   target = u · Σ(kept, w); each thread sums a contiguous chunk of ids, a block
//             scan orders the chunks, and the thread whose chunk holds the target walks it
// Counting and summing use cub::BlockReduce; sums are in f32, in a fixed order (the same
// result on every run).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cmath>

#include "llm/device.cuh"
#include "llm/sample.cuh"

namespace gk::kernels::llm {
namespace {

constexpr int kThreads = 1024;

struct SampleArgs {
  const char* logits;
  int32_t* ids;
  int64_t V, s0, s1, ids_stride;
  float inv_temperature;
  bool greedy;
  int64_t top_k;
  float top_p, min_p;
  uint64_t seed, offset;
};

// f32 bits mapped to uint32 so that unsigned order is float order (-inf lowest).
__device__ __forceinline__ uint32_t ordered(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

template <class T>
__device__ __forceinline__ float logit(const SampleArgs& a, const T* row, int64_t j) {
  const float l = to_f32(row[j * a.s1]);
  return isnan(l) ? -INFINITY : l;
}

struct ArgMax {
  float v;
  int64_t i;
};
struct ArgMaxOp {
  __device__ ArgMax operator()(const ArgMax& x, const ArgMax& y) const {
    if (y.v > x.v || (y.v == x.v && y.i < x.i)) return y;
    return x;
  }
};

struct MaxOp {
  __device__ int64_t operator()(int64_t x, int64_t y) const { return x > y ? x : y; }
};

template <class T>
__global__ void __launch_bounds__(kThreads) sample_kernel(const SampleArgs a) {
  using ReduceArg = cub::BlockReduce<ArgMax, kThreads>;
  using ReduceF = cub::BlockReduce<float, kThreads>;
  using ReduceI = cub::BlockReduce<int64_t, kThreads>;
  using Scan = cub::BlockScan<float, kThreads>;
  __shared__ union {
    typename ReduceArg::TempStorage arg;
    typename ReduceF::TempStorage f;
    typename ReduceI::TempStorage i;
    typename Scan::TempStorage scan;
  } temp;
  __shared__ float sh_f;
  __shared__ int64_t sh_i;

  const int64_t b = blockIdx.x;
  const T* row = reinterpret_cast<const T*>(a.logits) + b * a.s0;
  const int tid = threadIdx.x;

  ArgMax best{-INFINITY, a.V};
  for (int64_t j = tid; j < a.V; j += kThreads) {
    const float l = logit(a, row, j);
    if (l > best.v || (l == best.v && j < best.i)) best = {l, j};
  }
  best = ReduceArg(temp.arg).Reduce(best, ArgMaxOp());
  if (tid == 0) sh_i = best.i >= a.V ? 0 : best.i, sh_f = best.v;
  __syncthreads();
  const int64_t argmax = sh_i;
  const float max = sh_f;
  if (a.greedy || isinf(max)) {
    if (tid == 0) a.ids[b * a.ids_stride] = int32_t(argmax);
    return;
  }

  // top_k: the lowest logit bits kept (0 keeps all).
  uint32_t k_floor = 0;
  if (a.top_k > 0 && a.top_k < a.V) {
    uint32_t lo = 0, hi = 0xffffffffu;  // count(> hi) < k always; find the smallest such t
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      int64_t count = 0;
      for (int64_t j = tid; j < a.V; j += kThreads) count += ordered(logit(a, row, j)) > mid;
      count = ReduceI(temp.i).Sum(count);
      if (tid == 0) sh_i = count;
      __syncthreads();
      if (sh_i < a.top_k)
        hi = mid;
      else
        lo = mid + 1;
      __syncthreads();
    }
    k_floor = lo;
  }
  auto weight = [&](int64_t j, float& w) {
    const float l = logit(a, row, j);
    w = expf((l - max) * a.inv_temperature);
    return ordered(l) >= k_floor;
  };

  // top_p: the lowest weight bits kept.
  uint32_t p_floor = 0;
  if (a.top_p < 1.0f) {
    float mass = 0.0f;
    for (int64_t j = tid; j < a.V; j += kThreads) {
      float w;
      if (weight(j, w)) mass += w;
    }
    mass = ReduceF(temp.f).Sum(mass);
    if (tid == 0) sh_f = mass;
    __syncthreads();
    const float goal = a.top_p * sh_f;
    __syncthreads();
    uint32_t lo = 0, hi = 0x7f800000u;  // weights are in [0, 1]; above 1 nothing remains
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      const float t = __uint_as_float(mid);
      float above = 0.0f;
      for (int64_t j = tid; j < a.V; j += kThreads) {
        float w;
        if (weight(j, w) && w > t) above += w;
      }
      above = ReduceF(temp.f).Sum(above);
      if (tid == 0) sh_f = above;
      __syncthreads();
      if (sh_f < goal)
        hi = mid;
      else
        lo = mid + 1;
      __syncthreads();
    }
    p_floor = lo;
  }
  auto kept = [&](int64_t j, float& w) {
    if (!weight(j, w)) return false;
    return __float_as_uint(w) >= p_floor && w >= a.min_p;
  };

  // The draw: chunk sums in id order, scanned across the block.
  const int64_t chunk = (a.V + kThreads - 1) / kThreads;
  const int64_t begin = tid * chunk;
  const int64_t end = begin + chunk < a.V ? begin + chunk : a.V;
  float local = 0.0f;
  int64_t chunk_last = -1;
  for (int64_t j = begin; j < end; ++j) {
    float w;
    if (kept(j, w)) local += w, chunk_last = j;
  }
  float before = 0.0f, total = 0.0f;
  Scan(temp.scan).ExclusiveSum(local, before, total);
  __syncthreads();
  const int64_t last = ReduceI(temp.i).Reduce(chunk_last, MaxOp());
  if (tid == 0) sh_i = last;
  __syncthreads();
  const float target = float(gk::llm::sample_uniform(a.seed, a.offset, uint64_t(b))) * total;
  if (before <= target && target < before + local) {
    // The walk re-adds the chunk in order; should rounding leave it short of the target,
    // the target is at the chunk's end: its last kept id. Rounding may also put the target
    // in two adjacent chunks; the lower id wins.
    float cumulative = before;
    int64_t pick = chunk_last;
    for (int64_t j = begin; j < end; ++j) {
      float w;
      if (!kept(j, w)) continue;
      cumulative += w;
      pick = j;
      if (cumulative > target) break;
    }
    atomicMin(reinterpret_cast<unsigned long long*>(&sh_i), (unsigned long long)pick);
  }
  __syncthreads();
  if (tid == 0) a.ids[b * a.ids_stride] = int32_t(sh_i);
}

}  // namespace

cudaError_t launch_sample(const View& logits, const View& ids, const gk::llm::SampleParams& p,
                          cudaStream_t stream) {
  SampleArgs a{};
  a.logits = static_cast<const char*>(logits.data);
  a.ids = static_cast<int32_t*>(ids.data);
  a.V = logits.shape[1];
  a.s0 = logits.strides[0];
  a.s1 = logits.strides[1];
  a.ids_stride = ids.strides[0];
  a.greedy = p.temperature == 0.0;
  a.inv_temperature = a.greedy ? 1.0f : float(1.0 / p.temperature);
  a.top_k = p.top_k;
  a.top_p = float(p.top_p);
  a.min_p = float(p.min_p);
  a.seed = p.seed;
  a.offset = p.offset;
  const int64_t B = logits.shape[0];
  if (B == 0) return cudaSuccess;
  if (B > 2147483647 || a.V == 0) return cudaErrorInvalidValue;
  bool ok = visit_floating(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    sample_kernel<T><<<unsigned(B), kThreads, 0, stream>>>(a);
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace gk::kernels::llm
