// attention_sm90: FlashAttention-style prefill on Hopper's warpgroup MMA (wgmma, sm_90a).
// One block of 2 warpgroups per (tile of 128 queries, q head, sequence); warpgroup w owns
// query rows 64w .. 64w + 63 and keeps S, P and O in registers.
//
//   block (qt, h, b):              grid (ceil(Tq / 128), Hq, B); kv head = h / (Hq / Hkv)
//     Q tile [128, Dh], K and V tile 0 -> shared (cp.async, 128-byte swizzle)
//     for key tile j = 0, 1, ... while 128 j < kv_end    (kv_end: past the tile's last query)
//       K, V tile j + 1 -> the stage of tile j - 2 (cp.async, lands behind this tile's math)
//       S [64, 128] = Q_w K_j^T          (wgmma, both operands from shared memory; waiting
//                                          for it also waits for tile j - 1's P V)
//       per row: mask, m' = max(m, max s), p = 2^(s - m'), l = l 2^(m - m') + sum p
//       O_w = O_w 2^(m - m') + P V_j     (wgmma, P from registers, V N-major in shared;
//                                          runs on into the next tile)
//     out[b, q0 + r, h, :] = O[r, :] / l_r                                  (0 when l_r = 0)
//
// wgmma's f32 accumulator gives each lane the same (row, column) pairs as mma.sync's, so
// the online softmax and the repacking of S into P's A fragments are those of attention_tc.
// Shared tiles are [rows, Dh] as Dh / 64 column blocks of [rows, 128 bytes] in the 128-byte
// swizzle the descriptors name: 16-byte chunk j of row r sits at chunk j ^ (r % 8).
//
// Shared memory: Q [128, Dh] and three stages of K and V [128, Dh], 2-byte elements: 112 KB
// for Dh 64, 224 KB for Dh 128, plus 1 KB to align the swizzle.
//
// On the H200 this reaches ~265 TFLOP/s (causal, 4096 tokens, Dh 128), about half of torch
// SDPA's Hopper backend. Both warpgroups meet at one barrier per tile, so their softmaxes
// run at the same time and leave the tensor cores idle; FlashAttention-3's producer warp
// (TMA into mbarrier-guarded stages) with the two warpgroups' GEMMs and softmaxes
// alternating is what would close that. (Issuing tile j + 1's scores before tile j's
// softmax within one warpgroup measured slower here: ptxas serialises the wgmmas around it.)
#include <cmath>
#include <cstdint>

#include "llm/attention_operands.cuh"
#include "llm/attention_sm90.cuh"
#include "llm/device.cuh"
#include "llm/tensor_core.cuh"

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GK_ATTENTION_SM90A 1
#endif

namespace gk::kernels::llm {
namespace {

constexpr int kGroups = 2;  // warpgroups per block, 64 query rows each
constexpr int kThreads = 128 * kGroups;
constexpr int kQueryTile = 64 * kGroups;
constexpr int kKeys = 128;  // keys per tile: wgmma's N for S, its K (8 steps) for P V
// K and V stages: a tile's P V runs on while the next tile's scores start, so the stage
// being refilled is the one two tiles back.
constexpr int kStages = 3;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
constexpr int shared_bytes() {
  return kQueryTile * D * 2 + kStages * 2 * kKeys * D * 2 + 1024;
}

struct Sm90Args : AttentionOperands {
  float scale_log2;  // scale * log2(e): the softmax runs in base 2
  bool causal;
  bool out_pairs;  // two neighbouring output elements are one 4-byte word
};

template <class T, int N>
__device__ void wgmma_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b, int scale_d);
template <class T, int N>
__device__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b, int scale_d);

#ifdef GK_ATTENTION_SM90A
#include "llm/attention_sm90_wgmma.inc"

// A shared-memory matrix descriptor in the 128-byte swizzle. K-major operands: lbo unused
// (16), sbo 1024 (8 rows of 128 bytes); N-major: lbo = bytes between 64-wide column blocks.
__device__ __forceinline__ uint64_t descriptor(uint32_t address, uint32_t lbo, uint32_t sbo) {
  return ((address & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// The compiler does not know that wgmma.wait_group is what makes the accumulators final:
// tie every register to a volatile statement after the wait.
template <int N>
__device__ __forceinline__ void hold_registers(float (&d)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[n][e])::"memory");
  }
}

