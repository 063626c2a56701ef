// DLPack 1.x exchange: gk_tensor ⇄ DLManagedTensor(Versioned), zero copy.
//
// Export: a heap block holds the DLPack struct and one reference to the tensor, whose shape
// and strides arrays the DLTensor points to; the deleter drops both. Import: a tensor over the
// producer's memory whose release callback calls the producer's deleter.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
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

[[noreturn, gnu::cold, gnu::noinline]] void fail_no_dl_code(int32_t dtype) {
  if (dtype_is_packed(dtype)) {
    fail(GK_INVALID_ARGUMENT, std::string("the tensor is ") + dtype_name(dtype) +
                                  ", a block-quantized dtype DLPack has no code for; export "
                                  "it dequantized (gk_weights_get with dtype f32, f16 or bf16)");
  }
  fail(GK_INTERNAL, "tensor dtype " + std::to_string(dtype) + " has no DLPack code");
}

// The DLPack code and bits of each gk dtype, indexed by its value.
constexpr DLPackCode kDLPackCodes[] = {
    {0, 0},           // not a dtype
    {kDLFloat, 32},   // GK_DTYPE_F32
    {kDLFloat, 64},   // GK_DTYPE_F64
    {kDLFloat, 16},   // GK_DTYPE_F16
    {kDLBfloat, 16},  // GK_DTYPE_BF16
    {kDLInt, 8},      // GK_DTYPE_I8
    {kDLInt, 16},     // GK_DTYPE_I16
    {kDLInt, 32},     // GK_DTYPE_I32
    {kDLInt, 64},     // GK_DTYPE_I64
    {kDLUInt, 8},     // GK_DTYPE_U8
    {kDLBool, 8},     // GK_DTYPE_BOOL
};
static_assert(GK_DTYPE_F32 == 1 && GK_DTYPE_F64 == 2 && GK_DTYPE_F16 == 3 && GK_DTYPE_BF16 == 4 &&
                  GK_DTYPE_I8 == 5 && GK_DTYPE_I16 == 6 && GK_DTYPE_I32 == 7 && GK_DTYPE_I64 == 8 &&
                  GK_DTYPE_U8 == 9 && GK_DTYPE_BOOL == 10 && std::size(kDLPackCodes) == 11,
              "kDLPackCodes is indexed by gk_dtype");

