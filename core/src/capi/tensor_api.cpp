// Tensors and copies.
#include <cstdio>
#include <cstring>
#include <optional>

#include "capi/capi_util.h"
#include "common/dtype.h"
#include "dispatch/op_schema.h"
#include "memory/buffer_table.h"
#include "memory/charge_scope.h"

namespace gk {

void fail_misaligned(const void* data, int32_t dtype, const char* function) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", data);
  if (dtype_is_packed(dtype)) {
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": data " + text + " is not aligned to " +
                                  std::to_string(dtype_alignment(dtype)) + " bytes, as " +
                                  dtype_name(dtype) + " blocks need (their f16 scales)");
  }
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": data " + text + " is not aligned to " +
                                std::to_string(dtype_size(dtype)) + "-byte " +
                                dtype_name(dtype) + " elements");
}

std::pair<int64_t, int64_t> byte_extent(const gk_tensor_desc& d) {
  int64_t size = int64_t(dtype_size(d.dtype));
  if (numel(d) == 0) return {0, 0};
  // A packed (block-quantized) tensor is contiguous: its blocks from the first byte on.
  if (!size) return {0, int64_t(storage_bytes(d.dtype, uint64_t(numel(d))))};
  int64_t lo = 0, hi = 0;
  for (int32_t k = 0; k < d.ndim; ++k) {
    int64_t reach = (d.shape[k] - 1) * d.strides[k];
    (reach < 0 ? lo : hi) += reach;
  }
  return {lo * size, (hi + 1) * size};
}

gk_tensor_desc desc_of(const gk_tensor& t) {
  gk_tensor_desc d{};
  d.struct_size = sizeof(gk_tensor_desc);
  d.dtype = t.dtype;
  d.ndim = t.ndim;
  std::memcpy(d.shape, t.shape, sizeof(t.shape));
  std::memcpy(d.strides, t.strides, sizeof(t.strides));
  d.has_strides = 1;
  d.flags = t.flags;
  return d;
}

gk_tensor* new_tensor(Runtime& runtime, std::shared_ptr<Runtime> owner, const Device& device,
                      const gk_tensor_desc& d, void* data) {
  auto* t = new gk_tensor();
  t->runtime = &runtime;
  t->runtime_owner = std::move(owner);
  t->device = &device;
  t->dtype = d.dtype;
  t->ndim = d.ndim;
  std::memcpy(t->shape, d.shape, sizeof(t->shape));
  std::memcpy(t->strides, d.strides, sizeof(t->strides));
  t->flags = d.flags;
  t->data = data;
  return t;
}

gk_tensor* create_tensor(const std::shared_ptr<Runtime>& runtime, const Device& device,
                         const gk_tensor_desc& d, cuda::CUstream stream) {
  uint64_t bytes = storage_bytes(d.dtype, uint64_t(numel(d)));
  auto allocation =
      make_allocation(runtime->memory().pool(device), runtime.get(), device, bytes, stream);
  gk_tensor* t = new_tensor(*runtime, runtime, device, d, allocation->ptr);
  t->allocation = std::move(allocation);
  return t;
}

namespace {

// Checks a caller's descriptor and returns it with explicit strides.
gk_tensor_desc checked_desc(const gk_tensor_desc* desc, const char* function) {
  require_arg(desc, function, "desc");
  require_struct(desc->struct_size, GK_TENSOR_DESC_SIZE, function, "gk_tensor_desc");
  gk_tensor_desc d = *desc;
  check_desc(d, function);
  if (!d.has_strides) fill_contiguous_strides(&d);
  return d;
}

// Row-major with no gaps. A tensor with no element is contiguous whatever its strides (its
// bytes are none), as one with a 0-size dimension made by gk_tensor_create must be.
bool is_contiguous(const gk_tensor& t) {
  int64_t expected = 1;
  for (int32_t k = t.ndim - 1; k >= 0; --k) {
    if (t.shape[k] == 0) return true;
  }
  for (int32_t k = t.ndim - 1; k >= 0; --k) {
    if (t.shape[k] != 1 && t.strides[k] != expected) return false;
    expected *= t.shape[k];
  }
  return true;
}

uint64_t tensor_bytes(const gk_tensor& t) {
  return storage_bytes(t.dtype, uint64_t(numel(desc_of(t))));
}

void require_contiguous(const gk_tensor& t, const char* function, const char* which) {
  if (!is_contiguous(t)) {
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": tensor '" + which + "' " +
                                  shape_text(desc_of(t)) +
                                  " is not contiguous; copy it with an op first");
  }
}

