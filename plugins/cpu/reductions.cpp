// Reductions: sum mean prod max min over a set of axes, argmax argmin over one axis or all.
//
// sum/mean/prod/max/min walk the input once in logical row-major order and fold every
// element into an accumulator per output element (f64 for floating dtypes, wrapping i64
// for integers), so each output sees its elements in one fixed order: the result is
// bit-identical from run to run, whatever the strides.
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_ops.h"
#include "strided_iter.h"

namespace gk::cpu {
namespace {

enum class ReduceKind { kSum, kMean, kProd, kMax, kMin };

// Which axes a call reduces and the output shape it implies.
struct ReducePlan {
  bool reduced[kMaxDims] = {};
  int32_t out_ndim = 0;
  int64_t out_shape[kMaxDims] = {};
  int64_t count = 1;  // elements folded into each output
};

gk_status plan_reduce(const gk_kernel_args& args, ReducePlan& plan, std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  bool keepdims = false;
  if (gk_status s = flag_attr(args, "keepdims", keepdims, message)) return s;
  // Non-negative, in range and distinct (the core's op rules); absent: every axis.
  const gk_attr* axes = gk_find_attr(&args, "axes");
  for (int32_t d = 0; axes == nullptr && d < x.ndim; ++d) plan.reduced[d] = true;
  for (int32_t i = 0; axes != nullptr && i < axes->count; ++i) {
    plan.reduced[axes->value.ints[i]] = true;
  }
  for (int32_t d = 0; d < x.ndim; ++d) {
    if (plan.reduced[d]) {
      plan.count *= x.shape[d];
      if (keepdims) plan.out_shape[plan.out_ndim++] = 1;
    } else {
      plan.out_shape[plan.out_ndim++] = x.shape[d];
    }
  }
  return GK_OK;
}

gk_status check_out_shape(const gk_kernel_args& args, int32_t ndim, const int64_t* shape,
                          std::string& message) {
  const gk_plugin_tensor& out = args.outputs[0];
  bool ok = out.ndim == ndim;
  for (int32_t d = 0; ok && d < ndim; ++d) ok = out.shape[d] == shape[d];
  if (ok) return GK_OK;
  gk_plugin_tensor expected{nullptr, out.dtype, ndim, shape, shape, 0};
  return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': output 'out' is ",
              shape_string(out), ", expected ", shape_string(expected));
}

// Row-major byte strides of a packed buffer of `elem_size`-byte elements over `shape`.
void packed_strides(int32_t ndim, const int64_t* shape, int64_t elem_size, int64_t* out) {
  int64_t step = elem_size;
  for (int32_t d = ndim - 1; d >= 0; --d) {
    out[d] = step;
    step *= shape[d];
  }
}

template <ReduceKind K, class T>
void reduce(const gk_plugin_tensor& x, const gk_plugin_tensor& out, const ReducePlan& plan) {
  using C = compute_t<T>;
  using Acc = std::conditional_t<kIsFloating<T>, double, int64_t>;
  const int64_t out_numel = gk_tensor_numel(&out);
  Acc init{};
  if constexpr (K == ReduceKind::kProd) init = Acc(1);
  if constexpr (K == ReduceKind::kMax || K == ReduceKind::kMin) {
    constexpr bool kMax = K == ReduceKind::kMax;
    if constexpr (kIsFloating<T>) {
      init = kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      init = kMax ? std::numeric_limits<C>::min() : std::numeric_limits<C>::max();
    }
  }
  std::vector<Acc> acc(static_cast<size_t>(out_numel), init);

  // The accumulators laid over x's shape: packed over kept dims, stride 0 over reduced ones.
  int64_t kept_shape[kMaxDims];
  int32_t kept = 0;
  for (int32_t d = 0; d < x.ndim; ++d) {
    if (!plan.reduced[d]) kept_shape[kept++] = x.shape[d];
  }
  int64_t kept_strides[kMaxDims];
  packed_strides(kept, kept_shape, sizeof(Acc), kept_strides);
  int64_t strides[2][kMaxDims];
  for (int32_t d = 0, k = 0; d < x.ndim; ++d) {
    strides[0][d] = plan.reduced[d] ? 0 : kept_strides[k++];
  }
  byte_strides(x, sizeof(T), strides[1]);

  auto fold = [](Acc a, Acc v) -> Acc {
    if constexpr (K == ReduceKind::kSum || K == ReduceKind::kMean) {
      if constexpr (kIsFloating<T>)
        return a + v;
      else
        return static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(v));
    } else if constexpr (K == ReduceKind::kProd) {
      if constexpr (kIsFloating<T>)
        return a * v;
      else
        return static_cast<Acc>(static_cast<uint64_t>(a) * static_cast<uint64_t>(v));
    } else if constexpr (kIsFloating<T>) {
      // max/min: the first NaN sticks.
      if (std::isnan(a) || std::isnan(v)) return std::isnan(a) ? a : v;
      return K == ReduceKind::kMax ? (a < v ? v : a) : (v < a ? v : a);
    } else {
      return K == ReduceKind::kMax ? (a < v ? v : a) : (v < a ? v : a);
    }
  };