// Rows first .. first + kRows of a [rows, D] operand (row stride in elements, 16-byte rows)
// into a swizzled tile; rows from `end` on are zero, so that keys past L cannot bring Inf or
// NaN into P V.
template <class T, int D, int kRows>
__device__ __forceinline__ void load_swizzled(unsigned char* tile, const T* base,
                                              int64_t row_stride, int64_t first, int64_t end) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
#pragma unroll
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool ok = first + r < end;
    const uint32_t offset = (c >> 3) * (kRows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
    copy_16(shared_address(tile + offset), ok ? base + (first + r) * row_stride + c * 8 : base,
            ok);
  }
}
#endif

template <class T, int D>
__global__ void __launch_bounds__(kThreads) attention_sm90_kernel(const Sm90Args a) {
#ifdef GK_ATTENTION_SM90A
  constexpr int kQBytes = kQueryTile * D * 2;
  constexpr int kTileBytes = kKeys * D * 2;  // one K or V tile
  extern __shared__ unsigned char smem_raw[];
  unsigned char* q_tile = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  unsigned char* stages = q_tile + kQBytes;  // stage s: K at 2 s kTileBytes, V after it

  // Causal tiles near the end carry the most keys: they start first.
  const int64_t qt = a.causal ? int64_t(gridDim.x) - 1 - blockIdx.x : blockIdx.x;
  const int64_t q0 = qt * kQueryTile, h = blockIdx.y, b = blockIdx.z;
  const int64_t hk = h / a.group;
  int64_t L = a.lengths ? int64_t(a.lengths[b * a.ls]) : a.Tk;
  L = L < 0 ? 0 : (L > a.Tk ? a.Tk : L);
  const int64_t q_last = (q0 + kQueryTile < a.Tq ? q0 + kQueryTile : a.Tq) - 1;
  const int64_t kv_end = a.causal ? L - a.Tq + q_last + 1 : L;
  const int64_t tiles = kv_end > 0 ? (kv_end + kKeys - 1) / kKeys : 0;

  const T* qb = reinterpret_cast<const T*>(a.q) + b * a.qs[0] + h * a.qs[2];
  const T* kb = reinterpret_cast<const T*>(a.k) + b * a.ks[0] + hk * a.ks[2];
  const T* vb = reinterpret_cast<const T*>(a.v) + b * a.vs[0] + hk * a.vs[2];
  auto load_keys = [&](int64_t tile, int stage) {
    unsigned char* k_tile = stages + stage * 2 * kTileBytes;
    load_swizzled<T, D, kKeys>(k_tile, kb, a.ks[1], tile * kKeys, L);
    load_swizzled<T, D, kKeys>(k_tile + kTileBytes, vb, a.vs[1], tile * kKeys, L);
  };
  load_swizzled<T, D, kQueryTile>(q_tile, qb, a.qs[1], q0, a.Tq);
  if (tiles > 0) load_keys(0, 0);
  copy_commit();

  // Lane 4g + t of warp w in warpgroup wg holds rows g and g + 8 of the warp's 16.
  const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = q0 + wg * 64 + warp * 16 + g;
  int64_t limit[2];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t query = row0 + 8 * r;
    limit[r] = query >= a.Tq ? -1 : (a.causal ? L - a.Tq + query : L - 1);
  }
  // Every row of the block: a tile below all of them needs no mask.
  const int64_t block_limit = a.causal ? L - a.Tq + q0 : L - 1;
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  // Descriptor start addresses: the warpgroup's 64 rows of Q in each column block.
  const uint32_t q_base = shared_address(q_tile) + wg * 64 * 128;
  for (int64_t j = 0; j < tiles; ++j) {
    const int stage = int(j % kStages);
    copy_wait<0>();  // tile j
    // cp.async wrote through the generic proxy; wgmma reads through the async one.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    if (j + 1 < tiles) {
      // Into the stage of tile j - 2: both warpgroups waited for its P V before the barrier.
      load_keys(j + 1, int((j + 1) % kStages));
      copy_commit();
    }
    const uint32_t k_base = shared_address(stages + stage * 2 * kTileBytes);
    const uint32_t v_base = k_base + kTileBytes;

    float s[kKeys / 8][4];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t column = (kk >> 2), step = (kk & 3) * 32;
      wgmma_ss<T, kKeys>(s, descriptor(q_base + column * (kQueryTile * 128) + step, 16, 1024),
                         descriptor(k_base + column * (kKeys * 128) + step, 16, 1024), kk != 0);
    }
    wgmma_commit();
    wgmma_wait_all();  // also finishes the previous tile's P V
    hold_registers(s);
    hold_registers(o);

    const int64_t t0 = j * kKeys;
    float correction[2];
    auto past_limit = [&](int column, int r) { return t0 + 2 * t + column > limit[r]; };
    online_softmax(s, m, l, correction, t0 + kKeys - 1 > block_limit, past_limit, a.scale_log2);
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= correction[0];
      o[n][1] *= correction[0];
      o[n][2] *= correction[1];
      o[n][3] *= correction[1];
    }

    // O += P V over 16-key steps: S tiles 2 kk and 2 kk + 1 form P's A fragment (all packed
    // before the fence, so that no register the wgmmas read changes between them); V's 16
    // rows of a step are 2048 bytes on.
    uint32_t p[kKeys / 16][4];
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      p[kk][0] = pack<T>(s[2 * kk][0], s[2 * kk][1]);
      p[kk][1] = pack<T>(s[2 * kk][2], s[2 * kk][3]);
      p[kk][2] = pack<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      p[kk][3] = pack<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      wgmma_rs<T, D>(o, p[kk], descriptor(v_base + kk * 2048, kKeys * 128, 1024), 1);
    }
    wgmma_commit();  // waited for with the next tile's scores
  }
  wgmma_wait_all();
  hold_registers(o);

  T* out = reinterpret_cast<T*>(a.out) + b * a.os[0] + h * a.os[2];
  store_rows<T>(o, l, row0, t, a.Tq, out, a.os[1], a.os[3], a.out_pairs);