void require_bytes(const gk_tensor& t, uint64_t bytes, const char* function) {
  uint64_t expected = tensor_bytes(t);
  if (bytes != expected) {
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": " + std::to_string(bytes) +
                                  " bytes given; the tensor " + shape_text(desc_of(t)) + " " +
                                  dtype_name(t.dtype) + " holds " + std::to_string(expected));
  }
}

// The device's context current for a copy (nothing on the cpu device).
class DeviceScope {
 public:
  DeviceScope(const Runtime& rt, const Device& device) {
    if (!device.is_cuda()) return;
    driver_ = rt.devices().driver();
    guard_.emplace(*driver_, device.context);
  }
  // Waits for `stream` (the calls without a stream return when the copy is complete).
  void synchronize(cuda::CUstream stream) const {
    if (driver_) GK_CU_CHECK(*driver_, cuStreamSynchronize(stream));
  }

 private:
  const cuda::Driver* driver_ = nullptr;
  std::optional<cuda::ContextGuard> guard_;
};

}  // namespace
}  // namespace gk

extern "C" {

GK_API gk_status gk_tensor_create(gk_runtime* runtime, int32_t device, const gk_tensor_desc* desc,
                                  gk_stream* stream, gk_tensor** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_tensor_create");
    gk::require_arg(out, "gk_tensor_create", "out");
    gk_tensor_desc d = gk::checked_desc(desc, "gk_tensor_create");
    gk::fill_contiguous_strides(&d);
    const gk::Device& dev = rt.devices().at(device);
    gk_stream& s = gk::stream_for(rt, stream, dev, "gk_tensor_create");
    gk::ChargeScope charge(s.task ? s.task->owner : nullptr);  // a task's stream charges it
    *out = gk::create_tensor(runtime->impl, dev, d, s.native);
  });
}

GK_API gk_status gk_tensor_from_buffer(gk_buffer* buffer, uint64_t byte_offset,
                                       const gk_tensor_desc* desc, gk_tensor** out) {
  return gk::c_guard([&] {
    gk::require_arg(out, "gk_tensor_from_buffer", "out");
    gk_tensor_desc d = gk::checked_desc(desc, "gk_tensor_from_buffer");
    auto allocation = gk::BufferTable::instance().with(
        buffer, "gk_tensor_from_buffer", [](gk::BufferEntry& e) { return e.allocation; });
    auto [lo, hi] = gk::byte_extent(d);
    // Compared in 128 bits: byte_offset is the caller's and may be anything.
    const __int128 first = __int128(byte_offset) + lo, end = __int128(byte_offset) + hi;
    if (first < 0 || end > __int128(allocation->size)) {
      gk::fail(GK_OUT_OF_RANGE, "gk_tensor_from_buffer: a view " + gk::shape_text(d) +
                                    " at byte offset " + std::to_string(byte_offset) +
                                    " reaches bytes " + std::to_string(int64_t(first)) + ".." +
                                    std::to_string(int64_t(end)) + ", outside the buffer's " +
                                    std::to_string(allocation->size));
    }
    void* data = static_cast<char*>(allocation->ptr) + byte_offset;
    gk::require_aligned(data, d.dtype, "gk_tensor_from_buffer");
    gk::Runtime& rt = gk::runtime_of(*allocation.get());
    gk_tensor* t = gk::new_tensor(rt, rt.shared_from_this(), allocation->device, d, data);
    t->data_offset = byte_offset;
    t->allocation = std::move(allocation);
    *out = t;
  });
}

