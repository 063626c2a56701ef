// Helpers shared by the C entry points.
#pragma once

#include <string>
#include <utility>

#include "common/dtype.h"
#include "common/error.h"
#include "runtime/objects.h"

namespace gk {

inline Runtime& runtime_of(const gk_runtime* runtime, const char* function) {
  require_arg(runtime, function, "runtime");
  return *runtime->impl;
}

// The runtime an allocation was made for: the C API makes every allocation with its runtime as
// the context (create_tensor, gk_buffer_alloc).
inline Runtime& runtime_of(const Allocation& allocation) {
  return *static_cast<Runtime*>(allocation.context);
}

// A tensor's descriptor with explicit strides.
gk_tensor_desc desc_of(const gk_tensor& t);

// The lowest and one-past-highest byte offsets a strided view reaches from element 0; {0, 0}
// when it has no element. Each lies within kMaxTensorBytes of 0 for a checked descriptor.
std::pair<int64_t, int64_t> byte_extent(const gk_tensor_desc& d);

// A new tensor (one reference) of `runtime` over `data`, from a checked descriptor with
// explicit strides; the caller sets what owns the memory (allocation, or release and its
// context). `owner` keeps the runtime alive: empty only when the release context does (see
// gk_tensor::runtime_owner).
gk_tensor* new_tensor(Runtime& runtime, std::shared_ptr<Runtime> owner, const Device& device,
                      const gk_tensor_desc& d, void* data);

// A new tensor (one reference) over fresh memory of `device`, allocated in the order of the
// native `stream`, from a checked descriptor with explicit contiguous strides.
gk_tensor* create_tensor(const std::shared_ptr<Runtime>& runtime, const Device& device,
                         const gk_tensor_desc& d, cuda::CUstream stream);

[[noreturn]] void fail_stream_device(const Runtime& runtime, const gk_stream& stream,
                                     const Device& device, const char* function);

// The stream to use: `stream`, or the default stream of `device`. Fails when the stream
// belongs to another device or another runtime. Inline: the alloc/free hot path calls it twice.
inline gk_stream& stream_for(Runtime& runtime, gk_stream* stream, const Device& device,
                             const char* function) {
  if (!stream) return *runtime.default_stream(device.id);
  if (stream->device != &device) fail_stream_device(runtime, *stream, device, function);
  return *stream;
}

[[noreturn]] void fail_misaligned(const void* data, int32_t dtype, const char* function);

// Tensor data must be aligned to its element size (kernels load whole elements, and
// DLPack producers guarantee it), packed blocks to 2 bytes (their f16 scales); `data` is the
// first element's address. One rule for every way memory becomes a tensor: external data,
// buffer views, DLPack imports.
inline void require_aligned(const void* data, int32_t dtype, const char* function) {
  const uintptr_t size = dtype_alignment(dtype);
  if (reinterpret_cast<uintptr_t>(data) & (size - 1)) fail_misaligned(data, dtype, function);
}

// A malloc'ed copy for `char**` out-parameters (freed by gk_string_free).
char* c_string(const std::string& text);

}  // namespace gk
