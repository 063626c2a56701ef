// The runtime the tensor, view and DLPack fuzz targets share: the cpu device alone, the
// build tree's cpu plugin, log lines dropped, and a memory budget so that a descriptor the
// library rightly accepts cannot make a single input allocate gigabytes.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpukit/gpukit.h"

namespace gk::fuzz {

// Bytes the cpu device may have in use: larger allocations fail with RESOURCE_EXHAUSTED.
inline constexpr uint64_t kMemoryBudget = uint64_t(16) << 20;

// Inputs of at most this many elements are filled and run through ops.
inline constexpr int64_t kOpElements = 4096;

// Aborts the run: the harness itself cannot work (no runtime, no cpu plugin).
[[noreturn]] inline void setup_failed(const char* what) {
  std::fprintf(stderr, "fuzz setup: %s: %s\n", what, gk_last_error());
  std::abort();
}

// A broken promise of the C ABI (a call that succeeded without its result, a deleter not
// called exactly once): a finding, reported like a crash.
[[noreturn]] inline void contract_broken(const char* what) {
  std::fprintf(stderr, "fuzz: C ABI contract broken: %s\n", what);
  std::abort();
}

inline void drop_log_line(void*, int32_t, const char*) {}

inline bool cpu_plugin_loaded(const gk_runtime* rt) {
  for (int32_t i = 0; i < gk_plugin_count(rt); ++i) {
    gk_plugin_info info{};
    info.struct_size = sizeof(info);
    if (gk_plugin_get(rt, i, &info) == GK_OK && info.loaded && std::string(info.name) == "cpu") {
      return true;
    }
  }
  return false;
}

// Created on first use and kept for the process: every input runs against the same runtime,
// as a long-lived client's calls would.
inline gk_runtime* shared_runtime() {
  static gk_runtime* runtime = [] {
    gk_runtime_options o = GK_RUNTIME_OPTIONS_INIT;
    o.flags = GK_RUNTIME_IGNORE_ENVIRONMENT | GK_RUNTIME_NO_DEFAULT_PLUGINS;
    o.devices = "cpu";
    o.plugin_path = GPUKIT_FUZZ_MANIFESTS;
    o.log_fn = &drop_log_line;
    o.log_level = GK_LOG_ERROR;
    gk_runtime* rt = nullptr;
    if (gk_runtime_create(&o, &rt) != GK_OK) setup_failed("gk_runtime_create");
    if (!cpu_plugin_loaded(rt)) setup_failed("the cpu plugin is not loaded (is it built?)");
    if (gk_memory_set_budget(rt, 0, kMemoryBudget) != GK_OK) setup_failed("gk_memory_set_budget");
    return rt;
  }();
  return runtime;
}

}  // namespace gk::fuzz
