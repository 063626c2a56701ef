// matmul with a block-quantized weight on the GPU (matmul_gemv's gemv_quant kernel) against
// the cpu plugin on the same packed bytes and inputs. Each element must be within
// 1e-5 · Σ|a·w| of the cpu's (f32 accumulation in another order against f64); the output is
// poisoned (NaN) first, so an unwritten element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_runtime.h"
#include "quant/gguf_blocks.h"
#include "quant_blocks.h"

namespace gk::test {
namespace {

struct QuantCase {
  int32_t dtype;
  int64_t m, n, k;
  int32_t a_dtype;
  bool bias;
};

std::string name_of(const QuantCase& c) {
  return std::string(gk_dtype_name(c.dtype)) + " M=" + std::to_string(c.m) +
         " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
         " a=" + gk_dtype_name(c.a_dtype) + (c.bias ? " bias" : "");
}

std::vector<QuantCase> quant_cases() {
  std::vector<QuantCase> out;
  for (int32_t dtype : {GK_DTYPE_Q8_0, GK_DTYPE_Q4_0, GK_DTYPE_Q4_1, GK_DTYPE_Q4_K}) {
    const int64_t block = gk_dtype_block(dtype, nullptr);
    // Shapes of real projections (SmolLM2 576, Llama 3.2 1B 2048 / 8192) and odd ones: one
    // block, a row ending inside a chunk, a K past 48 KB of shared memory per row of a.
    const std::vector<std::pair<int64_t, int64_t>> shapes = {
        {5, block},   {33, 7 * block}, {576, block == 32 ? 576 : 512},
        {2048, 2048}, {512, 8192},     {64, 14336}};
    for (auto [n, k] : shapes) {
      for (int64_t m : {1, 3, 8, 17}) {
        out.push_back({dtype, m, n, k, GK_DTYPE_BF16, m == 3});
      }
      out.push_back({dtype, 1, n, k, GK_DTYPE_F32, true});
      out.push_back({dtype, 2, n, k, GK_DTYPE_F16, false});
    }
  }
  return out;
}

class GpuMatmulQuant : public ::testing::Test {
 protected:
  TensorPtr upload(gk_tensor* host, int32_t dev) {
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    EXPECT_EQ(gk_tensor_get_desc(host, &d), GK_OK);
    gk_tensor* t = nullptr;
    d.has_strides = 0;
    EXPECT_EQ(gk_tensor_create(rt_.get(), dev, &d, nullptr, &t), GK_OK) << gk_last_error();
    EXPECT_EQ(gk_copy(t, host, nullptr), GK_OK) << gk_last_error();
    return TensorPtr(t);
  }

  TensorPtr floats(const std::vector<float>& v, std::vector<int64_t> shape, int32_t dtype) {
    TensorPtr f32 = tensor_from(rt_.get(), v, shape);
    if (dtype == GK_DTYPE_F32) return f32;
    TensorPtr out = make_tensor(rt_.get(), dtype, shape);
    EXPECT_EQ(op_call(rt_.get(), "cast", {f32.get()}, {out.get()}), GK_OK) << gk_last_error();
    return out;
  }

  RuntimePtr rt_;
};

TEST_F(GpuMatmulQuant, packed_weights_match_the_cpu_reference) {
  rt_ = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt_.get(), dev);
  std::mt19937 rng(20261129);
  int passed = 0;
  for (const QuantCase& c : quant_cases()) {
    SCOPED_TRACE(name_of(c));
    const uint32_t block = gk_dtype_block(c.dtype, nullptr);
    const std::vector<uint8_t> bytes = random_blocks(c.dtype, c.n * c.k, rng);
    const std::vector<float> a = exact_values(c.m * c.k, rng), bv = exact_values(c.n, rng);
    TensorPtr b_cpu = make_tensor(rt_.get(), c.dtype, {c.n, c.k});
    ASSERT_EQ(gk_copy_from_host(b_cpu.get(), bytes.data(), bytes.size(), nullptr), GK_OK);
    TensorPtr a_cpu = floats(a, {c.m, c.k}, c.a_dtype);
    TensorPtr bias_cpu = floats(bv, {c.n}, c.a_dtype);
    TensorPtr b_gpu = upload(b_cpu.get(), dev), a_gpu = upload(a_cpu.get(), dev);
    TensorPtr bias_gpu = upload(bias_cpu.get(), dev);
    TensorPtr out_cpu = make_tensor(rt_.get(), GK_DTYPE_F32, {c.m, c.n});
    TensorPtr out_gpu = make_tensor(rt_.get(), GK_DTYPE_F32, {c.m, c.n}, dev);
    std::vector<uint8_t> poison(size_t(c.m * c.n) * 4, 0xff);
    ASSERT_EQ(gk_copy_from_host(out_gpu.get(), poison.data(), poison.size(), nullptr), GK_OK);
    std::vector<gk_tensor*> in_cpu = {a_cpu.get(), b_cpu.get()};
    std::vector<gk_tensor*> in_gpu = {a_gpu.get(), b_gpu.get()};
    if (c.bias) {
      in_cpu.push_back(bias_cpu.get());
      in_gpu.push_back(bias_gpu.get());
    }
    const gk_attr tb = int_attr("transpose_b", 1);
    ASSERT_EQ(op_call(rt_.get(), "matmul", in_cpu, {out_cpu.get()}, {tb}), GK_OK)
        << gk_last_error();
    ASSERT_EQ(op_call(rt_.get(), "matmul", in_gpu, {out_gpu.get()}, {tb}), GK_OK)
        << gk_last_error();
    const std::vector<float> ref = read_f32(out_cpu.get(), size_t(c.m * c.n));
    const std::vector<float> got = read_f32(out_gpu.get(), size_t(c.m * c.n));
    // Σ|a·w| per element, from the weights dequantized on the host.
    std::vector<float> w(size_t(c.n * c.k));
    quant::dequantize_blocks(c.dtype, bytes.data(), c.n * c.k / block, w.data());
    int bad = 0;
    for (int64_t i = 0; i < c.m && bad < 5; ++i) {
      for (int64_t j = 0; j < c.n && bad < 5; ++j) {
        double scale = c.bias ? std::fabs(bv[size_t(j)]) : 0.0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          scale += std::fabs(double(a[size_t(i * c.k + kk)]) * w[size_t(j * c.k + kk)]);
        }
        const float r = ref[size_t(i * c.n + j)], g = got[size_t(i * c.n + j)];
        if (!(std::fabs(double(g) - r) <= 1e-5 * scale + 1e-30)) {
          ADD_FAILURE() << "out[" << i << ", " << j << "] = " << g << ", cpu " << r << " (scale "
                        << scale << ")";
          ++bad;
        }
      }
    }
    passed += bad == 0;
  }
  std::printf("gemv_quant: %d of %zu cases match the cpu plugin\n", passed, quant_cases().size());
}

