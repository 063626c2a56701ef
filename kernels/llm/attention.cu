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
// Decode in f16 or bf16 with head_dim 64 or 128 takes attention_decode_kernel below: one
// block per kv head, serving its whole query group from one read of the keys and values.
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
#include <cstring>
#include <type_traits>

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
  int64_t splits;      // blocks per (i, h, b) along the keys
  int64_t split_keys;  // keys of each
  float* partial;      // [B, Tq, Hq, splits, Dh + 2] when splits > 1
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
  const int64_t first = split * a.split_keys;
  if (first + a.split_keys - 1 < last) last = first + a.split_keys - 1;

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

// The decode step (one query per sequence, f16/bf16, head_dim 64 or 128, 16-byte aligned
// key and value rows): one block per (kv head, sequence, split) serves every q head of the
// kv head's group, so each key and value row is read once per step, not once per q head.
//
//   warp w takes tiles of 32 keys: first + 32 w, first + 32 (w + kDecodeWarps), ...
//     lane l reads key row (tile + l) whole (Dh / 8 independent 16-byte loads) and scores it
//       against each q head g of the group (q · scale in shared memory, f32)
//     per g: the tile's max over the warp; m' = max(m, tile max); p_l = e^(s_l - m')
//     lanes own Dh / 32 adjacent value dims; for each of the tile's keys j (its row address
//       and p broadcast), acc[g] = acc[g] · e^(m - m') + Σ_j p_j v[j, dims]
//   the warps' (m, l, acc) are merged through shared memory, then as attention_kernel does.
//
// Every load of a tile is independent, so a warp has 32 keys' bytes in flight where
// attention_kernel has one key's (at batch 32 that kernel was latency-bound at a tenth of
// the card's bandwidth).
constexpr int kDecodeWarps = 4;
constexpr int kTileKeys = 32;  // one key per lane while scoring
constexpr int64_t kMaxDecodeGroup = 8;
// A split's keys: kDecodeSplitUnit (a tile per warp) per kDecodeSplitUnit (kv head,
// sequence) pairs, so that a batch of 32 Llama-3.2-1B sequences (256 pairs) runs about 1024
// blocks of 256 keys at context 1024, and one sequence blocks of 128 keys. It depends on the
// batch, not on the keys a table may hold, so a decode graph (whose table is wider than the
// sessions' lengths) splits the keys where the op-by-op step does and gives its bits.
constexpr int64_t kDecodeSplitUnit = kDecodeWarps * kTileKeys;
constexpr int64_t kMaxDecodeSplits = 256;

bool decode_serves(const View& q, const View& k, const View& v) {
  const int64_t dh = q.shape[3];
  return (q.dtype == DType::f16 || q.dtype == DType::bf16) && q.shape[1] == 1 &&
         (dh == 64 || dh == 128) && k.shape[2] > 0 && q.shape[2] % k.shape[2] == 0 &&
         q.shape[2] / k.shape[2] <= kMaxDecodeGroup && k.shape[2] <= 65535 &&
         rows_aligned(k, 8, 2) && rows_aligned(v, 8, 2);
}

// Keys per split block (past kMaxDecodeSplits splits, contexts of 32K keys and more at
// batch 1, as many more as keep the splits at that).
int64_t decode_split_keys(const View& q, const View& k, const View& block_table) {
  const int64_t pairs = q.shape[0] * k.shape[2];
  const int64_t tk = key_capacity(k, block_table);
  int64_t keys = kDecodeSplitUnit * ((pairs + kDecodeSplitUnit - 1) / kDecodeSplitUnit);
  if (tk > keys * kMaxDecodeSplits) {
    const int64_t fewest = (tk + kMaxDecodeSplits - 1) / kMaxDecodeSplits;
    keys = kDecodeSplitUnit * ((fewest + kDecodeSplitUnit - 1) / kDecodeSplitUnit);
  }
  return keys;
}

// Split blocks per (i, h, b) and the keys of each: the decode kernel's, or attention_kernel's.
struct Splits {
  int64_t count, keys;
};
Splits splits_of(const View& q, const View& k, const View& v, const View& block_table) {
  const int64_t tk = key_capacity(k, block_table);
  if (decode_serves(q, k, v)) {
    const int64_t keys = decode_split_keys(q, k, block_table);
    return {tk > keys ? (tk + keys - 1) / keys : 1, keys};
  }
  const int64_t count = split_count(q, k, block_table);
  return {count, (tk + count - 1) / count};
}

