// DLPack 1.x exchange: gk_tensor ⇄ DLManagedTensor(Versioned), zero copy.
//
// Export: a heap block holds the DLPack struct, the shape and strides arrays it points to
// and one reference to the tensor; the deleter drops both. Import: a tensor over the
// producer's memory whose release callback calls the producer's deleter.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "capi/capi_util.h"
#include "common/dtype.h"
#include "common/recycled_blocks.h"
#include "dispatch/op_schema.h"
#include "gpukit/gpukit_dlpack.h"

namespace gk {
namespace {

struct DLPackCode {
  uint8_t code;
  uint8_t bits;
};

DLPackCode dl_dtype_of(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F32:
      return {kDLFloat, 32};
    case GK_DTYPE_F64:
      return {kDLFloat, 64};
    case GK_DTYPE_F16:
      return {kDLFloat, 16};
    case GK_DTYPE_BF16:
      return {kDLBfloat, 16};
    case GK_DTYPE_I8:
      return {kDLInt, 8};
    case GK_DTYPE_I16:
      return {kDLInt, 16};
    case GK_DTYPE_I32:
      return {kDLInt, 32};
    case GK_DTYPE_I64:
      return {kDLInt, 64};
    case GK_DTYPE_U8:
      return {kDLUInt, 8};
    case GK_DTYPE_BOOL:
      return {kDLBool, 8};
    default:
      fail(GK_INTERNAL, "tensor dtype " + std::to_string(dtype) + " has no DLPack code");
  }
}

const char* dl_code_name(uint8_t code) {
  switch (code) {
    case kDLInt:
      return "int";
    case kDLUInt:
      return "uint";
    case kDLFloat:
      return "float";
    case kDLOpaqueHandle:
      return "opaque handle";
    case kDLBfloat:
      return "bfloat";
    case kDLComplex:
      return "complex";
    case kDLBool:
      return "bool";
    default:
      return code >= 7 && code <= 17 ? "float8/6/4" : "unknown";
  }
}

int32_t gk_dtype_of(const DLDataType& t, const char* function) {
  int32_t dtype = 0;
  if (t.lanes == 1) {
    switch (t.code) {
      case kDLFloat:
        dtype = t.bits == 32   ? GK_DTYPE_F32
                : t.bits == 64 ? GK_DTYPE_F64
                : t.bits == 16 ? GK_DTYPE_F16
                               : 0;
        break;
      case kDLBfloat:
        dtype = t.bits == 16 ? GK_DTYPE_BF16 : 0;
        break;
      case kDLInt:
        dtype = t.bits == 8    ? GK_DTYPE_I8
                : t.bits == 16 ? GK_DTYPE_I16
                : t.bits == 32 ? GK_DTYPE_I32
                : t.bits == 64 ? GK_DTYPE_I64
                               : 0;
        break;
      case kDLUInt:
        dtype = t.bits == 8 ? GK_DTYPE_U8 : 0;
        break;
      case kDLBool:
        dtype = t.bits == 8 ? GK_DTYPE_BOOL : 0;
        break;
      default:
        break;
    }
  }
  if (!dtype) {
    fail(GK_INVALID_ARGUMENT,
         std::string(function) + ": unsupported DLPack dtype " + dl_code_name(t.code) + " (code " +
             std::to_string(t.code) + ", bits " + std::to_string(t.bits) + ", lanes " +
             std::to_string(t.lanes) +
             "); supported with lanes 1: float 16/32/64, bfloat 16, int 8/16/32/64, uint 8, "
             "bool 8");
  }
  return dtype;
}

const char* dl_device_name(int32_t type) {
  switch (type) {
    case kDLCPU:
      return "kDLCPU";
    case kDLCUDA:
      return "kDLCUDA";
    case kDLCUDAHost:
      return "kDLCUDAHost";
    case kDLOpenCL:
      return "kDLOpenCL";
    case kDLVulkan:
      return "kDLVulkan";
    case kDLMetal:
      return "kDLMetal";
    case kDLVPI:
      return "kDLVPI";
    case kDLROCM:
      return "kDLROCM";
    case kDLROCMHost:
      return "kDLROCMHost";
    case kDLExtDev:
      return "kDLExtDev";
    case kDLCUDAManaged:
      return "kDLCUDAManaged";
    case kDLOneAPI:
      return "kDLOneAPI";
    case kDLWebGPU:
      return "kDLWebGPU";
    case kDLHexagon:
      return "kDLHexagon";
    case kDLMAIA:
      return "kDLMAIA";
    default:
      return "unknown";
  }
}

// The runtime device id for a DLPack device.
int32_t device_of(const Runtime& rt, const DLDevice& d, const char* function) {
  int32_t type = int32_t(d.device_type);
  if (type == kDLCPU || type == kDLCUDAHost) return 0;
  if (type == kDLCUDA || type == kDLCUDAManaged) {
    std::string cuda_ids;
    for (const Device& dev : rt.devices().devices()) {
      if (!dev.is_cuda()) continue;
      if (dev.ordinal == d.device_id) return dev.id;
      cuda_ids += (cuda_ids.empty() ? "" : ", ") + std::to_string(dev.ordinal);
    }
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": the tensor is on CUDA device " +
                                  std::to_string(d.device_id) +
                                  ", which this runtime does not use (its CUDA ordinals: " +
                                  (cuda_ids.empty() ? "none" : cuda_ids) + ")");
  }
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": unsupported DLPack device type " +
                                dl_device_name(type) + " (" + std::to_string(type) +
                                "); supported: kDLCPU, kDLCUDAHost, kDLCUDA, kDLCUDAManaged");
}

