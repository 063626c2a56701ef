/*
 * gpukit_dlpack.h — zero-copy tensor exchange with DLPack 1.x (PyTorch, CuPy, JAX,
 * NumPy, …) over the GPUkit runtime C ABI.
 *
 * C99. The DLPack structs below are declared from the DLPack 1.1 specification
 * (https://dmlc.github.io/dlpack/latest/c_api.html), because distributions still ship
 * dlpack.h 0.x, which has no versioned structs. If a dlpack.h of version 1.0 or newer
 * was included first (DLPACK_MAJOR_VERSION defined), its declarations are used instead;
 * a 0.x dlpack.h included first is an error. Once this header has declared the structs
 * it defines DLPACK_DLPACK_H_, so a later #include <dlpack/dlpack.h> is a no-op.
 *
 * Ownership, as in the DLPack spec: a DLManagedTensor(Versioned) belongs to whoever
 * holds it until they call its `deleter` exactly once (a consumer that imported it, or a
 * holder that never handed it on).
 */
#ifndef GPUKIT_GPUKIT_DLPACK_H_
#define GPUKIT_GPUKIT_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#include "gpukit.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DLPACK_MAJOR_VERSION
#ifdef DLPACK_VERSION
#error "gpukit_dlpack.h needs DLPack >= 1.0; a dlpack.h 0.x was included first"
#endif

#define DLPACK_DLPACK_H_
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
  kDLFloat8_e3m4 = 7,
  kDLFloat8_e4m3 = 8,
  kDLFloat8_e4m3b11fnuz = 9,
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e4m3fnuz = 11,
  kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13,
  kDLFloat8_e8m0fnu = 14,
  kDLFloat6_e2m3fn = 15,
  kDLFloat6_e3m2fn = 16,
  kDLFloat4_e2m1fn = 17
} DLDataTypeCode;

typedef struct {
  uint8_t code;   /* DLDataTypeCode */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;     /* in elements; NULL means compact row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1ULL << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ULL << 1)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1ULL << 2)

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif /* DLPACK_MAJOR_VERSION */

/* ---------------------------------------------------------------------------------
 * Export: a gk_tensor as a DLPack tensor, no copy.
 * ------------------------------------------------------------------------------- */

/* Exports `tensor` as a DLPack 1.x managed tensor (version 1.1). The export holds its
 * own reference to the tensor until the caller (or whoever it hands *out to) calls
 * (*out)->deleter(*out), exactly once, from any thread. dl_tensor.data is the address
 * of element [0, …, 0] with byte_offset 0; strides are always given, in elements; the
 * device is kDLCPU (id 0) for the cpu device and kDLCUDA with the CUDA ordinal for a
 * CUDA device. `flags` may hold DLPACK_FLAG_BITMASK_READ_ONLY and
 * DLPACK_FLAG_BITMASK_IS_COPIED; READ_ONLY is added when the tensor is read-only.
 * INVALID_ARGUMENT for other flag bits. Any thread. */
GK_API gk_status gk_tensor_to_dlpack_versioned(gk_tensor* tensor, uint64_t flags,
                                               DLManagedTensorVersioned** out);

/* The same as a legacy (unversioned) DLManagedTensor. It cannot say "read-only", so a
 * read-only tensor is refused with FAILED_PRECONDITION (use the versioned export). */
GK_API gk_status gk_tensor_to_dlpack(gk_tensor* tensor, DLManagedTensor** out);

/* ---------------------------------------------------------------------------------
 * Import: a DLPack tensor as a gk_tensor, no copy.
 * ------------------------------------------------------------------------------- */

/* Wraps `managed` as a tensor of `runtime`, without copying. On success the tensor owns
 * `managed`: its deleter is called exactly once, when the tensor's last reference is
 * released (from whichever thread releases it). On failure the caller keeps `managed`,
 * except when its major version is not DLPACK_MAJOR_VERSION: then, as the DLPack spec
 * requires, its deleter has been called and the status is FAILED_PRECONDITION.
 *
 * Accepted devices: kDLCPU and kDLCUDAHost (the cpu device), kDLCUDA and kDLCUDAManaged
 * (the runtime's CUDA device whose ordinal is device_id). Accepted dtypes, one lane:
 * float 16/32/64, bfloat 16, int 8/16/32/64, uint 8, bool 8. NULL strides mean
 * contiguous; any other strides are kept as given (zero, negative and size-1 dims
 * included). DLPACK_FLAG_BITMASK_READ_ONLY makes the tensor GK_TENSOR_READ_ONLY, so ops
 * refuse to write it. INVALID_ARGUMENT names the unsupported device type, dtype
 * (code/bits/lanes), ndim above GK_MAX_DIMS, a negative dimension, NULL data or shape
 * where elements exist, a data address not aligned to the element size, or strides
 * whose extent overflows. Any thread. */
GK_API gk_status gk_tensor_from_dlpack_versioned(gk_runtime* runtime,
                                                 DLManagedTensorVersioned* managed,
                                                 gk_tensor** out);

/* The same for a legacy (unversioned) DLManagedTensor; never read-only. On failure the
 * caller keeps `managed`. */
GK_API gk_status gk_tensor_from_dlpack(gk_runtime* runtime, DLManagedTensor* managed,
                                       gk_tensor** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_DLPACK_H_ */
