// matmul with a block-quantized weight on the cpu device: the cpu plugin's products against
// a float64 reference on the dequantized weights (kernels/quant/gguf_blocks.h, which
// tests/python/test_weights.py holds bit-exact with gguf-py), and every refused call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant/gguf_blocks.h"
#include "quant_blocks.h"
#include "test_runtime.h"

namespace gk::test {
namespace {

const int32_t kPacked[] = {GK_DTYPE_Q8_0, GK_DTYPE_Q4_0, GK_DTYPE_Q4_1, GK_DTYPE_Q4_K};

std::vector<double> dequantized(int32_t dtype, const std::vector<uint8_t>& b, int64_t n,
                                int64_t k) {
  std::vector<float> w(static_cast<size_t>(n * k));
  quant::dequantize_blocks(dtype, b.data(), n * k / gk_dtype_block(dtype, nullptr), w.data());
  return std::vector<double>(w.begin(), w.end());
}

class MatmulQuant : public ::testing::Test {
 protected:
  void SetUp() override { rt_ = make_runtime(test_options()); }

  TensorPtr packed(int32_t dtype, int64_t n, int64_t k, const std::vector<uint8_t>& bytes) {
    TensorPtr t = make_tensor(rt_.get(), dtype, {n, k});
    EXPECT_EQ(gk_copy_from_host(t.get(), bytes.data(), bytes.size(), nullptr), GK_OK)
        << gk_last_error();
    return t;
  }

  // f32 values as `dtype` (exact: the values are multiples of 1/256 below 1 in magnitude).
  TensorPtr floats(const std::vector<float>& v, std::vector<int64_t> shape, int32_t dtype) {
    TensorPtr f32 = tensor_from(rt_.get(), v, shape);
    if (dtype == GK_DTYPE_F32) return f32;
    TensorPtr out = make_tensor(rt_.get(), dtype, shape);
    EXPECT_EQ(op_call(rt_.get(), "cast", {f32.get()}, {out.get()}), GK_OK) << gk_last_error();
    return out;
  }

  RuntimePtr rt_;
};

TEST_F(MatmulQuant, packed_weights_match_float64_reference) {
  std::mt19937 rng(1234);
  int checked = 0;
  for (int32_t dtype : kPacked) {
    const int64_t block = gk_dtype_block(dtype, nullptr);
    for (int64_t m : {1, 3, 17}) {
      for (auto [n, k] :
           {std::pair<int64_t, int64_t>{5, block}, {33, 2 * block}, {64, 4 * block}}) {
        for (bool bias : {false, true}) {
          for (int32_t a_dtype : {GK_DTYPE_F32, GK_DTYPE_BF16, GK_DTYPE_F16}) {
            SCOPED_TRACE(std::string(gk_dtype_name(dtype)) + " M=" + std::to_string(m) +
                         " N=" + std::to_string(n) + " K=" + std::to_string(k) +
                         " bias=" + std::to_string(bias) + " a=" + gk_dtype_name(a_dtype));
            const std::vector<uint8_t> bytes = random_blocks(dtype, n * k, rng);
            const std::vector<double> w = dequantized(dtype, bytes, n, k);
            const std::vector<float> a = exact_values(m * k, rng);
            const std::vector<float> bv = exact_values(n, rng);
            TensorPtr ta = floats(a, {m, k}, a_dtype);
            TensorPtr tb = packed(dtype, n, k, bytes);
            TensorPtr tbias = floats(bv, {n}, a_dtype);
            TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {m, n});
            std::vector<gk_tensor*> in = {ta.get(), tb.get()};
            if (bias) in.push_back(tbias.get());
            ASSERT_EQ(op_call(rt_.get(), "matmul", in, {out.get()}, {int_attr("transpose_b", 1)}),
                      GK_OK)
                << gk_last_error();
            const std::vector<float> got = read_f32(out.get(), size_t(m * n));
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                double ref = bias ? bv[size_t(j)] : 0.0, scale = bias ? std::fabs(ref) : 0.0;
                for (int64_t kk = 0; kk < k; ++kk) {
                  const double p = double(a[size_t(i * k + kk)]) * w[size_t(j * k + kk)];
                  ref += p;
                  scale += std::fabs(p);
                }
                // f64 accumulation rounded once to f32.
                ASSERT_NEAR(got[size_t(i * n + j)], ref, 1e-6 * scale + 1e-30)
                    << "out[" << i << ", " << j << "]";
              }
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 3 * 3 * 2 * 3);
}

TEST_F(MatmulQuant, packed_weight_takes_alpha_beta_and_activation) {
  std::mt19937 rng(7);
  const int64_t m = 2, n = 9, k = 64;
  const std::vector<uint8_t> bytes = random_blocks(GK_DTYPE_Q8_0, n * k, rng);
  const std::vector<double> w = dequantized(GK_DTYPE_Q8_0, bytes, n, k);
  const std::vector<float> a = exact_values(m * k, rng), old = exact_values(m * n, rng);
  TensorPtr ta = floats(a, {m, k}, GK_DTYPE_F32);
  TensorPtr tb = packed(GK_DTYPE_Q8_0, n, k, bytes);
  TensorPtr out = tensor_from(rt_.get(), old, {m, n});
  gk_attr relu{};
  relu.name = "activation";
  relu.type = GK_ATTR_STRING;
  relu.value.s = "relu";
  ASSERT_EQ(op_call(rt_.get(), "matmul", {ta.get(), tb.get()}, {out.get()},
                    {int_attr("transpose_b", 1), float_attr("alpha", 0.5), float_attr("beta", 2.0),
                     relu}),
            GK_OK)
      << gk_last_error();
  const std::vector<float> got = read_f32(out.get(), size_t(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < k; ++kk)
        acc += double(a[size_t(i * k + kk)]) * w[size_t(j * k + kk)];
      const double ref = std::max(0.0, 0.5 * acc + 2.0 * old[size_t(i * n + j)]);
      EXPECT_NEAR(got[size_t(i * n + j)], ref, 1e-5);
    }
  }
}

// The status and message of a refused call.
std::pair<gk_status, std::string> refused(gk_status s) {
  return {s, s == GK_OK ? std::string() : std::string(gk_last_error())};
}

TEST_F(MatmulQuant, refuses_packed_weight_without_transpose_b) {
  std::mt19937 rng(1);
  TensorPtr a = floats(exact_values(64, rng), {1, 64}, GK_DTYPE_F32);
  TensorPtr b = packed(GK_DTYPE_Q8_0, 64, 64, random_blocks(GK_DTYPE_Q8_0, 64 * 64, rng));
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {1, 64});
  auto [s, msg] = refused(op_call(rt_.get(), "matmul", {a.get(), b.get()}, {out.get()}));
  EXPECT_EQ(s, GK_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("transpose_b = 1"), std::string::npos) << msg;
}

TEST_F(MatmulQuant, refuses_packed_weight_with_batch_dims) {
  std::mt19937 rng(2);
  TensorPtr a = floats(exact_values(64, rng), {1, 64}, GK_DTYPE_F32);
  TensorPtr b = make_tensor(rt_.get(), GK_DTYPE_Q4_0, {2, 3, 64});
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 1, 3});
  auto [s, msg] = refused(
      op_call(rt_.get(), "matmul", {a.get(), b.get()}, {out.get()}, {int_attr("transpose_b", 1)}));
  EXPECT_EQ(s, GK_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("expected 2 dimensions [N, K]"), std::string::npos) << msg;
}

