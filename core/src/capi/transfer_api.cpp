// The transfer C API (ABI 1.3): pinned host memory and transfer statistics.
#include <algorithm>
#include <cstring>

#include "capi/capi_util.h"

extern "C" {

GK_API gk_status gk_host_alloc(gk_runtime* runtime, uint64_t bytes, void** out) {
  return gk::c_guard([&] {
    gk::Runtime& rt = gk::runtime_of(runtime, "gk_host_alloc");
    gk::require_arg(out, "gk_host_alloc", "out");
    *out = bytes ? rt.host_memory().allocate(bytes) : nullptr;
  });
}

GK_API gk_status gk_host_free(gk_runtime* runtime, void* ptr) {
  return gk::c_guard([&] {
    gk::Runtime& rt = gk::runtime_of(runtime, "gk_host_free");
    if (ptr) rt.host_memory().free(ptr);
  });
}

GK_API gk_status gk_host_trim(gk_runtime* runtime, uint64_t* out_released) {
  return gk::c_guard([&] {
    uint64_t released = gk::runtime_of(runtime, "gk_host_trim").host_memory().trim();
    if (out_released) *out_released = released;
  });
}

GK_API gk_status gk_transfer_stats_get(gk_runtime* runtime, int32_t device,
                                       gk_transfer_stats* out) {
  return gk::c_guard([&] {
    gk::Runtime& rt = gk::runtime_of(runtime, "gk_transfer_stats_get");
    gk::require_arg(out, "gk_transfer_stats_get", "out");
    if (out->struct_size < GK_TRANSFER_STATS_SIZE) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_transfer_stats_get: gk_transfer_stats.struct_size is " +
                                        std::to_string(out->struct_size) + ", smaller than the " +
                                        std::to_string(GK_TRANSFER_STATS_SIZE) +
                                        " bytes of ABI 1.3");
    }
    const gk::Device& d = rt.devices().at(device);
    gk::TransferCounters c = rt.transfers(d).counters();
    gk::HostMemory::Usage host = rt.host_memory().usage();
    gk_transfer_stats s{};
    s.to_device_copies = c.to_device_copies;
    s.to_device_bytes = c.to_device_bytes;
    s.to_host_copies = c.to_host_copies;
    s.to_host_bytes = c.to_host_bytes;
    s.device_copies = c.device_copies;
    s.device_bytes = c.device_bytes;
    s.staged_copies = c.staged_copies;
    s.staged_bytes = c.staged_bytes;
    s.staged_chunks = c.staged_chunks;
    s.staging_bytes = c.staging_bytes;
    s.staging_chunk_bytes = c.staging_chunk_bytes;
    s.host_bytes_in_use = host.bytes_in_use;
    s.host_bytes_cached = host.bytes_cached;
    size_t size = out->struct_size;
    std::memcpy(out, &s, std::min(size, sizeof(s)));
    out->struct_size = size;
  });
}

}  // extern "C"