TEST_F(GpuMatmulQuant, epilogue_alpha_beta_and_activation_match_the_cpu_reference) {
  rt_ = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt_.get(), dev);
  std::mt19937 rng(5);
  const int64_t m = 3, n = 100, k = 512;
  const std::vector<uint8_t> bytes = random_blocks(GK_DTYPE_Q4_K, n * k, rng);
  TensorPtr b_cpu = make_tensor(rt_.get(), GK_DTYPE_Q4_K, {n, k});
  ASSERT_EQ(gk_copy_from_host(b_cpu.get(), bytes.data(), bytes.size(), nullptr), GK_OK);
  TensorPtr a_cpu = floats(exact_values(m * k, rng), {m, k}, GK_DTYPE_BF16);
  TensorPtr out_cpu = tensor_from(rt_.get(), exact_values(m * n, rng), {m, n});
  TensorPtr b_gpu = upload(b_cpu.get(), dev), a_gpu = upload(a_cpu.get(), dev);
  TensorPtr out_gpu = upload(out_cpu.get(), dev);
  gk_attr silu{};
  silu.name = "activation";
  silu.type = GK_ATTR_STRING;
  silu.value.s = "silu";
  const std::vector<gk_attr> attrs = {int_attr("transpose_b", 1), float_attr("alpha", 0.25),
                                      float_attr("beta", -1.5), silu};
  ASSERT_EQ(op_call(rt_.get(), "matmul", {a_cpu.get(), b_cpu.get()}, {out_cpu.get()}, attrs), GK_OK)
      << gk_last_error();
  ASSERT_EQ(op_call(rt_.get(), "matmul", {a_gpu.get(), b_gpu.get()}, {out_gpu.get()}, attrs), GK_OK)
      << gk_last_error();
  const std::vector<float> ref = read_f32(out_cpu.get(), size_t(m * n));
  const std::vector<float> got = read_f32(out_gpu.get(), size_t(m * n));
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(got[i], ref[i], 1e-4 * (1.0 + std::fabs(ref[i]))) << "element " << i;
  }
}

TEST_F(GpuMatmulQuant, transposed_a_is_declined_naming_the_reason) {
  rt_ = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt_.get(), dev);
  std::mt19937 rng(6);
  const int64_t m = 2, n = 8, k = 64;
  const std::vector<uint8_t> bytes = random_blocks(GK_DTYPE_Q8_0, n * k, rng);
  TensorPtr b_cpu = make_tensor(rt_.get(), GK_DTYPE_Q8_0, {n, k});
  ASSERT_EQ(gk_copy_from_host(b_cpu.get(), bytes.data(), bytes.size(), nullptr), GK_OK);
  TensorPtr a_cpu = floats(exact_values(k * m, rng), {k, m}, GK_DTYPE_F32);
  TensorPtr b_gpu = upload(b_cpu.get(), dev), a_gpu = upload(a_cpu.get(), dev);
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {m, n}, dev);
  const gk_status s = op_call(rt_.get(), "matmul", {a_gpu.get(), b_gpu.get()}, {out.get()},
                              {int_attr("transpose_a", 1), int_attr("transpose_b", 1)});
  EXPECT_NE(s, GK_OK);
  EXPECT_NE(std::string(gk_last_error()).find("contiguous along K"), std::string::npos)
      << gk_last_error();
}

}  // namespace
}  // namespace gk::test
