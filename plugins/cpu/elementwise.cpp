// Elementwise ops: binary with NumPy broadcasting, comparisons, unary, gated activations,
// cast.
//
// Floating dtypes compute in compute_t (f32 for f16/bf16); integer add/sub/mul/neg/abs wrap
// around like NumPy instead of overflowing (done in unsigned arithmetic, which C++ defines).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_ops.h"
#include "elementwise_math.h"
#include "strided_iter.h"

namespace gk::cpu {
namespace {

// ----------------------------------------------------------------------------------------
// Row loops shared by the elementwise ops.

template <class TO, class TI, class F>
void map_unary(NdLoop<2>& loop, F f) {
  loop.run([&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
    if (s[0] == sizeof(TO) && s[1] == sizeof(TI)) {
      for (int64_t i = 0; i < n; ++i) {
        store<TO>(p[0] + i * sizeof(TO), f(load<TI>(p[1] + i * sizeof(TI))));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) store<TO>(p[0] + i * s[0], f(load<TI>(p[1] + i * s[1])));
    }
  });
}

template <class T, class F>
void map_binary(NdLoop<3>& loop, F f) {
  loop.run([&](const std::array<char*, 3>& p, int64_t n, const std::array<int64_t, 3>& s) {
    constexpr int64_t kSize = sizeof(T);
    if (s[0] == kSize && s[1] == kSize && s[2] == kSize) {
      for (int64_t i = 0; i < n; ++i) {
        store<T>(p[0] + i * kSize, f(load<T>(p[1] + i * kSize), load<T>(p[2] + i * kSize)));
      }
    } else if (s[0] == kSize && s[1] == kSize && s[2] == 0) {
      const auto b = load<T>(p[2]);  // a row against one broadcast value
      for (int64_t i = 0; i < n; ++i) store<T>(p[0] + i * kSize, f(load<T>(p[1] + i * kSize), b));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        store<T>(p[0] + i * s[0], f(load<T>(p[1] + i * s[1]), load<T>(p[2] + i * s[2])));
      }
    }
  });
}

// The NumPy broadcast of a's and b's shapes equals out's shape.
gk_status check_broadcast(const gk_kernel_args& args, const gk_plugin_tensor& a,
                          const gk_plugin_tensor& b, const gk_plugin_tensor& out,
                          std::string& message) {
  const int32_t ndim = a.ndim > b.ndim ? a.ndim : b.ndim;
  bool ok = out.ndim == ndim;
  for (int32_t d = 0; ok && d < ndim; ++d) {
    const int64_t da = d >= ndim - a.ndim ? a.shape[d - (ndim - a.ndim)] : 1;
    const int64_t db = d >= ndim - b.ndim ? b.shape[d - (ndim - b.ndim)] : 1;
    if (da != db && da != 1 && db != 1) ok = false;
    const int64_t dim = da == 1 ? db : da;
    if (ok && out.shape[d] != dim) ok = false;
  }
  if (ok) return GK_OK;
  return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': inputs ", shape_string(a), " and ",
              shape_string(b), " do not broadcast to output ", shape_string(out));
}

// The checks of an op with inputs 'a' and 'b' and output 'out' before it runs: the inputs
// broadcast to the output, and each tensor has its data.
gk_status check_two_inputs(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& a = args.inputs[0];
  const gk_plugin_tensor& b = args.inputs[1];
  const gk_plugin_tensor& out = args.outputs[0];
  if (gk_status s = check_broadcast(args, a, b, out, message)) return s;
  if (gk_status s = check_data(args, a, "input 'a'", message)) return s;
  if (gk_status s = check_data(args, b, "input 'b'", message)) return s;
  return check_data(args, out, "output 'out'", message);
}

// Operand 0 of `loop` the output (`out_size`-byte elements), 1 and 2 the inputs broadcast to
// it (`in_size`-byte elements).
template <size_t N>
void set_two_input_operands(NdLoop<N>& loop, const gk_plugin_tensor& a, const gk_plugin_tensor& b,
                            const gk_plugin_tensor& out, size_t in_size, size_t out_size) {
  int64_t strides[3][kMaxDims];
  byte_strides(out, out_size, strides[0]);
  broadcast_byte_strides(a, in_size, out.ndim, out.shape, strides[1]);
  broadcast_byte_strides(b, in_size, out.ndim, out.shape, strides[2]);
  loop.set_operand(0, out.data, strides[0]);
  loop.set_operand(1, a.data, strides[1]);
  loop.set_operand(2, b.data, strides[2]);
}

