// The memory C API: owners, budgets, trim, statistics and snapshots of the device pools.
#include <algorithm>
#include <cstring>

#include "capi/capi_util.h"
#include "memory/buffer_table.h"

namespace {

gk::MemoryPool& pool_of(gk_runtime* runtime, int32_t device, const char* function) {
  gk::Runtime& rt = gk::runtime_of(runtime, function);
  return rt.memory().pool(rt.devices().at(device));
}

}  // namespace

extern "C" {

GK_API gk_status gk_memory_owner_create(gk_runtime* runtime, int32_t device, const char* name,
                                        uint64_t quota_bytes, gk_memory_owner** out) {
  return gk::c_guard([&] {
    gk::Runtime& rt = gk::runtime_of(runtime, "gk_memory_owner_create");
    gk::require_arg(name, "gk_memory_owner_create", "name");
    gk::require_arg(out, "gk_memory_owner_create", "out");
    const gk::Device& d = rt.devices().at(device);
    gk::MemoryOwner* owner = rt.memory().pool(d).create_owner(name, quota_bytes);
    *out = new gk_memory_owner{runtime->impl, &d, owner};
  });
}

GK_API void gk_memory_owner_destroy(gk_memory_owner* owner) {
  if (!owner) return;
  owner->runtime->memory().pool(*owner->device).close_owner(owner->owner);
  delete owner;
}

GK_API gk_status gk_memory_owner_usage(const gk_memory_owner* owner, uint64_t* in_use,
                                       uint64_t* peak) {
  return gk::c_guard([&] {
    gk::require_arg(owner, "gk_memory_owner_usage", "owner");
    gk::MemoryOwner usage = owner->runtime->memory().pool(*owner->device).owner_usage(owner->owner);
    if (in_use) *in_use = usage.in_use;
    if (peak) *peak = usage.peak;
  });
}

GK_API gk_status gk_memory_set_budget(gk_runtime* runtime, int32_t device, uint64_t bytes) {
  return gk::c_guard([&] {
    pool_of(runtime, device, "gk_memory_set_budget").set_budget(bytes);
    gk::Runtime& rt = *runtime->impl;
    rt.scheduler().capacity_changed(rt.devices().at(device));  // pending tasks may fit now
  });
}

GK_API gk_status gk_memory_trim(gk_runtime* runtime, int32_t device, uint64_t* out_released) {
  return gk::c_guard([&] {
    uint64_t released = pool_of(runtime, device, "gk_memory_trim").trim();
    if (out_released) *out_released = released;
  });
}

GK_API gk_status gk_memory_stats_get(gk_runtime* runtime, int32_t device, gk_memory_stats* out) {
  return gk::c_guard([&] {
    gk::MemoryPool& pool = pool_of(runtime, device, "gk_memory_stats_get");
    gk::require_arg(out, "gk_memory_stats_get", "out");
    gk::require_struct(out->struct_size, GK_MEMORY_STATS_SIZE, "gk_memory_stats_get",
                       "gk_memory_stats");
    gk::PoolStats p = pool.stats();
    gk_memory_stats s{};
    s.struct_size = out->struct_size;
    s.bytes_in_use = p.bytes_in_use;
    s.bytes_requested = p.bytes_requested;
    s.bytes_reserved = p.bytes_reserved;
    s.peak_bytes_in_use = p.peak_bytes_in_use;
    s.peak_bytes_reserved = p.peak_bytes_reserved;
    s.alloc_count = p.alloc_count;
    s.free_count = p.free_count;
    s.failure_count = p.failure_count;
    s.segment_count = p.segment_count;
    s.largest_free_block = p.largest_free_block;
    s.fragmentation = p.fragmentation;
    s.budget = p.budget;
    s.bytes_spilled = p.bytes_spilled;
    s.spill_count = p.spill_count;
    s.restore_count = p.restore_count;
    s.cross_stream_waits = p.cross_stream_waits;
    std::memcpy(out, &s, std::min(out->struct_size, sizeof(s)));
  });
}

GK_API gk_status gk_memory_snapshot_json(gk_runtime* runtime, int32_t device, char** out_json) {
  return gk::c_guard([&] {
    gk::MemoryPool& pool = pool_of(runtime, device, "gk_memory_snapshot_json");
    gk::require_arg(out_json, "gk_memory_snapshot_json", "out_json");
    *out_json = gk::c_string(pool.snapshot_json());
  });
}

GK_API gk_status gk_buffer_is_spilled(const gk_buffer* buffer, int32_t* out) {
  return gk::c_guard([&] {
    gk::require_arg(out, "gk_buffer_is_spilled", "out");
    auto allocation = gk::BufferTable::instance().with(
        buffer, "gk_buffer_is_spilled", [](gk::BufferEntry& e) { return e.allocation; });
    *out = allocation->evictable() && allocation->pool.is_spilled(allocation->record) ? 1 : 0;
  });
}

}  // extern "C"
