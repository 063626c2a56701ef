// The structs behind the C ABI's opaque handles.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "common/recycled_blocks.h"
#include "common/ref_count.h"
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
  std::shared_ptr<gk::Task> task = {};  // the scheduler task owning it, if any
};

struct gk_event {
  std::shared_ptr<gk::Runtime> runtime;
  const gk::Device* device;
  gk::cuda::CUevent native;  // nullptr on the cpu device
};

// In recycled storage: the DLPack exchange and op outputs make and drop one per call.
struct gk_tensor : gk::RecycledStorage {
  std::atomic<int32_t> refs{1};
  gk::Runtime* runtime = nullptr;
  // Keeps `runtime` alive. Empty only when the release callback's context does so until the
  // callback has run (a tensor imported from this runtime's own DLPack export holds the
  // exported tensor): read `runtime`, never copy this to keep the runtime.
  std::shared_ptr<gk::Runtime> runtime_owner;
  const gk::Device* device = nullptr;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[GK_MAX_DIMS] = {};
  int64_t strides[GK_MAX_DIMS] = {};
  uint32_t flags = 0;
  void* data = nullptr;                         // element [0, …, 0]: use gk::tensor_data()
  uint64_t data_offset = 0;                     // element [0, …, 0] from the allocation's start
  gk::AllocationRef allocation;                 // GPUkit memory, or
  gk_release_fn release = nullptr;              // external memory's release callback
  void* release_context = nullptr;

  ~gk_tensor() {
    if (release) release(release_context);
  }
};
static_assert(gk::recycled_size_index(sizeof(gk_tensor)) >= 0, "add a larger recycled block size");

struct gk_memory_owner {
  std::shared_ptr<gk::Runtime> runtime;
  const gk::Device* device;
  gk::MemoryOwner* owner;  // lives as long as the device's pool
  gk::Task* task = nullptr;  // set when it is a scheduler task's owner (borrowed handle)
};

struct gk_task {
  std::shared_ptr<gk::Runtime> runtime;
  std::shared_ptr<gk::Task> task;  // also held by the task's streams
  gk_memory_owner owner;           // the handle gk_task_memory_owner lends
};

namespace gk {

// gk_tensor_retain and gk_tensor_release, inline for the core's own calls (the exported
// functions are called through the PLT from inside the library).
inline void retain_tensor(gk_tensor* tensor) {
  if (tensor) tensor->refs.fetch_add(1, std::memory_order_relaxed);
}
inline void release_tensor(gk_tensor* tensor) {
  if (tensor && drop_reference(tensor->refs)) delete tensor;
}

// The address of a tensor's element [0, …, 0] now. A tensor over an evictable buffer is
// restored first when spilled (it may come back at a new address).
inline void* tensor_data(const gk_tensor& t, cuda::CUstream stream) {
  if (!t.allocation || !t.allocation->evictable()) return t.data;
  return static_cast<char*>(t.allocation->locate(stream, false)) + t.data_offset;
}

// Tensor addresses for the length of one call: evictable memory is restored and pinned
// (never spilled) until the TensorPins goes.
class TensorPins {
 public:
  explicit TensorPins(cuda::CUstream stream) : stream_(stream) {}
  ~TensorPins() {
    for (Allocation* a : pinned_) a->unpin();
  }
  TensorPins(const TensorPins&) = delete;
  TensorPins& operator=(const TensorPins&) = delete;

  void* data(const gk_tensor& t) { return data(t, stream_); }
  // With the stream of the tensor's own device (for a copy across devices).
  void* data(const gk_tensor& t, cuda::CUstream stream) {
    if (!t.allocation || !t.allocation->evictable()) return t.data;
    pinned_.reserve(pinned_.size() + 1);
    void* base = t.allocation->locate(stream, true);
    pinned_.push_back(t.allocation.get());
    return static_cast<char*>(base) + t.data_offset;
  }

 private:
  cuda::CUstream stream_;
  std::vector<Allocation*> pinned_;
};

}  // namespace gk
