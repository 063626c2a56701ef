// matmul: out = act(alpha · op(a) · op(b) + beta · out + bias), batched with broadcast
// batch dims, through OpenBLAS.
//
//   for each batch index (broadcast over a's and b's leading dims):
//     A = a's matrix if BLAS can read it in place (unit stride along one axis, leading
//         stride covering the other), else packed row-major into f32/f64 scratch
//     B = likewise
//     C = out in place when it is f32/f64 of the compute type and BLAS-shaped, else
//         scratch (loaded from out first when beta != 0)
//     cblas_sgemm / cblas_dgemm(C = alpha·A·B + beta·C); cblas_sgemv / cblas_dgemv for one
//     row (a decode step), which reads B in place where gemm would pack all of it first
//     epilogue: C += bias, C = activation(C); scratch C is converted into out
//
// f16/bf16 inputs are converted to f32 (exactly) and multiplied with f32 accumulation;
// out may then be f16/bf16 (rounded) or f32. TF32 does not exist on the CPU, so the
// `precision` attribute is accepted and changes nothing.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "cpu_ops.h"
#include "elementwise_math.h"
#include "strided_iter.h"

namespace gk::cpu {
namespace {

enum class Activation { kNone, kRelu, kGelu, kSilu };

struct MatmulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  double alpha = 1.0;
  double beta = 0.0;
  Activation activation = Activation::kNone;
};

// The attributes as the core's op rules hand them (normalised: present, in range).
gk_status read_attrs(const gk_kernel_args& args, MatmulAttrs& attrs, std::string& message) {
  if (gk_status s = flag_attr(args, "transpose_a", attrs.transpose_a, message)) return s;
  if (gk_status s = flag_attr(args, "transpose_b", attrs.transpose_b, message)) return s;
  attrs.alpha = gk_attr_float(&args, "alpha", 1.0);
  attrs.beta = gk_attr_float(&args, "beta", 0.0);
  const std::string_view activation = text_attr(args, "activation", "none");
  attrs.activation = activation == "relu"   ? Activation::kRelu
                     : activation == "gelu" ? Activation::kGelu
                     : activation == "silu" ? Activation::kSilu
                                            : Activation::kNone;
  return GK_OK;
}

// The logical M×K, K×N and M×N problem of one call, with element strides of each matrix.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t a_row = 0, a_col = 0;  // A(i, kk) at a + i*a_row + kk*a_col
  int64_t b_row = 0, b_col = 0;
  int64_t batch_ndim = 0;
  int64_t batch_shape[kMaxDims] = {};
};

gk_status plan_shape(const gk_kernel_args& args, const MatmulAttrs& attrs, MatmulShape& shape,
                     std::string& message) {
  const gk_plugin_tensor& a = args.inputs[0];
  const gk_plugin_tensor& b = args.inputs[1];
  const gk_plugin_tensor& out = args.outputs[0];
  if (a.ndim < 2 || b.ndim < 2) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': inputs need 2 or more dims, got 'a' ",
                shape_string(a), " and 'b' ", shape_string(b));
  }
  const int32_t ar = a.ndim - 2, ac = a.ndim - 1, br = b.ndim - 2, bc = b.ndim - 1;
  shape.m = attrs.transpose_a ? a.shape[ac] : a.shape[ar];
  shape.k = attrs.transpose_a ? a.shape[ar] : a.shape[ac];
  shape.a_row = attrs.transpose_a ? a.strides[ac] : a.strides[ar];
  shape.a_col = attrs.transpose_a ? a.strides[ar] : a.strides[ac];
  const int64_t kb = attrs.transpose_b ? b.shape[bc] : b.shape[br];
  shape.n = attrs.transpose_b ? b.shape[br] : b.shape[bc];
  shape.b_row = attrs.transpose_b ? b.strides[bc] : b.strides[br];
  shape.b_col = attrs.transpose_b ? b.strides[br] : b.strides[bc];
  if (kb != shape.k) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': inner dims differ: 'a' ",
                shape_string(a), " gives K = ", shape.k, ", 'b' ", shape_string(b),
                " gives K = ", kb, " (transpose_a = ", attrs.transpose_a,
                ", transpose_b = ", attrs.transpose_b, ")");
  }
  // Batch dims: the broadcast of a's and b's leading dims.
  const int32_t na = a.ndim - 2, nb = b.ndim - 2;
  shape.batch_ndim = na > nb ? na : nb;
  bool ok = out.ndim == shape.batch_ndim + 2;
  for (int32_t d = 0; ok && d < shape.batch_ndim; ++d) {
    const int64_t da = d >= shape.batch_ndim - na ? a.shape[d - (shape.batch_ndim - na)] : 1;
    const int64_t db = d >= shape.batch_ndim - nb ? b.shape[d - (shape.batch_ndim - nb)] : 1;
    if (da != db && da != 1 && db != 1) {
      return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': batch dims of 'a' ", shape_string(a),
                  " and 'b' ", shape_string(b), " do not broadcast");
    }
    shape.batch_shape[d] = da == 1 ? db : da;
    ok = out.shape[d] == shape.batch_shape[d];
  }
  ok = ok && out.shape[out.ndim - 2] == shape.m && out.shape[out.ndim - 1] == shape.n;
  if (!ok) {
    return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': output 'out' is ", shape_string(out),
                " but 'a' ", shape_string(a), " and 'b' ", shape_string(b), " give [..., ", shape.m,
                ", ", shape.n, "]");
  }
  if (args.num_inputs == 3) {
    const gk_plugin_tensor& bias = args.inputs[2];
    if (bias.ndim != 1 || bias.shape[0] != shape.n) {
      return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': input 'bias' is ", shape_string(bias),
                  ", expected [", shape.n, "]");
    }
  }
  return GK_OK;
}

