// Streams and events.
#include <cstdio>

#include "capi/capi_util.h"

namespace gk {

void fail_stream_device(const Runtime& runtime, const gk_stream& stream, const Device& device,
                        const char* function) {
  if (stream.runtime != &runtime) {
    char text[96];
    std::snprintf(text, sizeof(text), "runtime %p, but the work is on runtime %p",
                  static_cast<const void*>(stream.runtime), static_cast<const void*>(&runtime));
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": the stream belongs to " + text +
                                  "; a stream serves only the runtime that created it");
  }
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": the stream belongs to " +
                                stream.device->label() + ", but the work is on " +
                                device.label());
}

}  // namespace gk

namespace {

const gk::cuda::Driver& driver_of(const gk::Runtime& rt) { return *rt.devices().driver(); }

}  // namespace

extern "C" {

GK_API gk_status gk_stream_create(gk_runtime* runtime, int32_t device, int32_t priority,
                                  gk_stream** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_stream_create");
    gk::require_arg(out, "gk_stream_create", "out");
    const gk::Device& d = rt.devices().at(device);
    gk::cuda::CUstream native = nullptr;
    if (d.is_cuda()) {
      const auto& driver = driver_of(rt);
      gk::cuda::ContextGuard guard(driver, d.context);
      int least = 0, greatest = 0;
      GK_CU_CHECK(driver, cuCtxGetStreamPriorityRange(&least, &greatest));
      // Lower numbers are higher priority: clamp into [greatest, least].
      int clamped = std::min(std::max(priority, greatest), least);
      GK_CU_CHECK(driver, cuStreamCreateWithPriority(&native, gk::cuda::kStreamNonBlocking, clamped));
    }
    std::unique_ptr<gk_stream> stream(new gk_stream{&rt, runtime->impl, &d, native, d.is_cuda()});
    // GPUkit destroys this stream itself (gk_stream_destroy tells the pool first), so frees
    // on it need no event until another stream wants their memory.
    if (native) {
      try {
        rt.memory().pool(d).track_stream(native);
      } catch (...) {
        gk::cuda::ContextGuard guard(driver_of(rt), d.context);
        driver_of(rt).api().cuStreamDestroy(native);
        throw;
      }
    }
    *out = stream.release();
  });
}

GK_API gk_status gk_stream_wrap(gk_runtime* runtime, int32_t device, void* native_stream,
                                gk_stream** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_stream_wrap");
    gk::require_arg(out, "gk_stream_wrap", "out");
    const gk::Device& d = rt.devices().at(device);
    if (!d.is_cuda() && native_stream) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_stream_wrap: device " + std::to_string(device) +
                                        " is the cpu device, which has no native streams");
    }
    *out = new gk_stream{&rt, runtime->impl, &d, static_cast<gk::cuda::CUstream>(native_stream),
                         false};
  });
}

GK_API gk_status gk_stream_synchronize(gk_stream* stream) {
  return gk::c_guard([&] {
    gk::require_arg(stream, "gk_stream_synchronize", "stream");
    if (!stream->device->is_cuda()) return;
    const auto& driver = driver_of(*stream->runtime);
    gk::cuda::ContextGuard guard(driver, stream->device->context);
    GK_CU_CHECK(driver, cuStreamSynchronize(stream->native));
  });
}

GK_API gk_status gk_stream_destroy(gk_stream* stream) {
  if (!stream) return GK_OK;
  // A wrapped stream belongs to its creator: free the wrapper without waiting on it.
  gk_status status = stream->owns_native ? gk_stream_synchronize(stream) : GK_OK;
  if (stream->owns_native) {
    // Frees still pending on the stream are settled before its handle can be reused.
    stream->runtime->memory().pool(*stream->device).forget_stream(stream->native);
    const auto& driver = driver_of(*stream->runtime);
    const auto& api = driver.api();
    if (api.cuCtxPushCurrent(stream->device->context) == gk::cuda::kSuccess) {
      api.cuStreamDestroy(stream->native);
      gk::cuda::CUcontext popped;
      api.cuCtxPopCurrent(&popped);
    }
  }
  if (stream->task) stream->runtime->scheduler().stream_destroyed(*stream->task);
  if (stream->owner) delete stream;  // the runtime's default streams are never freed here
  return status;
}

GK_API gk_status gk_stream_native(const gk_stream* stream, void** out) {
  return gk::c_guard([&] {
    gk::require_arg(stream, "gk_stream_native", "stream");
    gk::require_arg(out, "gk_stream_native", "out");
    *out = stream->native;
  });
}

