// Helpers for the GPU suites: a runtime with every device, and the skip when there is
// no CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_runtime.h"

namespace gk::test {

// A runtime over every device with the build tree's plugins; `disable` is a comma list
// of plugin-name globs to turn off.
inline RuntimePtr make_gpu_runtime(const char* disable = nullptr) {
  gk_runtime_options o = test_options();
  o.devices = "all";
  o.plugins_disable = disable;
  o.log_level = GK_LOG_WARNING;
  return make_runtime(o);
}

// The first CUDA device id, or -1.
inline int32_t first_cuda_device(gk_runtime* rt) {
  int32_t count = 0;
  gk_device_count(rt, &count);
  for (int32_t id = 0; id < count; ++id) {
    gk_device_props p{};
    p.struct_size = sizeof(p);
    if (gk_device_get_props(rt, id, &p) == GK_OK && p.kind == GK_DEVICE_KIND_CUDA) return id;
  }
  return -1;
}

// Why the runtime has no CUDA device ("" when it has one).
inline std::string cuda_absent_reason(gk_runtime* rt) {
  char* info = nullptr;
  if (gk_runtime_info_json(rt, &info) != GK_OK) return gk_last_error();
  auto j = nlohmann::json::parse(info);
  gk_string_free(info);
  return j.value("cuda_absent_reason", std::string("no CUDA device found"));
}

}  // namespace gk::test

// Skips the test, with the reason, on a machine without a CUDA device.
#define GK_REQUIRE_CUDA_DEVICE(rt, device_var)                                   \
  int32_t device_var = ::gk::test::first_cuda_device(rt);                        \
  if (device_var < 0) {                                                          \
    GTEST_SKIP() << "no CUDA device: " << ::gk::test::cuda_absent_reason(rt);    \
  }
