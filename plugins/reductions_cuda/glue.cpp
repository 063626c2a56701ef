// Shared glue helpers (see glue.h).
#include "glue.h"

#include <cstring>

namespace gk::plugins::reductions_cuda {

LaunchContext::~LaunchContext() {
  if (ws_ != nullptr) host_->free(host_->host_context, args_->device, ws_, args_->stream);
}

gk_status LaunchContext::workspace(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return GK_OK;
  const gk_status st = host_->alloc(host_->host_context, args_->device, bytes, args_->stream, &ws_);
  if (st != GK_OK) {
    const std::string msg = std::string(args_->op) + ": scratch of " + std::to_string(bytes) +
                            " bytes for partial results could not be allocated";
    host_->report_error(host_->host_context, msg.c_str());
    ws_ = nullptr;
    return st;
  }
  *out = ws_;
  return GK_OK;
}

gk_status LaunchContext::cuda_error(const char* what, cudaError_t err) const {
  const std::string msg = std::string(args_->op) + ": " + what + " failed: " +
                          cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  host_->report_error(host_->host_context, msg.c_str());
  return GK_INTERNAL;
}

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

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F32: return "f32";
    case GK_DTYPE_F64: return "f64";
    case GK_DTYPE_F16: return "f16";
    case GK_DTYPE_BF16: return "bf16";
    case GK_DTYPE_I8: return "i8";
    case GK_DTYPE_I16: return "i16";
    case GK_DTYPE_I32: return "i32";
    case GK_DTYPE_I64: return "i64";
    case GK_DTYPE_U8: return "u8";
    case GK_DTYPE_BOOL: return "bool";
    default: return "unknown";
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