GK_API gk_status gk_stream_device(const gk_stream* stream, int32_t* out) {
  return gk::c_guard([&] {
    gk::require_arg(stream, "gk_stream_device", "stream");
    gk::require_arg(out, "gk_stream_device", "out");
    *out = stream->device->id;
  });
}

GK_API gk_status gk_event_create(gk_runtime* runtime, int32_t device, gk_event** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_event_create");
    gk::require_arg(out, "gk_event_create", "out");
    const gk::Device& d = rt.devices().at(device);
    gk::cuda::CUevent native = nullptr;
    if (d.is_cuda()) {
      const auto& driver = driver_of(rt);
      gk::cuda::ContextGuard guard(driver, d.context);
      GK_CU_CHECK(driver, cuEventCreate(&native, gk::cuda::kEventDefault));
    }
    *out = new gk_event{runtime->impl, &d, native};
  });
}

GK_API void gk_event_destroy(gk_event* event) {
  if (!event) return;
  if (event->native) {
    const auto& api = driver_of(*event->runtime).api();
    if (api.cuCtxPushCurrent(event->device->context) == gk::cuda::kSuccess) {
      api.cuEventDestroy(event->native);
      gk::cuda::CUcontext popped;
      api.cuCtxPopCurrent(&popped);
    }
  }
  delete event;
}

GK_API gk_status gk_event_record(gk_event* event, gk_stream* stream) {
  return gk::c_guard([&] {
    gk::require_arg(event, "gk_event_record", "event");
    gk_stream& s = gk::stream_for(*event->runtime, stream, *event->device, "gk_event_record");
    if (!event->native) return;
    const auto& driver = driver_of(*event->runtime);
    gk::cuda::ContextGuard guard(driver, event->device->context);
    GK_CU_CHECK(driver, cuEventRecord(event->native, s.native));
  });
}

GK_API gk_status gk_stream_wait_event(gk_stream* stream, gk_event* event) {
  return gk::c_guard([&] {
    gk::require_arg(stream, "gk_stream_wait_event", "stream");
    gk::require_arg(event, "gk_stream_wait_event", "event");
    if (!event->native || !stream->device->is_cuda()) return;  // cpu work is already complete
    const auto& driver = driver_of(*stream->runtime);
    gk::cuda::ContextGuard guard(driver, stream->device->context);
    GK_CU_CHECK(driver, cuStreamWaitEvent(stream->native, event->native, 0));
  });
}

GK_API gk_status gk_event_synchronize(gk_event* event) {
  return gk::c_guard([&] {
    gk::require_arg(event, "gk_event_synchronize", "event");
    if (!event->native) return;
    const auto& driver = driver_of(*event->runtime);
    gk::cuda::ContextGuard guard(driver, event->device->context);
    GK_CU_CHECK(driver, cuEventSynchronize(event->native));
  });
}

GK_API gk_status gk_event_query(gk_event* event) {
  if (!event) return gk::c_guard([] { gk::require_arg(nullptr, "gk_event_query", "event"); });
  if (!event->native) return GK_OK;
  const auto& driver = driver_of(*event->runtime);
  gk::cuda::CUresult r = driver.api().cuEventQuery(event->native);
  if (r == gk::cuda::kSuccess) return GK_OK;
  if (r == gk::cuda::kErrorNotReady) return GK_UNAVAILABLE;
  return gk::c_guard([&] { GK_CU_CHECK(driver, cuEventQuery(event->native)); });
}

GK_API gk_status gk_event_elapsed_ms(gk_event* start, gk_event* end, float* out_ms) {
  return gk::c_guard([&] {
    gk::require_arg(start, "gk_event_elapsed_ms", "start");
    gk::require_arg(end, "gk_event_elapsed_ms", "end");
    gk::require_arg(out_ms, "gk_event_elapsed_ms", "out_ms");
    if (!start->native || !end->native) {
      gk::fail(GK_FAILED_PRECONDITION,
               "gk_event_elapsed_ms: events of the cpu device carry no time; time CPU work with a "
               "host clock");
    }
    const auto& driver = driver_of(*start->runtime);
    gk::cuda::ContextGuard guard(driver, start->device->context);
    GK_CU_CHECK(driver, cuEventElapsedTime(out_ms, start->native, end->native));
  });
}

}  // extern "C"
