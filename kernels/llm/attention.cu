// attention: one block per (query token, q head, sequence); its warps split the keys and
// each keeps an online softmax, merged at the end through shared memory.
//
//   block (i, h, b):                       grid (Tq, Hq, B); kv head = h / (Hq / Hkv)
//     lane l of each warp holds q[d] · scale for d = l, l + 32, ... (< Dh), in registers
//     warp w: for j = w; j <= last; j += kWarps            (last = L - Tq + i, or L - 1)
//       s = Σ_d q[d] k[j, d]                               lanes, then a butterfly shuffle
//       m' = max(m, s); acc = acc · e^(m - m') + e^(s - m') v[j, :]; l likewise   (f32)
//     shared: every warp's (m, l, acc[Dh]); the block rescales them to the common max
//     out[b, i, h, :] = Σ_w acc_w e^(m_w - M) / Σ_w l_w e^(m_w - M)   (0 when no key)
//
// Few blocks and many keys (decode: Tq = 1, so B · Hq blocks) leave most SMs idle and each
// warp walking a long chain of dependent loads, so the keys are split over `splits` blocks
// per (i, h, b) (grid.z = B · splits), each covering Tk / splits keys; every block writes its
// (M, Σ l, Σ acc) to the workspace and a second kernel merges the splits the same way the
// warps are merged above.
//
// With a block table, k and v are block pools and key j of sequence b is row j % block_size
// of block block_table[b, j / block_size]: only the address of a key row changes, so a
// batch of sequences whose caches are scattered over one pool is one launch. A block id
// outside the pool reads as no key there.
//
// Prefill in f16 or bf16 with head_dim 64 or 128 goes to the tensor-core kernel instead
// (attention_tc.cu): there a block's 128 queries share every K and V tile it loads; it
// reads block tables the same way.
#include <cmath>

#include "llm/attention.cuh"
#include "llm/attention_operands.cuh"
#include "llm/attention_tc.cuh"
#include "llm/device.cuh"

