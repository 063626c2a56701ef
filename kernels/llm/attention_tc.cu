// attention_tc: FlashAttention-2-style prefill on tensor cores. One block of 4 warps per
// (tile of 64 queries, q head, sequence); warp w owns query rows 16w .. 16w + 15 of the tile.
//
//   block (qt, h, b):                  grid (ceil(Tq / 64), Hq, B); kv head = h / (Hq / Hkv)
//     Q tile [64, Dh] -> shared (staged in the O buffer) -> each warp's Dh / 16 A fragments
//     O [64, Dh] = 0 (f32, shared); per row m = -inf, l = 0 (registers of the row's 2 lanes)
//     for key tile t0 = 0, 64, ... < kv_end         (kv_end: past the tile's last query's keys)
//       K, V tiles [64, Dh] -> shared, rows past L zero                               (block)
//       S [16, 64] = Q_w K^T                                  (wmma, f32 result in shared)
//       per row: mask, m' = max(m, max s), p = 2^(s - m'), l = l 2^(m - m') + sum p
//         P [16, 64] = p as T (shared); O rows *= 2^(m - m')              (2 lanes per row)
//       O_w += P V                                  (wmma; O fragments loaded from shared)
//     out[b, q0 + r, h, :] = O[r, :] / l_r                                  (0 when l_r = 0)
//
// Shared memory, in bytes: K and V 2 * 64 (Dh + 8) * 2, S 64 * 68 * 4, P 64 * 72 * 2,
// O 64 (Dh + 4) * 4: 62464 for Dh 64, 95232 for Dh 128, under the 99 KB a block may opt into
// on SM 86 and 89. The row padding keeps wmma's 32-byte pointer alignment and moves
// consecutive rows onto different banks.
#include <mma.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "llm/attention_tc.cuh"
#include "llm/device.cuh"