DLPackCode dl_dtype_of(int32_t dtype) {
  if (dtype < GK_DTYPE_F32 || dtype > GK_DTYPE_BOOL) fail_no_dl_code(dtype);
  return kDLPackCodes[dtype];
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

// A DLPack device type as the integer the producer wrote: a value outside DLDeviceType's
// enumerators may not be read through the enum type.
int32_t device_type_of(const DLDevice& d) {
  int32_t type;
  static_assert(sizeof(d.device_type) == sizeof(type));
  std::memcpy(&type, &d.device_type, sizeof(type));
  return type;
}

// The runtime device for a DLPack device other than the host's.
[[gnu::noinline]] const Device& device_of_other(const DeviceSet& devices, const DLDevice& d,
                                                const char* function) {
  int32_t type = device_type_of(d);
  if (type == kDLCUDA || type == kDLCUDAManaged) {
    std::string cuda_ids;
    for (const Device& dev : devices.devices()) {
      if (!dev.is_cuda()) continue;
      if (dev.ordinal == d.device_id) return dev;
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

// The runtime device for a DLPack device.
const Device& device_of(const DeviceSet& devices, const DLDevice& d, const char* function) {
  const int32_t type = device_type_of(d);
  if (type == kDLCPU || type == kDLCUDAHost) {
    return devices.devices().front();  // the host CPU, id 0
  }
  return device_of_other(devices, d, function);
}

// The failures of set_from_dl, out of line: building their messages inline made every
// import save and restore registers and zero a larger frame for strings it never builds.
[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_dtype(const char* function,
                                                          const DLDataType& t) {
  fail(GK_INVALID_ARGUMENT,
       std::string(function) + ": unsupported DLPack dtype " + dl_code_name(t.code) + " (code " +
           std::to_string(t.code) + ", bits " + std::to_string(t.bits) + ", lanes " +
           std::to_string(t.lanes) +
           "); supported with lanes 1: float 16/32/64, bfloat 16, int 8/16/32/64, uint 8, bool 8");
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_ndim(const char* function, int32_t ndim) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": ndim " + std::to_string(ndim) +
                                " is outside 0.." + std::to_string(GK_MAX_DIMS) + " (GK_MAX_DIMS)");
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_null_shape(const char* function) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": shape is NULL");
}
[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_null_data(const char* function, int64_t count) {
  fail(GK_INVALID_ARGUMENT,
       std::string(function) + ": data is NULL for " + std::to_string(count) + " elements");
}

[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_offset(const char* function, const void* data,
                                                           uint64_t byte_offset) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", data);
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": data " + text + " + byte_offset " +
                                std::to_string(byte_offset) + " wraps past the address space");
}

// The gk dtype of a DLPack dtype, or 0: the inverse of kDLPackCodes, searched (f32 is its
// first entry).
int32_t gk_dtype_of(const DLDataType& t) {
  if (t.lanes != 1) return 0;
  for (int32_t d = GK_DTYPE_F32; d <= GK_DTYPE_BOOL; ++d) {
    if (kDLPackCodes[d].code == t.code && kDLPackCodes[d].bits == t.bits) return d;
  }
  return 0;
}

// Checks a DLTensor and sets a new tensor's dtype, ndim, shape, strides, flags and data
// from it (written in place: dims past ndim stay 0, as tensors are compared and hashed whole).
[[gnu::always_inline]] inline void set_from_dl(const DLTensor& t, bool read_only,
                                               const char* function, gk_tensor& out) {
  out.dtype = gk_dtype_of(t.dtype);
  if (!out.dtype) fail_dl_dtype(function, t.dtype);
  if (t.ndim < 0 || t.ndim > GK_MAX_DIMS) fail_dl_ndim(function, t.ndim);
  out.ndim = t.ndim;
  if (t.ndim > 0 && !t.shape) fail_dl_null_shape(function);
  check_layout(out.dtype, t.ndim, t.shape, t.strides, function);
  int64_t count = 1;
  for (int32_t k = 0; k < out.ndim; ++k) {
    out.shape[k] = t.shape[k];
    if (t.strides) out.strides[k] = t.strides[k];
    count *= t.shape[k];
  }
  if (!t.strides) contiguous_strides(out.ndim, out.shape, out.strides);
  out.flags = read_only ? GK_TENSOR_READ_ONLY : 0;
  // The address in integers: data + byte_offset must not wrap (pointer arithmetic past the
  // producer's object would be undefined, and the result wild).
  uintptr_t address = reinterpret_cast<uintptr_t>(t.data);
  if (count > 0 && !t.data) fail_dl_null_data(function, count);
  if (t.data && __builtin_add_overflow(address, t.byte_offset, &address)) {
    fail_dl_offset(function, t.data, t.byte_offset);
  }
  char* p = reinterpret_cast<char*>(address);
  if (count > 0) require_aligned(p, out.dtype, function);
  out.data = p;
}

// In recycled storage: a DLPack exchange makes and drops one per call. The DLTensor's shape
// and strides point into the exported tensor, which this holds and whose shape and strides
// never change.
template <typename Managed>
struct Export : RecycledStorage {
  Managed managed{};
  gk_tensor* tensor = nullptr;
  Allocation* pinned = nullptr;  // evictable memory stays resident while exported

  // Fills `managed` but for the flags and version; holds a reference to `t` when it returns.
  explicit Export(gk_tensor* t) : tensor(t) {
    DLTensor& out = managed.dl_tensor;
    DLPackCode c = dl_dtype_of(t->dtype);  // before address(): nothing throws after a pin
    out.dtype.code = c.code;
    out.dtype.bits = c.bits;
    out.dtype.lanes = 1;
    out.data = address();
    if (t->device->is_cuda()) {
      out.device.device_type = kDLCUDA;
      out.device.device_id = t->device->ordinal;
    } else {
      out.device.device_type = kDLCPU;
      out.device.device_id = 0;
    }
    out.ndim = t->ndim;
    out.shape = t->shape;
    out.strides = t->strides;
    out.byte_offset = 0;
    managed.manager_ctx = this;
    managed.deleter = &deleter;
    retain_tensor(t);
  }

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
    release_tensor(e->tensor);
    delete e;
  }
};

static_assert(recycled_size_index(sizeof(Export<DLManagedTensorVersioned>)) >= 0 &&
                  recycled_size_index(sizeof(Export<DLManagedTensor>)) >= 0,
              "add a larger recycled block size");

[[noreturn, gnu::cold, gnu::noinline]] void fail_dl_flags(const char* function, uint64_t flags) {
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(flags));
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": flags 0x" + hex +
                                " hold bits other than READ_ONLY (0x1) and IS_COPIED (0x2)");
}

