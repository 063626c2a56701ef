// Host conversions of weights. Compiled with -ffp-contract=off (core/CMakeLists.txt): the
// dequantized values must be llama.cpp's exactly, so `d * q - m` stays a multiply and a
// subtract, each rounded, never one fused multiply-add.
//
// The block decoders are kernels/quant/gguf_blocks.h (shared with the cpu plugin's matmul).
#include "weights/convert.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "common/half.h"
#include "quant/gguf_blocks.h"

namespace gk::weights {

namespace {

uint16_t le16(const uint8_t* p) {
  return uint16_t(p[0] | (p[1] << 8));
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
  if (!quant::dequantize_blocks(dtype, src, int64_t(blocks), dst)) {
    fail(GK_INTERNAL, std::string("dequantize: ") + dtype_name(dtype) + " is not block-quantized");
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