  NdLoop<2> loop(x.ndim, x.shape);
  loop.set_operand(0, acc.data(), strides[0]);
  loop.set_operand(1, x.data, strides[1]);
  loop.run([&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
    if (s[0] == 0) {
      Acc a;
      std::memcpy(&a, p[0], sizeof(Acc));
      for (int64_t i = 0; i < n; ++i) a = fold(a, static_cast<Acc>(load<T>(p[1] + i * s[1])));
      std::memcpy(p[0], &a, sizeof(Acc));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        Acc a;
        std::memcpy(&a, p[0] + i * s[0], sizeof(Acc));
        a = fold(a, static_cast<Acc>(load<T>(p[1] + i * s[1])));
        std::memcpy(p[0] + i * s[0], &a, sizeof(Acc));
      }
    }
  });

  if constexpr (K == ReduceKind::kMean) {
    for (Acc& a : acc) a /= static_cast<Acc>(plan.count);  // 0 / 0 is NaN for an empty mean
  }
  int64_t write_strides[2][kMaxDims];
  byte_strides(out, sizeof(T), write_strides[0]);
  packed_strides(out.ndim, out.shape, sizeof(Acc), write_strides[1]);
  NdLoop<2> write(out.ndim, out.shape);
  write.set_operand(0, out.data, write_strides[0]);
  write.set_operand(1, acc.data(), write_strides[1]);
  write.run([&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
    for (int64_t i = 0; i < n; ++i) {
      Acc a;
      std::memcpy(&a, p[1] + i * s[1], sizeof(Acc));
      store<T>(p[0] + i * s[0], static_cast<C>(a));
    }
  });
}

template <ReduceKind K>
gk_status check_reduce(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 1, 1, 1, message)) return s;
  const gk_plugin_tensor& x = args.inputs[0];
  gk_status s =
      K == ReduceKind::kMean
          ? check_dtype(args, x, "input 'x'",
                        {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16}, message)
          : check_dtype(args, x, "input 'x'",
                        {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16, GK_DTYPE_I32,
                         GK_DTYPE_I64},
                        message);
  if (s) return s;
  if ((s = check_same_dtype(args, args.outputs[0], "output 'out'", x.dtype, "input 'x'",
                            message))) {
    return s;
  }
  ReducePlan plan;
  if (plan_reduce(args, plan, message)) return GK_UNIMPLEMENTED;
  return GK_OK;
}

template <ReduceKind K>
gk_status run_reduce(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_plugin_tensor& out = args.outputs[0];
  ReducePlan plan;
  if (gk_status s = plan_reduce(args, plan, message)) return s;
  if (gk_status s = check_out_shape(args, plan.out_ndim, plan.out_shape, message)) return s;
  if (gk_status s = check_data(args, x, "input 'x'", message)) return s;
  if (gk_status s = check_data(args, out, "output 'out'", message)) return s;
  if ((K == ReduceKind::kMax || K == ReduceKind::kMin) && plan.count == 0 &&
      gk_tensor_numel(&out) > 0) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'x' ", shape_string(x),
                " gives an empty reduction, which has no ", args.op);
  }
  auto body = [&](auto tag) -> gk_status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, int16_t> ||
                  std::is_same_v<T, uint8_t>) {
      return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
    } else {
      reduce<K, T>(x, out, plan);
      return GK_OK;
    }
  };
  return visit_numeric(x.dtype, body, [&] {
    return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
  });
}

// ----------------------------------------------------------------------------------------
// argmax / argmin: the first index of the extreme; the first NaN counts as the extreme.

template <bool kMax, class T>
struct ArgScan {
  compute_t<T> best{};
  int64_t index = -1;
  bool done = false;  // a NaN was seen: nothing can replace it

  void visit(compute_t<T> v, int64_t i) {
    if (done) return;
    if constexpr (kIsFloating<T>) {
      if (std::isnan(v)) {
        best = v;
        index = i;
        done = true;
        return;
      }
    }
    if (index < 0 || (kMax ? best < v : v < best)) {
      best = v;
      index = i;
    }
  }
};

// The axis when given (non-negative: the core's op rules normalised it); absent: over every
// element. The rules take axis 0 of a scalar, which has no axis to scan: declined.
gk_status arg_axis(const gk_kernel_args& args, bool& has_axis, int32_t& axis,
                   std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_attr* attr = gk_find_attr(&args, "axis");
  has_axis = attr != nullptr;
  if (!has_axis) return GK_OK;
  axis = static_cast<int32_t>(attr->value.i);
  if (axis >= x.ndim) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': axis ", attr->value.i,
                " is out of range for input 'x' with ", x.ndim, " dims");
  }
  return GK_OK;
}

