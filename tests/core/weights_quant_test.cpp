// Dequantization and float conversion of weights, against references written here from the
// formats' descriptions: element by element, each value computed as llama.cpp's
// dequantize_row_* computes it (the same float operations in the same order; this file is
// compiled without contraction), and rounding found by searching every f16/bf16 value.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "test_runtime.h"
#include "weights_writer.h"

namespace gk::test {
namespace {

double half_value(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY)
             : e     ? std::ldexp(1024.0 + m, e - 25)
                     : std::ldexp(m, -24);
  return (h & 0x8000) ? -v : v;
}
double bf16_value(uint16_t h) {
  return std::bit_cast<float>(uint32_t(h) << 16);
}

// Every finite non-negative value of a 16-bit format, sorted, plus the first value past the
// largest (standing for Inf: a value at least halfway there rounds to it).
struct Format {
  std::vector<std::pair<double, uint16_t>> values;
  uint16_t inf;
  Format(double (*decode)(uint16_t), uint16_t inf_bits, double past_largest) : inf(inf_bits) {
    for (uint32_t b = 0; b < inf_bits; ++b) values.emplace_back(decode(uint16_t(b)), uint16_t(b));
    values.emplace_back(past_largest, inf_bits);
    std::sort(values.begin(), values.end());
  }
  // Round to nearest, ties to the even bit pattern.
  uint16_t round(double x) const {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(x);
    if (a >= values.back().first) return sign | inf;
    auto hi = std::lower_bound(values.begin(), values.end(), std::make_pair(a, uint16_t(0)));
    if (hi->first == a) return sign | hi->second;
    auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    if (dl < dh) return sign | lo->second;
    if (dh < dl) return sign | hi->second;
    return sign | ((lo->second & 1) ? hi->second : lo->second);
  }
};
const Format& f16_format() {
  static const Format f(&half_value, 0x7c00, 65536.0);
  return f;
}
const Format& bf16_format() {
  static const Format f(&bf16_value, 0x7f80, std::ldexp(1.0, 128));
  return f;
}

bool is_nan_bits(uint16_t h, const Format& f) {
  return (h & 0x7fff) > f.inf;
}

// ---- the reference dequantization, one element at a time ----

float h(const uint8_t* p) {
  return float(half_value(uint16_t(p[0] | (p[1] << 8))));
}

float ref_q8_0(const uint8_t* b, int i) {
  return float(int8_t(b[2 + i])) * h(b);
}
float ref_q4_0(const uint8_t* b, int i) {
  const uint8_t byte = b[2 + i % 16];
  const int q = i < 16 ? byte & 15 : byte >> 4;
  return float(q - 8) * h(b);
}
float ref_q4_1(const uint8_t* b, int i) {
  const uint8_t byte = b[4 + i % 16];
  const int q = i < 16 ? byte & 15 : byte >> 4;
  return float(q) * h(b) + h(b + 2);
}
// The k-quants' 12 scale bytes: sub-block j < 4 has its 6-bit scale in byte j and min in
// byte j + 4; j >= 4 has the low 4 bits of both in byte j + 4 (scale low nibble, min high
// nibble) and their top 2 bits in the top of bytes j - 4 (scale) and j (min).
int k_scale(const uint8_t* s, int j) {
  return j < 4 ? s[j] % 64 : (s[j + 4] % 16) + 16 * (s[j - 4] / 64);
}
int k_min(const uint8_t* s, int j) {
  return j < 4 ? s[j + 4] % 64 : (s[j + 4] / 16) + 16 * (s[j] / 64);
}
float ref_k(const uint8_t* b, int i, bool five) {
  const int j = i / 32, l = i % 32;
  const uint8_t* qs = b + (five ? 48 : 16);
  const uint8_t byte = qs[32 * (j / 2) + l];
  int q = j % 2 ? byte >> 4 : byte & 15;
  if (five && (b[16 + l] >> j) & 1) q += 16;
  const float scale = h(b) * float(k_scale(b + 4, j));
  const float min = h(b + 2) * float(k_min(b + 4, j));
  return scale * float(q) - min;
}
float ref_q6_k(const uint8_t* b, int i) {
  const int half = i / 128, quarter = (i % 128) / 32, l = i % 32;
  const uint8_t low_byte = b[64 * half + l + (quarter % 2) * 32];
  const int low = quarter < 2 ? low_byte & 15 : low_byte >> 4;
  const int high = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
  const int q = (low | (high << 4)) - 32;
  const int8_t scale = int8_t(b[192 + 8 * half + 2 * quarter + l / 16]);
  return h(b + 208) * float(scale) * float(q);
}

struct QuantCase {
  uint32_t ggml;
  int32_t dtype;
  int block, bytes;
  std::vector<int> half_fields;  // offsets of the f16 fields in a block
  float (*ref)(const uint8_t*, int);
};
float ref_q4_k(const uint8_t* b, int i) {
  return ref_k(b, i, false);
}
float ref_q5_k(const uint8_t* b, int i) {
  return ref_k(b, i, true);
}

const QuantCase kQuantCases[] = {
    {kGgmlQ8_0, GK_DTYPE_Q8_0, 32, 34, {0}, &ref_q8_0},
    {kGgmlQ4_0, GK_DTYPE_Q4_0, 32, 18, {0}, &ref_q4_0},
    {kGgmlQ4_1, GK_DTYPE_Q4_1, 32, 20, {0, 2}, &ref_q4_1},
    {kGgmlQ4_K, GK_DTYPE_Q4_K, 256, 144, {0, 2}, &ref_q4_k},
    {kGgmlQ5_K, GK_DTYPE_Q5_K, 256, 176, {0, 2}, &ref_q5_k},
    {kGgmlQ6_K, GK_DTYPE_Q6_K, 256, 210, {208}, &ref_q6_k},
};

struct WeightsDeleter {
  void operator()(gk_weights* w) const { gk_weights_close(w); }
};

class WeightsConvert : public ::testing::Test {
 protected:
  RuntimePtr rt_ = make_runtime(test_options());
  ScratchDir dir_;

