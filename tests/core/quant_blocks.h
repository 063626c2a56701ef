// Random GGUF blocks and exactly representable inputs for the tests of matmul with a
// block-quantized weight (tests/core/matmul_quant_test.cpp, tests/gpu/matmul_quant_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpukit/gpukit.h"

namespace gk::test {

// IEEE half bits of a value in ±[1e-3, 1e-1] (a normal half: the scale of a real block).
inline uint16_t random_scale_bits(std::mt19937& rng, bool allow_negative) {
  std::uniform_real_distribution<float> mag(1e-3f, 1e-1f);
  const float v = mag(rng);
  // v is normal in f16: exponent in [-10, -4]; keep 10 mantissa bits (truncation).
  int e = 0;
  const float f = std::frexp(v, &e);  // v = f · 2^e, f in [0.5, 1)
  const uint16_t mantissa = uint16_t(uint32_t((f * 2.0f - 1.0f) * 1024.0f) & 0x3ffu);
  const uint16_t exponent = uint16_t(e - 1 + 15);
  const bool negative = allow_negative && (rng() & 1u);
  return uint16_t((negative ? 0x8000u : 0u) | (uint32_t(exponent) << 10) | mantissa);
}

// `elements` elements (a multiple of the block) of `dtype` in valid random blocks: random
// quant bytes, finite f16 scales (q4_1's min and q4_k's dmin too).
inline std::vector<uint8_t> random_blocks(int32_t dtype, int64_t elements, std::mt19937& rng) {
  uint32_t block_bytes = 0;
  const uint32_t block = gk_dtype_block(dtype, &block_bytes);
  const int64_t blocks = elements / block;
  std::vector<uint8_t> out(size_t(blocks) * block_bytes);
  for (auto& b : out) b = uint8_t(rng() & 0xffu);
  for (int64_t i = 0; i < blocks; ++i) {
    uint8_t* p = out.data() + i * block_bytes;
    const uint16_t d = random_scale_bits(rng, dtype != GK_DTYPE_Q4_K);
    std::memcpy(p, &d, 2);
    if (dtype == GK_DTYPE_Q4_1 || dtype == GK_DTYPE_Q4_K) {
      const uint16_t m = random_scale_bits(rng, dtype == GK_DTYPE_Q4_1);
      std::memcpy(p + 2, &m, 2);
    }
  }
  return out;
}

// Values k/256 for k in [-255, 255]: exact in f32, f16 and bf16.
inline std::vector<float> exact_values(int64_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int> k(-255, 255);
  std::vector<float> v(static_cast<size_t>(count));
  for (auto& x : v) x = float(k(rng)) / 256.0f;
  return v;
}

}  // namespace gk::test
