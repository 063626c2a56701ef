// attention_tc: FlashAttention-2-style prefill on tensor cores (mma.sync m16n8k16, SM 80+).
// One block of 4 warps per (tile of 128 queries, q head, sequence); warp w owns query rows
// 32w .. 32w + 31 of the tile (two 16-row mma blocks) and keeps S, P and O in registers.
//
//   block (qt, h, b):              grid (ceil(Tq / 128), Hq, B); kv head = h / (Hq / Hkv)
//     Q tile [128, Dh], K tile 0 -> shared (cp.async)
//     for key tile j = 0, 1, ... while 64 j < kv_end   (kv_end: past the tile's last query)
//       V_j -> shared (cp.async, lands while S is computed)
//       S [32, 64] = Q_w K_j^T                              (mma; f32 in registers)
//       K_j+1 -> shared (cp.async, lands while P V_j is computed)
//       per row: mask, m' = max(m, max s), p = 2^(s - m'), l = l 2^(m - m') + sum p
//       O_w = O_w 2^(m - m') + P V_j          (P: S's accumulators repacked as A fragments)
//     out[b, q0 + r, h, :] = O[r, :] / l_r                                  (0 when l_r = 0)
//
// The accumulator of S [16, 8] (rows g and g + 8, columns 2t and 2t + 1 of lane 4g + t) is
// laid out like half of an A fragment [16, 16], so P never leaves the registers. Rows of the
// shared tiles are padded by 16 bytes: the 8 rows an ldmatrix reads then start on 8
// different 16-byte bank groups.
//
// Shared memory: Q [128, Dh + 8], K and V [64, Dh + 8] elements: 36864 bytes for Dh 64,
// 69632 for Dh 128 (under the 99 KB a block may opt into on SM 86 and 89).
//
// On the H200 this reaches ~200 TFLOP/s (causal, 4096 tokens, Dh 128), about 0.38x of torch
// SDPA's Hopper backend: mma.sync issues from registers with the warps of two blocks per SM
// to hide its latency; the SM 90 path past this is wgmma with TMA-fed shared memory.
#include <cmath>
#include <cstdint>

#include "llm/attention_operands.cuh"
#include "llm/attention_tc.cuh"
#include "llm/device.cuh"
#include "llm/tensor_core.cuh"

namespace gk::kernels::llm {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kKeyTile = 64;
// 16-row blocks per warp: each K and V fragment read from shared memory serves kRowBlocks
// mma's (one block per warp measured 5-15% slower on the H200).
constexpr int kRowBlocks = 2;
constexpr float kLog2e = 1.4426950408889634f;

// Q [16 kM kWarps, Dh], K and V [64, Dh] in shared memory, rows padded to D + 8 elements.
template <int D, int kM>
struct TileLayout {
  static constexpr int ld = D + 8;  // elements per shared row
  static constexpr size_t q_offset = 0;
  static constexpr size_t k_offset = q_offset + size_t(16 * kM * kWarps) * ld * 2;
  static constexpr size_t v_offset = k_offset + size_t(kKeyTile) * ld * 2;
  static constexpr size_t bytes = v_offset + size_t(kKeyTile) * ld * 2;
  static_assert((ld * 2) % 16 == 0, "cp.async and ldmatrix need 16-byte aligned rows");
};

struct TcArgs : AttentionOperands {
  float scale_log2;  // scale * log2(e): the softmax runs in base 2
  bool causal;
  bool q_vector, k_vector, v_vector;  // rows start on 16 bytes and elements are contiguous
  bool out_pairs;                     // two neighbouring output elements are one 4-byte word
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// d [16, 8] += a [16, 16] b [16, 8], f32 accumulators.
template <class T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1);
template <>
__device__ __forceinline__ void mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                   uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Where row t of a [rows, D] operand of one (sequence, head) lives: base + t row_stride or,
// in a paged cache, row t % block_size of block table[t / block_size]. A block id outside
// [0, num_blocks) has no rows (nullptr): they load as zeros and the softmax leaves them out.
template <class T, bool kPaged>
struct Rows {
  const T* base;
  int64_t row_stride, col_stride;
  const int32_t* table = nullptr;  // null: rows are evenly spaced from base
  int64_t table_stride = 0, block_stride = 0;
  uint32_t block_size = 1, num_blocks = 0;