// How BLAS reads a rows×cols matrix with element strides (row, col) in place: row-major
// (trans = false) or column-major (trans = true) with leading dim ld. False: pack it.
// A stride along a dim of size 1 is never used, so it may be anything.
bool blas_layout(int64_t rows, int64_t cols, int64_t row, int64_t col, bool& trans, int64_t& ld) {
  const int64_t row_major_ld = rows == 1 ? (cols > 1 ? cols : 1) : row;
  if ((cols == 1 || col == 1) && row_major_ld >= (cols > 1 ? cols : 1)) {
    trans = false;
    ld = row_major_ld;
    return ld <= INT_MAX;
  }
  const int64_t col_major_ld = cols == 1 ? (rows > 1 ? rows : 1) : col;
  if ((rows == 1 || row == 1) && col_major_ld >= (rows > 1 ? rows : 1)) {
    trans = true;
    ld = col_major_ld;
    return ld <= INT_MAX;
  }
  return false;
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, double beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k),
              static_cast<float>(alpha), a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb),
              static_cast<float>(beta), c, static_cast<blasint>(ldc));
}

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

// y = alpha·op(A)·x + beta·y for a product of one row (m = 1): the weights are read where they
// are, where gemm would first pack all of them (for a decode step, every weight, every token).
inline void gemv(bool trans, int64_t rows, int64_t cols, double alpha, const float* a, int64_t lda,
                 const float* x, int64_t incx, double beta, float* y) {
  cblas_sgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, static_cast<blasint>(rows),
              static_cast<blasint>(cols), static_cast<float>(alpha), a, static_cast<blasint>(lda),
              x, static_cast<blasint>(incx), static_cast<float>(beta), y, 1);
}

inline void gemv(bool trans, int64_t rows, int64_t cols, double alpha, const double* a,
                 int64_t lda, const double* x, int64_t incx, double beta, double* y) {
  cblas_dgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, static_cast<blasint>(rows),
              static_cast<blasint>(cols), alpha, a, static_cast<blasint>(lda), x,
              static_cast<blasint>(incx), beta, y, 1);
}

// One BLAS-ready operand: in place, or packed row-major into `scratch` (sized here, so that
// an operand BLAS reads in place costs no allocation).
template <class T, class C>
const C* prepare_operand(const char* data, int64_t rows, int64_t cols, int64_t row, int64_t col,
                         std::vector<C>& scratch, bool& trans, int64_t& ld) {
  if constexpr (std::is_same_v<T, C>) {
    if (blas_layout(rows, cols, row, col, trans, ld)) return reinterpret_cast<const C*>(data);
  }
  trans = false;
  ld = cols > 1 ? cols : 1;
  scratch.resize(static_cast<size_t>(rows * cols));
  C* packed = scratch.data();
  for (int64_t i = 0; i < rows; ++i) {
    const char* src = data + i * row * static_cast<int64_t>(sizeof(T));
    for (int64_t j = 0; j < cols; ++j) {
      packed[i * cols + j] = load<T>(src + j * col * static_cast<int64_t>(sizeof(T)));
    }
  }
  return packed;
}

template <class T, class TO>
class Matmul {
 public:
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;

  Matmul(const gk_kernel_args& args, const MatmulAttrs& attrs, const MatmulShape& shape)
      : args_(args), attrs_(attrs), shape_(shape) {
    const gk_plugin_tensor& out = args.outputs[0];
    out_row_ = out.strides[out.ndim - 2];
    out_col_ = out.strides[out.ndim - 1];
    const int64_t mn = shape.m * shape.n;
    bool out_trans = false;
    out_in_place_ = std::is_same_v<TO, C> &&
                    blas_layout(shape.m, shape.n, out_row_, out_col_, out_trans, ldc_) &&
                    !out_trans;
    if (!out_in_place_) {
      c_scratch_.resize(static_cast<size_t>(mn));
      ldc_ = shape.n > 1 ? shape.n : 1;
    }
  }

