// Shared by the matmul plugins: a matmul call of the plugin ABI (gk_kernel_args) turned into
// the MatmulProblem the kernels in kernels/matmul take, so that no kernel sees the ABI.
// Header-only; failures throw the plugin SDK's Failure, which its entry points turn into a
// supports() reason or a launch() error.
#pragma once

#include <cstring>
#include <string>

#include "gpukit/gpukit_plugin.h"
#include "gpukit/gpukit_plugin.hpp"
#include "matmul_problem.h"

namespace gk::plugins {

// Fills *p from the call. Returns false with *why set when the call is not a matmul this
// code can describe (the core validates shapes first, so this is defensive).
inline bool parse_matmul_args(const gk_kernel_args& args, gk::matmul::MatmulProblem* p,
                              std::string* why) {
  using gk::matmul::Activation;
  if (args.num_inputs < 2 || args.num_outputs < 1) {
    *why = "matmul needs inputs a, b and output out";
    return false;
  }
  const gk_plugin_tensor& a = args.inputs[0];
  const gk_plugin_tensor& b = args.inputs[1];
  const gk_plugin_tensor& c = args.outputs[0];
  if (a.ndim < 2 || b.ndim < 2 || c.ndim < 2) {
    *why = "matmul operands need at least 2 dims";
    return false;
  }
  const bool ta = gk_attr_int(&args, "transpose_a", 0) != 0;
  const bool tb = gk_attr_int(&args, "transpose_b", 0) != 0;
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
  p->b_dtype = b.dtype;
  p->out_dtype = c.dtype;
  if (args.num_inputs > 2) {
    const gk_plugin_tensor& bias = args.inputs[2];
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

  p->alpha = gk_attr_float(&args, "alpha", 1.0);
  p->beta = gk_attr_float(&args, "beta", 0.0);
  // One of the op's spellings (the core's op rules normalised it); absent: none.
  const gk_attr* act = gk_find_attr(&args, "activation");
  const char* s = act ? act->value.s : "none";
  p->act = std::strcmp(s, "relu") == 0   ? Activation::kRelu
           : std::strcmp(s, "gelu") == 0 ? Activation::kGelu
           : std::strcmp(s, "silu") == 0 ? Activation::kSilu
                                         : Activation::kNone;
  const gk_attr* approx = gk_find_attr(&args, "approximate");
  p->gelu_tanh = approx && approx->type == GK_ATTR_STRING && approx->value.s &&
                 std::strcmp(approx->value.s, "tanh") == 0;
  const gk_attr* prec = gk_find_attr(&args, "precision");
  p->allow_tf32 = prec && std::strcmp(prec->value.s, "tf32") == 0;
  return true;
}

// The call as a MatmulProblem, with *dev the CUDA device it runs on, whose SM must lie in
// [sm_min, sm_max]. Throws GK_INVALID_ARGUMENT naming what is not served: another op, another
// device, or arguments parse_matmul_args refuses.
inline gk::matmul::MatmulProblem matmul_call(const gk_host_services* host,
                                             const gk_kernel_args& args, int32_t sm_min,
                                             int32_t sm_max, gk_plugin_device* dev) {
  if (std::strcmp(args.op, "matmul") != 0) {
    gk::plugin::fail(GK_INVALID_ARGUMENT,
                     std::string("serves op matmul only, not '") + args.op + "'");
  }
  *dev = gk::plugin::call_device(host, args, sm_min, sm_max);
  gk::matmul::MatmulProblem p;
  std::string why;
  if (!parse_matmul_args(args, &p, &why)) gk::plugin::fail(GK_INVALID_ARGUMENT, why);
  return p;
}

}  // namespace gk::plugins
