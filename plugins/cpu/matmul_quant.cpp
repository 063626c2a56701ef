// matmul with a block-quantized weight: out = act(alpha · a · dequant(b)ᵀ + beta · out + bias),
// the reference for every plugin that reads packed GGUF weights (docs/ops.md, "matmul with a
// packed weight").
//
//   b: [N, K] packed along K (q8_0, q4_0, q4_1 or q4_k), transpose_b = 1, contiguous
//   a: [..., M, K] f32/f64/f16/bf16 (any strides; transpose_a as usual); out [..., M, N] f32
//   for each weight row n:
//     dequantize row n into f32 scratch with kernels/quant/gguf_blocks.h (bit-exact llama.cpp)
//     for each batch entry and row i of a: acc = Σ_k a[i, k] · w[k]  (f64)
//     out[i, n] = act(alpha · acc + beta · out[i, n] + bias[n]), rounded to f32
//
// Compiled with -ffp-contract=off (CMakeLists.txt) so that the decoders round as llama.cpp's.
#include <cmath>
#include <vector>

#include "cpu_ops.h"
#include "elementwise_math.h"
#include "quant/gguf_blocks.h"
#include "strided_iter.h"

namespace gk::cpu {
namespace {

bool served_packed(int32_t dtype) {
  return dtype == GK_DTYPE_Q8_0 || dtype == GK_DTYPE_Q4_0 || dtype == GK_DTYPE_Q4_1 ||
         dtype == GK_DTYPE_Q4_K;
}

// Row `row` of a packed [N, K] weight as K floats.
void dequantize_row(int32_t dtype, const uint8_t* b, int64_t k, int64_t row, float* y) {
  const plugin::DtypeInfo* info = plugin::dtype_info(dtype);
  const int64_t blocks = k / info->block;
  quant::dequantize_blocks(dtype, b + row * blocks * info->block_bytes, blocks, y);
}

}  // namespace

gk_status check_matmul_packed(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 2, 3, 1, message)) return s;
  const gk_plugin_tensor& a = args.inputs[0];
  const gk_plugin_tensor& b = args.inputs[1];
  if (!served_packed(b.dtype)) {
    return fail(message, GK_UNIMPLEMENTED, "op 'matmul': input 'b' is ", dtype_name(b.dtype),
                "; the cpu plugin reads packed q8_0, q4_0, q4_1 and q4_k weights");
  }
  if (dtype_size(a.dtype) == 0) {
    return fail(message, GK_UNIMPLEMENTED, "op 'matmul': input 'a' is ", dtype_name(a.dtype),
                "; with a packed 'b' it must be f32, f64, f16 or bf16");
  }
  gk_status s = check_dtype(args, a, "input 'a'",
                            {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16}, message);
  if (s) return s;
  if (args.num_inputs == 3 &&
      (s = check_same_dtype(args, args.inputs[2], "input 'bias'", a.dtype, "input 'a'", message))) {
    return s;
  }
  if (args.outputs[0].dtype != GK_DTYPE_F32) {
    return fail(message, GK_UNIMPLEMENTED, "op 'matmul': output 'out' has dtype ",
                dtype_name(args.outputs[0].dtype), "; a packed 'b' gives f32");
  }
  bool ta = false, tb = false;
  if ((s = flag_attr(args, "transpose_a", ta, message))) return s;
  if ((s = flag_attr(args, "transpose_b", tb, message))) return s;
  if (b.ndim != 2) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': packed input 'b' is ", shape_string(b),
                "; expected [N, K]");
  }
  if (!tb) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': packed input 'b' ", shape_string(b),
                " is [N, K] with blocks along K; it needs transpose_b = 1");
  }
  const uint32_t block = plugin::dtype_info(b.dtype)->block;
  if (b.shape[1] % block != 0) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': packed input 'b' ", shape_string(b),
                ": K = ", b.shape[1], " is not a multiple of the ", dtype_name(b.dtype), " block (",
                block, ")");
  }
  if ((b.shape[0] > 1 && b.strides[0] != b.shape[1]) || (b.shape[1] > 1 && b.strides[1] != 1)) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': packed input 'b' ", shape_string(b),
                " has strides [", b.strides[0], ", ", b.strides[1],
                "]; packed rows must be contiguous");
  }
  return GK_OK;
}