GK_API gk_status gk_tensor_from_external(gk_runtime* runtime, int32_t device, void* data,
                                         const gk_tensor_desc* desc, gk_release_fn release,
                                         void* context, gk_tensor** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_tensor_from_external");
    gk::require_arg(out, "gk_tensor_from_external", "out");
    gk_tensor_desc d = gk::checked_desc(desc, "gk_tensor_from_external");
    if (!data && gk::numel(d) > 0) gk::require_arg(data, "gk_tensor_from_external", "data");
    gk::require_aligned(data, d.dtype, "gk_tensor_from_external");
    const gk::Device& dev = rt.devices().at(device);
    gk_tensor* t = gk::new_tensor(rt, runtime->impl, dev, d, data);
    t->release = release;
    t->release_context = context;
    *out = t;
  });
}

GK_API void gk_tensor_retain(gk_tensor* tensor) {
  gk::retain_tensor(tensor);
}

GK_API void gk_tensor_release(gk_tensor* tensor) {
  gk::release_tensor(tensor);
}

GK_API gk_status gk_tensor_get_desc(const gk_tensor* tensor, gk_tensor_desc* out) {
  return gk::c_guard([&] {
    gk::require_arg(tensor, "gk_tensor_get_desc", "tensor");
    gk::require_arg(out, "gk_tensor_get_desc", "out");
    gk::require_struct(out->struct_size, GK_TENSOR_DESC_SIZE, "gk_tensor_get_desc", "gk_tensor_desc");
    size_t size = out->struct_size;
    gk_tensor_desc d = gk::desc_of(*tensor);
    std::memcpy(out, &d, std::min(size, sizeof(d)));
    out->struct_size = size;
  });
}

GK_API int32_t gk_tensor_device(const gk_tensor* tensor) { return tensor ? tensor->device->id : -1; }

GK_API void* gk_tensor_data(const gk_tensor* tensor) {
  if (!tensor) return nullptr;
  void* data = nullptr;
  gk_status status = gk::c_guard([&] {
    data = gk::tensor_data(*tensor, gk::kOwnStream);
  });
  return status == GK_OK ? data : nullptr;
}

GK_API gk_status gk_copy_from_host(gk_tensor* dst, const void* src, uint64_t bytes,
                                   gk_stream* stream) {
  return gk::c_guard([&] {
    gk::require_arg(dst, "gk_copy_from_host", "dst");
    if (bytes) gk::require_arg(src, "gk_copy_from_host", "src");
    gk::require_contiguous(*dst, "gk_copy_from_host", "dst");
    gk::require_bytes(*dst, bytes, "gk_copy_from_host");
    if (dst->flags & GK_TENSOR_READ_ONLY) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_copy_from_host: tensor 'dst' is read-only");
    }
    gk::Runtime& rt = *dst->runtime;
    gk_stream& s = gk::stream_for(rt, stream, *dst->device, "gk_copy_from_host");
    if (!bytes) return;
    gk::TensorPins pins(s.native);
    void* dst_data = pins.data(*dst);
    gk::DeviceScope scope(rt, *dst->device);
    rt.transfers(*dst->device).to_device(dst_data, src, bytes, s.native);
    if (!stream) scope.synchronize(s.native);
  });
}