// ----------------------------------------------------------------------------------------
// Binary ops.

template <BinaryKind K>
gk_status check_binary(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 2, 2, 1, message)) return s;
  const gk_plugin_tensor& a = args.inputs[0];
  gk_status s =
      (K == BinaryKind::kDiv || K == BinaryKind::kPow)
          ? check_dtype(args, a, "input 'a'",
                        {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16}, message)
          : check_dtype(args, a, "input 'a'",
                        {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16, GK_DTYPE_I8,
                         GK_DTYPE_I16, GK_DTYPE_I32, GK_DTYPE_I64, GK_DTYPE_U8},
                        message);
  if (s) return s;
  if ((s = check_same_dtype(args, args.inputs[1], "input 'b'", a.dtype, "input 'a'", message))) {
    return s;
  }
  return check_same_dtype(args, args.outputs[0], "output 'out'", a.dtype, "input 'a'", message);
}

template <BinaryKind K>
gk_status run_binary(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& a = args.inputs[0];
  const gk_plugin_tensor& b = args.inputs[1];
  const gk_plugin_tensor& out = args.outputs[0];
  if (gk_status s = check_two_inputs(args, message)) return s;
  return visit_numeric(
      a.dtype,
      [&](auto tag) -> gk_status {
        using T = typename decltype(tag)::type;
        if constexpr (!kIsFloating<T> && (K == BinaryKind::kDiv || K == BinaryKind::kPow)) {
          return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': integer dtype ",
                      dtype_name(a.dtype));
        } else {
          NdLoop<3> loop(out.ndim, out.shape);
          set_two_input_operands(loop, a, b, out, sizeof(T), sizeof(T));
          map_binary<T>(loop, [](auto x, auto y) { return binary_apply<K>(x, y); });
          return GK_OK;
        }
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(a.dtype));
      });
}

// ----------------------------------------------------------------------------------------
// Comparisons: eq ne lt le gt ge. Inputs of one dtype, broadcast; out is bool (one byte,
// 0 or 1). f16/bf16 compare their exact f32 values; NaN compares false except for ne, as
// in NumPy. bool inputs (eq, ne only) compare as truth values.

enum class CompareKind { kEq, kNe, kLt, kLe, kGt, kGe };

template <CompareKind K, class C>
inline bool compare_apply(C a, C b) {
  if constexpr (K == CompareKind::kEq) return a == b;
  if constexpr (K == CompareKind::kNe) return a != b;
  if constexpr (K == CompareKind::kLt) return a < b;
  if constexpr (K == CompareKind::kLe) return a <= b;
  if constexpr (K == CompareKind::kGt) return a > b;
  if constexpr (K == CompareKind::kGe) return a >= b;
}

// Rows of out (bool) = f(a, b), a and b of storage type T.
template <class T, class F>
void map_compare(NdLoop<3>& loop, F f) {
  loop.run([&](const std::array<char*, 3>& p, int64_t n, const std::array<int64_t, 3>& s) {
    constexpr int64_t kSize = sizeof(T);
    if (s[0] == 1 && s[1] == kSize && s[2] == kSize) {
      for (int64_t i = 0; i < n; ++i) {
        p[0][i] = static_cast<char>(f(load<T>(p[1] + i * kSize), load<T>(p[2] + i * kSize)));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        p[0][i * s[0]] = static_cast<char>(f(load<T>(p[1] + i * s[1]), load<T>(p[2] + i * s[2])));
      }
    }
  });
}

template <CompareKind K>
gk_status check_compare(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 2, 2, 1, message)) return s;
  const gk_plugin_tensor& a = args.inputs[0];
  constexpr bool kBoolToo = K == CompareKind::kEq || K == CompareKind::kNe;
  gk_status s =
      kBoolToo ? check_dtype(args, a, "input 'a'",
                             {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16, GK_DTYPE_I8,
                              GK_DTYPE_I16, GK_DTYPE_I32, GK_DTYPE_I64, GK_DTYPE_U8, GK_DTYPE_BOOL},
                             message)
               : check_dtype(args, a, "input 'a'",
                             {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16, GK_DTYPE_I8,
                              GK_DTYPE_I16, GK_DTYPE_I32, GK_DTYPE_I64, GK_DTYPE_U8},
                             message);
  if (s) return s;
  if ((s = check_same_dtype(args, args.inputs[1], "input 'b'", a.dtype, "input 'a'", message))) {
    return s;
  }
  return check_dtype(args, args.outputs[0], "output 'out'", {GK_DTYPE_BOOL}, message);
}