// The failures of desc_of_dl, out of line: building their messages inline made every
// import save and restore registers and zero a larger frame for strings it never builds.
[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_ndim(const char* function, int32_t ndim) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": ndim " + std::to_string(ndim) +
                                " is outside 0.." + std::to_string(GK_MAX_DIMS) + " (GK_MAX_DIMS)");
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_shape(const char* function,
                                                          const gk_tensor_desc& d,
                                                          const char* problem) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": shape " + shape_text(d) + problem);
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_data(const char* function, int64_t count,
                                                         int32_t dtype, int64_t size) {
  if (count < 0) {
    fail(GK_INVALID_ARGUMENT,
         std::string(function) + ": data is NULL for " + std::to_string(-count) + " elements");
  }
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": data + byte_offset is not aligned to " +
                                std::to_string(size) + "-byte " + dtype_name(dtype) + " elements");
}

// A descriptor for a DLTensor, checked; `data` receives the address of element 0.
gk_tensor_desc desc_of_dl(const DLTensor& t, bool read_only, const char* function, void** data) {
  gk_tensor_desc d{};  // dims past ndim stay 0: tensors are compared and hashed whole
  d.struct_size = sizeof(d);
  d.dtype = gk_dtype_of(t.dtype, function);
  if (t.ndim < 0 || t.ndim > GK_MAX_DIMS) fail_dl_ndim(function, t.ndim);
  d.ndim = t.ndim;
  if (t.ndim > 0 && !t.shape) fail(GK_INVALID_ARGUMENT, std::string(function) + ": shape is NULL");
  int64_t count = 1;
  bool negative = false;
  for (int32_t k = 0; k < t.ndim; ++k) {
    d.shape[k] = t.shape[k];
    negative |= t.shape[k] < 0;
    count *= t.shape[k];
  }
  if (negative) fail_dl_shape(function, d, " has a negative dimension");
  // gk_dtype_of accepted the dtype: whole bytes (bool is 8 bits).
  const int64_t size = t.dtype.bits / 8;
  d.has_strides = 1;
  if (t.strides) {
    // The farthest element must be addressable: |(shape-1)·stride| summed, in bytes.
    __int128 reach = 0;
    for (int32_t k = 0; k < t.ndim; ++k) {
      d.strides[k] = t.strides[k];
      const __int128 r = __int128(t.shape[k] - 1) * t.strides[k];
      reach += r < 0 ? -r : r;
    }
    if (count > 0 && reach * size > __int128(INT64_MAX))
      fail_dl_shape(function, d, " with these strides reaches beyond 2^63 bytes");
  } else {
    fill_contiguous_strides(&d);
  }
  d.flags = read_only ? GK_TENSOR_READ_ONLY : 0;
  char* p = static_cast<char*>(t.data);
  if (count > 0) {
    if (!p) fail_dl_data(function, -count, d.dtype, size);
    p += t.byte_offset;
    if (reinterpret_cast<uintptr_t>(p) % size != 0) fail_dl_data(function, count, d.dtype, size);
  } else if (p) {
    p += t.byte_offset;
  }
  *data = p;
  return d;
}

