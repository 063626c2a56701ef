// Host conversions of weights. Compiled with -ffp-contract=off (core/CMakeLists.txt): the
// dequantized values must be llama.cpp's exactly, so `d * q - m` stays a multiply and a
// subtract, each rounded, never one fused multiply-add.
//
// Block layouts (little-endian; "f16" is an IEEE half):
//   q8_0 (34 bytes / 32): f16 d, 32 x i8 q                    y[j] = q[j] * d
//   q4_0 (18 bytes / 32): f16 d, 16 bytes of two 4-bit q      y[j] = (lo(j) - 8) * d,
//                         element j in the low nibble of byte j, j+16 in its high nibble
//   q4_1 (20 bytes / 32): f16 d, f16 m, 16 bytes as q4_0      y[j] = q * d + m
//   q4_k (144 bytes / 256): f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins,
//                         128 bytes of 4-bit q; group g (32 elements) has scale s, min m:
//                         y = (d * s) * q - (dmin * m)
//   q5_k (176 bytes / 256): as q4_k plus 32 bytes of high bits before the 4-bit q: bit g
//                         of byte l adds 16 to element l of group g
//   q6_k (210 bytes / 256): 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 x i8
//                         scales (one per 16 elements), f16 d: y = (d * s) * (q - 32)
#include "weights/convert.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "common/half.h"

namespace gk::weights {

namespace {

uint16_t le16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
}
float half_at(const uint8_t* p) {
  return f16_to_f32(le16(p));
}

void dequantize_q8_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}

void dequantize_q4_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* q = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = float((q[j] & 0x0f) - 8) * d;
    y[j + 16] = float((q[j] >> 4) - 8) * d;
  }
}

void dequantize_q4_1(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const float m = half_at(b + 2);
  const uint8_t* q = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(q[j] & 0x0f) * d + m;
    y[j + 16] = float(q[j] >> 4) * d + m;
  }
}

// The 6-bit scale and min of group g (0..7) of a k-quant super-block: groups 0..3 keep them
// in the low 6 bits of bytes g and g+4; groups 4..7 in the nibbles of byte g+4, with their
// top 2 bits in the spare high bits of bytes g-4 (scale) and g (min).
void scale_min(const uint8_t* s, int g, uint8_t* scale, uint8_t* min) {
  if (g < 4) {
    *scale = s[g] & 63;
    *min = s[g + 4] & 63;
  } else {
    *scale = uint8_t((s[g + 4] & 0x0f) | ((s[g - 4] >> 6) << 4));
    *min = uint8_t((s[g + 4] >> 4) | ((s[g] >> 6) << 4));
  }
}

// q4_k and q5_k: `high` is the q5_k high-bit bytes, or null.
void dequantize_k4(const uint8_t* b, const uint8_t* high, const uint8_t* q, float* y) {
  const float d = half_at(b);
  const float dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  for (int g = 0; g < 8; ++g) {
    uint8_t s, m;
    scale_min(scales, g, &s, &m);
    const float dl = d * float(s);
    const float ml = dmin * float(m);
    // Groups 2k and 2k+1 share bytes 32k..32k+31: the low nibbles, then the high ones.
    const uint8_t* bytes = q + 32 * (g / 2);
    const int shift = (g & 1) * 4;
    for (int l = 0; l < 32; ++l) {
      int value = (bytes[l] >> shift) & 0x0f;
      if (high && ((high[l] >> g) & 1)) value += 16;
      y[32 * g + l] = dl * float(value) - ml;
    }
  }
}