template <CompareKind K>
gk_status run_compare(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& a = args.inputs[0];
  const gk_plugin_tensor& b = args.inputs[1];
  const gk_plugin_tensor& out = args.outputs[0];
  if (gk_status s = check_two_inputs(args, message)) return s;
  auto run = [&](auto tag, auto f) -> gk_status {
    using T = typename decltype(tag)::type;
    NdLoop<3> loop(out.ndim, out.shape);
    set_two_input_operands(loop, a, b, out, sizeof(T), 1);
    map_compare<T>(loop, f);
    return GK_OK;
  };
  if (a.dtype == GK_DTYPE_BOOL) {
    // Any nonzero byte is true.
    return run(TypeTag<uint8_t>{},
               [](uint8_t x, uint8_t y) { return compare_apply<K>(x != 0, y != 0); });
  }
  return visit_numeric(
      a.dtype,
      [&](auto tag) -> gk_status {
        return run(tag, [](auto x, auto y) { return compare_apply<K>(x, y); });
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(a.dtype));
      });
}

// ----------------------------------------------------------------------------------------
// Unary ops.

template <UnaryKind K>
gk_status check_unary(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 1, 1, 1, message)) return s;
  const gk_plugin_tensor& x = args.inputs[0];
  constexpr bool kIntegerToo =
      K == UnaryKind::kNeg || K == UnaryKind::kAbs || K == UnaryKind::kRelu;
  gk_status s =
      kIntegerToo ? check_dtype(args, x, "input 'x'",
                                {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16,
                                 GK_DTYPE_I8, GK_DTYPE_I16, GK_DTYPE_I32, GK_DTYPE_I64},
                                message)
                  : check_dtype(args, x, "input 'x'",
                                {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16}, message);
  if (s) return s;
  return check_same_dtype(args, args.outputs[0], "output 'out'", x.dtype, "input 'x'", message);
}

template <UnaryKind K>
gk_status run_unary_kind(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_plugin_tensor& out = args.outputs[0];
  if (!same_shape(x, out)) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': output 'out' ",
                shape_string(out), " differs from input 'x' ", shape_string(x));
  }
  if (gk_status s = check_data(args, x, "input 'x'", message)) return s;
  if (gk_status s = check_data(args, out, "output 'out'", message)) return s;
  return visit_numeric(
      x.dtype,
      [&](auto tag) -> gk_status {
        using T = typename decltype(tag)::type;
        constexpr bool kIntegerOk =
            K == UnaryKind::kNeg || K == UnaryKind::kAbs || K == UnaryKind::kRelu;
        if constexpr (!kIsFloating<T> && (!kIntegerOk || std::is_same_v<T, uint8_t>)) {
          return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
        } else {
          int64_t strides[2][kMaxDims];
          byte_strides(out, sizeof(T), strides[0]);
          byte_strides(x, sizeof(T), strides[1]);
          NdLoop<2> loop(out.ndim, out.shape);
          loop.set_operand(0, out.data, strides[0]);
          loop.set_operand(1, x.data, strides[1]);
          map_unary<T, T>(loop, [](auto v) { return unary_apply<K>(v); });
          return GK_OK;
        }
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
      });
}

template <UnaryKind K>
gk_status run_unary(const gk_kernel_args& args, std::string& message) {
  if constexpr (K == UnaryKind::kGelu) {
    if (std::strcmp(text_attr(args, "approximate", "none"), "tanh") == 0) {
      return run_unary_kind<UnaryKind::kGeluTanh>(args, message);
    }
  }
  return run_unary_kind<K>(args, message);
}

// ----------------------------------------------------------------------------------------
// Gated activations: out = act(gate) * up.