  void run() {
    const gk_plugin_tensor& a = args_.inputs[0];
    const gk_plugin_tensor& b = args_.inputs[1];
    const gk_plugin_tensor& out = args_.outputs[0];
    const int32_t nb = static_cast<int32_t>(shape_.batch_ndim);
    int64_t strides[3][kMaxDims];
    // Leading dims only: a view of each tensor without its matrix dims.
    gk_plugin_tensor a_batch{a.data, a.dtype, a.ndim - 2, a.shape, a.strides, 0};
    gk_plugin_tensor b_batch{b.data, b.dtype, b.ndim - 2, b.shape, b.strides, 0};
    broadcast_byte_strides(a_batch, sizeof(T), nb, shape_.batch_shape, strides[0]);
    broadcast_byte_strides(b_batch, sizeof(T), nb, shape_.batch_shape, strides[1]);
    for (int32_t d = 0; d < nb; ++d) strides[2][d] = out.strides[d] * int64_t{sizeof(TO)};
    NdLoop<3> loop(nb, shape_.batch_shape);
    loop.set_operand(0, a.data, strides[0]);
    loop.set_operand(1, b.data, strides[1]);
    loop.set_operand(2, out.data, strides[2]);
    loop.run([&](const std::array<char*, 3>& p, int64_t n, const std::array<int64_t, 3>& s) {
      for (int64_t i = 0; i < n; ++i) one(p[0] + i * s[0], p[1] + i * s[1], p[2] + i * s[2]);
    });
  }

 private:
  void one(const char* a, const char* b, char* out) {
    const int64_t m = shape_.m, n = shape_.n, k = shape_.k;
    if (m == 0 || n == 0) return;
    constexpr int64_t kOutSize = sizeof(TO);
    C* c = out_in_place_ ? reinterpret_cast<C*>(out) : c_scratch_.data();
    if (!out_in_place_) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          // Read out only when beta uses it, so uninitialised memory never leaks in.
          c[i * ldc_ + j] =
              attrs_.beta != 0.0 ? load<TO>(out + (i * out_row_ + j * out_col_) * kOutSize) : C(0);
        }
      }
    }
    if (k == 0) {
      // Nothing to multiply: C = beta·C (0 when beta is 0, whatever C held).
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          C& v = c[i * ldc_ + j];
          v = attrs_.beta != 0.0 ? static_cast<C>(attrs_.beta * v) : C(0);
        }
      }
    } else {
      bool ta = false, tb = false;
      int64_t lda = 0, ldb = 0;
      const C* pa = prepare_operand<T, C>(a, m, k, shape_.a_row, shape_.a_col, a_scratch_, ta, lda);
      const C* pb = prepare_operand<T, C>(b, k, n, shape_.b_row, shape_.b_col, b_scratch_, tb, ldb);
      if (m == 1) {
        // c[0, :] = alpha · op(b)ᵀ · a[0, :] + beta · c: op(b) is [k, n] row-major (or [n, k]
        // when tb), a's row has stride 1 (or lda when ta: a is stored as [k, 1]). With beta 0
        // c is zeroed first: gemv scales y by beta, and 0 · NaN of a poisoned output is NaN
        // in some BLAS builds.
        if (attrs_.beta == 0.0) std::fill(c, c + n, C(0));
        gemv(!tb, tb ? n : k, tb ? k : n, attrs_.alpha, pb, ldb, pa, ta ? lda : 1, attrs_.beta, c);
      } else {
        gemm(ta, tb, m, n, k, attrs_.alpha, pa, lda, pb, ldb, attrs_.beta, c, ldc_);
      }
    }
    epilogue(c);
    if (!out_in_place_) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          store<TO>(out + (i * out_row_ + j * out_col_) * kOutSize, c[i * ldc_ + j]);
        }
      }
    }
  }

  void epilogue(C* c) {
    const bool has_bias = args_.num_inputs == 3;
    if (!has_bias && attrs_.activation == Activation::kNone) return;
    const gk_plugin_tensor* bias = has_bias ? &args_.inputs[2] : nullptr;
    for (int64_t i = 0; i < shape_.m; ++i) {
      C* row = c + i * ldc_;
      for (int64_t j = 0; j < shape_.n; ++j) {
        C v = row[j];
        if (bias) {
          v += load<T>(static_cast<const char*>(bias->data) +
                       j * bias->strides[0] * static_cast<int64_t>(sizeof(T)));
        }
        switch (attrs_.activation) {
          case Activation::kNone:
            break;
          case Activation::kRelu:
            v = relu(v);
            break;
          case Activation::kGelu:
            v = gelu_erf(v);
            break;
          case Activation::kSilu:
            v = silu(v);
            break;
        }
        row[j] = v;
      }
    }
  }

  const gk_kernel_args& args_;
  const MatmulAttrs& attrs_;
  const MatmulShape& shape_;
  int64_t out_row_ = 0, out_col_ = 0, ldc_ = 0;
  bool out_in_place_ = false;
  std::vector<C> a_scratch_, b_scratch_, c_scratch_;
};

