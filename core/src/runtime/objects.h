// The structs behind the C ABI's opaque handles.
#pragma once

#include <atomic>
#include <memory>

#include "gpukit/gpukit.h"
#include "memory/device_memory.h"
#include "runtime/runtime.h"

struct gk_runtime {
  std::shared_ptr<gk::Runtime> impl;
};

struct gk_stream {
  gk::Runtime* runtime;
  std::shared_ptr<gk::Runtime> owner;  // null for the runtime's own default streams
  const gk::Device* device;
  gk::cuda::CUstream native;           // nullptr: the legacy default stream (or cpu)
  bool owns_native;
};

struct gk_event {
  std::shared_ptr<gk::Runtime> runtime;
  const gk::Device* device;
  gk::cuda::CUevent native;  // nullptr on the cpu device
};

struct gk_tensor {
  std::atomic<int32_t> refs{1};
  std::shared_ptr<gk::Runtime> runtime;
  const gk::Device* device = nullptr;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[GK_MAX_DIMS] = {};
  int64_t strides[GK_MAX_DIMS] = {};
  uint32_t flags = 0;
  void* data = nullptr;                         // element [0, …, 0]
  std::shared_ptr<gk::Allocation> allocation;   // GPUkit memory, or
  gk_release_fn release = nullptr;              // external memory's release callback
  void* release_context = nullptr;

  ~gk_tensor() {
    if (release) release(release_context);
  }
};