// Fills a DLTensor for `t` at address `data`, pointing at shape and strides arrays the
// caller keeps.
void fill_dl(const gk_tensor& t, void* data, int64_t* shape, int64_t* strides, DLTensor* out) {
  out->data = data;
  if (t.device->is_cuda()) {
    out->device.device_type = kDLCUDA;
    out->device.device_id = t.device->ordinal;
  } else {
    out->device.device_type = kDLCPU;
    out->device.device_id = 0;
  }
  out->ndim = t.ndim;
  DLPackCode c = dl_dtype_of(t.dtype);
  out->dtype.code = c.code;
  out->dtype.bits = c.bits;
  out->dtype.lanes = 1;
  std::memcpy(shape, t.shape, sizeof(int64_t) * GK_MAX_DIMS);
  std::memcpy(strides, t.strides, sizeof(int64_t) * GK_MAX_DIMS);
  out->shape = shape;
  out->strides = strides;
  out->byte_offset = 0;
}

// In recycled storage: a DLPack exchange makes and drops one per call.
template <typename Managed>
struct Export : RecycledStorage {
  Managed managed{};
  int64_t shape[GK_MAX_DIMS] = {};
  int64_t strides[GK_MAX_DIMS] = {};
  gk_tensor* tensor = nullptr;
  Allocation* pinned = nullptr;  // evictable memory stays resident while exported

  // The address to export: evictable memory is restored (if spilled) and pinned, since
  // the consumer keeps the raw pointer until it calls the deleter.
  void* address() {
    if (!tensor->allocation || !tensor->allocation->evictable()) return tensor->data;
    void* base = tensor->allocation->locate(nullptr, true);
    pinned = tensor->allocation.get();
    return static_cast<char*>(base) + tensor->data_offset;
  }

  static void deleter(Managed* self) {
    if (!self) return;
    auto* e = static_cast<Export*>(self->manager_ctx);
    if (e->pinned) e->pinned->unpin();
    gk_tensor_release(e->tensor);
    delete e;
  }
};

static_assert(recycled_size_index(sizeof(Export<DLManagedTensorVersioned>)) >= 0 &&
                  recycled_size_index(sizeof(Export<DLManagedTensor>)) >= 0,
              "add a larger recycled block size");

template <typename Managed>
void release_managed(void* context) {
  auto* m = static_cast<Managed*>(context);
  if (m && m->deleter) m->deleter(m);
}

template <typename Managed>
void import_managed(gk_runtime* runtime, Managed* managed, bool read_only, const char* function,
                    gk_tensor** out) {
  Runtime& rt = runtime_of(runtime, function);
  int32_t device = device_of(rt, managed->dl_tensor.device, function);
  void* data = nullptr;
  gk_tensor_desc d = desc_of_dl(managed->dl_tensor, read_only, function, &data);
  // This runtime's own export holds its tensor, and so the runtime, until the deleter runs
  // (the imported tensor's release): the tensor needs no reference of its own to it.
  bool own_export = managed->deleter == &Export<Managed>::deleter &&
                    static_cast<Export<Managed>*>(managed->manager_ctx)->tensor->runtime == &rt;
  // desc_of_dl checked all that gk_tensor_from_external checks (dtype, ndim, dimensions,
  // data), so the tensor is made directly, without a second round of checks.
  gk_tensor* t =
      new_tensor(rt, own_export ? nullptr : runtime->impl, rt.devices().at(device), d, data);
  t->release = &release_managed<Managed>;
  t->release_context = managed;
  *out = t;
}

}  // namespace
}  // namespace gk

