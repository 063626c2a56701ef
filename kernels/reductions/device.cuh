// Device helpers of the reductions kernel family: dtype conversion, 16-byte vector
// access, NaN-propagating min/max, fixed-order warp/block trees, index arithmetic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "common.cuh"

namespace gk::kernels::reductions {

// Index arithmetic for up to kMaxDims dims passed by value to kernels. dims are
// stored innermost first so decomposition walks them in order.
struct Dims {
  int n = 0;
  int64_t size[kMaxDims] = {};
};

// ---------------------------------------------------------------------------------
// Scalar conversion: all floating math runs in f32.
// ---------------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ float to_f32(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// 16 bytes of T: the unit of every vectorised load and store.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

// Whole-width global access through an integer type of the vector's size, so the
// compiler emits one 16/8/4-byte instruction: copying a struct of __half or
// __nv_bfloat16 directly became one 2-byte store per element (PTX st.global.u16 ×8,
// seen on H100 as bf16 elementwise at ~50-70% of copy bandwidth).
template <size_t kBytes>
struct BitsOf;
template <>
struct BitsOf<16> {
  using type = uint4;
};
template <>
struct BitsOf<8> {
  using type = uint2;
};
template <>
struct BitsOf<4> {
  using type = unsigned int;
};
template <>
struct BitsOf<2> {
  using type = unsigned short;
};

template <typename V>
__device__ __forceinline__ V load_bits(const void* p) {
  using B = typename BitsOf<sizeof(V)>::type;
  const B b = *static_cast<const B*>(p);
  V v;
  memcpy(&v, &b, sizeof(V));
  return v;
}

__device__ __forceinline__ unsigned int bits_of(float v) {
  return __float_as_uint(v);
}
__device__ __forceinline__ unsigned int bits_of(int32_t v) {
  return static_cast<unsigned int>(v);
}
__device__ __forceinline__ unsigned int bits_of(__half v) {
  return __half_as_ushort(v);
}
__device__ __forceinline__ unsigned int bits_of(__nv_bfloat16 v) {
  return __bfloat16_as_ushort(v);
}
__device__ __forceinline__ unsigned int bits_of(uint8_t v) {
  return v;
}

// Packs V's elements (V::v[]) into 32-bit words by value, then stores them with one
// instruction; a memcpy of the struct still compiled to 2-byte stores. A vector of 2 bytes
// (a pair of one-byte bools) takes one 2-byte store.
template <typename V>
__device__ __forceinline__ void store_bits(void* p, const V& v) {
  using T = std::remove_cv_t<std::remove_reference_t<decltype(v.v[0])>>;
  constexpr int kN = sizeof(V) / sizeof(T);
  constexpr int kWords = sizeof(V) / 4;
  static_assert(sizeof(V) == 2 || (sizeof(V) % 4 == 0 && kWords <= 4),
                "vector of 2, 4, 8 or 16 bytes");
  if constexpr (sizeof(V) == 2) {
    static_assert(kN == 2, "a 2-byte vector holds two 1-byte elements");
    *static_cast<unsigned short*>(p) =
        static_cast<unsigned short>(bits_of(v.v[0]) | (bits_of(v.v[1]) << 8));
  } else {
    unsigned int w[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (sizeof(T) == 4) {
        w[i] = bits_of(v.v[i]);
      } else if constexpr (sizeof(T) == 2) {
        w[i] = bits_of(v.v[2 * i]) | (bits_of(v.v[2 * i + 1]) << 16);
      } else {
        w[i] = bits_of(v.v[4 * i]) | (bits_of(v.v[4 * i + 1]) << 8) |
               (bits_of(v.v[4 * i + 2]) << 16) | (bits_of(v.v[4 * i + 3]) << 24);
      }
    }
    static_assert(kN == kWords * (4 / sizeof(T)), "whole words");
    // Plain uint4/uint2 stores were still split into 32-bit ones (PTX), hence the asm.
    if constexpr (kWords == 4) {
      asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]),
                   "r"(w[2]), "r"(w[3])
                   : "memory");
    } else if constexpr (kWords == 2) {
      asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
    } else {
      *static_cast<unsigned int*>(p) = w[0];
    }
  }
}

template <typename T>
__device__ __forceinline__ Vec16<T> load_vec(const T* p) {
  return load_bits<Vec16<T>>(p);
}

