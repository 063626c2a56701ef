// matmul_problem.h — one matmul call reduced to numbers the kernels take.
//
// The op (docs/ops.md) is out = act(alpha · op(a) · op(b) + beta · out + bias) over
// broadcast batch dims. Every plugin that serves it first turns gk_kernel_args into a
// MatmulProblem: M, N, K, one (row, column) stride pair per matrix, and the batch dims
// collapsed as far as the three tensors' strides allow. Transposes become strides, so
// the kernels never see a transpose flag. Host-only; no CUDA types.
#ifndef GPUKIT_KERNELS_MATMUL_MATMUL_PROBLEM_H_
#define GPUKIT_KERNELS_MATMUL_MATMUL_PROBLEM_H_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpukit/gpukit_plugin.h"

namespace gk::matmul {

enum class Activation : int32_t { kNone = 0, kRelu = 1, kGelu = 2, kSilu = 3 };

// Batch dims left after collapsing: out has at most GK_MAX_DIMS - 2 of them.
inline constexpr int kMaxBatchDims = GK_MAX_DIMS - 2;

// Element offsets of one batch entry in a, b and out. Passed to kernels by value.
struct BatchLayout {
  int32_t ndim = 0;  // 0: a single matrix
  int64_t shape[kMaxBatchDims] = {};
  int64_t a_stride[kMaxBatchDims] = {};  // 0 where a broadcasts
  int64_t b_stride[kMaxBatchDims] = {};
  int64_t c_stride[kMaxBatchDims] = {};
};

struct MatmulProblem {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch_count = 1;
  BatchLayout batch;
  // Element strides of a (M×K view), b (K×N view), out (M×N) and bias.
  int64_t a_sm = 0, a_sk = 0, b_sk = 0, b_sn = 0, c_sm = 0, c_sn = 0, bias_s = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;  // nullptr: no bias
  void* c = nullptr;
  bool has_bias = false;
  int32_t in_dtype = 0;   // a, b and bias (gk_dtype)
  int32_t out_dtype = 0;  // in_dtype, or f32 for f16/bf16 inputs
  double alpha = 1.0, beta = 0.0;
  Activation act = Activation::kNone;
  bool gelu_tanh = false;  // only when the caller passed approximate="tanh"
  bool allow_tf32 = false;
};

inline size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F64: return 8;
    case GK_DTYPE_F32: return 4;
    case GK_DTYPE_F16:
    case GK_DTYPE_BF16: return 2;
    default: return 0;
  }
}