void dequantize_q6_k(const uint8_t* b, float* y) {
  const float d = half_at(b + 208);
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

// Element i of a floating `dtype` at `src`, exactly, as f32 (f64 excluded).
float load_f32(int32_t dtype, const uint8_t* src, uint64_t i) {
  switch (dtype) {
    case GK_DTYPE_F16:
      return f16_to_f32(le16(src + 2 * i));
    case GK_DTYPE_BF16:
      return bf16_to_f32(le16(src + 2 * i));
    default: {
      float v;
      std::memcpy(&v, src + 4 * i, 4);
      return v;
    }
  }
}

// Stores f32 `v` as element i of a floating `dtype` at `dst` (rounding to nearest even).
void store_f32(int32_t dtype, uint8_t* dst, uint64_t i, float v) {
  switch (dtype) {
    case GK_DTYPE_F16: {
      const uint16_t h = f32_to_f16(v);
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
    case GK_DTYPE_BF16: {
      const uint16_t h = f32_to_bf16(v);
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
    case GK_DTYPE_F64: {
      const double w = v;
      std::memcpy(dst + 8 * i, &w, 8);
      break;
    }
    default:
      std::memcpy(dst + 4 * i, &v, 4);
  }
}

// f64 to a floating dtype: rounded once, straight from the double.
void store_f64(int32_t dtype, uint8_t* dst, uint64_t i, double v) {
  switch (dtype) {
    case GK_DTYPE_F16: {
      const uint16_t h = f64_to_f16(v);
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
    case GK_DTYPE_BF16: {
      const uint16_t h = f64_to_bf16(v);
      std::memcpy(dst + 2 * i, &h, 2);
      break;
    }
    case GK_DTYPE_F32: {
      const float f = float(v);
      std::memcpy(dst + 4 * i, &f, 4);
      break;
    }
    default:
      std::memcpy(dst + 8 * i, &v, 8);
  }
}

}  // namespace

bool can_convert(int32_t from, int32_t to) {
  if (from == to) return dtype_is_known(from);
  if (dtype_is_floating(from)) return dtype_is_floating(to);
  if (dtype_is_packed(from)) {
    return to == GK_DTYPE_F32 || to == GK_DTYPE_F16 || to == GK_DTYPE_BF16;
  }
  return false;
}

void dequantize(int32_t dtype, const uint8_t* src, uint64_t blocks, float* dst) {
  uint32_t block_bytes = 0;
  const uint32_t block = dtype_block(dtype, &block_bytes);
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * block_bytes;
    float* y = dst + i * block;
    switch (dtype) {
      case GK_DTYPE_Q8_0:
        dequantize_q8_0(b, y);
        break;
      case GK_DTYPE_Q4_0:
        dequantize_q4_0(b, y);
        break;
      case GK_DTYPE_Q4_1:
        dequantize_q4_1(b, y);
        break;
      case GK_DTYPE_Q4_K:
        dequantize_k4(b, nullptr, b + 16, y);
        break;
      case GK_DTYPE_Q5_K:
        dequantize_k4(b, b + 16, b + 48, y);
        break;
      case GK_DTYPE_Q6_K:
        dequantize_q6_k(b, y);
        break;
      default:
        fail(GK_INTERNAL,
             std::string("dequantize: ") + dtype_name(dtype) + " is not block-quantized");
    }
  }
}

void convert(int32_t from, const void* src_bytes, int32_t to, void* dst_bytes, uint64_t elements) {
  const auto* src = static_cast<const uint8_t*>(src_bytes);
  auto* dst = static_cast<uint8_t*>(dst_bytes);
  if (from == to) {
    std::memcpy(dst, src, storage_bytes(from, elements));
    return;
  }
  if (dtype_is_packed(from)) {
    uint32_t block_bytes = 0;
    const uint32_t block = dtype_block(from, &block_bytes);
    // A few thousand elements at a time through an f32 scratch that stays in cache.
    const uint64_t chunk_blocks = std::max<uint64_t>(1, 8192 / block);
    std::vector<float> scratch(size_t(chunk_blocks * block));
    const uint64_t blocks = elements / block;
    for (uint64_t b = 0; b < blocks; b += chunk_blocks) {
      const uint64_t n = std::min(chunk_blocks, blocks - b);
      dequantize(from, src + b * block_bytes, n, scratch.data());
      if (to == GK_DTYPE_F32) {
        std::memcpy(dst + b * block * 4, scratch.data(), size_t(n * block * 4));
      } else {
        uint8_t* out = dst + b * block * 2;
        for (uint64_t i = 0; i < n * block; ++i) store_f32(to, out, i, scratch[size_t(i)]);
      }
    }
    return;
  }
  if (from == GK_DTYPE_F64) {
    for (uint64_t i = 0; i < elements; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      store_f64(to, dst, i, v);
    }
    return;
  }
  for (uint64_t i = 0; i < elements; ++i) store_f32(to, dst, i, load_f32(from, src, i));
}

}  // namespace gk::weights