template <UnaryKind K>
gk_status check_gated(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 2, 2, 1, message)) return s;
  const gk_plugin_tensor& gate = args.inputs[0];
  gk_status s = check_dtype(args, gate, "input 'gate'",
                            {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16}, message);
  if (s) return s;
  if ((s = check_same_dtype(args, args.inputs[1], "input 'up'", gate.dtype, "input 'gate'",
                            message))) {
    return s;
  }
  return check_same_dtype(args, args.outputs[0], "output 'out'", gate.dtype, "input 'gate'",
                          message);
}

template <UnaryKind K>
gk_status run_gated_kind(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& gate = args.inputs[0];
  const gk_plugin_tensor& up = args.inputs[1];
  const gk_plugin_tensor& out = args.outputs[0];
  if (!same_shape(gate, up) || !same_shape(gate, out)) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'gate' ",
                shape_string(gate), ", input 'up' ", shape_string(up), " and output 'out' ",
                shape_string(out), " must have one shape");
  }
  if (gk_status s = check_data(args, gate, "input 'gate'", message)) return s;
  if (gk_status s = check_data(args, up, "input 'up'", message)) return s;
  if (gk_status s = check_data(args, out, "output 'out'", message)) return s;
  return visit_floating(
      gate.dtype,
      [&](auto tag) -> gk_status {
        using T = typename decltype(tag)::type;
        int64_t strides[3][kMaxDims];
        byte_strides(out, sizeof(T), strides[0]);
        byte_strides(gate, sizeof(T), strides[1]);
        byte_strides(up, sizeof(T), strides[2]);
        NdLoop<3> loop(out.ndim, out.shape);
        loop.set_operand(0, out.data, strides[0]);
        loop.set_operand(1, gate.data, strides[1]);
        loop.set_operand(2, up.data, strides[2]);
        map_binary<T>(loop, [](auto g, auto u) { return unary_apply<K>(g) * u; });
        return GK_OK;
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ",
                    dtype_name(gate.dtype));
      });
}

template <UnaryKind K>
gk_status run_gated(const gk_kernel_args& args, std::string& message) {
  if constexpr (K == UnaryKind::kGelu) {
    if (std::strcmp(text_attr(args, "approximate", "none"), "tanh") == 0) {
      return run_gated_kind<UnaryKind::kGeluTanh>(args, message);
    }
  }
  return run_gated_kind<K>(args, message);
}

// ----------------------------------------------------------------------------------------
// cast: any pair of f32 f64 f16 bf16 i32 i64.

constexpr std::initializer_list<int32_t> kCastDtypes = {GK_DTYPE_F32,  GK_DTYPE_F64, GK_DTYPE_F16,
                                                        GK_DTYPE_BF16, GK_DTYPE_I32, GK_DTYPE_I64};

// Float to integer truncates toward zero; NaN gives 0 (ops.md) and out-of-range values
// saturate, so no input reaches C++'s undefined float-to-int conversion.
template <class TO, class C>
TO float_to_int(C v) {
  if (std::isnan(v)) return 0;
  constexpr TO kMin = std::numeric_limits<TO>::min();
  constexpr TO kMax = std::numeric_limits<TO>::max();
  if (v <= static_cast<C>(kMin)) return kMin;
  if (v >= static_cast<C>(kMax)) return kMax;  // kMax rounds up to 2^31 / 2^63 in C
  return static_cast<TO>(v);
}

template <class TO, class TI>
void cast_rows(NdLoop<2>& loop) {
  map_unary<TO, TI>(loop, [](auto v) -> compute_t<TO> {
    if constexpr (kIsFloating<TI> && !kIsFloating<TO>) {
      return float_to_int<TO>(v);
    } else {
      return static_cast<compute_t<TO>>(v);  // int to int wraps (C++20 modular conversion)
    }
  });
}

template <class F>
gk_status visit_cast(int32_t dtype, F&& f) {
  switch (dtype) {
    case GK_DTYPE_I32:
      return f(TypeTag<int32_t>{});
    case GK_DTYPE_I64:
      return f(TypeTag<int64_t>{});
    default:
      return visit_floating(dtype, f, [] { return gk_status{GK_UNIMPLEMENTED}; });
  }
}

gk_status check_cast(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 1, 1, 1, message)) return s;
  if (gk_status s = check_dtype(args, args.inputs[0], "input 'x'", kCastDtypes, message)) {
    return s;
  }
  return check_dtype(args, args.outputs[0], "output 'out'", kCastDtypes, message);
}

