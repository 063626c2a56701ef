// What the llm model tests share: the golden models' folders, logits comparisons, sessions,
// and the runtime they use on a GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "gpukit/gpukit.h"

// tests/llm/golden/<model>.
inline std::string golden_folder(const std::string& model) {
  return std::string(GPUKIT_LLM_GOLDEN) + "/" + model;
}

inline int32_t argmax(const float* row, int64_t n) {
  return int32_t(std::max_element(row, row + n) - row);
}

// max|a - b| / max|b| over one row.
inline double row_error(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

// A session of `m` (0: the model's context), charged to `task` when given.
inline gk_session* open_session(gk_model* m, int64_t max_context = 0, gk_task* task = nullptr) {
  gk_session_options o{};
  o.struct_size = sizeof(o);
  o.max_context = max_context;
  o.task = task;
  gk_session* s = nullptr;
  EXPECT_EQ(gk_session_create(m, &o, &s), GK_OK) << gk_last_error();
  return s;
}

// The runtime the llm tests use on a GPU: every device, the test manifests, and the first
// CUDA device, or why there is none to run on (the test then skips, saying so).

struct CudaRuntime {
  gk_runtime* rt = nullptr;
  int32_t device = -1;
  std::string skip;  // non-empty: no CUDA device, or no CUDA llm kernel plugin to run on it
};

// `log_fn` (may be NULL) receives the runtime's log lines from `log_level` up.
inline CudaRuntime cuda_runtime(gk_log_fn log_fn = nullptr, void* log_user_data = nullptr,
                                int32_t log_level = GK_LOG_WARNING) {
  CudaRuntime out;
  gk_runtime_options o = GK_RUNTIME_OPTIONS_INIT;
  o.flags = GK_RUNTIME_IGNORE_ENVIRONMENT | GK_RUNTIME_NO_DEFAULT_PLUGINS;
  o.devices = "all";
  o.plugin_path = GPUKIT_TEST_MANIFESTS;
  o.log_fn = log_fn;
  o.log_user_data = log_user_data;
  o.log_level = log_level;
  if (gk_runtime_create(&o, &out.rt) != GK_OK) {
    out.skip = std::string("the runtime could not be created: ") + gk_last_error();
    return out;
  }
  int32_t count = 0;
  gk_device_count(out.rt, &count);
  for (int32_t d = 0; d < count && out.device < 0; ++d) {
    gk_device_props p{};
    p.struct_size = sizeof(p);
    if (gk_device_get_props(out.rt, d, &p) == GK_OK && p.kind == GK_DEVICE_KIND_CUDA) out.device = d;
  }
  // A build without CUDA has no kernel plugin for the device: nothing to run the ops.
  bool cuda_plugins = false;
  for (int32_t i = 0; i < gk_plugin_count(out.rt); ++i) {
    gk_plugin_info p{};
    p.struct_size = sizeof(p);
    if (gk_plugin_get(out.rt, i, &p) == GK_OK && p.loaded && p.device_kind == GK_DEVICE_KIND_CUDA &&
        std::string(p.family) == "llm") {
      cuda_plugins = true;
    }
  }
  if (out.device < 0) {
    out.skip = "no CUDA device";
  } else if (!cuda_plugins) {
    out.skip = "no CUDA llm kernel plugin (built without CUDA)";
  }
  return out;
}
