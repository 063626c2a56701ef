/*
 * gpukit_tensor.h — tensors, dtypes and copies
 *
 * Part of the GPUkit C ABI; a client includes gpukit.h, which includes every part (each
 * part also compiles on its own). Rules for every part: gpukit.h's opening comment.
 */
#ifndef GPUKIT_GPUKIT_TENSOR_H_
#define GPUKIT_GPUKIT_TENSOR_H_

#include "gpukit_memory.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------
 * Tensors: a typed, shaped, strided view of memory on one device. Reference-counted:
 * every create returns one reference, gk_tensor_retain adds one, gk_tensor_release
 * drops one, and the last release frees what the tensor owns. Releasing from any
 * thread is safe.
 * ------------------------------------------------------------------------------- */

typedef struct gk_tensor gk_tensor;

typedef enum gk_dtype {
  GK_DTYPE_F32 = 1,
  GK_DTYPE_F64 = 2,
  GK_DTYPE_F16 = 3,
  GK_DTYPE_BF16 = 4,
  GK_DTYPE_I8 = 5,
  GK_DTYPE_I16 = 6,
  GK_DTYPE_I32 = 7,
  GK_DTYPE_I64 = 8,
  GK_DTYPE_U8 = 9,
  GK_DTYPE_BOOL = 10
} gk_dtype;

/* Bytes per element (0 for an unknown dtype) and the lower-case name ("bf16"). */
GK_API size_t gk_dtype_size(int32_t dtype);
GK_API const char* gk_dtype_name(int32_t dtype);

#define GK_MAX_DIMS 8

enum {
  /* Ops refuse to write into a read-only tensor. */
  GK_TENSOR_READ_ONLY = 1u << 0
};

typedef struct gk_tensor_desc {
  size_t struct_size;             /* sizeof(gk_tensor_desc) */
  int32_t dtype;                  /* gk_dtype */
  int32_t ndim;                   /* 0 (scalar) .. GK_MAX_DIMS */
  int64_t shape[GK_MAX_DIMS];
  /* In elements, may be zero or negative. All-zero with has_strides == 0 means
   * contiguous row-major. */
  int64_t strides[GK_MAX_DIMS];
  int32_t has_strides;
  uint32_t flags;                 /* GK_TENSOR_* */
} gk_tensor_desc;

#define GK_TENSOR_DESC_SIZE GK_STRUCT_SIZE(gk_tensor_desc, flags)

/* Allocates a contiguous tensor on `device` (strides in desc are ignored). */
GK_API gk_status gk_tensor_create(gk_runtime* runtime, int32_t device,
                                  const gk_tensor_desc* desc, gk_stream* stream,
                                  gk_tensor** out);

/* A view over `buffer` starting `byte_offset` bytes in. The tensor holds its own
 * reference to the buffer, so the buffer may be freed by the caller first. Every
 * element the view can reach must lie inside the buffer (OUT_OF_RANGE otherwise). */
GK_API gk_status gk_tensor_from_buffer(gk_buffer* buffer, uint64_t byte_offset,
                                       const gk_tensor_desc* desc, gk_tensor** out);

/* Called once when a tensor over external memory is freed. */
typedef void (*gk_release_fn)(void* context);

/* A view over memory GPUkit does not own (`data` is a host pointer for the cpu device,
 * a CUdeviceptr for CUDA): no copy. `release` (may be NULL) is called with `context`
 * when the last reference goes; until then `data` must stay valid. */
GK_API gk_status gk_tensor_from_external(gk_runtime* runtime, int32_t device, void* data,
                                         const gk_tensor_desc* desc, gk_release_fn release,
                                         void* context, gk_tensor** out);

GK_API void gk_tensor_retain(gk_tensor* tensor);
GK_API void gk_tensor_release(gk_tensor* tensor); /* NULL is a no-op */

/* Fills *out (the caller sets out->struct_size) with dtype, shape, strides (always
 * explicit, has_strides = 1) and flags. */
GK_API gk_status gk_tensor_get_desc(const gk_tensor* tensor, gk_tensor_desc* out);

/* Device id, and the address of element [0, …, 0] (valid while the tensor lives). */
GK_API int32_t gk_tensor_device(const gk_tensor* tensor);
GK_API void* gk_tensor_data(const gk_tensor* tensor);

/* ---------------------------------------------------------------------------------
 * Copies. With a stream, the copy is queued on it: host memory passed in must stay
 * valid (and, for copies to host, is only written) until the stream reaches the copy.
 * With stream NULL, the copy runs on the default stream of the GPU involved (the
 * destination's when both are GPUs) and the call returns when it is complete. Since
 * ABI 1.3, pageable host memory is staged: see "Transfers" for when such calls return.
 * ------------------------------------------------------------------------------- */

/* Host → tensor. The tensor must be contiguous and `bytes` equal its size. */
GK_API gk_status gk_copy_from_host(gk_tensor* dst, const void* src, uint64_t bytes,
                                   gk_stream* stream);

/* Tensor → host. The tensor must be contiguous and `bytes` equal its size. */
GK_API gk_status gk_copy_to_host(const gk_tensor* src, void* dst, uint64_t bytes,
                                 gk_stream* stream);

/* Tensor → tensor, on one device or across devices; same dtype and shape, both
 * contiguous. */
GK_API gk_status gk_copy(gk_tensor* dst, const gk_tensor* src, gk_stream* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_TENSOR_H_ */