#endif
}

template <class T, int D>
cudaError_t launch_tiles(const Sm90Args& a, int64_t batch, int64_t heads, cudaStream_t stream) {
  const cudaError_t e = allow_shared_bytes<attention_sm90_kernel<T, D>>(shared_bytes<D>());
  if (e != cudaSuccess) return e;
  const dim3 grid(unsigned((a.Tq + kQueryTile - 1) / kQueryTile), unsigned(heads), unsigned(batch));
  attention_sm90_kernel<T, D><<<grid, kThreads, shared_bytes<D>(), stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

std::string attention_sm90_refusal(const View& q, const View& k, const View& v) {
  if (q.dtype != DType::f16 && q.dtype != DType::bf16) return "dtype is not f16 or bf16";
  if (q.shape[3] != 64 && q.shape[3] != 128) {
    return "head_dim " + std::to_string(q.shape[3]) + " is not 64 or 128";
  }
  if (q.shape[1] < 64) {
    return "Tq " + std::to_string(q.shape[1]) + " is under one 64-row warpgroup tile";
  }
  // cp.async copies 16 bytes: contiguous elements, every row on a 16-byte boundary.
  for (const View* t : {&q, &k, &v}) {
    if (!rows_aligned(*t, 8, 2)) {
      return std::string(t == &q ? "q" : (t == &k ? "k" : "v")) +
             " rows are not contiguous 16-byte aligned runs (cp.async copies 16 bytes)";
    }
  }
  if (q.shape[1] / kQueryTile >= 2147483647 || q.shape[2] > 65535 || q.shape[0] > 65535) {
    return "q " + std::to_string(q.shape[0]) + "x" + std::to_string(q.shape[1]) + "x" +
           std::to_string(q.shape[2]) + " exceeds the grid (Tq / 128 < 2^31, Hq and B <= 65535)";
  }
  return "";
}

cudaError_t launch_attention_sm90(const View& q, const View& k, const View& v,
                                  const View& kv_lengths, const View& out, float scale,
                                  bool causal, cudaStream_t stream) {
  if (!attention_sm90_refusal(q, k, v).empty()) return cudaErrorInvalidValue;
  Sm90Args a{};
  static_cast<AttentionOperands&>(a) = attention_operands(q, k, v, kv_lengths, View{}, out);
  a.scale_log2 = scale * kLog2e;
  a.causal = causal;
  a.out_pairs = rows_aligned(out, 2, 2);
  const int64_t batch = q.shape[0], heads = q.shape[2];
  if (batch == 0 || heads == 0) return cudaSuccess;
  const bool wide = q.shape[3] == 128;
  if (q.dtype == DType::f16) {
    return wide ? launch_tiles<__half, 128>(a, batch, heads, stream)
                : launch_tiles<__half, 64>(a, batch, heads, stream);
  }
  return wide ? launch_tiles<__nv_bfloat16, 128>(a, batch, heads, stream)
              : launch_tiles<__nv_bfloat16, 64>(a, batch, heads, stream);
}

}  // namespace gk::kernels::llm