  __device__ __forceinline__ const T* row(int64_t t) const {
    if (!kPaged) return base + t * row_stride;
    const uint32_t position = uint32_t(t);  // paged positions are < 2^31 (launch_attention_tc)
    const int32_t block = table[int64_t(position / block_size) * table_stride];
    if (block < 0 || uint32_t(block) >= num_blocks) return nullptr;
    return base + block * block_stride + int64_t(position % block_size) * row_stride;
  }

  // Whether a block of keys first .. end - 1 lies outside the pool (their rows then hold no
  // key: the tile is masked key by key).
  __device__ __forceinline__ bool has_missing_block(int64_t first, int64_t end) const {
    if (!kPaged) return false;
    for (uint32_t block = uint32_t(first) / block_size; int64_t(block) * block_size < end;
         ++block) {
      const int32_t id = table[int64_t(block) * table_stride];
      if (id < 0 || uint32_t(id) >= num_blocks) return true;
    }
    return false;
  }
};

// Rows first .. first + kRows of an operand into shared memory (row pitch D + 8); rows from
// `end` on are zero, so that keys past L cannot bring Inf or NaN into P V. Vector tiles go
// through cp.async (the caller commits and waits); others are stored directly.
template <class T, int D, int kRows, bool kPaged>
__device__ __forceinline__ void load_tile(T* dst, const Rows<T, kPaged>& src, int64_t first, int64_t end,
                                          bool vectorized) {
  constexpr int ld = D + 8;
  if (vectorized) {
    constexpr int kChunks = D / 8;  // 8 elements: 16 bytes
#pragma unroll
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
      const int r = idx / kChunks, c = (idx % kChunks) * 8;
      const T* row = first + r < end ? src.row(first + r) : nullptr;
      copy_16(shared_address(dst + r * ld + c), row ? row + c : src.base, row != nullptr);
    }
  } else {
    for (int idx = threadIdx.x; idx < kRows * D; idx += kThreads) {
      const int r = idx / D, c = idx % D;
      const T* row = first + r < end ? src.row(first + r) : nullptr;
      dst[r * ld + c] = row ? row[c * src.col_stride] : from_f32<T>(0.0f);
    }
  }
}