gk_status run_matmul_packed(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_matmul_packed(args, message)) return s;
  const gk_plugin_tensor& a = args.inputs[0];
  const gk_plugin_tensor& b = args.inputs[1];
  const gk_plugin_tensor& out = args.outputs[0];
  const bool ta = gk_attr_int(&args, "transpose_a", 0) != 0;
  const int64_t n = b.shape[0], k = b.shape[1];
  if (a.ndim < 2 || out.ndim != a.ndim) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': 'a' ", shape_string(a), " and 'out' ",
                shape_string(out), " need the same number (2 or more) of dims");
  }
  const int32_t ar = a.ndim - 2, ac = a.ndim - 1;
  const int64_t m = ta ? a.shape[ac] : a.shape[ar];
  const int64_t ka = ta ? a.shape[ar] : a.shape[ac];
  const int64_t a_row = ta ? a.strides[ac] : a.strides[ar];
  const int64_t a_col = ta ? a.strides[ar] : a.strides[ac];
  bool ok = ka == k && out.shape[out.ndim - 2] == m && out.shape[out.ndim - 1] == n;
  int64_t batch = 1;
  for (int32_t d = 0; ok && d < a.ndim - 2; ++d) {
    ok = out.shape[d] == a.shape[d];
    batch *= a.shape[d];
  }
  if (!ok) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': 'a' ", shape_string(a), ", 'b' ",
                shape_string(b), " (transposed) and 'out' ", shape_string(out), " do not fit");
  }
  const bool has_bias = args.num_inputs == 3;
  if (has_bias && (args.inputs[2].ndim != 1 || args.inputs[2].shape[0] != n)) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': input 'bias' is ",
                shape_string(args.inputs[2]), ", expected [", n, "]");
  }
  if (gk_status s = check_data(args, a, "input 'a'", message)) return s;
  if (gk_status s = check_data(args, b, "input 'b'", message)) return s;
  if (has_bias) {
    if (gk_status s = check_data(args, args.inputs[2], "input 'bias'", message)) return s;
  }
  if (gk_status s = check_data(args, out, "output 'out'", message)) return s;
  if (m == 0 || n == 0 || batch == 0) return GK_OK;

  const double alpha = gk_attr_float(&args, "alpha", 1.0);
  const double beta = gk_attr_float(&args, "beta", 0.0);
  const std::string_view act = text_attr(args, "activation", "none");

  // Byte offsets of each batch entry's matrix in a and out (row-major over the batch dims).
  const int32_t nb = a.ndim - 2;
  std::vector<int64_t> a_off(static_cast<size_t>(batch)), out_off(static_cast<size_t>(batch));
  for (int64_t e = 0; e < batch; ++e) {
    int64_t rest = e, ao = 0, oo = 0;
    for (int32_t d = nb - 1; d >= 0; --d) {
      const int64_t i = rest % a.shape[d];
      rest /= a.shape[d];
      ao += i * a.strides[d];
      oo += i * out.strides[d];
    }
    a_off[static_cast<size_t>(e)] = ao;
    out_off[static_cast<size_t>(e)] = oo;
  }
  const int64_t o_row = out.strides[out.ndim - 2], o_col = out.strides[out.ndim - 1];

  return visit_floating(
      a.dtype,
      [&](auto tag) -> gk_status {
        using T = typename decltype(tag)::type;
        constexpr int64_t kSize = sizeof(T);
        // a as f64 rows, once: [batch · M, K].
        std::vector<double> a64(static_cast<size_t>(batch * m * k));
        for (int64_t e = 0; e < batch; ++e) {
          for (int64_t i = 0; i < m; ++i) {
            const char* row = static_cast<const char*>(a.data) + (a_off[e] + i * a_row) * kSize;
            double* dst = a64.data() + (e * m + i) * k;
            for (int64_t kk = 0; kk < k; ++kk) dst[kk] = double(load<T>(row + kk * a_col * kSize));
          }
        }
        std::vector<float> w(static_cast<size_t>(k));
        float* o = static_cast<float*>(out.data);
        for (int64_t j = 0; j < n; ++j) {
          dequantize_row(b.dtype, static_cast<const uint8_t*>(b.data), k, j, w.data());
          const double bias = has_bias
                                  ? double(load<T>(static_cast<const char*>(args.inputs[2].data) +
                                                   j * args.inputs[2].strides[0] * kSize))
                                  : 0.0;
          for (int64_t r = 0; r < batch * m; ++r) {
            const double* x = a64.data() + r * k;
            double acc = 0.0;
            for (int64_t kk = 0; kk < k; ++kk) acc += x[kk] * double(w[kk]);
            float* dst = o + out_off[r / m] + (r % m) * o_row + j * o_col;
            double v = alpha * acc + bias;
            if (beta != 0.0) v += beta * double(*dst);
            if (act == "relu") v = relu(v);
            if (act == "gelu") v = gelu_erf(v);
            if (act == "silu") v = silu(v);
            *dst = static_cast<float>(v);
          }
        }
        return GK_OK;
      },
      [&] { return fail(message, GK_UNIMPLEMENTED, "op 'matmul': dtype ", dtype_name(a.dtype)); });
}

}  // namespace gk::cpu