// Eight 16-bit values of a 16-byte load, as f32.
template <class T>
__device__ __forceinline__ void unpack8(const uint4& u, float* f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    T pair[2];
    memcpy(pair, &w[i], sizeof(w[i]));
    f[2 * i] = to_f32(pair[0]);
    f[2 * i + 1] = to_f32(pair[1]);
  }
}

template <class T, int Dh>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    attention_decode_kernel(const AttentionArgs a) {
  constexpr int kChunks = Dh / 8;  // 16-byte pieces of a row
  constexpr int kDims = Dh / 32;   // value dims per lane: 2 or 4 (4 or 8 bytes)
  constexpr int G = int(kMaxDecodeGroup);
  const int64_t b = blockIdx.x / a.splits, split = blockIdx.x % a.splits, hk = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int group = int(a.group);
  int64_t L = a.lengths ? int64_t(a.lengths[b * a.ls]) : a.Tk;
  L = L < 0 ? 0 : (L > a.Tk ? a.Tk : L);
  const int64_t first = split * a.split_keys;
  const int64_t end = first + a.split_keys < L ? first + a.split_keys : L;

  __shared__ __align__(16) float sq[G][Dh];
  __shared__ float sp[kDecodeWarps][G][kTileKeys];
  __shared__ float sm_m[kDecodeWarps][G], sm_l[kDecodeWarps][G];
  __shared__ float sacc[kDecodeWarps][G][Dh];
  const T* q = reinterpret_cast<const T*>(a.q) + b * a.qs[0];
  for (int x = threadIdx.x; x < group * Dh; x += blockDim.x) {
    const int64_t h = hk * group + x / Dh, d = x % Dh;
    sq[x / Dh][d] = to_f32(q[h * a.qs[2] + d * a.qs[3]]) * a.scale;
  }
  __syncthreads();

  const T* kb = reinterpret_cast<const T*>(a.k) + (a.table ? 0 : b * a.ks[0]) + hk * a.ks[2];
  const T* vb = reinterpret_cast<const T*>(a.v) + (a.table ? 0 : b * a.vs[0]) + hk * a.vs[2];
  float m[G], l[G], acc[G][kDims];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < kDims; ++e) acc[g][e] = 0.0f;
  }
  for (int64_t tile = first + warp * kTileKeys; tile < end; tile += kDecodeWarps * kTileKeys) {
    const int64_t j = tile + lane;
    bool valid = j < end;
    int64_t krow = 0, vrow = 0;  // this lane's key and value rows, from kb and vb
    if (valid) {
      int64_t block = 0, row = j;
      if (a.table) {
        block = a.table[b * a.ts[0] + (j / a.block_size) * a.ts[1]];
        valid = block >= 0 && block < a.num_blocks;
        row = j % a.block_size;
      }
      krow = block * a.ks[0] + row * a.ks[1];
      vrow = block * a.vs[0] + row * a.vs[1];
    }
    float s[G];
#pragma unroll
    for (int g = 0; g < G; ++g) s[g] = 0.0f;
    if (valid) {
      uint4 raw[kChunks];
      const uint4* kr = reinterpret_cast<const uint4*>(kb + krow);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) raw[c] = kr[c];
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        float kf[8];
        unpack8<T>(raw[c], kf);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          if (g < group) {
            const float4 q0 = *reinterpret_cast<const float4*>(&sq[g][8 * c]);
            const float4 q1 = *reinterpret_cast<const float4*>(&sq[g][8 * c + 4]);
            s[g] += q0.x * kf[0] + q0.y * kf[1] + q0.z * kf[2] + q0.w * kf[3] + q1.x * kf[4] +
                    q1.y * kf[5] + q1.z * kf[6] + q1.w * kf[7];
          }
        }
      }
    }
    __syncwarp();  // the previous tile's reads of sp are done
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (g >= group) continue;
      float tile_max = valid ? s[g] : -INFINITY;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
      }
      const float m_new = fmaxf(m[g], tile_max);
      // m_new = -inf: no key yet (warp-uniform), nothing to rescale or add.
      const float correction = m_new == -INFINITY ? 1.0f : expf(m[g] - m_new);
      const float p = valid ? expf(s[g] - m_new) : 0.0f;
      l[g] = l[g] * correction + p;