template <class T, int D, int kM, bool kPaged>
__global__ void __launch_bounds__(kThreads) attention_tc_kernel(const TcArgs a) {
  using Layout = TileLayout<D, kM>;
  constexpr int ld = Layout::ld;
  constexpr int kDFrags = D / 16;        // k steps of Q K^T
  constexpr int kOTiles = D / 8;         // n tiles of O
  constexpr int kSTiles = kKeyTile / 8;  // n tiles of S
  constexpr int kWarpRows = 16 * kM;
  constexpr int kQueryTile = kWarpRows * kWarps;
  extern __shared__ __align__(128) unsigned char smem[];
  T* q_tile = reinterpret_cast<T*>(smem + Layout::q_offset);
  T* k_tile = reinterpret_cast<T*>(smem + Layout::k_offset);
  T* v_tile = reinterpret_cast<T*>(smem + Layout::v_offset);

  // Causal tiles near the end carry the most keys: they start first.
  const int64_t qt = a.causal ? int64_t(gridDim.x) - 1 - blockIdx.x : blockIdx.x;
  const int64_t q0 = qt * kQueryTile, h = blockIdx.y, b = blockIdx.z;
  const int64_t hk = h / a.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t L = a.lengths ? int64_t(a.lengths[b * a.ls]) : a.Tk;
  L = L < 0 ? 0 : (L > a.Tk ? a.Tk : L);
  const int64_t q_last = (q0 + kQueryTile < a.Tq ? q0 + kQueryTile : a.Tq) - 1;
  const int64_t kv_end = a.causal ? L - a.Tq + q_last + 1 : L;
  const int64_t tiles = kv_end > 0 ? (kv_end + kKeyTile - 1) / kKeyTile : 0;

  const Rows<T, false> queries{reinterpret_cast<const T*>(a.q) + b * a.qs[0] + h * a.qs[2],
                               a.qs[1], a.qs[3]};
  Rows<T, kPaged> keys{reinterpret_cast<const T*>(a.k) + hk * a.ks[2], a.ks[1], a.ks[3]};
  Rows<T, kPaged> values{reinterpret_cast<const T*>(a.v) + hk * a.vs[2], a.vs[1], a.vs[3]};
  if (kPaged) {
    for (Rows<T, kPaged>* rows : {&keys, &values}) {
      rows->table = a.table + b * a.ts[0];
      rows->table_stride = a.ts[1];
      rows->block_size = uint32_t(a.block_size);
      // Ids are compared as unsigned 32-bit: a pool of 2^32 blocks or more reads all ids.
      rows->num_blocks = uint32_t(a.num_blocks < (int64_t(1) << 32) ? a.num_blocks
                                                                    : (int64_t(1) << 32) - 1);
    }
    keys.block_stride = a.ks[0];
    values.block_stride = a.vs[0];
  } else {
    keys.base += b * a.ks[0];
    values.base += b * a.vs[0];
  }
  load_tile<T, D, kQueryTile>(q_tile, queries, q0, a.Tq, a.q_vector);
  if (tiles > 0) load_tile<T, D, kKeyTile>(k_tile, keys, 0, L, a.k_vector);
  copy_commit();

  // Lane 4g + t holds rows g and g + 8 of each of the warp's 16-row blocks, columns 2t and
  // 2t + 1 of each 8.
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = q0 + warp * kWarpRows + g;  // query of the lane's first row
  int64_t limit[kM][2];
  float m[kM][2], l[kM][2];  // l: this lane's part of each row's sum, summed over 4 lanes last
  float o[kM][kOTiles][4];
#pragma unroll
  for (int mi = 0; mi < kM; ++mi) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t query = row0 + 16 * mi + 8 * r;
      limit[mi][r] = query >= a.Tq ? -1 : (a.causal ? L - a.Tq + query : L - 1);
      m[mi][r] = -INFINITY;
      l[mi][r] = 0.0f;
    }
#pragma unroll
    for (int n = 0; n < kOTiles; ++n) o[mi][n][0] = o[mi][n][1] = o[mi][n][2] = o[mi][n][3] = 0.0f;
  }
  int64_t min_limit = limit[0][0];