gk_status run_cast(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_plugin_tensor& out = args.outputs[0];
  if (!same_shape(x, out)) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'cast': output 'out' ", shape_string(out),
                " differs from input 'x' ", shape_string(x));
  }
  if (gk_status s = check_data(args, x, "input 'x'", message)) return s;
  if (gk_status s = check_data(args, out, "output 'out'", message)) return s;
  gk_status status = visit_cast(x.dtype, [&](auto in_tag) -> gk_status {
    return visit_cast(out.dtype, [&](auto out_tag) -> gk_status {
      using TI = typename decltype(in_tag)::type;
      using TO = typename decltype(out_tag)::type;
      int64_t strides[2][kMaxDims];
      byte_strides(out, sizeof(TO), strides[0]);
      byte_strides(x, sizeof(TI), strides[1]);
      NdLoop<2> loop(out.ndim, out.shape);
      loop.set_operand(0, out.data, strides[0]);
      loop.set_operand(1, x.data, strides[1]);
      cast_rows<TO, TI>(loop);
      return GK_OK;
    });
  });
  if (status == GK_OK) return GK_OK;
  return fail(message, status, "op 'cast': ", dtype_name(x.dtype), " to ", dtype_name(out.dtype),
              " is not served");
}

constexpr OpDef kOps[] = {
    {"add", &check_binary<BinaryKind::kAdd>, &run_binary<BinaryKind::kAdd>},
    {"sub", &check_binary<BinaryKind::kSub>, &run_binary<BinaryKind::kSub>},
    {"mul", &check_binary<BinaryKind::kMul>, &run_binary<BinaryKind::kMul>},
    {"div", &check_binary<BinaryKind::kDiv>, &run_binary<BinaryKind::kDiv>},
    {"maximum", &check_binary<BinaryKind::kMaximum>, &run_binary<BinaryKind::kMaximum>},
    {"minimum", &check_binary<BinaryKind::kMinimum>, &run_binary<BinaryKind::kMinimum>},
    {"pow", &check_binary<BinaryKind::kPow>, &run_binary<BinaryKind::kPow>},
    {"eq", &check_compare<CompareKind::kEq>, &run_compare<CompareKind::kEq>},
    {"ne", &check_compare<CompareKind::kNe>, &run_compare<CompareKind::kNe>},
    {"lt", &check_compare<CompareKind::kLt>, &run_compare<CompareKind::kLt>},
    {"le", &check_compare<CompareKind::kLe>, &run_compare<CompareKind::kLe>},
    {"gt", &check_compare<CompareKind::kGt>, &run_compare<CompareKind::kGt>},
    {"ge", &check_compare<CompareKind::kGe>, &run_compare<CompareKind::kGe>},
    {"neg", &check_unary<UnaryKind::kNeg>, &run_unary<UnaryKind::kNeg>},
    {"abs", &check_unary<UnaryKind::kAbs>, &run_unary<UnaryKind::kAbs>},
    {"exp", &check_unary<UnaryKind::kExp>, &run_unary<UnaryKind::kExp>},
    {"log", &check_unary<UnaryKind::kLog>, &run_unary<UnaryKind::kLog>},
    {"sqrt", &check_unary<UnaryKind::kSqrt>, &run_unary<UnaryKind::kSqrt>},
    {"rsqrt", &check_unary<UnaryKind::kRsqrt>, &run_unary<UnaryKind::kRsqrt>},
    {"tanh", &check_unary<UnaryKind::kTanh>, &run_unary<UnaryKind::kTanh>},
    {"sigmoid", &check_unary<UnaryKind::kSigmoid>, &run_unary<UnaryKind::kSigmoid>},
    {"relu", &check_unary<UnaryKind::kRelu>, &run_unary<UnaryKind::kRelu>},
    {"gelu", &check_unary<UnaryKind::kGelu>, &run_unary<UnaryKind::kGelu>},
    {"silu", &check_unary<UnaryKind::kSilu>, &run_unary<UnaryKind::kSilu>},
    {"swiglu", &check_gated<UnaryKind::kSilu>, &run_gated<UnaryKind::kSilu>},
    {"geglu", &check_gated<UnaryKind::kGelu>, &run_gated<UnaryKind::kGelu>},
    {"cast", &check_cast, &run_cast},
};

}  // namespace

std::span<const OpDef> elementwise_ops() {
  return kOps;
}

}  // namespace gk::cpu