#pragma unroll
      for (int e = 0; e < kDims; ++e) acc[g][e] *= correction;
      m[g] = m_new;
      sp[warp][g][lane] = p;
    }
    __syncwarp();
    // The tile's value rows, 8 keys' loads in flight at a time.
    const int keys = end - tile < kTileKeys ? int(end - tile) : kTileKeys;
    for (int j0 = 0; j0 < keys; j0 += 8) {
      float vf[8][kDims];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int64_t row = __shfl_sync(0xffffffffu, vrow, j0 + u);
        const bool ok = __shfl_sync(0xffffffffu, int(valid), j0 + u) != 0;
        if constexpr (kDims == 4) {
          uint2 raw = ok ? *reinterpret_cast<const uint2*>(vb + row + kDims * lane) : uint2{0, 0};
          T pair[4];
          memcpy(pair, &raw, sizeof(raw));
#pragma unroll
          for (int e = 0; e < 4; ++e) vf[u][e] = to_f32(pair[e]);
        } else {
          uint32_t raw = ok ? *reinterpret_cast<const uint32_t*>(vb + row + kDims * lane) : 0u;
          T pair[2];
          memcpy(pair, &raw, sizeof(raw));
          vf[u][0] = to_f32(pair[0]);
          vf[u][1] = to_f32(pair[1]);
        }
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        if (g >= group) continue;
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const float p = sp[warp][g][j0 + u];
#pragma unroll
          for (int e = 0; e < kDims; ++e) acc[g][e] += p * vf[u][e];
        }
      }
    }
  }

  // (A key past `keys` in the last group of 8 is not valid: its p is 0 and its value was
  // not read.) The warps' states, merged.
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (g >= group) continue;
    float sum = l[g];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = sum;
    }
#pragma unroll
    for (int e = 0; e < kDims; ++e) sacc[warp][g][kDims * lane + e] = acc[g][e];
  }
  __syncthreads();
  for (int x = threadIdx.x; x < group * Dh; x += blockDim.x) {
    const int g = x / Dh, d = x % Dh;
    const int64_t h = hk * group + g;
    float M = -INFINITY;
    for (int w = 0; w < kDecodeWarps; ++w) M = fmaxf(M, sm_m[w][g]);
    float total = 0.0f, sum = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float weight = sm_m[w][g] == -INFINITY ? 0.0f : expf(sm_m[w][g] - M);
      total += sm_l[w][g] * weight;
      sum += sacc[w][g][d] * weight;
    }
    if (a.splits > 1) {
      float* p = a.partial + ((b * a.Hq + h) * a.splits + split) * (a.Dh + 2);
      if (d == 0) {
        p[0] = M;
        p[1] = total;
      }
      p[2 + d] = sum;
    } else {
      T* out = reinterpret_cast<T*>(a.out) + b * a.os[0] + h * a.os[2];
      out[d * a.os[3]] = from_f32<T>(total > 0.0f ? sum / total : 0.0f);
    }
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

size_t attention_workspace_bytes(const View& q, const View& k, const View& v,
                                 const View& block_table) {
  if (tensor_cores_serve(q, k, block_table)) return 0;  // it needs no workspace
  const int64_t splits = splits_of(q, k, v, block_table).count;
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
  const bool decode = decode_serves(q, k, v);
  const Splits splits = splits_of(q, k, v, block_table);
  a.splits = splits.count;
  a.split_keys = splits.keys;
  a.partial = static_cast<float*>(workspace);
  if (a.splits > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  const dim3 merge_grid(unsigned(a.Tq), unsigned(a.Hq), unsigned(q.shape[0]));
  if (decode) {
    const dim3 grid(unsigned(q.shape[0] * a.splits), unsigned(k.shape[2]));
    auto launch = [&](auto tag, auto head_dim) {
      using T = decltype(tag);
      attention_decode_kernel<T, decltype(head_dim)::value>
          <<<grid, kDecodeWarps * 32, 0, stream>>>(a);
      if (a.splits > 1) attention_merge_kernel<T><<<merge_grid, 128, 0, stream>>>(a);
    };
    const bool f16 = q.dtype == DType::f16;
    if (a.Dh == 64) {
      f16 ? launch(__half{}, std::integral_constant<int, 64>{})
          : launch(__nv_bfloat16{}, std::integral_constant<int, 64>{});
    } else {
      f16 ? launch(__half{}, std::integral_constant<int, 128>{})
          : launch(__nv_bfloat16{}, std::integral_constant<int, 128>{});
    }
    return cudaGetLastError();
  }
  const dim3 grid(unsigned(a.Tq), unsigned(a.Hq), unsigned(q.shape[0] * a.splits));
  bool ok = visit_floating(q.dtype, [&](auto tag) {
    using T = decltype(tag);
    attention_kernel<T><<<grid, kWarps * 32, 0, stream>>>(a);
    if (a.splits > 1) attention_merge_kernel<T><<<merge_grid, 128, 0, stream>>>(a);
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace gk::kernels::llm