// Streaming load for data read once (keeps L2 for what is re-read).
template <typename T>
__device__ __forceinline__ Vec16<T> load_vec_stream(const T* p) {
  Vec16<T> r;
  int4 raw = __ldcs(reinterpret_cast<const int4*>(p));
  memcpy(&r, &raw, sizeof(r));
  return r;
}

template <typename T>
__device__ __forceinline__ void store_vec(T* p, const Vec16<T>& v) {
  store_bits(p, v);
}

// NumPy semantics: NaN wins.
// e^x from the MUFU instruction alone (ex2.approx of x·log2 e, relative error ~2^-22),
// without the compare, select and two multiplies __expf adds for denormal results: those
// are flushed to 0. For results rounded to 16 bits, where that only loses bf16 denormals.
__device__ __forceinline__ float exp_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
  return r;
}

__device__ __forceinline__ float nan_max(float a, float b) {
  return (a > b || a != a) ? a : b;
}
__device__ __forceinline__ float nan_min(float a, float b) {
  return (a < b || a != a) ? a : b;
}

// ---------------------------------------------------------------------------------
// Programmatic dependent launch (SM 90+). A split reduction's finalize kernel is launched
// as a dependent of the partials kernel: it is scheduled while that kernel's last wave
// still runs (every partials block allows it at its start), so its launch latency is
// hidden, and it waits until the partials kernel has finished and its writes are
// visible before reading them. Both are no-ops below SM 90 and, for the wait, when the
// launch did not ask for it.
// ---------------------------------------------------------------------------------
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// ---------------------------------------------------------------------------------
// Fixed-order trees. The xor butterfly combines the same pairs in every lane, so all
// lanes hold bit-identical results; the block tree then reads the per-warp values
// in warp order. Neither depends on timing, so results repeat bit for bit.
// ---------------------------------------------------------------------------------
template <typename F>
__device__ __forceinline__ float warp_all_reduce(float v, F combine) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = combine(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Block all-reduces with one barrier each: every thread of the block gets the block-wide
// result. Successive reductions alternate between the two halves of the scratch, so a
// warp writes half h for reduction n + 2 only after passing reduction n + 1's barrier,
// which no warp reaches before it has read half h for reduction n. Every thread of the
// block makes the same sequence of calls. (A single buffer needs a second barrier per
// reduction before it can be written again: layernorm, with two reductions a row, read
// 98% of copy that way against rmsnorm's 100%.)
class BlockReducer {
 public:
  __device__ explicit BlockReducer(float (&scratch)[2][32]) : scratch_(scratch) {}

  template <typename F>
  __device__ __forceinline__ float all_reduce(float v, F combine) {
    v = warp_all_reduce(v, combine);
    float* half = scratch_[parity_];
    parity_ ^= 1;
    const int nwarps = blockDim.x / 32;
    if (threadIdx.x % 32 == 0) half[threadIdx.x / 32] = v;
    __syncthreads();
    float r = half[0];
    for (int w = 1; w < nwarps; ++w) r = combine(r, half[w]);
    return r;
  }

 private:
  float (&scratch_)[2][32];
  int parity_ = 0;
};

struct AddOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return nan_max(a, b); }
};

// Offset of logical index `idx` (row-major over dims stored innermost first).
__device__ __forceinline__ int64_t offset_of(int64_t idx, const Dims& dims,
                                             const int64_t* strides) {
  int64_t off = 0;
  for (int d = 0; d < dims.n; ++d) {
    const int64_t q = idx / dims.size[d];
    off += (idx - q * dims.size[d]) * strides[d];
    idx = q;
  }
  return off;
}

// offset_of for idx < 2^32 over dims whose sizes multiply to < 2^32 (the caller checks):
// 32-bit divisions, a few instructions each, where a 64-bit one is a call of about 70.
__device__ __forceinline__ int64_t offset_of_u32(uint32_t idx, const Dims& dims,
                                                 const int64_t* strides) {
  int64_t off = 0;
  for (int d = 0; d < dims.n; ++d) {
    const uint32_t size = static_cast<uint32_t>(dims.size[d]);
    const uint32_t q = idx / size;
    off += static_cast<int64_t>(idx - q * size) * strides[d];
    idx = q;
  }
  return off;
}

}  // namespace gk::kernels::reductions