extern "C" {

GK_API gk_status gk_tensor_to_dlpack_versioned(gk_tensor* tensor, uint64_t flags,
                                               DLManagedTensorVersioned** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_tensor_to_dlpack_versioned";
    gk::require_arg(tensor, fn, "tensor");
    gk::require_arg(out, fn, "out");
    const uint64_t known = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
    if (flags & ~known) {
      gk::fail(
          GK_INVALID_ARGUMENT, std::string(fn) + ": flags 0x" + [&] {
            char b[32];
            std::snprintf(b, sizeof(b), "%llx", static_cast<unsigned long long>(flags));
            return std::string(b);
          }() + " hold bits other than READ_ONLY (0x1) and IS_COPIED (0x2)");
    }
    using E = gk::Export<DLManagedTensorVersioned>;
    auto e = std::make_unique<E>();
    e->tensor = tensor;
    gk::fill_dl(*tensor, e->address(), e->shape, e->strides, &e->managed.dl_tensor);
    e->managed.version.major = DLPACK_MAJOR_VERSION;
    e->managed.version.minor = DLPACK_MINOR_VERSION;
    e->managed.manager_ctx = e.get();
    e->managed.deleter = &E::deleter;
    e->managed.flags = flags;
    if (tensor->flags & GK_TENSOR_READ_ONLY) e->managed.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    gk_tensor_retain(tensor);
    *out = &e.release()->managed;
  });
}

GK_API gk_status gk_tensor_to_dlpack(gk_tensor* tensor, DLManagedTensor** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_tensor_to_dlpack";
    gk::require_arg(tensor, fn, "tensor");
    gk::require_arg(out, fn, "out");
    if (tensor->flags & GK_TENSOR_READ_ONLY) {
      gk::fail(GK_FAILED_PRECONDITION,
               std::string(fn) +
                   ": the tensor is read-only and a legacy DLManagedTensor cannot "
                   "say so; use gk_tensor_to_dlpack_versioned");
    }
    using E = gk::Export<DLManagedTensor>;
    auto e = std::make_unique<E>();
    e->tensor = tensor;
    gk::fill_dl(*tensor, e->address(), e->shape, e->strides, &e->managed.dl_tensor);
    e->managed.manager_ctx = e.get();
    e->managed.deleter = &E::deleter;
    gk_tensor_retain(tensor);
    *out = &e.release()->managed;
  });
}

GK_API gk_status gk_tensor_from_dlpack_versioned(gk_runtime* runtime,
                                                 DLManagedTensorVersioned* managed,
                                                 gk_tensor** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_tensor_from_dlpack_versioned";
    gk::require_arg(managed, fn, "managed");
    if (managed->version.major != DLPACK_MAJOR_VERSION) {
      uint32_t major = managed->version.major, minor = managed->version.minor;
      if (managed->deleter) managed->deleter(managed);
      gk::fail(GK_FAILED_PRECONDITION,
               std::string(fn) + ": the DLPack tensor has version " + std::to_string(major) + "." +
                   std::to_string(minor) + ", this library reads major version " +
                   std::to_string(DLPACK_MAJOR_VERSION) + "; its deleter has been called");
    }
    gk::require_arg(out, fn, "out");
    gk::import_managed(runtime, managed, (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, fn,
                       out);
  });
}

GK_API gk_status gk_tensor_from_dlpack(gk_runtime* runtime, DLManagedTensor* managed,
                                       gk_tensor** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_tensor_from_dlpack";
    gk::require_arg(managed, fn, "managed");
    gk::require_arg(out, fn, "out");
    gk::import_managed(runtime, managed, false, fn, out);
  });
}

}  // extern "C"
