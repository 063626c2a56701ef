// Helpers shared by the C entry points.
#pragma once

#include <string>

#include "common/error.h"
#include "runtime/objects.h"

namespace gk {

inline Runtime& runtime_of(const gk_runtime* runtime, const char* function) {
  require_arg(runtime, function, "runtime");
  return *runtime->impl;
}

// A tensor's descriptor with explicit strides.
gk_tensor_desc desc_of(const gk_tensor& t);

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

[[noreturn]] void fail_stream_device(const gk_stream& stream, const Device& device,
                                     const char* function);

// The stream to use: `stream`, or the default stream of `device`. Fails when the stream
// belongs to another device. Inline: the alloc/free hot path calls it twice.
inline gk_stream& stream_for(Runtime& runtime, gk_stream* stream, const Device& device,
                             const char* function) {
  if (!stream) return *runtime.default_stream(device.id);
  if (stream->device != &device) fail_stream_device(*stream, device, function);
  return *stream;
}

// A malloc'ed copy for `char**` out-parameters (freed by gk_string_free).
char* c_string(const std::string& text);

}  // namespace gk