// A DLPack tensor of another major version: its layout past `version` is unknown, so it is
// only handed back to its deleter.
[[noreturn, gnu::cold, gnu::noinline]] void refuse_dl_version(const char* function,
                                                              DLManagedTensorVersioned* managed) {
  uint32_t major = managed->version.major, minor = managed->version.minor;
  const bool has_deleter = managed->deleter != nullptr;
  if (has_deleter) managed->deleter(managed);
  fail(GK_FAILED_PRECONDITION,
       std::string(function) + ": the DLPack tensor has version " + std::to_string(major) + "." +
           std::to_string(minor) + ", this library reads major version " +
           std::to_string(DLPACK_MAJOR_VERSION) +
           (has_deleter ? "; its deleter has been called" : "; it has no deleter to call"));
}

template <typename Managed>
void release_managed(void* context) {
  auto* m = static_cast<Managed*>(context);
  if (m && m->deleter) m->deleter(m);
}

template <typename Managed>
void import_managed(gk_runtime* runtime, Managed* managed, bool read_only, const char* function,
                    gk_tensor** out) {
  Runtime& rt = runtime_of(runtime, function);
  const Device& device = device_of(rt.devices(), managed->dl_tensor.device, function);
  // Made here rather than through new_tensor: set_from_dl checks the DLTensor (all that
  // gk_tensor_from_external checks: dtype, ndim, dimensions, data) while it fills the
  // tensor, with no descriptor in between. Until `release` is set, deleting it on a
  // failure leaves the producer's tensor alone.
  std::unique_ptr<gk_tensor> t(new gk_tensor);
  set_from_dl(managed->dl_tensor, read_only, function, *t);
  t->runtime = &rt;
  t->device = &device;
  // This runtime's own export holds its tensor, and so the runtime, until the deleter runs
  // (the imported tensor's release): the tensor needs no reference of its own to it.
  bool own_export = managed->deleter == &Export<Managed>::deleter &&
                    static_cast<Export<Managed>*>(managed->manager_ctx)->tensor->runtime == &rt;
  if (!own_export) t->runtime_owner = runtime->impl;
  t->release = &release_managed<Managed>;
  t->release_context = managed;
  *out = t.release();
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
    if (flags & ~known) gk::fail_dl_flags(fn, flags);
    auto* e = new gk::Export<DLManagedTensorVersioned>(tensor);
    e->managed.version.major = DLPACK_MAJOR_VERSION;
    e->managed.version.minor = DLPACK_MINOR_VERSION;
    e->managed.flags = flags;
    if (tensor->flags & GK_TENSOR_READ_ONLY) e->managed.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
    *out = &e->managed;
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
    *out = &(new gk::Export<DLManagedTensor>(tensor))->managed;
  });
}

GK_API gk_status gk_tensor_from_dlpack_versioned(gk_runtime* runtime,
                                                 DLManagedTensorVersioned* managed,
                                                 gk_tensor** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_tensor_from_dlpack_versioned";
    gk::require_arg(managed, fn, "managed");
    if (managed->version.major != DLPACK_MAJOR_VERSION) gk::refuse_dl_version(fn, managed);
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