#pragma unroll
  for (int mi = 0; mi < kM; ++mi) {
    min_limit = min_limit < limit[mi][0] ? min_limit : limit[mi][0];
    min_limit = min_limit < limit[mi][1] ? min_limit : limit[mi][1];
  }

  // ldmatrix addresses. Q (A fragments): lanes 0-15 read rows 0-15 at column k, lanes 16-31
  // at column k + 8. K ([key, d], B fragments): lane i reads key (i / 16) * 8 + i % 8 at
  // d + ((i / 8) & 1) * 8, giving b0, b1 of two 8-key n tiles. V (transposed): lane i reads
  // key ((i / 8) & 1) * 8 + i % 8 at d + (i / 16) * 8, giving b0, b1 of two 8-wide d tiles.
  const uint32_t q_base =
      shared_address(q_tile + (warp * kWarpRows + (lane & 15)) * ld + (lane >> 4) * 8);
  const uint32_t k_base =
      shared_address(k_tile + ((lane >> 4) * 8 + (lane & 7)) * ld + ((lane >> 3) & 1) * 8);
  const uint32_t v_base =
      shared_address(v_tile + (((lane >> 3) & 1) * 8 + (lane & 7)) * ld + (lane >> 4) * 8);

  // K and V have one buffer each: V_j streams in during S = Q K_j, K_j+1 during P V_j.
  for (int64_t j = 0; j < tiles; ++j) {
    const int64_t t0 = j * kKeyTile;
    copy_wait<0>();
    __syncthreads();  // K_j has landed; every warp is done with V_j-1
    load_tile<T, D, kKeyTile>(v_tile, values, t0, L, a.v_vector);
    copy_commit();

    float s[kM][kSTiles][4];
#pragma unroll
    for (int mi = 0; mi < kM; ++mi) {
#pragma unroll
      for (int n = 0; n < kSTiles; ++n) s[mi][n][0] = s[mi][n][1] = s[mi][n][2] = s[mi][n][3] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kDFrags; ++kk) {
      uint32_t qf[kM][4];
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
        ldmatrix_x4(qf[mi], q_base + uint32_t((mi * 16 * ld + kk * 16) * 2));
      }
#pragma unroll
      for (int n = 0; n < kSTiles; n += 2) {
        uint32_t kf[4];
        ldmatrix_x4(kf, k_base + uint32_t((n * 8 * ld + kk * 16) * 2));
#pragma unroll
        for (int mi = 0; mi < kM; ++mi) {
          mma<T>(s[mi][n], qf[mi], kf[0], kf[1]);
          mma<T>(s[mi][n + 1], qf[mi], kf[2], kf[3]);
        }
      }
    }

    copy_wait<0>();
    __syncthreads();  // V_j has landed; every warp is done with K_j
    if (j + 1 < tiles) {
      load_tile<T, D, kKeyTile>(k_tile, keys, t0 + kKeyTile, L, a.k_vector);
    }
    copy_commit();

    const bool masked = t0 + kKeyTile - 1 > min_limit ||
                        keys.has_missing_block(t0, t0 + kKeyTile < L ? t0 + kKeyTile : L);
#pragma unroll
    for (int mi = 0; mi < kM; ++mi) {
      float correction[2];
      // Keys past the row's limit, and keys of a block outside the pool (paged only).
      auto masked_key = [&](int column, int r) {
        const int64_t key = t0 + 2 * t + column;
        return key > limit[mi][r] || (kPaged && keys.row(key) == nullptr);
      };
      online_softmax(s[mi], m[mi], l[mi], correction, masked, masked_key, a.scale_log2);
#pragma unroll
      for (int n = 0; n < kOTiles; ++n) {
        o[mi][n][0] *= correction[0];
        o[mi][n][1] *= correction[0];
        o[mi][n][2] *= correction[1];
        o[mi][n][3] *= correction[1];
      }
    }

    // O += P V over 16-key steps: S tiles 2 kk and 2 kk + 1 form P's A fragment.
#pragma unroll
    for (int kk = 0; kk < kKeyTile / 16; ++kk) {
      uint32_t p[kM][4];
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
        p[mi][0] = pack<T>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
        p[mi][1] = pack<T>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
        p[mi][2] = pack<T>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
        p[mi][3] = pack<T>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
      }
#pragma unroll
      for (int n = 0; n < kOTiles; n += 2) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, v_base + uint32_t((kk * 16 * ld + n * 8) * 2));
#pragma unroll
        for (int mi = 0; mi < kM; ++mi) {
          mma<T>(o[mi][n], p[mi], vf[0], vf[1]);
          mma<T>(o[mi][n + 1], p[mi], vf[2], vf[3]);
        }
      }
    }
  }

  T* out = reinterpret_cast<T*>(a.out) + b * a.os[0] + h * a.os[2];
#pragma unroll
  for (int mi = 0; mi < kM; ++mi) {
    store_rows<T>(o[mi], l[mi], row0 + 16 * mi, t, a.Tq, out, a.os[1], a.os[3], a.out_pairs);
  }
}