// Fills *p from the call. Returns false with *why set when the call is not a matmul this
// code can describe (the core validates shapes first, so this is defensive).
inline bool parse_matmul_args(const gk_kernel_args* args, MatmulProblem* p, std::string* why) {
  if (args->num_inputs < 2 || args->num_outputs < 1) {
    *why = "matmul needs inputs a, b and output out";
    return false;
  }
  const gk_plugin_tensor& a = args->inputs[0];
  const gk_plugin_tensor& b = args->inputs[1];
  const gk_plugin_tensor& c = args->outputs[0];
  if (a.ndim < 2 || b.ndim < 2 || c.ndim < 2) {
    *why = "matmul operands need at least 2 dims";
    return false;
  }
  const bool ta = gk_attr_int(args, "transpose_a", 0) != 0;
  const bool tb = gk_attr_int(args, "transpose_b", 0) != 0;
  const int ar = a.ndim - 2, ac = a.ndim - 1;
  const int br = b.ndim - 2, bc = b.ndim - 1;
  p->m = ta ? a.shape[ac] : a.shape[ar];
  p->k = ta ? a.shape[ar] : a.shape[ac];
  p->a_sm = ta ? a.strides[ac] : a.strides[ar];
  p->a_sk = ta ? a.strides[ar] : a.strides[ac];
  p->n = tb ? b.shape[br] : b.shape[bc];
  p->b_sk = tb ? b.strides[bc] : b.strides[br];
  p->b_sn = tb ? b.strides[br] : b.strides[bc];
  p->c_sm = c.strides[c.ndim - 2];
  p->c_sn = c.strides[c.ndim - 1];
  p->a = a.data;
  p->b = b.data;
  p->c = c.data;
  p->in_dtype = a.dtype;
  p->out_dtype = c.dtype;
  if (args->num_inputs > 2) {
    const gk_plugin_tensor& bias = args->inputs[2];
    p->has_bias = true;
    p->bias = bias.data;
    p->bias_s = bias.ndim >= 1 ? bias.strides[bias.ndim - 1] : 0;
  }

  // Batch dims: out's leading dims; a and b broadcast into them (stride 0).
  const int nb = c.ndim - 2;
  int64_t shape[GK_MAX_DIMS], sa[GK_MAX_DIMS], sb[GK_MAX_DIMS], sc[GK_MAX_DIMS];
  int kept = 0;
  p->batch_count = 1;
  for (int i = 0; i < nb; ++i) {
    const int64_t size = c.shape[i];
    p->batch_count *= size;
    const int ai = i - (nb - (a.ndim - 2));
    const int bi = i - (nb - (b.ndim - 2));
    const int64_t as = (ai >= 0 && a.shape[ai] != 1) ? a.strides[ai] : 0;
    const int64_t bs = (bi >= 0 && b.shape[bi] != 1) ? b.strides[bi] : 0;
    if (size == 1) continue;  // contributes no offset
    // Merge into the previous kept dim when all three tensors walk it contiguously.
    if (kept > 0 && sa[kept - 1] == as * size && sb[kept - 1] == bs * size &&
        sc[kept - 1] == c.strides[i] * size) {
      shape[kept - 1] *= size;
      sa[kept - 1] = as;
      sb[kept - 1] = bs;
      sc[kept - 1] = c.strides[i];
      continue;
    }
    shape[kept] = size;
    sa[kept] = as;
    sb[kept] = bs;
    sc[kept] = c.strides[i];
    ++kept;
  }
  p->batch.ndim = kept;
  for (int i = 0; i < kept; ++i) {
    p->batch.shape[i] = shape[i];
    p->batch.a_stride[i] = sa[i];
    p->batch.b_stride[i] = sb[i];
    p->batch.c_stride[i] = sc[i];
  }

  p->alpha = gk_attr_float(args, "alpha", 1.0);
  p->beta = gk_attr_float(args, "beta", 0.0);
  const gk_attr* act = gk_find_attr(args, "activation");
  p->act = Activation::kNone;
  if (act && act->type == GK_ATTR_STRING && act->value.s) {
    const char* s = act->value.s;
    if (std::strcmp(s, "relu") == 0) p->act = Activation::kRelu;
    else if (std::strcmp(s, "gelu") == 0) p->act = Activation::kGelu;
    else if (std::strcmp(s, "silu") == 0) p->act = Activation::kSilu;
    else if (std::strcmp(s, "none") != 0) {
      *why = std::string("unknown activation '") + s + "'";
      return false;
    }
  }
  const gk_attr* approx = gk_find_attr(args, "approximate");
  p->gelu_tanh = approx && approx->type == GK_ATTR_STRING && approx->value.s &&
                 std::strcmp(approx->value.s, "tanh") == 0;
  const gk_attr* prec = gk_find_attr(args, "precision");
  p->allow_tf32 = prec && prec->type == GK_ATTR_STRING && prec->value.s &&
                  std::strcmp(prec->value.s, "tf32") == 0;
  return true;
}

// Writes `why` into the supports() reason buffer.
inline void write_reason(char* reason, size_t capacity, const std::string& why) {
  if (!reason || capacity == 0) return;
  std::snprintf(reason, capacity, "%s", why.c_str());
}

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_MATMUL_PROBLEM_H_
