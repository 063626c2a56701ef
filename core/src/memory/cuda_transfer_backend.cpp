// The transfer engine's CUDA backend: one non-blocking copy stream per direction, created on
// first use; the events that join them with callers' streams come from a small cache.
#include <mutex>
#include <vector>

#include "common/error.h"
#include "memory/transfer_engine.h"

namespace gk {
namespace {

class CudaTransferBackend final : public TransferBackend {
 public:
  CudaTransferBackend(const cuda::Driver& driver, cuda::CUcontext context)
      : driver_(driver), api_(driver.api()), context_(context) {}

  ~CudaTransferBackend() override {
    if (api_.cuCtxPushCurrent(context_) != cuda::kSuccess) return;
    for (cuda::CUstream& s : streams_) {
      if (!s) continue;
      api_.cuStreamSynchronize(s);
      api_.cuStreamDestroy(s);
    }
    for (cuda::CUevent e : spare_events_) api_.cuEventDestroy(e);
    cuda::CUcontext popped;
    api_.cuCtxPopCurrent(&popped);
  }

  bool is_dma_capable(const void* ptr, uint64_t bytes) override {
    // Both ends: a range that starts in pinned memory may run past it.
    return registered(ptr) && registered(static_cast<const char*>(ptr) + bytes - 1);
  }

  void* alloc_staging(uint64_t bytes) override {
    void* p = nullptr;
    return api_.cuMemHostAlloc(&p, bytes, 0) == cuda::kSuccess ? p : nullptr;
  }
  void free_staging(void* ptr) noexcept override {
    if (!ptr || api_.cuCtxPushCurrent(context_) != cuda::kSuccess) return;
    api_.cuMemFreeHost(ptr);
    cuda::CUcontext popped;
    api_.cuCtxPopCurrent(&popped);
  }

  void* create_event() override {
    cuda::CUevent e = nullptr;
    GK_CU_CHECK(driver_, cuEventCreate(&e, cuda::kEventDisableTiming));
    return e;
  }
  void destroy_event(void* event) noexcept override {
    if (!event || api_.cuCtxPushCurrent(context_) != cuda::kSuccess) return;
    api_.cuEventDestroy(static_cast<cuda::CUevent>(event));
    cuda::CUcontext popped;
    api_.cuCtxPopCurrent(&popped);
  }
  void record(void* event, CopyLane lane) override {
    GK_CU_CHECK(driver_, cuEventRecord(static_cast<cuda::CUevent>(event), stream(lane)));
  }
  void synchronize(void* event) override {
    GK_CU_CHECK(driver_, cuEventSynchronize(static_cast<cuda::CUevent>(event)));
  }

  // A stream waits on the event's state at the cuStreamWaitEvent call, so the event can go
  // back to the cache (and be recorded again by another thread) right after.
  void lane_waits_for_caller(CopyLane lane, cuda::CUstream caller) override {
    JoinEvent e(*this);
    GK_CU_CHECK(driver_, cuEventRecord(e.event, caller));
    GK_CU_CHECK(driver_, cuStreamWaitEvent(stream(lane), e.event, 0));
  }
  void caller_waits_for_lane(cuda::CUstream caller, CopyLane lane) override {
    JoinEvent e(*this);
    GK_CU_CHECK(driver_, cuEventRecord(e.event, stream(lane)));
    GK_CU_CHECK(driver_, cuStreamWaitEvent(caller, e.event, 0));
  }

  void copy_host_async(CopyLane lane, void* dst, const void* src, uint64_t bytes) override {
    if (lane == CopyLane::kToDevice) {
      GK_CU_CHECK(driver_, cuMemcpyHtoDAsync(reinterpret_cast<cuda::CUdeviceptr>(dst), src, bytes,
                                             stream(lane)));
    } else {
      GK_CU_CHECK(driver_, cuMemcpyDtoHAsync(dst, reinterpret_cast<cuda::CUdeviceptr>(src), bytes,
                                             stream(lane)));
    }
  }
  void copy_unified_async(CopyLane lane, void* dst, const void* src, uint64_t bytes) override {
    GK_CU_CHECK(driver_,
                cuMemcpyAsync(reinterpret_cast<cuda::CUdeviceptr>(dst),
                              reinterpret_cast<cuda::CUdeviceptr>(src), bytes, stream(lane)));
  }
  // Also called at teardown, from any thread: makes the context current itself.
  void drain(CopyLane lane) noexcept override {
    cuda::CUstream s = streams_[size_t(lane)];
    if (!s || api_.cuCtxPushCurrent(context_) != cuda::kSuccess) return;
    api_.cuStreamSynchronize(s);
    cuda::CUcontext popped;
    api_.cuCtxPopCurrent(&popped);
  }

 private:
  // An event from the cache for one join, back in the cache at the end of the scope.
  struct JoinEvent {
    explicit JoinEvent(CudaTransferBackend& b) : backend(b), event(b.take_event()) {}
    ~JoinEvent() { backend.give_back(event); }
    JoinEvent(const JoinEvent&) = delete;
    JoinEvent& operator=(const JoinEvent&) = delete;
    CudaTransferBackend& backend;
    cuda::CUevent event;
  };

  bool registered(const void* ptr) {
    int attribute = cuda::kPointerAttributeMemoryType;
    unsigned type = cuda::kMemoryTypeUnregistered;
    void* data[] = {&type};
    // cuPointerGetAttributes (not the singular call) answers "unregistered" for pageable
    // memory instead of failing, so tools such as compute-sanitizer see no API error.
    cuda::CUresult r =
        api_.cuPointerGetAttributes(1, &attribute, data, reinterpret_cast<cuda::CUdeviceptr>(ptr));
    return r == cuda::kSuccess && type != cuda::kMemoryTypeUnregistered;
  }

  cuda::CUstream stream(CopyLane lane) {
    size_t i = size_t(lane);
    std::call_once(stream_created_[i], [&] {
      GK_CU_CHECK(driver_, cuStreamCreateWithPriority(&streams_[i], cuda::kStreamNonBlocking, 0));
    });
    return streams_[i];
  }

  cuda::CUevent take_event() {
    {
      std::lock_guard<std::mutex> lock(events_mutex_);
      if (!spare_events_.empty()) {
        cuda::CUevent e = spare_events_.back();
        spare_events_.pop_back();
        return e;
      }
    }
    cuda::CUevent e = nullptr;
    GK_CU_CHECK(driver_, cuEventCreate(&e, cuda::kEventDisableTiming));
    return e;
  }
  void give_back(cuda::CUevent e) noexcept {
    std::lock_guard<std::mutex> lock(events_mutex_);
    try {
      spare_events_.push_back(e);
    } catch (...) {
      api_.cuEventDestroy(e);
    }
  }

  const cuda::Driver& driver_;
  const cuda::DriverApi& api_;
  cuda::CUcontext context_;
  std::once_flag stream_created_[2];
  cuda::CUstream streams_[2] = {nullptr, nullptr};
  std::mutex events_mutex_;
  std::vector<cuda::CUevent> spare_events_;
};

}  // namespace

std::unique_ptr<TransferBackend> make_cuda_transfer_backend(const cuda::Driver& driver,
                                                            cuda::CUcontext context) {
  return std::make_unique<CudaTransferBackend>(driver, context);
}

}  // namespace gk