template <bool kMax>
gk_status check_arg(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 1, 1, 1, message)) return s;
  gk_status s = check_dtype(
      args, args.inputs[0], "input 'x'",
      {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16, GK_DTYPE_I32, GK_DTYPE_I64},
      message);
  if (s) return s;
  if ((s = check_dtype(args, args.outputs[0], "output 'out'", {GK_DTYPE_I64}, message))) return s;
  bool has_axis = false, keepdims = false;
  int32_t axis = 0;
  if (arg_axis(args, has_axis, axis, message) || flag_attr(args, "keepdims", keepdims, message)) {
    return GK_UNIMPLEMENTED;
  }
  return GK_OK;
}

template <bool kMax, class T>
void arg_reduce(const gk_plugin_tensor& x, const gk_plugin_tensor& out, bool has_axis,
                int32_t axis) {
  int64_t x_strides[kMaxDims] = {};
  byte_strides(x, sizeof(T), x_strides);
  if (!has_axis) {
    ArgScan<kMax, T> scan;
    int64_t i = 0;
    NdLoop<1> loop(x.ndim, x.shape);
    loop.set_operand(0, x.data, x_strides);
    loop.run([&](const std::array<char*, 1>& p, int64_t n, const std::array<int64_t, 1>& s) {
      for (int64_t j = 0; j < n; ++j) scan.visit(load<T>(p[0] + j * s[0]), i++);
    });
    store<int64_t>(static_cast<char*>(out.data), scan.index);
    return;
  }
  // Loop over x's shape with the axis collapsed to 1; each step scans the axis.
  int64_t shape[kMaxDims];
  int64_t strides[2][kMaxDims];
  const bool keepdims = out.ndim == x.ndim;
  for (int32_t d = 0, o = 0; d < x.ndim; ++d) {
    shape[d] = d == axis ? 1 : x.shape[d];
    const bool skip = d == axis && !keepdims;  // the output has no such dim
    strides[0][d] = skip ? 0 : out.strides[o++] * static_cast<int64_t>(sizeof(int64_t));
    strides[1][d] = x_strides[d];
  }
  const int64_t length = x.shape[axis];
  const int64_t step = x_strides[axis];
  NdLoop<2> loop(x.ndim, shape);
  loop.set_operand(0, out.data, strides[0]);
  loop.set_operand(1, x.data, strides[1]);
  loop.run([&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
    for (int64_t i = 0; i < n; ++i) {
      ArgScan<kMax, T> scan;
      const char* row = p[1] + i * s[1];
      for (int64_t j = 0; j < length; ++j) scan.visit(load<T>(row + j * step), j);
      store<int64_t>(p[0] + i * s[0], scan.index);
    }
  });
}

template <bool kMax>
gk_status run_arg(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_plugin_tensor& out = args.outputs[0];
  bool has_axis = false, keepdims = false;
  int32_t axis = 0;
  if (gk_status s = arg_axis(args, has_axis, axis, message)) return s;
  if (gk_status s = flag_attr(args, "keepdims", keepdims, message)) return s;
  int64_t shape[kMaxDims];
  int32_t ndim = 0;
  for (int32_t d = 0; d < x.ndim; ++d) {
    const bool reduced = !has_axis || d == axis;
    if (!reduced)
      shape[ndim++] = x.shape[d];
    else if (keepdims)
      shape[ndim++] = 1;
  }
  if (gk_status s = check_out_shape(args, ndim, shape, message)) return s;
  if (gk_status s = check_data(args, x, "input 'x'", message)) return s;
  if (gk_status s = check_data(args, out, "output 'out'", message)) return s;
  const int64_t length = has_axis ? x.shape[axis] : gk_tensor_numel(&x);
  if (length == 0 && gk_tensor_numel(&out) > 0) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'x' ", shape_string(x),
                " has no elements to take the ", args.op, " of");
  }
  auto body = [&](auto tag) -> gk_status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, int16_t> ||
                  std::is_same_v<T, uint8_t>) {
      return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
    } else {
      arg_reduce<kMax, T>(x, out, has_axis, axis);
      return GK_OK;
    }
  };
  return visit_numeric(x.dtype, body, [&] {
    return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
  });
}

constexpr OpDef kOps[] = {
    {"sum", &check_reduce<ReduceKind::kSum>, &run_reduce<ReduceKind::kSum>},
    {"mean", &check_reduce<ReduceKind::kMean>, &run_reduce<ReduceKind::kMean>},
    {"prod", &check_reduce<ReduceKind::kProd>, &run_reduce<ReduceKind::kProd>},
    {"max", &check_reduce<ReduceKind::kMax>, &run_reduce<ReduceKind::kMax>},
    {"min", &check_reduce<ReduceKind::kMin>, &run_reduce<ReduceKind::kMin>},
    {"argmax", &check_arg<true>, &run_arg<true>},
    {"argmin", &check_arg<false>, &run_arg<false>},
};

}  // namespace

std::span<const OpDef> reduction_ops() {
  return kOps;
}

}  // namespace gk::cpu