template <class T, int D, int kM, bool kPaged>
cudaError_t launch_tiles(const TcArgs& a, int64_t batch, int64_t heads, cudaStream_t stream) {
  const cudaError_t e =
      allow_shared_bytes<attention_tc_kernel<T, D, kM, kPaged>>(int(TileLayout<D, kM>::bytes));
  if (e != cudaSuccess) return e;
  constexpr int64_t kQueryTile = 16 * kM * kWarps;
  const dim3 grid(unsigned((a.Tq + kQueryTile - 1) / kQueryTile), unsigned(heads), unsigned(batch));
  attention_tc_kernel<T, D, kM, kPaged><<<grid, kThreads, TileLayout<D, kM>::bytes, stream>>>(a);
  return cudaGetLastError();
}

// The paged form is its own instantiation: the contiguous one keeps its plain row addresses
// (sharing one kernel cost ~10% on the H200).
template <class T>
cudaError_t launch_head_dim(const TcArgs& a, int64_t head_dim, int64_t batch, int64_t heads,
                            cudaStream_t stream) {
  if (a.table) {
    return head_dim == 64 ? launch_tiles<T, 64, kRowBlocks, true>(a, batch, heads, stream)
                          : launch_tiles<T, 128, kRowBlocks, true>(a, batch, heads, stream);
  }
  return head_dim == 64 ? launch_tiles<T, 64, kRowBlocks, false>(a, batch, heads, stream)
                        : launch_tiles<T, 128, kRowBlocks, false>(a, batch, heads, stream);
}

}  // namespace

std::string attention_tc_refusal(const View& q) {
  if (q.dtype != DType::f16 && q.dtype != DType::bf16) {
    return "dtype is not f16 or bf16 (the mma input types)";
  }
  if (q.shape[3] != 64 && q.shape[3] != 128) {
    return "head_dim " + std::to_string(q.shape[3]) + " is not 64 or 128";
  }
  if (q.shape[1] < 16) {
    return "Tq " + std::to_string(q.shape[1]) +
           " is under one 16-row mma tile (decode stays on the split-key kernel)";
  }
  if (q.shape[1] / (16 * kRowBlocks * kWarps) >= 2147483647 || q.shape[2] > 65535 ||
      q.shape[0] > 65535) {
    return "q " + std::to_string(q.shape[0]) + "x" + std::to_string(q.shape[1]) + "x" +
           std::to_string(q.shape[2]) + " exceeds the grid (Tq / 64 < 2^31, Hq and B <= 65535)";
  }
  return "";
}

cudaError_t launch_attention_tc(const View& q, const View& k, const View& v, const View& kv_lengths,
                                const View& block_table, const View& out, float scale,
                                bool causal, cudaStream_t stream) {
  if (!attention_tc_refusal(q).empty()) return cudaErrorInvalidValue;
  // Paged key positions are counted in 32 bits.
  if (block_table.data &&
      (kv_lengths.data == nullptr || k.shape[1] <= 0 ||
       block_table.shape[1] > (int64_t(1) << 31) / k.shape[1])) {
    return cudaErrorInvalidValue;
  }
  TcArgs a{};
  static_cast<AttentionOperands&>(a) = attention_operands(q, k, v, kv_lengths, block_table, out);
  a.scale_log2 = scale * kLog2e;
  a.causal = causal;
  a.q_vector = rows_aligned(q, 8, 2);
  a.k_vector = rows_aligned(k, 8, 2);
  a.v_vector = rows_aligned(v, 8, 2);
  a.out_pairs = rows_aligned(out, 2, 2);
  const int64_t batch = q.shape[0], heads = q.shape[2], head_dim = q.shape[3];
  if (batch == 0 || heads == 0) return cudaSuccess;
  return q.dtype == DType::f16 ? launch_head_dim<__half>(a, head_dim, batch, heads, stream)
                               : launch_head_dim<__nv_bfloat16>(a, head_dim, batch, heads, stream);
}

}  // namespace gk::kernels::llm
