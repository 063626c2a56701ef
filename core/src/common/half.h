// f16 (IEEE binary16) and bf16 (bfloat16) bit conversions for the core (weights). Widening
// is exact; narrowing rounds to nearest even, overflows to Inf, and keeps NaN a NaN (quiet,
// with the sign). The plugins keep their own copy (plugins/cpu/half.h): the core and the
// plugins share no code.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace gk {

inline float f16_to_f32(uint16_t h) {
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

inline float bf16_to_f32(uint16_t h) {
  return std::bit_cast<float>(uint32_t(h) << 16);
}

inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x0040u);  // quiet NaN
  // Adding 0x7fff plus the kept lowest bit rounds the dropped 16 bits to nearest even; a
  // carry into the exponent is the correct rounding up (to Inf past the largest).
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // 65520 and up: Inf
  if (magnitude >= 0x38800000u) {
    // Normal in f16: rebias by 127 - 15 and round the 13 dropped bits to nearest even.
    const uint32_t rebiased = magnitude - 0x38000000u;
    return uint16_t(sign | ((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13));
  }
  if (magnitude < 0x33000000u) return sign;  // at most half the smallest subnormal: zero
  // Subnormal in f16: the significand (with its implicit bit) shifted to units of 2^-24.
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - (magnitude >> 23);  // 14 .. 24
  uint32_t result = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (result & 1u))) ++result;
  return uint16_t(sign | result);
}

// A double rounded once (to nearest even) to a binary format of `exponent_bits` and
// `mantissa_bits` (f16: 5, 10; bf16: 8, 7), as its bits. Rounding a double directly, not
// through f32, avoids rounding twice.
inline uint16_t f64_to_small_float(double v, int exponent_bits, int mantissa_bits) {
  const uint16_t sign = std::signbit(v) ? uint16_t(1u << (exponent_bits + mantissa_bits)) : 0;
  const uint16_t inf = uint16_t(((1u << exponent_bits) - 1) << mantissa_bits);
  if (std::isnan(v)) return uint16_t(sign | inf | (1u << (mantissa_bits - 1)));
  const double a = std::fabs(v);
  if (std::isinf(a)) return uint16_t(sign | inf);
  if (a == 0) return sign;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int min_exponent = 1 - bias;  // of the smallest normal
  int e = std::ilogb(a);
  if (e > bias + 1) return uint16_t(sign | inf);  // far past the largest finite value
  if (e < min_exponent) e = min_exponent;         // subnormal: the smallest normal's spacing
  // Units of the result's last place at exponent e; scaling by a power of two is exact.
  const double units = std::nearbyint(std::ldexp(a, mantissa_bits - e));
  uint32_t bits;
  if (units < std::ldexp(1.0, mantissa_bits)) {
    bits = uint32_t(units);  // subnormal (or, at 2^mantissa_bits, the smallest normal)
  } else {
    // units in [2^m, 2^(m+1)]: the top value carries into the next exponent, as it should.
    bits = (uint32_t(e + bias) << mantissa_bits) + (uint32_t(units) - (1u << mantissa_bits));
  }
  if (bits >= inf) return uint16_t(sign | inf);
  return uint16_t(sign | bits);
}

inline uint16_t f64_to_f16(double v) {
  return f64_to_small_float(v, 5, 10);
}
inline uint16_t f64_to_bf16(double v) {
  return f64_to_small_float(v, 8, 7);
}

}  // namespace gk
