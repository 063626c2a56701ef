// layernorm, rmsnorm and their fused residual forms, over the last axis, in f64.
//
// The add_ forms first write sum = x + residual (rounded to the dtype), then normalise
// that stored sum, so `out` is exactly the plain norm of the `sum` output.
#include <cmath>

#include "cpu_ops.h"
#include "strided_iter.h"

namespace gk::cpu {
namespace {

struct NormSpec {
  bool rms;            // rmsnorm (else layernorm)
  bool add;            // inputs start with x, residual; outputs are out, sum
  int32_t min_inputs;  // weight (and bias) optional beyond this
  int32_t max_inputs;
};

constexpr NormSpec kLayernorm{false, false, 1, 3};
constexpr NormSpec kRmsnorm{true, false, 1, 2};
constexpr NormSpec kAddLayernorm{false, true, 3, 4};
constexpr NormSpec kAddRmsnorm{true, true, 3, 3};

const char* input_role(const NormSpec& spec, int32_t index) {
  if (spec.add) {
    constexpr const char* kRoles[] = {"input 'x'", "input 'residual'", "input 'weight'",
                                      "input 'bias'"};
    return kRoles[index];
  }
  constexpr const char* kRoles[] = {"input 'x'", "input 'weight'", "input 'bias'"};
  return kRoles[index];
}

template <const NormSpec& kSpec>
gk_status check_norm(const gk_kernel_args& args, std::string& message) {
  if (gk_status s =
          check_counts(args, kSpec.min_inputs, kSpec.max_inputs, kSpec.add ? 2 : 1, message)) {
    return s;
  }
  const gk_plugin_tensor& x = args.inputs[0];
  gk_status s = check_dtype(args, x, "input 'x'",
                            {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16}, message);
  if (s) return s;
  for (int32_t i = 1; i < args.num_inputs; ++i) {
    if ((s = check_same_dtype(args, args.inputs[i], input_role(kSpec, i), x.dtype, "input 'x'",
                              message))) {
      return s;
    }
  }
  if ((s = check_same_dtype(args, args.outputs[0], "output 'out'", x.dtype, "input 'x'",
                            message))) {
    return s;
  }
  if (kSpec.add && (s = check_same_dtype(args, args.outputs[1], "output 'sum'", x.dtype,
                                         "input 'x'", message))) {
    return s;
  }
  return GK_OK;
}

template <bool kRms, bool kAdd, class T>
void normalize_rows(const gk_kernel_args& args, const gk_plugin_tensor* weight,
                    const gk_plugin_tensor* bias, double eps) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_plugin_tensor& out = args.outputs[0];
  const int32_t last = x.ndim - 1;
  const int64_t h = x.shape[last];
  constexpr int64_t kSize = sizeof(T);
  // Operands: out, x, and for the add_ forms residual and sum.
  int64_t shape[kMaxDims];
  int64_t strides[4][kMaxDims] = {};
  const gk_plugin_tensor* tensors[4] = {&out, &x, kAdd ? &args.inputs[1] : nullptr,
                                        kAdd ? &args.outputs[1] : nullptr};
  for (int32_t d = 0; d < x.ndim; ++d) shape[d] = d == last ? 1 : x.shape[d];
  NdLoop<4> loop(x.ndim, shape);
  int64_t steps[4] = {};
  for (int k = 0; k < 4; ++k) {
    if (tensors[k] == nullptr) continue;
    byte_strides(*tensors[k], kSize, strides[k]);
    steps[k] = strides[k][last];
    loop.set_operand(k, tensors[k]->data, strides[k]);
  }
  const char* w = weight ? static_cast<const char*>(weight->data) : nullptr;
  const char* b = bias ? static_cast<const char*>(bias->data) : nullptr;
  const int64_t w_step = weight ? weight->strides[0] * kSize : 0;
  const int64_t b_step = bias ? bias->strides[0] * kSize : 0;

