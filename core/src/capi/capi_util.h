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

// The stream to use: `stream`, or the default stream of `device`. Fails when the stream
// belongs to another device.
gk_stream& stream_for(Runtime& runtime, gk_stream* stream, const Device& device,
                      const char* function);

// A malloc'ed copy for `char**` out-parameters (freed by gk_string_free).
char* c_string(const std::string& text);

}  // namespace gk
