// Buffers: checked handles over stream-ordered allocations.
#include <cstdio>

#include "capi/capi_util.h"
#include "memory/buffer_table.h"

namespace gk {

// The failures of gk_buffer_alloc's checks, out of line: building their messages inline
// made every call save more registers and keep a larger frame.
[[noreturn, gnu::cold, gnu::noinline]] void fail_alloc_flags(uint32_t flags) {
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%x", flags);
  fail(GK_INVALID_ARGUMENT,
       std::string("gk_buffer_alloc: flags 0x") + hex + " has bits that are not GK_BUFFER_* flags");
}

[[noreturn, gnu::cold, gnu::noinline]] void fail_owner_device(const gk_memory_owner& owner,
                                                              const Device& device) {
  fail(GK_INVALID_ARGUMENT, "gk_buffer_alloc: owner '" + owner.owner->name + "' belongs to " +
                                owner.device->label() + ", but the buffer is on " + device.label());
}

// make_allocation (memory/device_memory.h) with the buffer's handle made in the same critical
// section of the pool: a new buffer takes one lock. The allocation's context is the runtime.
inline gk_buffer* new_buffer(Runtime& runtime, const Device& device, uint64_t size,
                             cuda::CUstream stream, MemoryOwner* owner, bool evictable) {
  MemoryPool& pool = runtime.memory().pool(device);
  if (!owner) owner = ChargeScope::current_if_any();
  std::lock_guard<SpinLock> guard(pool.lock());
  return BufferTable::instance().insert_new_held(pool, &runtime, device, size, stream, owner,
                                                 evictable);
}

}  // namespace gk

extern "C" {

GK_API gk_status gk_buffer_alloc(gk_runtime* runtime, const gk_alloc_args* args, gk_buffer** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_buffer_alloc");
    gk::require_arg(args, "gk_buffer_alloc", "args");
    gk::require_arg(out, "gk_buffer_alloc", "out");
    gk::require_struct(args->struct_size, GK_ALLOC_ARGS_SIZE, "gk_buffer_alloc", "gk_alloc_args");
    const gk::Device& d = rt.devices().at(args->device);
    gk_stream& s = gk::stream_for(rt, args->stream, d, "gk_buffer_alloc");
    if (args->flags & ~uint32_t(GK_BUFFER_EVICTABLE)) gk::fail_alloc_flags(args->flags);
    gk::MemoryOwner* owner = nullptr;
    gk::Task* task = nullptr;
    if (args->struct_size >= GK_STRUCT_SIZE(gk_alloc_args, owner) && args->owner) {
      if (args->owner->device != &d) gk::fail_owner_device(*args->owner, d);
      owner = args->owner->owner;
      task = args->owner->task;
    }
    // A task's stream charges the task when no owner is named.
    if (!owner && s.task) {
      owner = s.task->owner;
      task = s.task.get();
    }
    gk_buffer* buffer =
        gk::new_buffer(rt, d, args->size, s.native, owner, args->flags & GK_BUFFER_EVICTABLE);
    // Cancelling the task frees the buffers allocated for it (a stale handle after that).
    if (task) rt.scheduler().charge_buffer(*task, buffer);
    *out = buffer;
  });
}

GK_API gk_status gk_buffer_free(gk_buffer* buffer, gk_stream* stream) {
  return gk::c_guard([&] {
    // The stream is checked before the handle goes stale, so a bad call changes nothing.
    gk::BufferTable::instance().free(
        buffer, "gk_buffer_free", stream ? stream->native : gk::kOwnStream,
        [&](gk::BufferEntry& e) {
          if (!stream) return;
          gk::stream_for(gk::runtime_of(*e.allocation.get()), stream, e.allocation->device,
                         "gk_buffer_free");
        });
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
      // A spilled buffer comes back first; mapped, it is never evicted.
      void* ptr = e.allocation->locate_held(gk::kOwnStream, true);
      ++e.map_count;
      return ptr;
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
      e.allocation->unpin_held();
    });
  });
}

}  // extern "C"