namespace gk::kernels::llm {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWarps = 4;
constexpr int kFrag = 16;                   // wmma's m, n and k
constexpr int kQueryTile = kFrag * kWarps;  // one 16-row wmma tile per warp
constexpr int kKeyTile = 64;
constexpr float kLog2e = 1.4426950408889634f;

template <int D>
struct TileLayout {
  static constexpr int kv_ld = D + 8;        // T elements per K, V (and staged Q) row
  static constexpr int s_ld = kKeyTile + 4;  // floats per S row
  static constexpr int p_ld = kKeyTile + 8;  // T elements per P row
  static constexpr int o_ld = D + 4;         // floats per O row
  static constexpr size_t k_offset = 0;
  static constexpr size_t v_offset = k_offset + size_t(kKeyTile) * kv_ld * 2;
  static constexpr size_t s_offset = v_offset + size_t(kKeyTile) * kv_ld * 2;
  static constexpr size_t p_offset = s_offset + size_t(kQueryTile) * s_ld * 4;
  static constexpr size_t o_offset = p_offset + size_t(kQueryTile) * p_ld * 2;
  static constexpr size_t bytes = o_offset + size_t(kQueryTile) * o_ld * 4;
  static_assert(v_offset % 32 == 0 && s_offset % 32 == 0 && p_offset % 32 == 0 &&
                    o_offset % 32 == 0,
                "wmma loads and stores need 32-byte aligned tiles");
  static_assert(size_t(kQueryTile) * kv_ld * 2 <= size_t(kQueryTile) * o_ld * 4,
                "Q is staged in the O buffer");
};

struct TcArgs {
  const char* q;
  const char* k;
  const char* v;
  const int32_t* lengths;
  char* out;
  int64_t Tq, Tk, group;
  int64_t qs[4], ks[4], vs[4], os[4], ls;
  float scale_log2;  // scale * log2(e): the softmax runs in base 2
  bool causal;
  bool q_vector, k_vector, v_vector;  // rows start on 16 bytes and elements are contiguous
};

// Copies rows [0, kRows) of a tile to shared memory (row pitch ld); rows from `valid` on are
// zero, so that keys past L cannot bring Inf or NaN into P V.
template <class T, int D, int kRows>
__device__ __forceinline__ void load_rows(T* dst, int ld, const T* src, int64_t row_stride,
                                          int64_t col_stride, int64_t valid, bool vectorized) {
  if (vectorized) {
    constexpr int kChunks = D / 8;  // 8 elements: 16 bytes
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kWarps * 32) {
      const int r = idx / kChunks, c = (idx % kChunks) * 8;
      uint4 chunk = make_uint4(0, 0, 0, 0);
      if (r < valid) chunk = *reinterpret_cast<const uint4*>(src + r * row_stride + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = chunk;
    }
  } else {
    for (int idx = threadIdx.x; idx < kRows * D; idx += kWarps * 32) {
      const int r = idx / D, c = idx % D;
      dst[r * ld + c] = r < valid ? src[r * row_stride + c * col_stride] : from_f32<T>(0.0f);
    }
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kWarps * 32) attention_tc_kernel(const TcArgs a) {
  using Layout = TileLayout<D>;
  using AFragment = wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major>;
  using Accumulator = wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* k_tile = reinterpret_cast<T*>(smem + Layout::k_offset);
  T* v_tile = reinterpret_cast<T*>(smem + Layout::v_offset);
  float* s_tile = reinterpret_cast<float*>(smem + Layout::s_offset);
  T* p_tile = reinterpret_cast<T*>(smem + Layout::p_offset);
  float* o_tile = reinterpret_cast<float*>(smem + Layout::o_offset);
  T* q_stage = reinterpret_cast<T*>(smem + Layout::o_offset);

  const int64_t q0 = int64_t(blockIdx.x) * kQueryTile, h = blockIdx.y, b = blockIdx.z;
  const int64_t hk = h / a.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t L = a.lengths ? int64_t(a.lengths[b * a.ls]) : a.Tk;
  L = L < 0 ? 0 : (L > a.Tk ? a.Tk : L);
  // Keys from kv_end on are past every query of the tile: their tiles are skipped.
  const int64_t q_last = (q0 + kQueryTile < a.Tq ? q0 + kQueryTile : a.Tq) - 1;
  const int64_t kv_end = a.causal ? L - a.Tq + q_last + 1 : L;

  const T* q = reinterpret_cast<const T*>(a.q) + b * a.qs[0] + q0 * a.qs[1] + h * a.qs[2];
  load_rows<T, D, kQueryTile>(q_stage, Layout::kv_ld, q, a.qs[1], a.qs[3], a.Tq - q0, a.q_vector);
  __syncthreads();
  AFragment q_frag[D / kFrag];
#pragma unroll
  for (int kk = 0; kk < D / kFrag; ++kk) {
    wmma::load_matrix_sync(q_frag[kk], q_stage + warp * kFrag * Layout::kv_ld + kk * kFrag,
                           Layout::kv_ld);
  }
  __syncthreads();  // the O buffer held Q
  for (int idx = threadIdx.x; idx < kQueryTile * Layout::o_ld; idx += kWarps * 32) {
    o_tile[idx] = 0.0f;
  }
  __syncthreads();

  // Row `row` of the warp's 16 belongs to lanes 2 row and 2 row + 1, which take alternate
  // columns (fewer bank conflicts than halves).
  const int row = lane >> 1, half = lane & 1;
  const int64_t query = q0 + warp * kFrag + row;
  const int64_t key_limit = query >= a.Tq ? -1 : (a.causal ? L - a.Tq + query : L - 1);
  float m = -INFINITY, l = 0.0f;
  float* s_rows = s_tile + warp * kFrag * Layout::s_ld;
  T* p_rows = p_tile + warp * kFrag * Layout::p_ld;
  float* o_rows = o_tile + warp * kFrag * Layout::o_ld;

  const T* kb = reinterpret_cast<const T*>(a.k) + b * a.ks[0] + hk * a.ks[2];
  const T* vb = reinterpret_cast<const T*>(a.v) + b * a.vs[0] + hk * a.vs[2];
  for (int64_t t0 = 0; t0 < kv_end; t0 += kKeyTile) {
    __syncthreads();  // every warp is done with the previous K and V tiles
    load_rows<T, D, kKeyTile>(k_tile, Layout::kv_ld, kb + t0 * a.ks[1], a.ks[1], a.ks[3], L - t0,
                              a.k_vector);
    load_rows<T, D, kKeyTile>(v_tile, Layout::kv_ld, vb + t0 * a.vs[1], a.vs[1], a.vs[3], L - t0,
                              a.v_vector);
    __syncthreads();

    // S = Q K^T: K stored [key, d] row-major is K^T column-major.
#pragma unroll
    for (int n = 0; n < kKeyTile / kFrag; ++n) {
      Accumulator s_frag;
      wmma::fill_fragment(s_frag, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::col_major> k_frag;
        wmma::load_matrix_sync(k_frag, k_tile + n * kFrag * Layout::kv_ld + kk * kFrag,
                               Layout::kv_ld);
        wmma::mma_sync(s_frag, q_frag[kk], k_frag, s_frag);
      }
      wmma::store_matrix_sync(s_rows + n * kFrag, s_frag, Layout::s_ld, wmma::mem_row_major);
    }
    __syncwarp();

    float s[kKeyTile / 2];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < kKeyTile / 2; ++c) {
      const int col = half + 2 * c;
      s[c] = t0 + col <= key_limit ? s_rows[row * Layout::s_ld + col] * a.scale_log2 : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);
    // A row that has seen no key yet keeps p = 0 and its zero O.
    const bool no_key = m_new == -INFINITY;
    const float correction = no_key ? 1.0f : exp2f(m - m_new);
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kKeyTile / 2; ++c) {
      const float p = no_key ? 0.0f : exp2f(s[c] - m_new);
      p_rows[row * Layout::p_ld + half + 2 * c] = from_f32<T>(p);
      sum += p;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * correction + sum;
    m = m_new;
    for (int c = half; c < D; c += 2) o_rows[row * Layout::o_ld + c] *= correction;
    __syncwarp();

    // O += P V, V stored [key, d] row-major.
    AFragment p_frag[kKeyTile / kFrag];
#pragma unroll
    for (int kk = 0; kk < kKeyTile / kFrag; ++kk) {
      wmma::load_matrix_sync(p_frag[kk], p_rows + kk * kFrag, Layout::p_ld);
    }
#pragma unroll
    for (int n = 0; n < D / kFrag; ++n) {
      Accumulator o_frag;
      wmma::load_matrix_sync(o_frag, o_rows + n * kFrag, Layout::o_ld, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kKeyTile / kFrag; ++kk) {
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::row_major> v_frag;
        wmma::load_matrix_sync(v_frag, v_tile + kk * kFrag * Layout::kv_ld + n * kFrag,
                               Layout::kv_ld);
        wmma::mma_sync(o_frag, p_frag[kk], v_frag, o_frag);
      }
      wmma::store_matrix_sync(o_rows + n * kFrag, o_frag, Layout::o_ld, wmma::mem_row_major);
    }
  }

  // 1 / l per row goes through the warp's S rows (free now) so that the lanes can write the
  // output row by row, consecutive lanes on consecutive elements.
  __syncwarp();
  if (half == 0) s_rows[row * Layout::s_ld] = l > 0.0f ? 1.0f / l : 0.0f;
  __syncwarp();
  T* out = reinterpret_cast<T*>(a.out) + b * a.os[0] + h * a.os[2];
  for (int idx = lane; idx < kFrag * D; idx += 32) {
    const int r = idx / D, d = idx % D;
    const int64_t i = q0 + warp * kFrag + r;
    if (i < a.Tq) {
      out[i * a.os[1] + d * a.os[3]] =
          from_f32<T>(o_rows[r * Layout::o_ld + d] * s_rows[r * Layout::s_ld]);
    }
  }
}

// Vector loads need contiguous elements and every row of every (sequence, head) starting on
// a 16-byte boundary.
bool rows_are_16_byte_aligned(const View& t) {
  return t.strides[3] == 1 && reinterpret_cast<uintptr_t>(t.data) % 16 == 0 &&
         t.strides[0] % 8 == 0 && t.strides[1] % 8 == 0 && t.strides[2] % 8 == 0;
}

// The dynamic shared memory limit is a per-device attribute of each instantiation: set it
// once per device (the first 64; beyond, on every launch).
template <class T, int D>
cudaError_t allow_shared_bytes() {
  static std::atomic<uint64_t> devices_done{0};
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
  if (bit != 0 && (devices_done.load(std::memory_order_relaxed) & bit) != 0) return cudaSuccess;
  e = cudaFuncSetAttribute(attention_tc_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           int(TileLayout<D>::bytes));
  if (e == cudaSuccess) devices_done.fetch_or(bit, std::memory_order_relaxed);
  return e;
}

template <class T, int D>
cudaError_t launch_tiles(const TcArgs& a, int64_t batch, int64_t heads, cudaStream_t stream) {
  const cudaError_t e = allow_shared_bytes<T, D>();
  if (e != cudaSuccess) return e;
  const dim3 grid(unsigned((a.Tq + kQueryTile - 1) / kQueryTile), unsigned(heads), unsigned(batch));
  attention_tc_kernel<T, D><<<grid, kWarps * 32, TileLayout<D>::bytes, stream>>>(a);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_head_dim(const TcArgs& a, int64_t head_dim, int64_t batch, int64_t heads,
                            cudaStream_t stream) {
  return head_dim == 64 ? launch_tiles<T, 64>(a, batch, heads, stream)
                        : launch_tiles<T, 128>(a, batch, heads, stream);
}

}  // namespace

std::string attention_tc_refusal(const View& q) {
  if (q.dtype != DType::f16 && q.dtype != DType::bf16) {
    return "dtype is not f16 or bf16 (the wmma input types)";
  }
  if (q.shape[3] != 64 && q.shape[3] != 128) {
    return "head_dim " + std::to_string(q.shape[3]) + " is not 64 or 128";
  }
  if (q.shape[1] < kFrag) {
    return "Tq " + std::to_string(q.shape[1]) +
           " is under one 16-row wmma tile (decode stays on the split-key kernel)";
  }
  if ((q.shape[1] + kQueryTile - 1) / kQueryTile > 2147483647 || q.shape[2] > 65535 ||
      q.shape[0] > 65535) {
    return "q " + std::to_string(q.shape[0]) + "x" + std::to_string(q.shape[1]) + "x" +
           std::to_string(q.shape[2]) + " exceeds the grid (Tq / 64 < 2^31, Hq and B <= 65535)";
  }
  return "";
}

cudaError_t launch_attention_tc(const View& q, const View& k, const View& v, const View& kv_lengths,
                                const View& out, float scale, bool causal, cudaStream_t stream) {
  if (!attention_tc_refusal(q).empty()) return cudaErrorInvalidValue;
  TcArgs a{};
  a.q = static_cast<const char*>(q.data);
  a.k = static_cast<const char*>(k.data);
  a.v = static_cast<const char*>(v.data);
  a.lengths = static_cast<const int32_t*>(kv_lengths.data);
  a.ls = kv_lengths.data ? kv_lengths.strides[0] : 0;
  a.out = static_cast<char*>(out.data);
  a.Tq = q.shape[1];
  a.Tk = k.shape[1];
  a.group = k.shape[2] > 0 ? q.shape[2] / k.shape[2] : 1;
  for (int d = 0; d < 4; ++d) {
    a.qs[d] = q.strides[d];
    a.ks[d] = k.strides[d];
    a.vs[d] = v.strides[d];
    a.os[d] = out.strides[d];
  }
  a.scale_log2 = scale * kLog2e;
  a.causal = causal;
  a.q_vector = rows_are_16_byte_aligned(q);
  a.k_vector = rows_are_16_byte_aligned(k);
  a.v_vector = rows_are_16_byte_aligned(v);
  const int64_t batch = q.shape[0], heads = q.shape[2], head_dim = q.shape[3];
  if (batch == 0 || heads == 0) return cudaSuccess;
  return q.dtype == DType::f16 ? launch_head_dim<__half>(a, head_dim, batch, heads, stream)
                               : launch_head_dim<__nv_bfloat16>(a, head_dim, batch, heads, stream);
}

}  // namespace gk::kernels::llm
