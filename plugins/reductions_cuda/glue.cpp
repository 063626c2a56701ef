// Shared glue helpers (see glue.h).
#include "glue.h"

#include <cstring>

namespace gk::plugins::reductions_cuda {

bool map_dtype(int32_t dtype, kr::DType* out) {
  switch (dtype) {
    case GK_DTYPE_F32: *out = kr::DType::f32; return true;
    case GK_DTYPE_F16: *out = kr::DType::f16; return true;
    case GK_DTYPE_BF16: *out = kr::DType::bf16; return true;
    case GK_DTYPE_I32: *out = kr::DType::i32; return true;
    case GK_DTYPE_I64: *out = kr::DType::i64; return true;
    case GK_DTYPE_BOOL: *out = kr::DType::b8; return true;
    default: return false;
  }
}


bool to_ref(const gk_kernel_args* args, const gk_plugin_tensor& t, const char* arg,
            kr::TensorRef* out, std::string* why) {
  if (!map_dtype(t.dtype, &out->dtype)) {
    *why = std::string(args->op) + ": " + arg + " dtype " + dtype_name(t.dtype) +
           " is not served on CUDA by reductions_cuda (f32, f16, bf16; i32, i64 and bool for "
           "the ops that list them)";
    return false;
  }
  if (t.ndim < 0 || t.ndim > kr::kMaxDims) {
    *why = std::string(args->op) + ": " + arg + " has " + std::to_string(t.ndim) +
           " dims; reductions_cuda serves at most " + std::to_string(kr::kMaxDims);
    return false;
  }
  out->data = t.data;
  out->ndim = t.ndim;
  for (int d = 0; d < t.ndim; ++d) {
    out->shape[d] = t.shape[d];
    out->strides[d] = t.strides[d];
  }
  return true;
}

const char* attr_string(const gk_kernel_args* args, const char* name, const char* fallback) {
  const gk_attr* a = gk_find_attr(args, name);
  return a ? a->value.s : fallback;  // one of the op's spellings (the core's op rules)
}

}  // namespace gk::plugins::reductions_cuda
