// softmax and log_softmax along one axis, in f64 for every dtype.
//
// Each row along the axis takes three passes: its max (NaN if any element is NaN), the sum
// of exp(x - max), then the outputs. Subtracting the max keeps exp from overflowing.
#include <cmath>
#include <limits>

#include "cpu_ops.h"
#include "strided_iter.h"

namespace gk::cpu {
namespace {

// The axis, non-negative (the core's op rules normalised it); absent: the last.
int32_t softmax_axis(const gk_kernel_args& args) {
  return static_cast<int32_t>(gk_attr_int(&args, "axis", args.inputs[0].ndim - 1));
}

gk_status check_softmax(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 1, 1, 1, message)) return s;
  const gk_plugin_tensor& x = args.inputs[0];
  gk_status s = check_dtype(args, x, "input 'x'",
                            {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16}, message);
  if (s) return s;
  if ((s = check_same_dtype(args, args.outputs[0], "output 'out'", x.dtype, "input 'x'",
                            message))) {
    return s;
  }
  return GK_OK;
}

template <bool kLog, class T>
void softmax_rows(const gk_plugin_tensor& x, const gk_plugin_tensor& out, int32_t axis) {
  int64_t shape[kMaxDims];
  int64_t strides[2][kMaxDims];
  for (int32_t d = 0; d < x.ndim; ++d) {
    shape[d] = d == axis ? 1 : x.shape[d];
    strides[0][d] = out.strides[d] * static_cast<int64_t>(sizeof(T));
    strides[1][d] = x.strides[d] * static_cast<int64_t>(sizeof(T));
  }
  const int64_t length = x.ndim > 0 ? x.shape[axis] : 1;
  const int64_t x_step = x.ndim > 0 ? strides[1][axis] : 0;
  const int64_t out_step = x.ndim > 0 ? strides[0][axis] : 0;
  NdLoop<2> loop(x.ndim, shape);
  loop.set_operand(0, out.data, strides[0]);
  loop.set_operand(1, x.data, strides[1]);
  loop.run([&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
    for (int64_t i = 0; i < n; ++i) {
      const char* in = p[1] + i * s[1];
      char* o = p[0] + i * s[0];
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < length; ++j) {
        const double v = load<T>(in + j * x_step);
        if (std::isnan(v) || v > max) max = v;
        if (std::isnan(v)) break;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < length; ++j) sum += std::exp(load<T>(in + j * x_step) - max);
      const double log_sum = std::log(sum);
      for (int64_t j = 0; j < length; ++j) {
        const double shifted = load<T>(in + j * x_step) - max;
        store<T>(o + j * out_step, kLog ? shifted - log_sum : std::exp(shifted) / sum);
      }
    }
  });
}

template <bool kLog>
gk_status run_softmax(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_plugin_tensor& out = args.outputs[0];
  const int32_t axis = softmax_axis(args);
  if (!same_shape(x, out)) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': output 'out' ",
                shape_string(out), " differs from input 'x' ", shape_string(x));
  }
  if (gk_status s = check_data(args, x, "input 'x'", message)) return s;
  if (gk_status s = check_data(args, out, "output 'out'", message)) return s;
  return visit_floating(
      x.dtype,
      [&](auto tag) {
        softmax_rows<kLog, typename decltype(tag)::type>(x, out, axis);
        return gk_status{GK_OK};
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
      });
}

constexpr OpDef kOps[] = {
    {"softmax", &check_softmax, &run_softmax<false>},
    {"log_softmax", &check_softmax, &run_softmax<true>},
};

}  // namespace

std::span<const OpDef> softmax_ops() {
  return kOps;
}

}  // namespace gk::cpu