TEST_F(MatmulQuant, refuses_packed_a) {
  std::mt19937 rng(3);
  TensorPtr a = packed(GK_DTYPE_Q8_0, 1, 64, random_blocks(GK_DTYPE_Q8_0, 64, rng));
  TensorPtr b = packed(GK_DTYPE_Q8_0, 4, 64, random_blocks(GK_DTYPE_Q8_0, 4 * 64, rng));
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {1, 4});
  auto [s, msg] = refused(
      op_call(rt_.get(), "matmul", {a.get(), b.get()}, {out.get()}, {int_attr("transpose_b", 1)}));
  EXPECT_EQ(s, GK_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("input 'a'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("block-quantized"), std::string::npos) << msg;
}

TEST_F(MatmulQuant, refuses_output_other_than_f32) {
  std::mt19937 rng(4);
  TensorPtr a = floats(exact_values(64, rng), {1, 64}, GK_DTYPE_BF16);
  TensorPtr b = packed(GK_DTYPE_Q4_1, 4, 64, random_blocks(GK_DTYPE_Q4_1, 4 * 64, rng));
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_BF16, {1, 4});
  auto [s, msg] = refused(
      op_call(rt_.get(), "matmul", {a.get(), b.get()}, {out.get()}, {int_attr("transpose_b", 1)}));
  EXPECT_EQ(s, GK_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("f32"), std::string::npos) << msg;
}

TEST_F(MatmulQuant, refuses_bias_in_another_dtype_than_a) {
  std::mt19937 rng(5);
  TensorPtr a = floats(exact_values(64, rng), {1, 64}, GK_DTYPE_BF16);
  TensorPtr b = packed(GK_DTYPE_Q4_0, 4, 64, random_blocks(GK_DTYPE_Q4_0, 4 * 64, rng));
  TensorPtr bias = floats(exact_values(4, rng), {4}, GK_DTYPE_F32);
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {1, 4});
  auto [s, msg] = refused(op_call(rt_.get(), "matmul", {a.get(), b.get(), bias.get()}, {out.get()},
                                  {int_attr("transpose_b", 1)}));
  EXPECT_EQ(s, GK_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("bias"), std::string::npos) << msg;
}

TEST_F(MatmulQuant, refuses_a_packed_dtype_no_plugin_lists) {
  // q6_k is a packed dtype the op's rules take, but no plugin here lists it for matmul.
  std::mt19937 rng(6);
  TensorPtr a = floats(exact_values(256, rng), {1, 256}, GK_DTYPE_F32);
  TensorPtr b = make_tensor(rt_.get(), GK_DTYPE_Q6_K, {2, 256});
  std::vector<uint8_t> zeros(2 * 210, 0);
  ASSERT_EQ(gk_copy_from_host(b.get(), zeros.data(), zeros.size(), nullptr), GK_OK);
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {1, 2});
  auto [s, msg] = refused(
      op_call(rt_.get(), "matmul", {a.get(), b.get()}, {out.get()}, {int_attr("transpose_b", 1)}));
  EXPECT_NE(s, GK_OK);
  EXPECT_NE(msg.find("does not list q6_k"), std::string::npos) << msg;
}

TEST_F(MatmulQuant, packed_weights_cannot_be_strided_or_cut_inside_a_block) {
  // A packed tensor is contiguous with whole blocks along K: such views never exist, so no
  // matmul sees them.
  gk_tensor_desc d = desc(GK_DTYPE_Q8_0, {4, 48});
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_create(rt_.get(), 0, &d, nullptr, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("multiple of 32"), std::string::npos)
      << gk_last_error();
  d = desc(GK_DTYPE_Q8_0, {4, 64});
  d.has_strides = 1;
  d.strides[0] = 128;
  d.strides[1] = 1;
  EXPECT_EQ(gk_tensor_create(rt_.get(), 0, &d, nullptr, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("contiguous"), std::string::npos) << gk_last_error();
}

}  // namespace
}  // namespace gk::test