  loop.run([&](const std::array<char*, 4>& p, int64_t n, const std::array<int64_t, 4>& s) {
    for (int64_t i = 0; i < n; ++i) {
      char* o = p[0] + i * s[0];
      const char* src = p[1] + i * s[1];
      int64_t src_step = steps[1];
      if constexpr (kAdd) {
        char* sum = p[3] + i * s[3];
        const char* residual = p[2] + i * s[2];
        for (int64_t j = 0; j < h; ++j) {
          store<T>(sum + j * steps[3],
                   load<T>(src + j * src_step) + load<T>(residual + j * steps[2]));
        }
        src = sum;
        src_step = steps[3];
      }
      double mean = 0.0;
      double second = 0.0;  // variance (layernorm) or mean square (rmsnorm)
      if constexpr (kRms) {
        for (int64_t j = 0; j < h; ++j) {
          const double v = load<T>(src + j * src_step);
          second += v * v;
        }
      } else {
        for (int64_t j = 0; j < h; ++j) mean += load<T>(src + j * src_step);
        mean /= static_cast<double>(h);
        for (int64_t j = 0; j < h; ++j) {
          const double v = load<T>(src + j * src_step) - mean;
          second += v * v;
        }
      }
      second /= static_cast<double>(h);
      const double rstd = 1.0 / std::sqrt(second + eps);
      for (int64_t j = 0; j < h; ++j) {
        double v = (load<T>(src + j * src_step) - mean) * rstd;
        if (w) v *= load<T>(w + j * w_step);
        if (b) v += load<T>(b + j * b_step);
        store<T>(o + j * steps[0], v);
      }
    }
  });
}

template <const NormSpec& kSpec>
gk_status run_norm(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  const double eps = gk_attr_float(&args, "eps", 1e-5);
  if (x.ndim < 1) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op,
                "': input 'x' is a scalar; it needs a last axis to normalise");
  }
  const int64_t h = x.shape[x.ndim - 1];
  const int32_t first_param = kSpec.add ? 2 : 1;
  const gk_plugin_tensor* weight =
      args.num_inputs > first_param ? &args.inputs[first_param] : nullptr;
  const gk_plugin_tensor* bias =
      args.num_inputs > first_param + 1 ? &args.inputs[first_param + 1] : nullptr;
  for (int32_t i = first_param; i < args.num_inputs; ++i) {
    const gk_plugin_tensor& t = args.inputs[i];
    if (t.ndim != 1 || t.shape[0] != h) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", input_role(kSpec, i),
                  " is ", shape_string(t), ", expected [", h, "]");
    }
  }
  const char* like_x[] = {kSpec.add ? "input 'residual'" : nullptr, "output 'out'",
                          kSpec.add ? "output 'sum'" : nullptr};
  const gk_plugin_tensor* like_x_tensors[] = {kSpec.add ? &args.inputs[1] : nullptr,
                                              &args.outputs[0],
                                              kSpec.add ? &args.outputs[1] : nullptr};
  for (int k = 0; k < 3; ++k) {
    if (like_x_tensors[k] == nullptr) continue;
    if (!same_shape(*like_x_tensors[k], x)) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", like_x[k], " is ",
                  shape_string(*like_x_tensors[k]), ", expected ", shape_string(x),
                  " like input 'x'");
    }
    if (gk_status s = check_data(args, *like_x_tensors[k], like_x[k], message)) return s;
  }
  for (int32_t i = 0; i < args.num_inputs; ++i) {
    if (gk_status s = check_data(args, args.inputs[i], input_role(kSpec, i), message)) return s;
  }
  return visit_floating(
      x.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        normalize_rows<kSpec.rms, kSpec.add, T>(args, weight, bias, eps);
        return gk_status{GK_OK};
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
      });
}

constexpr OpDef kOps[] = {
    {"layernorm", &check_norm<kLayernorm>, &run_norm<kLayernorm>},
    {"rmsnorm", &check_norm<kRmsnorm>, &run_norm<kRmsnorm>},
    {"add_layernorm", &check_norm<kAddLayernorm>, &run_norm<kAddLayernorm>},
    {"add_rmsnorm", &check_norm<kAddRmsnorm>, &run_norm<kAddRmsnorm>},
};

}  // namespace

std::span<const OpDef> norm_ops() {
  return kOps;
}

}  // namespace gk::cpu
