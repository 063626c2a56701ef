// Buffers: checked handles over stream-ordered allocations.
#include "capi/capi_util.h"
#include "memory/buffer_table.h"

extern "C" {

GK_API gk_status gk_buffer_alloc(gk_runtime* runtime, const gk_alloc_args* args, gk_buffer** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_buffer_alloc");
    gk::require_arg(args, "gk_buffer_alloc", "args");
    gk::require_arg(out, "gk_buffer_alloc", "out");
    gk::require_struct(args->struct_size, GK_ALLOC_ARGS_SIZE, "gk_buffer_alloc", "gk_alloc_args");
    const gk::Device& d = rt.devices().at(args->device);
    gk_stream& s = gk::stream_for(rt, args->stream, d, "gk_buffer_alloc");
    auto allocation = std::make_shared<gk::Allocation>(runtime->impl, d, args->size, s.native);
    *out = gk::BufferTable::instance().insert(std::move(allocation));
  });
}

GK_API gk_status gk_buffer_free(gk_buffer* buffer, gk_stream* stream) {
  return gk::c_guard([&] {
    auto& table = gk::BufferTable::instance();
    if (stream) {
      // Check the stream before the handle goes stale, so a bad call changes nothing.
      table.with(buffer, "gk_buffer_free", [&](gk::BufferEntry& e) {
        gk::stream_for(*e.allocation->runtime, stream, e.allocation->device, "gk_buffer_free");
      });
    }
    std::shared_ptr<gk::Allocation> allocation = table.remove(buffer, "gk_buffer_free");
    if (stream) allocation->free_stream = stream->native;
  });
}

GK_API gk_status gk_buffer_size(const gk_buffer* buffer, uint64_t* out) {
  return gk::c_guard([&] {
    gk::require_arg(out, "gk_buffer_size", "out");
    *out = gk::BufferTable::instance().with(buffer, "gk_buffer_size",
                                            [](gk::BufferEntry& e) { return e.allocation->size; });
  });
}

GK_API gk_status gk_buffer_device(const gk_buffer* buffer, int32_t* out) {
  return gk::c_guard([&] {
    gk::require_arg(out, "gk_buffer_device", "out");
    *out = gk::BufferTable::instance().with(
        buffer, "gk_buffer_device", [](gk::BufferEntry& e) { return e.allocation->device.id; });
  });
}

GK_API gk_status gk_buffer_map(gk_buffer* buffer, void** out) {
  return gk::c_guard([&] {
    gk::require_arg(out, "gk_buffer_map", "out");
    *out = gk::BufferTable::instance().with(buffer, "gk_buffer_map", [](gk::BufferEntry& e) {
      ++e.map_count;
      return e.allocation->ptr;
    });
  });
}

GK_API gk_status gk_buffer_unmap(gk_buffer* buffer) {
  return gk::c_guard([&] {
    gk::BufferTable::instance().with(buffer, "gk_buffer_unmap", [&](gk::BufferEntry& e) {
      if (e.map_count == 0) {
        gk::fail(GK_FAILED_PRECONDITION, "gk_buffer_unmap: the buffer is not mapped");
      }
      --e.map_count;
    });
  });
}

}  // extern "C"