GK_API gk_status gk_copy_to_host(const gk_tensor* src, void* dst, uint64_t bytes,
                                 gk_stream* stream) {
  return gk::c_guard([&] {
    gk::require_arg(src, "gk_copy_to_host", "src");
    if (bytes) gk::require_arg(dst, "gk_copy_to_host", "dst");
    gk::require_contiguous(*src, "gk_copy_to_host", "src");
    gk::require_bytes(*src, bytes, "gk_copy_to_host");
    gk::Runtime& rt = *src->runtime;
    gk_stream& s = gk::stream_for(rt, stream, *src->device, "gk_copy_to_host");
    if (!bytes) return;
    gk::TensorPins pins(s.native);
    void* src_data = pins.data(*src);
    gk::DeviceScope scope(rt, *src->device);
    rt.transfers(*src->device).to_host(dst, src_data, bytes, s.native);
    if (!stream) scope.synchronize(s.native);
  });
}

GK_API gk_status gk_copy(gk_tensor* dst, const gk_tensor* src, gk_stream* stream) {
  return gk::c_guard([&] {
    gk::require_arg(dst, "gk_copy", "dst");
    gk::require_arg(src, "gk_copy", "src");
    gk::require_contiguous(*dst, "gk_copy", "dst");
    gk::require_contiguous(*src, "gk_copy", "src");
    gk_tensor_desc dd = gk::desc_of(*dst), sd = gk::desc_of(*src);
    if (dst->dtype != src->dtype || std::vector<int64_t>(dd.shape, dd.shape + dd.ndim) !=
                                        std::vector<int64_t>(sd.shape, sd.shape + sd.ndim)) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_copy: 'dst' is " + gk::shape_text(dd) + " " +
                                        gk::dtype_name(dst->dtype) + " but 'src' is " +
                                        gk::shape_text(sd) + " " + gk::dtype_name(src->dtype));
    }
    if (dst->flags & GK_TENSOR_READ_ONLY) gk::fail(GK_INVALID_ARGUMENT, "gk_copy: tensor 'dst' is read-only");
    uint64_t bytes = gk::tensor_bytes(*src);
    const gk::Device& src_dev = *src->device;
    const gk::Device& dst_dev = *dst->device;
    // Ordered on the destination's stream unless only the source is a GPU.
    const gk::Device& order_dev = dst_dev.is_cuda() ? dst_dev : src_dev;
    gk::Runtime& rt = *dst->runtime;
    gk_stream& s = gk::stream_for(rt, stream, order_dev, "gk_copy");
    if (!bytes) return;
    // Each side restored in its own device's order (the cpu side has no streams).
    gk::TensorPins pins(s.native);
    void* dst_data = pins.data(*dst, &dst_dev == &order_dev ? s.native : nullptr);
    void* src_data = pins.data(*src, &src_dev == &order_dev ? s.native : nullptr);
    gk::TransferEngine& engine = rt.transfers(order_dev);
    if (!src_dev.is_cuda() && !dst_dev.is_cuda()) {
      engine.count_device_copy(bytes);
      std::memmove(dst_data, src_data, bytes);
      return;
    }
    gk::DeviceScope scope(rt, order_dev);
    if (!src_dev.is_cuda()) {
      engine.to_device(dst_data, src_data, bytes, s.native);
    } else if (!dst_dev.is_cuda()) {
      engine.to_host(dst_data, src_data, bytes, s.native);
    } else {
      // Device to device stays on the caller's stream: it never blocks the host, and a copy
      // stream would only add two event joins (the caller's stream waits for it either way).
      const auto& driver = *rt.devices().driver();
      auto dptr = [](void* p) { return reinterpret_cast<gk::cuda::CUdeviceptr>(p); };
      engine.count_device_copy(bytes);
      if (&src_dev == &dst_dev) {
        GK_CU_CHECK(driver, cuMemcpyDtoDAsync(dptr(dst_data), dptr(src_data), bytes, s.native));
      } else {
        GK_CU_CHECK(driver, cuMemcpyPeerAsync(dptr(dst_data), dst_dev.context, dptr(src_data),
                                              src_dev.context, bytes, s.native));
      }
    }
    if (!stream) scope.synchronize(s.native);
  });
}

}  // extern "C"
