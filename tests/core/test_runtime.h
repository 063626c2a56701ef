// Shared helpers for the core tests: a runtime on the cpu device with the build tree's
// plugins, and log capture.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpukit/gpukit.h"

namespace gk::test {

struct LogCapture {
  std::vector<std::string> lines;
  static void sink(void* user, int32_t, const char* message) {
    static_cast<LogCapture*>(user)->lines.emplace_back(message);
  }
  bool contains(const std::string& text) const {
    for (const auto& l : lines) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  }
};

// Options that ignore the environment and load the build tree's plugins.
inline gk_runtime_options test_options(LogCapture* log = nullptr) {
  gk_runtime_options o = GK_RUNTIME_OPTIONS_INIT;
  o.flags = GK_RUNTIME_IGNORE_ENVIRONMENT | GK_RUNTIME_NO_DEFAULT_PLUGINS;
  o.devices = "cpu";
  o.plugin_path = GPUKIT_TEST_MANIFESTS;
  if (log) {
    o.log_fn = &LogCapture::sink;
    o.log_user_data = log;
    o.log_level = GK_LOG_DEBUG;
  }
  return o;
}

struct RuntimeDeleter {
  void operator()(gk_runtime* r) const { gk_runtime_destroy(r); }
};
using RuntimePtr = std::unique_ptr<gk_runtime, RuntimeDeleter>;

inline RuntimePtr make_runtime(const gk_runtime_options& options) {
  gk_runtime* rt = nullptr;
  gk_status s = gk_runtime_create(&options, &rt);
  EXPECT_EQ(s, GK_OK) << gk_last_error();
  return RuntimePtr(rt);
}

struct TensorDeleter {
  void operator()(gk_tensor* t) const { gk_tensor_release(t); }
};
using TensorPtr = std::unique_ptr<gk_tensor, TensorDeleter>;

inline gk_tensor_desc desc(int32_t dtype, std::vector<int64_t> shape) {
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.ndim = int32_t(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) d.shape[i] = shape[i];
  return d;
}

inline TensorPtr make_tensor(gk_runtime* rt, int32_t dtype, std::vector<int64_t> shape,
                             int32_t device = 0) {
  gk_tensor_desc d = desc(dtype, std::move(shape));
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_create(rt, device, &d, nullptr, &t), GK_OK) << gk_last_error();
  return TensorPtr(t);
}

inline TensorPtr tensor_from(gk_runtime* rt, const std::vector<float>& values,
                             std::vector<int64_t> shape) {
  TensorPtr t = make_tensor(rt, GK_DTYPE_F32, std::move(shape));
  EXPECT_EQ(gk_copy_from_host(t.get(), values.data(), values.size() * sizeof(float), nullptr),
            GK_OK)
      << gk_last_error();
  return t;
}

inline std::vector<float> read_f32(const gk_tensor* t, size_t count) {
  std::vector<float> out(count);
  EXPECT_EQ(gk_copy_to_host(t, out.data(), count * sizeof(float), nullptr), GK_OK)
      << gk_last_error();
  return out;
}

// gk_op_call with the given tensors and attributes.
inline gk_status op_call(gk_runtime* rt, const char* op, std::vector<gk_tensor*> inputs,
                         std::vector<gk_tensor*> outputs, std::vector<gk_attr> attrs = {}) {
  gk_op_args a{};
  a.struct_size = sizeof(a);
  a.inputs = inputs.data();
  a.num_inputs = int32_t(inputs.size());
  a.outputs = outputs.data();
  a.num_outputs = int32_t(outputs.size());
  a.attrs = attrs.data();
  a.num_attrs = int32_t(attrs.size());
  return gk_op_call(rt, op, &a);
}

// Attributes of a call; a list's values stay the caller's.
inline gk_attr int_attr(const char* name, int64_t v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_INT;
  a.value.i = v;
  return a;
}

inline gk_attr float_attr(const char* name, double v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_FLOAT;
  a.value.f = v;
  return a;
}

inline gk_attr ints_attr(const char* name, const std::vector<int64_t>& v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_INTS;
  a.value.ints = v.data();
  a.count = int32_t(v.size());
  return a;
}

}  // namespace gk::test