  std::unique_ptr<gk_weights, WeightsDeleter> open(const std::string& path) {
    gk_weights* w = nullptr;
    EXPECT_EQ(gk_weights_open(rt_.get(), path.c_str(), nullptr, &w), GK_OK) << gk_last_error();
    return std::unique_ptr<gk_weights, WeightsDeleter>(w);
  }
  template <typename T>
  std::vector<T> get(gk_weights* w, const char* name, int32_t dtype, size_t count) {
    gk_tensor* t = nullptr;
    EXPECT_EQ(gk_weights_get(w, name, 0, dtype, nullptr, &t), GK_OK) << gk_last_error();
    std::vector<T> out(count);
    EXPECT_EQ(gk_copy_to_host(t, out.data(), count * sizeof(T), nullptr), GK_OK) << gk_last_error();
    gk_tensor_release(t);
    return out;
  }
};

TEST_F(WeightsConvert, DequantizationMatchesTheReferenceBitForBit) {
  std::mt19937 rng(1234);
  GgufWriter g;
  std::vector<Bytes> data;
  for (const QuantCase& c : kQuantCases) {
    const int rows = 3, blocks_per_row = c.block == 32 ? 4 : 2;
    Bytes bytes(size_t(rows * blocks_per_row * c.bytes));
    for (auto& b : bytes) b = uint8_t(rng());
    for (size_t block = 0; block < bytes.size() / size_t(c.bytes); ++block) {
      for (int field : c.half_fields) {
        // A finite scale, either sign, exponent 1..28 (normal) or 0 (subnormal).
        const uint16_t e = uint16_t(rng() % 29), m = uint16_t(rng() % 1024);
        const uint16_t bits = uint16_t((rng() & 0x8000) | (e << 10) | m);
        bytes[block * size_t(c.bytes) + size_t(field)] = uint8_t(bits);
        bytes[block * size_t(c.bytes) + size_t(field) + 1] = uint8_t(bits >> 8);
      }
    }
    g.tensor(std::string("q") + gk_dtype_name(c.dtype), {rows, int64_t(blocks_per_row * c.block)},
             c.ggml, bytes);
    data.push_back(std::move(bytes));
  }
  auto w = open(dir_.write("q.gguf", g.bytes()));
  for (size_t k = 0; k < std::size(kQuantCases); ++k) {
    const QuantCase& c = kQuantCases[k];
    SCOPED_TRACE(gk_dtype_name(c.dtype));
    const std::string name = std::string("q") + gk_dtype_name(c.dtype);
    const size_t blocks = data[k].size() / size_t(c.bytes);
    const size_t elements = blocks * size_t(c.block);
    std::vector<float> expected(elements);
    for (size_t b = 0; b < blocks; ++b) {
      for (int i = 0; i < c.block; ++i) {
        expected[b * size_t(c.block) + size_t(i)] = c.ref(data[k].data() + b * size_t(c.bytes), i);
      }
    }
    // As stored: the packed bytes, unchanged.
    EXPECT_EQ(get<uint8_t>(w.get(), name.c_str(), 0, data[k].size()), data[k]);
    const auto f32 = get<float>(w.get(), name.c_str(), GK_DTYPE_F32, elements);
    const auto f16 = get<uint16_t>(w.get(), name.c_str(), GK_DTYPE_F16, elements);
    const auto bf16 = get<uint16_t>(w.get(), name.c_str(), GK_DTYPE_BF16, elements);
    size_t mismatches = 0;
    for (size_t i = 0; i < elements; ++i) {
      mismatches += std::bit_cast<uint32_t>(f32[i]) != std::bit_cast<uint32_t>(expected[i]);
      mismatches += f16[i] != f16_format().round(expected[i]);
      mismatches += bf16[i] != bf16_format().round(expected[i]);
      if (mismatches && mismatches < 4) {
        ADD_FAILURE() << "element " << i << ": " << f32[i] << " expected " << expected[i];
      }
    }
    EXPECT_EQ(mismatches, 0u);
    gk_tensor* refused = nullptr;
    EXPECT_EQ(gk_weights_get(w.get(), name.c_str(), 0, GK_DTYPE_F64, nullptr, &refused),
              GK_INVALID_ARGUMENT);
  }
}

TEST_F(WeightsConvert, FloatsConvertRoundingToNearestEven) {
  std::mt19937_64 rng(99);
  std::vector<float> f32 = {0.0f,
                            -0.0f,
                            1.0f,
                            -2.5f,
                            65504.0f,
                            65519.99f,
                            65520.0f,
                            1e-8f,
                            5.9604645e-8f,
                            2.9802322e-8f,
                            2.9802326e-8f,
                            1.0f + 0x1p-11f,
                            1.0f + 0x1p-8f,
                            3.0e38f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            1e-40f};
  std::vector<double> f64 = {0.0,
                             -0.0,
                             1.0 + 0x1p-11 + 0x1p-40,
                             1.0 + 0x1p-11,
                             65520.0,
                             65519.999,
                             1e300,
                             -1e300,
                             1e-300,
                             0x1p-25 + 0x1p-60,
                             0x1p-25,
                             1.0 + 0x1p-8 + 0x1p-50,
                             std::numeric_limits<double>::infinity()};
  for (int i = 0; i < 4000; ++i) {
    const uint32_t bits = uint32_t(rng());
    if (((bits >> 23) & 0xff) == 0xff) continue;  // NaN and Inf checked apart
    f32.push_back(std::bit_cast<float>(bits));
    f64.push_back(std::ldexp(double(int64_t(rng() >> 11)), int(rng() % 80) - 100));
  }
  std::vector<uint16_t> h16, b16;
  for (uint32_t b = 0; b < 65536; b += 7) {
    if ((b & 0x7c00) != 0x7c00) h16.push_back(uint16_t(b));
    if ((b & 0x7f80) != 0x7f80) b16.push_back(uint16_t(b));
  }
  f32.push_back(std::numeric_limits<float>::quiet_NaN());
  f64.push_back(-std::numeric_limits<double>::quiet_NaN());
  const std::string path = dir_.write(
      "f.safetensors", safetensors_file({{"f32", "F32", {int64_t(f32.size())}, bytes_of(f32)},
                                         {"f64", "F64", {int64_t(f64.size())}, bytes_of(f64)},
                                         {"f16", "F16", {int64_t(h16.size())}, bytes_of(h16)},
                                         {"bf16", "BF16", {int64_t(b16.size())}, bytes_of(b16)}}));
  auto w = open(path);
  auto check16 = [&](const std::vector<uint16_t>& got, const std::vector<double>& source,
                     const Format& f, const char* what) {
    size_t bad = 0;
    for (size_t i = 0; i < source.size(); ++i) {
      const bool ok = std::isnan(source[i]) ? is_nan_bits(got[i], f) : got[i] == f.round(source[i]);
      if (!ok && ++bad < 4) {
        ADD_FAILURE() << what << " element " << i << ": " << source[i] << " gave 0x" << std::hex
                      << got[i] << ", expected 0x" << f.round(source[i]);
      }
    }
    EXPECT_EQ(bad, 0u) << what;
  };
  const std::vector<double> f32_values(f32.begin(), f32.end());
  check16(get<uint16_t>(w.get(), "f32", GK_DTYPE_F16, f32.size()), f32_values, f16_format(),
          "f32->f16");
  check16(get<uint16_t>(w.get(), "f32", GK_DTYPE_BF16, f32.size()), f32_values, bf16_format(),
          "f32->bf16");
  check16(get<uint16_t>(w.get(), "f64", GK_DTYPE_F16, f64.size()), f64, f16_format(), "f64->f16");
  check16(get<uint16_t>(w.get(), "f64", GK_DTYPE_BF16, f64.size()), f64, bf16_format(),
          "f64->bf16");
  std::vector<double> h16_values, b16_values;
  for (uint16_t b : h16) h16_values.push_back(half_value(b));
  for (uint16_t b : b16) b16_values.push_back(bf16_value(b));
  check16(get<uint16_t>(w.get(), "f16", GK_DTYPE_BF16, h16.size()), h16_values, bf16_format(),
          "f16->bf16");
  check16(get<uint16_t>(w.get(), "bf16", GK_DTYPE_F16, b16.size()), b16_values, f16_format(),
          "bf16->f16");
  // Widening is exact; f64 to f32 rounds as the C++ conversion does.
  const auto h32 = get<float>(w.get(), "f16", GK_DTYPE_F32, h16.size());
  const auto h64 = get<double>(w.get(), "f16", GK_DTYPE_F64, h16.size());
  for (size_t i = 0; i < h16.size(); ++i) {
    ASSERT_EQ(double(h32[i]), h16_values[i]) << i;
    ASSERT_EQ(h64[i], h16_values[i]) << i;
  }
  const auto b32 = get<float>(w.get(), "bf16", GK_DTYPE_F32, b16.size());
  for (size_t i = 0; i < b16.size(); ++i) ASSERT_EQ(double(b32[i]), b16_values[i]) << i;
  const auto d32 = get<float>(w.get(), "f64", GK_DTYPE_F32, f64.size());
  for (size_t i = 0; i + 1 < f64.size(); ++i) ASSERT_EQ(d32[i], float(f64[i])) << i;
  EXPECT_TRUE(std::isnan(d32.back()));
  const auto s64 = get<double>(w.get(), "f32", GK_DTYPE_F64, f32.size());
  for (size_t i = 0; i + 1 < f32.size(); ++i) ASSERT_EQ(s64[i], double(f32[i])) << i;
}

}  // namespace
}  // namespace gk::test