namespace gk::kernels::llm {
namespace {

constexpr int kWarps = 8;  // 256 threads: 8 independent key streams per (token, head)
constexpr int kPerLane = kMaxAttentionHeadDim / 32;
// Splitting pays while the unsplit grid is smaller than this (about 8 blocks per SM on
// H100): the keys are split until the grid reaches it, so each warp's chain of dependent
// loads is as short as the machine allows...
constexpr int64_t kSplitBelowBlocks = 1024;
// ...down to kMinSplitKeys keys per split block (8 per warp), enough to amortise the block's
// setup and its share of the merge. A decode graph sizes the grid for its block table's
// width, not the session's length, so splits past the length exit at once.
constexpr int64_t kMinSplitKeys = 64;
constexpr int64_t kMaxSplits = 64;

struct AttentionArgs : AttentionOperands {
  float scale;
  bool causal;
  int64_t splits;  // blocks per (i, h, b) along the keys
  float* partial;  // [B, Tq, Hq, splits, Dh + 2] when splits > 1
};

// The keys a sequence may hold: its cache's positions, or its row of the block table.
int64_t key_capacity(const View& k, const View& block_table) {
  return block_table.data ? k.shape[1] * block_table.shape[1] : k.shape[1];
}

int64_t split_count(const View& q, const View& k, const View& block_table) {
  const int64_t blocks = q.shape[0] * q.shape[1] * q.shape[2];
  const int64_t tk = key_capacity(k, block_table);
  if (blocks >= kSplitBelowBlocks || tk <= kMinSplitKeys) return 1;
  const int64_t by_grid = (kSplitBelowBlocks + blocks - 1) / blocks;
  const int64_t by_keys = (tk + kMinSplitKeys - 1) / kMinSplitKeys;
  const int64_t splits = by_grid < by_keys ? by_grid : by_keys;
  return splits < kMaxSplits ? splits : kMaxSplits;
}

template <class T>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(const AttentionArgs a) {
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z / a.splits;
  const int64_t split = blockIdx.z % a.splits;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t hk = h / a.group;
  int64_t L = a.lengths ? int64_t(a.lengths[b * a.ls]) : a.Tk;
  L = L < 0 ? 0 : (L > a.Tk ? a.Tk : L);
  int64_t last = a.causal ? (L - a.Tq + i < L - 1 ? L - a.Tq + i : L - 1) : L - 1;
  // This block's keys: [first, last].
  const int64_t split_len = (a.Tk + a.splits - 1) / a.splits;
  const int64_t first = split * split_len;
  if (first + split_len - 1 < last) last = first + split_len - 1;

  const T* q = reinterpret_cast<const T*>(a.q) + b * a.qs[0] + i * a.qs[1] + h * a.qs[2];
  // Without a table, sequence b's keys; with one, the pool's (block and row per key).
  const T* kb = reinterpret_cast<const T*>(a.k) + (a.table ? 0 : b * a.ks[0]) + hk * a.ks[2];
  const T* vb = reinterpret_cast<const T*>(a.v) + (a.table ? 0 : b * a.vs[0]) + hk * a.vs[2];
  float qr[kPerLane], acc[kPerLane];
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t d = lane + 32 * r;
    qr[r] = d < a.Dh ? to_f32(q[d * a.qs[3]]) * a.scale : 0.0f;
    acc[r] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  // With a table, the block id of the warp's next key is loaded one key ahead, so the table
  // read is not one more dependent load in each key's chain.
  auto block_of = [&](int64_t j) -> int64_t {
    return j <= last ? int64_t(a.table[b * a.ts[0] + (j / a.block_size) * a.ts[1]]) : 0;
  };
  int64_t next_block = a.table ? block_of(first + warp) : 0;
  for (int64_t j = first + warp; j <= last; j += kWarps) {
    // The whole warp reads key j: a skipped key is skipped by all of its lanes.
    int64_t block = 0, row = j;
    if (a.table) {
      block = next_block;
      next_block = block_of(j + kWarps);
      if (block < 0 || block >= a.num_blocks) continue;
      row = j % a.block_size;
    }
    const T* kr = kb + block * a.ks[0] + row * a.ks[1];
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int64_t d = lane + 32 * r;
      if (d < a.Dh) s += qr[r] * to_f32(kr[d * a.ks[3]]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
    const T* vr = vb + block * a.vs[0] + row * a.vs[1];
#pragma unroll
    for (int r = 0; r < kPerLane; ++r) {
      const int64_t d = lane + 32 * r;
      if (d < a.Dh) acc[r] = acc[r] * correction + p * to_f32(vr[d * a.vs[3]]);
    }
    m = m_new;
  }

  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ float sm_acc[kWarps][kMaxAttentionHeadDim];
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int r = 0; r < kPerLane; ++r) {
    const int64_t d = lane + 32 * r;
    if (d < a.Dh) sm_acc[warp][d] = acc[r];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm_m[w]);
  float total = 0.0f;
  float weight[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = sm_m[w] == -INFINITY ? 0.0f : expf(sm_m[w] - M);
    total += sm_l[w] * weight[w];
  }
  if (a.splits > 1) {
    float* p = a.partial + (((b * a.Tq + i) * a.Hq + h) * a.splits + split) * (a.Dh + 2);
    if (threadIdx.x == 0) {
      p[0] = M;
      p[1] = total;
    }
    for (int64_t d = threadIdx.x; d < a.Dh; d += blockDim.x) {
      float sum = 0.0f;
      for (int w = 0; w < kWarps; ++w) sum += sm_acc[w][d] * weight[w];
      p[2 + d] = sum;
    }
    return;
  }
  T* out = reinterpret_cast<T*>(a.out) + b * a.os[0] + i * a.os[1] + h * a.os[2];
  for (int64_t d = threadIdx.x; d < a.Dh; d += blockDim.x) {
    float sum = 0.0f;
    for (int w = 0; w < kWarps; ++w) sum += sm_acc[w][d] * weight[w];
    out[d * a.os[3]] = from_f32<T>(total > 0.0f ? sum / total : 0.0f);
  }
}

// Merges the splits of one (i, h, b): rescales each to the common max, as the warps are.
template <class T>
__global__ void attention_merge_kernel(const AttentionArgs a) {
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const float* p = a.partial + ((b * a.Tq + i) * a.Hq + h) * a.splits * (a.Dh + 2);
  float M = -INFINITY;
  for (int64_t s = 0; s < a.splits; ++s) M = fmaxf(M, p[s * (a.Dh + 2)]);
  float total = 0.0f;
  for (int64_t s = 0; s < a.splits; ++s) {
    const float m = p[s * (a.Dh + 2)];
    if (m != -INFINITY) total += p[s * (a.Dh + 2) + 1] * expf(m - M);
  }
  T* out = reinterpret_cast<T*>(a.out) + b * a.os[0] + i * a.os[1] + h * a.os[2];
  for (int64_t d = threadIdx.x; d < a.Dh; d += blockDim.x) {
    float sum = 0.0f;
    for (int64_t s = 0; s < a.splits; ++s) {
      const float m = p[s * (a.Dh + 2)];
      if (m != -INFINITY) sum += p[s * (a.Dh + 2) + 2 + d] * expf(m - M);
    }
    out[d * a.os[3]] = from_f32<T>(total > 0.0f ? sum / total : 0.0f);
  }
}

// Whether the tensor-core kernel serves the call (it counts paged key positions in 32 bits).
bool tensor_cores_serve(const View& q, const View& k, const View& block_table) {
  return attention_tc_refusal(q).empty() && key_capacity(k, block_table) < (int64_t(1) << 31);
}

}  // namespace

std::string attention_refusal(const View& q) {
  if (q.shape[3] > kMaxAttentionHeadDim) {
    return "head_dim " + std::to_string(q.shape[3]) + " exceeds the kernel's " +
           std::to_string(kMaxAttentionHeadDim) + " (held in registers, 8 per lane)";
  }
  if (q.shape[1] > 2147483647 || q.shape[2] > 65535 || q.shape[0] > 65535) {
    return "q " + std::to_string(q.shape[0]) + "x" + std::to_string(q.shape[1]) + "x" +
           std::to_string(q.shape[2]) + " exceeds the grid (Tq < 2^31, Hq and B <= 65535)";
  }
  return "";
}

size_t attention_workspace_bytes(const View& q, const View& k, const View& block_table) {
  if (tensor_cores_serve(q, k, block_table)) return 0;  // it needs no workspace
  const int64_t splits = split_count(q, k, block_table);
  if (splits <= 1) return 0;
  return size_t(q.shape[0] * q.shape[1] * q.shape[2] * splits * (q.shape[3] + 2)) * sizeof(float);
}

cudaError_t launch_attention(const View& q, const View& k, const View& v, const View& kv_lengths,
                             const View& block_table, const View& out, float scale, bool causal,
                             void* workspace, cudaStream_t stream) {
  if (!attention_refusal(q).empty()) return cudaErrorInvalidValue;
  AttentionArgs a{};
  static_cast<AttentionOperands&>(a) = attention_operands(q, k, v, kv_lengths, block_table, out);
  a.scale = scale;
  a.causal = causal;
  if (q.shape[0] == 0 || a.Tq == 0 || a.Hq == 0 || a.Dh == 0) return cudaSuccess;
  if (tensor_cores_serve(q, k, block_table)) {
    return launch_attention_tc(q, k, v, kv_lengths, block_table, out, scale, causal, stream);
  }
  a.splits = split_count(q, k, block_table);
  a.partial = static_cast<float*>(workspace);
  if (a.splits > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(a.Tq), unsigned(a.Hq), unsigned(q.shape[0] * a.splits));
  const dim3 merge_grid(unsigned(a.Tq), unsigned(a.Hq), unsigned(q.shape[0]));
  bool ok = visit_floating(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    attention_kernel<T><<<grid, kWarps * 32, 0, stream>>>(a);
    if (a.splits > 1) attention_merge_kernel<T><<<merge_grid, 128, 0, stream>>>(a);
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace gk::kernels::llm