gk_status check_matmul(const gk_kernel_args& args, std::string& message) {
  if (matmul_b_packed(args)) return check_matmul_packed(args, message);
  if (gk_status s = check_counts(args, 2, 3, 1, message)) return s;
  const gk_plugin_tensor& a = args.inputs[0];
  gk_status s = check_dtype(args, a, "input 'a'",
                            {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16}, message);
  if (s) return s;
  if ((s = check_same_dtype(args, args.inputs[1], "input 'b'", a.dtype, "input 'a'", message))) {
    return s;
  }
  if (args.num_inputs == 3 &&
      (s = check_same_dtype(args, args.inputs[2], "input 'bias'", a.dtype, "input 'a'", message))) {
    return s;
  }
  const gk_plugin_tensor& out = args.outputs[0];
  const bool half_in = a.dtype == GK_DTYPE_F16 || a.dtype == GK_DTYPE_BF16;
  if (out.dtype != a.dtype && !(half_in && out.dtype == GK_DTYPE_F32)) {
    return fail(message, GK_UNIMPLEMENTED, "op 'matmul': output 'out' has dtype ",
                dtype_name(out.dtype), "; inputs of dtype ", dtype_name(a.dtype), " give ",
                dtype_name(a.dtype), half_in ? " or f32" : "");
  }
  MatmulAttrs attrs;
  if (read_attrs(args, attrs, message)) return GK_UNIMPLEMENTED;
  // OpenBLAS takes 32-bit dims.
  for (int32_t i = 0; i < 2; ++i) {
    const gk_plugin_tensor& t = args.inputs[i];
    for (int32_t d = t.ndim - 2; d >= 0 && d < t.ndim; ++d) {
      if (t.shape[d] > INT_MAX) {
        return fail(message, GK_UNIMPLEMENTED, "op 'matmul': input ", i == 0 ? "'a'" : "'b'",
                    " dim ", d, " = ", t.shape[d], " exceeds OpenBLAS's limit ", INT_MAX);
      }
    }
  }
  return GK_OK;
}

gk_status run_matmul(const gk_kernel_args& args, std::string& message) {
  if (matmul_b_packed(args)) return run_matmul_packed(args, message);
  MatmulAttrs attrs;
  if (gk_status s = read_attrs(args, attrs, message)) return s;
  MatmulShape shape;
  if (gk_status s = plan_shape(args, attrs, shape, message)) return s;
  if (gk_status s = check_data(args, args.inputs[0], "input 'a'", message)) return s;
  if (gk_status s = check_data(args, args.inputs[1], "input 'b'", message)) return s;
  if (args.num_inputs == 3) {
    if (gk_status s = check_data(args, args.inputs[2], "input 'bias'", message)) return s;
  }
  if (gk_status s = check_data(args, args.outputs[0], "output 'out'", message)) return s;
  const int32_t out_dtype = args.outputs[0].dtype;
  return visit_floating(
      args.inputs[0].dtype,
      [&](auto tag) -> gk_status {
        using T = typename decltype(tag)::type;
        if (out_dtype == GK_DTYPE_F32 && !std::is_same_v<T, float>) {
          if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
            Matmul<T, float>(args, attrs, shape).run();
            return GK_OK;
          }
        }
        if (out_dtype != DtypeTraits<T>::kDtype) {
          return fail(message, GK_INVALID_ARGUMENT, "op 'matmul': output 'out' has dtype ",
                      dtype_name(out_dtype), ", inputs ", dtype_name(args.inputs[0].dtype));
        }
        Matmul<T, T>(args, attrs, shape).run();
        return GK_OK;
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op 'matmul': dtype ",
                    dtype_name(args.inputs[0].dtype));
      });
}

constexpr OpDef kOps[] = {
    {"matmul", &check_matmul, &run_matmul},
};

}  // namespace

std::span<const OpDef> matmul_ops() {
  return kOps;
}

}  // namespace gk::cpu
