// gguf_blocks.h — host decoders of GGUF's block-quantized formats, bit-exact with llama.cpp's
// dequantize_row_* and gguf-py's quants.py. One implementation, shared by the core's weight
// conversion (core/src/weights/convert.cpp) and the cpu plugin's matmul with a packed weight
// (plugins/cpu/matmul_quant.cpp). Host-only, header-only; it needs only the ABI's dtype enum.
//
// A file that includes it must be compiled with -ffp-contract=off: `d * q - m` has to stay a
// multiply and a subtract, each rounded, never one fused multiply-add, to match llama.cpp.
//
// Block layouts (little-endian; "f16" is an IEEE half):
//   q8_0 (34 bytes / 32): f16 d, 32 x i8 q                    y[j] = q[j] * d
//   q4_0 (18 bytes / 32): f16 d, 16 bytes of two 4-bit q      y[j] = (lo(j) - 8) * d,
//                         element j in the low nibble of byte j, j+16 in its high nibble
//   q4_1 (20 bytes / 32): f16 d, f16 m, 16 bytes as q4_0      y[j] = q * d + m
//   q4_k (144 bytes / 256): f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins,
//                         128 bytes of 4-bit q; group g (32 elements) has scale s, min m:
//                         y = (d * s) * q - (dmin * m); groups 2k and 2k+1 share the 32
//                         bytes 32k..32k+31, low nibbles then high nibbles
//   q5_k (176 bytes / 256): as q4_k plus 32 bytes of high bits before the 4-bit q: bit g
//                         of byte l adds 16 to element l of group g
//   q6_k (210 bytes / 256): 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 x i8
//                         scales (one per 16 elements), f16 d: y = (d * s) * (q - 32)
#ifndef GPUKIT_KERNELS_QUANT_GGUF_BLOCKS_H_
#define GPUKIT_KERNELS_QUANT_GGUF_BLOCKS_H_

#include <bit>
#include <cmath>
#include <cstdint>

#include "gpukit/gpukit_weights.h"  // GK_DTYPE_Q8_0 ... GK_DTYPE_Q6_K

namespace gk::quant {

// IEEE binary16 bits to f32; exact.
inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: mantissa * 2^-24, exact in f32.
  const float magnitude = std::ldexp(float(mantissa), -24);
  return sign ? -magnitude : magnitude;
}

inline float block_half(const uint8_t* p) {
  return f16_bits_to_f32(uint16_t(p[0] | (p[1] << 8)));
}

inline void dequantize_q8_0(const uint8_t* b, float* y) {
  const float d = block_half(b);
  for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}

inline void dequantize_q4_0(const uint8_t* b, float* y) {
  const float d = block_half(b);
  const uint8_t* q = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = float((q[j] & 0x0f) - 8) * d;
    y[j + 16] = float((q[j] >> 4) - 8) * d;
  }
}

inline void dequantize_q4_1(const uint8_t* b, float* y) {
  const float d = block_half(b);
  const float m = block_half(b + 2);
  const uint8_t* q = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(q[j] & 0x0f) * d + m;
    y[j + 16] = float(q[j] >> 4) * d + m;
  }
}

// The 6-bit scale and min of group g (0..7) of a k-quant super-block: groups 0..3 keep them
// in the low 6 bits of bytes g and g+4; groups 4..7 in the nibbles of byte g+4, with their
// top 2 bits in the spare high bits of bytes g-4 (scale) and g (min).
inline void k_scale_min(const uint8_t* s, int g, uint8_t* scale, uint8_t* min) {
  if (g < 4) {
    *scale = s[g] & 63;
    *min = s[g + 4] & 63;
  } else {
    *scale = uint8_t((s[g + 4] & 0x0f) | ((s[g - 4] >> 6) << 4));
    *min = uint8_t((s[g + 4] >> 4) | ((s[g] >> 6) << 4));
  }
}

// q4_k and q5_k super-block `b`: `high` is the q5_k high-bit bytes, or null; `q` the 4-bit
// quants (b + 16 for q4_k, b + 48 for q5_k).
inline void dequantize_k4(const uint8_t* b, const uint8_t* high, const uint8_t* q, float* y) {
  const float d = block_half(b);
  const float dmin = block_half(b + 2);
  const uint8_t* scales = b + 4;
  for (int g = 0; g < 8; ++g) {
    uint8_t s, m;
    k_scale_min(scales, g, &s, &m);
    const float dl = d * float(s);
    const float ml = dmin * float(m);
    const uint8_t* bytes = q + 32 * (g / 2);
    const int shift = (g & 1) * 4;
    for (int l = 0; l < 32; ++l) {
      int value = (bytes[l] >> shift) & 0x0f;
      if (high && ((high[l] >> g) & 1)) value += 16;
      y[32 * g + l] = dl * float(value) - ml;
    }
  }
}

inline void dequantize_q4_k(const uint8_t* b, float* y) {
  dequantize_k4(b, nullptr, b + 16, y);
}

inline void dequantize_q5_k(const uint8_t* b, float* y) {
  dequantize_k4(b, b + 16, b + 48, y);
}

inline void dequantize_q6_k(const uint8_t* b, float* y) {
  const float d = block_half(b + 208);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* low = b + 64 * half;
    const uint8_t* high = b + 128 + 32 * half;
    const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192 + 8 * half);
    float* out = y + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((low[l] & 0x0f) | (((high[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((low[l + 32] & 0x0f) | (((high[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((low[l] >> 4) | (((high[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((low[l + 32] >> 4) | (((high[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * float(scales[is]) * float(q1);
      out[l + 32] = d * float(scales[is + 2]) * float(q2);
      out[l + 64] = d * float(scales[is + 4]) * float(q3);
      out[l + 96] = d * float(scales[is + 6]) * float(q4);
    }
  }
}

// `blocks` consecutive blocks of `dtype` (a block-quantized gk_dtype) at `src` into
// blocks x block-size floats at `y`; false when `dtype` is not one of them.
inline bool dequantize_blocks(int32_t dtype, const uint8_t* src, int64_t blocks, float* y) {
  void (*decode)(const uint8_t*, float*) = nullptr;
  int64_t elements = 0, bytes = 0;
  switch (dtype) {
    case GK_DTYPE_Q8_0:
      decode = dequantize_q8_0, elements = 32, bytes = 34;
      break;
    case GK_DTYPE_Q4_0:
      decode = dequantize_q4_0, elements = 32, bytes = 18;
      break;
    case GK_DTYPE_Q4_1:
      decode = dequantize_q4_1, elements = 32, bytes = 20;
      break;
    case GK_DTYPE_Q4_K:
      decode = dequantize_q4_k, elements = 256, bytes = 144;
      break;
    case GK_DTYPE_Q5_K:
      decode = dequantize_q5_k, elements = 256, bytes = 176;
      break;
    case GK_DTYPE_Q6_K:
      decode = dequantize_q6_k, elements = 256, bytes = 210;
      break;
    default:
      return false;
  }
  for (int64_t i = 0; i < blocks; ++i) decode(src + i * bytes, y + i * elements);
  return true;
}

}  // namespace gk::quant

#endif  // GPUKIT_KERNELS_QUANT_GGUF_BLOCKS_H_
