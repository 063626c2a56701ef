/*
 * gpukit.h — the GPUkit runtime C ABI.
 *
 * C99, no C++ types. Every fallible call returns a gk_status (GK_OK == 0) and, on
 * failure, leaves a message for the calling thread that gk_last_error() returns.
 *
 * Versioning: GK_ABI_VERSION_MAJOR changes only when an existing declaration changes
 * meaning or layout; GK_ABI_VERSION_MINOR grows when declarations are appended.
 * gk_runtime_create() refuses a caller built against another major version.
 *
 * Argument and option structs open with `size_t struct_size` (set it to sizeof) and
 * only ever grow at the end; the library reads no field past the caller's struct_size.
 *
 * Threading: unless a call says otherwise, calls on one runtime may be made from any
 * thread concurrently. Handles are not reference-counted unless the call says so.
 *
 * See docs/abi.md for the full ownership, threading and versioning rules.
 */
#ifndef GPUKIT_GPUKIT_H_
#define GPUKIT_GPUKIT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GK_API __declspec(dllimport)
#elif defined(GK_BUILDING_LIBRARY)
#define GK_API __attribute__((visibility("default")))
#else
#define GK_API
#endif

/* ---------------------------------------------------------------------------------
 * Versions
 * ------------------------------------------------------------------------------- */

#define GK_ABI_VERSION_MAJOR 1
#define GK_ABI_VERSION_MINOR 11
/* major in the high 16 bits, minor in the low 16 bits. */
#define GK_MAKE_VERSION(major, minor) ((uint32_t)(((uint32_t)(major) << 16) | (uint32_t)(minor)))
#define GK_ABI_VERSION GK_MAKE_VERSION(GK_ABI_VERSION_MAJOR, GK_ABI_VERSION_MINOR)
#define GK_VERSION_MAJOR(v) ((uint32_t)(v) >> 16)
#define GK_VERSION_MINOR(v) ((uint32_t)(v) & 0xffffu)

/* Size of a struct up to and including `last`: the size a caller of the version that
 * ended with `last` passes as struct_size. */
#define GK_STRUCT_SIZE(type, last) (offsetof(type, last) + sizeof(((type*)0)->last))

/* The runtime ABI version the library implements (GK_MAKE_VERSION form). Any thread. */
GK_API uint32_t gk_abi_version(void);

/* The library's release version, e.g. "0.1.0". Static storage; any thread. */
GK_API const char* gk_library_version(void);

/* ---------------------------------------------------------------------------------
 * Status and errors. Codes follow the abseil canonical set; values never change.
 * ------------------------------------------------------------------------------- */

typedef int32_t gk_status;
enum {
  GK_OK = 0,
  GK_CANCELLED = 1,
  GK_UNKNOWN = 2,
  GK_INVALID_ARGUMENT = 3,
  GK_DEADLINE_EXCEEDED = 4,
  GK_NOT_FOUND = 5,
  GK_ALREADY_EXISTS = 6,
  GK_PERMISSION_DENIED = 7,
  GK_RESOURCE_EXHAUSTED = 8,
  GK_FAILED_PRECONDITION = 9,
  GK_ABORTED = 10,
  GK_OUT_OF_RANGE = 11,
  GK_UNIMPLEMENTED = 12,
  GK_INTERNAL = 13,
  GK_UNAVAILABLE = 14,
  GK_DATA_LOSS = 15,
  GK_UNAUTHENTICATED = 16
};

/* The message of the last failed call made by this thread ("" if none). Names the
 * object, the value and the limit involved. Valid until the next gk_ call on this
 * thread; copy it to keep it. */
GK_API const char* gk_last_error(void);

/* "OK", "INVALID_ARGUMENT", …; "UNKNOWN_STATUS" for a value outside the set. Static
 * storage; any thread. */
GK_API const char* gk_status_name(gk_status status);

/* Frees a string the library returned through a `char**` out-parameter. NULL is a
 * no-op. Any thread. */
GK_API void gk_string_free(char* str);

/* ---------------------------------------------------------------------------------
 * Logging
 * ------------------------------------------------------------------------------- */

enum {
  GK_LOG_DEBUG = 0,
  GK_LOG_INFO = 1,
  GK_LOG_WARNING = 2,
  GK_LOG_ERROR = 3,
  GK_LOG_OFF = 4
};

/* Receives log lines. `message` is valid only during the call. May be called from any
 * thread that calls into the runtime, and from the runtime's own threads. */
typedef void (*gk_log_fn)(void* user_data, int32_t level, const char* message);

/* ---------------------------------------------------------------------------------
 * Runtime
 * ------------------------------------------------------------------------------- */

typedef struct gk_runtime gk_runtime;

/* Runtime flags (bit set). */
enum {
  /* Ignore GPUKIT_DEVICE, GPUKIT_PLUGIN_PATH, GPUKIT_PLUGINS_DISABLE and
   * GPUKIT_LOG_LEVEL. (They are always ignored in setuid/setgid processes.) */
  GK_RUNTIME_IGNORE_ENVIRONMENT = 1u << 0,
  /* Do not search the manifests folder installed beside libgpukit. */
  GK_RUNTIME_NO_DEFAULT_PLUGINS = 1u << 1
};

typedef struct gk_runtime_options {
  size_t struct_size;      /* sizeof(gk_runtime_options) */
  uint32_t abi_version;    /* GK_ABI_VERSION of the caller's header */
  uint32_t flags;          /* GK_RUNTIME_* */
  /* "cpu" for the cpu device alone, "cuda" or "all" (default when NULL). Overridden
   * by GPUKIT_DEVICE unless GK_RUNTIME_IGNORE_ENVIRONMENT. */
  const char* devices;
  /* Extra colon-separated folders of plugin manifests, searched after the default
   * folder and GPUKIT_PLUGIN_PATH. May be NULL. Copied; need not outlive the call. */
  const char* plugin_path;
  /* Glob of plugin names to skip (e.g. "matmul_*"), added to GPUKIT_PLUGINS_DISABLE.
   * May be NULL. Copied. */
  const char* plugins_disable;
  gk_log_fn log_fn;        /* NULL: log lines go to stderr */
  void* log_user_data;
  /* Lowest level logged; GPUKIT_LOG_LEVEL overrides. GK_RUNTIME_OPTIONS_INIT (and NULL
   * options) log warnings and errors only: "no CUDA device, using the cpu device" is an
   * info line (gk_runtime_info_json's cuda_absent_reason says it too). */
  int32_t log_level;
} gk_runtime_options;

#define GK_RUNTIME_OPTIONS_SIZE GK_STRUCT_SIZE(gk_runtime_options, log_level)

/* Options with every field at its default, for the caller's header version. */
#define GK_RUNTIME_OPTIONS_INIT \
  { sizeof(gk_runtime_options), GK_ABI_VERSION, 0u, NULL, NULL, NULL, NULL, NULL, GK_LOG_WARNING }

/* Creates a runtime: discovers devices, reads manifests and loads plugins. A broken
 * plugin is skipped with its reason (see gk_plugin_get), never fails the call.
 * `options` may be NULL for defaults. Fails with FAILED_PRECONDITION when
 * options->abi_version has another major version than the library. On success the
 * caller owns *out and frees it with gk_runtime_destroy. Any thread. Several
 * runtimes may live in one process; they share the devices' primary contexts. */
GK_API gk_status gk_runtime_create(const gk_runtime_options* options, gk_runtime** out);

/* Releases the caller's hold on the runtime; the handle must not be used again. Streams,
 * events, buffers and tensors made from it stay valid and keep what they need alive:
 * the runtime waits for its streams, unloads its plugins and releases the devices' primary
 * contexts when the last of them is freed. NULL is a no-op. */
GK_API void gk_runtime_destroy(gk_runtime* runtime);

/* ---------------------------------------------------------------------------------
 * Devices. Device ids are 0 .. count-1. Id 0 is always the host CPU; CUDA devices
 * follow in CUDA ordinal order.
 * ------------------------------------------------------------------------------- */

typedef enum gk_device_kind {
  GK_DEVICE_KIND_CPU = 1,
  GK_DEVICE_KIND_CUDA = 2
} gk_device_kind;

typedef struct gk_device_props {
  size_t struct_size;       /* sizeof(gk_device_props), set by the caller */
  int32_t kind;             /* gk_device_kind */
  int32_t ordinal;          /* CUDA ordinal; 0 for the cpu device */
  char name[128];           /* "NVIDIA H100 80GB HBM3", or the CPU model */
  int32_t sm_version;       /* major*10+minor, e.g. 90; 0 for the cpu device */
  int32_t sm_count;         /* multiprocessors; logical cores for the cpu device */
  uint64_t total_memory;    /* bytes */
  uint64_t free_memory;     /* bytes, read at the call */
  int32_t driver_version;   /* CUDA driver, e.g. 13000; 0 when absent */
  int32_t nvrtc_version;    /* NVRTC found at run time, e.g. 13000; 0 when absent */
  int32_t plugins_eligible; /* 1 when CUDA plugins may serve it (SM >= 80) */
  char note[256];           /* why not eligible, or "" */
} gk_device_props;

#define GK_DEVICE_PROPS_SIZE GK_STRUCT_SIZE(gk_device_props, note)

/* Number of devices, the cpu device included (so always >= 1). Any thread. */
GK_API gk_status gk_device_count(const gk_runtime* runtime, int32_t* out);

/* Fills *props (the caller sets props->struct_size) for device `device`. OUT_OF_RANGE
 * for an unknown id. Any thread. */
GK_API gk_status gk_device_get_props(const gk_runtime* runtime, int32_t device,
                                     gk_device_props* props);

/* The device GPUkit would pick for work with no preference: the first CUDA device
 * eligible for plugins, else the cpu device (0). Any thread. */
GK_API int32_t gk_device_default(const gk_runtime* runtime);

/* ---------------------------------------------------------------------------------
 * Streams and events. A stream orders work on one device. On the cpu device work runs
 * synchronously in the calling thread, so its streams and events are always complete.
 * A NULL gk_stream* means the runtime's default stream of the device involved.
 * ------------------------------------------------------------------------------- */

typedef struct gk_stream gk_stream;
typedef struct gk_event gk_event;

/* Creates a stream on `device`. `priority` is a CUDA stream priority (lower number =
 * higher priority, clamped to the device's range; 0 is the default). The caller owns
 * *out (gk_stream_destroy). Any thread. */
GK_API gk_status gk_stream_create(gk_runtime* runtime, int32_t device, int32_t priority,
                                  gk_stream** out);

/* Wraps a stream created elsewhere (a CUstream / cudaStream_t from PyTorch, CuPy,
 * JAX …) on CUDA device `device` without taking ownership: gk_stream_destroy frees the
 * wrapper only. The native stream must outlive the wrapper. */
GK_API gk_status gk_stream_wrap(gk_runtime* runtime, int32_t device, void* native_stream,
                                gk_stream** out);

/* Waits for the work of a stream made by gk_stream_create, then frees it. For a stream
 * from gk_stream_wrap, frees the wrapper only, without waiting. NULL is a no-op. */
GK_API gk_status gk_stream_destroy(gk_stream* stream);

/* Blocks the calling thread until all work queued on the stream is complete. */
GK_API gk_status gk_stream_synchronize(gk_stream* stream);

/* The native handle (CUstream) of a CUDA stream, NULL for the cpu device. Valid for the
 * stream's lifetime. */
GK_API gk_status gk_stream_native(const gk_stream* stream, void** out);

/* The device id a stream belongs to. */
GK_API gk_status gk_stream_device(const gk_stream* stream, int32_t* out);

/* Creates an event on `device`; the caller owns *out (gk_event_destroy). */
GK_API gk_status gk_event_create(gk_runtime* runtime, int32_t device, gk_event** out);

/* Frees an event. NULL is a no-op. */
GK_API void gk_event_destroy(gk_event* event);

/* Captures the work queued on `stream` so far. Stream and event share a device. */
GK_API gk_status gk_event_record(gk_event* event, gk_stream* stream);

/* Makes later work on `stream` wait for `event`, without blocking the host. */
GK_API gk_status gk_stream_wait_event(gk_stream* stream, gk_event* event);

/* Blocks until the event's captured work is complete. */
GK_API gk_status gk_event_synchronize(gk_event* event);

/* GK_OK when complete, GK_UNAVAILABLE while pending (no message is set for that). */
GK_API gk_status gk_event_query(gk_event* event);

/* Milliseconds between two recorded, completed events of one CUDA device. */
GK_API gk_status gk_event_elapsed_ms(gk_event* start, gk_event* end, float* out_ms);

/* ---------------------------------------------------------------------------------
 * Buffers: device memory owned by GPUkit. Allocation and free are stream-ordered.
 * A gk_buffer* is a checked handle: using it after gk_buffer_free returns
 * INVALID_ARGUMENT naming the stale handle instead of touching freed memory.
 * ------------------------------------------------------------------------------- */

typedef struct gk_buffer gk_buffer;
typedef struct gk_memory_owner gk_memory_owner; /* see "Memory" below */

typedef struct gk_alloc_args {
  size_t struct_size;   /* sizeof(gk_alloc_args) */
  int32_t device;
  uint64_t size;        /* bytes; 0 is allowed and yields a valid, empty buffer */
  gk_stream* stream;    /* the allocation is usable in this stream's order; NULL default */
  uint32_t flags;       /* GK_BUFFER_* (ABI 1.1; 0 before) */
  /* ABI 1.1: the owner charged (quota and accounting), NULL for none. Read only when
   * struct_size covers it. */
  gk_memory_owner* owner;
} gk_alloc_args;

#define GK_ALLOC_ARGS_SIZE GK_STRUCT_SIZE(gk_alloc_args, flags)

/* Allocates at least args->size bytes, 256-byte aligned. RESOURCE_EXHAUSTED names the
 * request, the device's total and free memory. The caller owns *out (gk_buffer_free).
 * Any thread. */
GK_API gk_status gk_buffer_alloc(gk_runtime* runtime, const gk_alloc_args* args,
                                 gk_buffer** out);

/* Releases the caller's reference in `stream`'s order (NULL: the buffer's allocation
 * stream). Memory is returned once tensors viewing the buffer are released too. A
 * second free of the same handle fails with INVALID_ARGUMENT. */
GK_API gk_status gk_buffer_free(gk_buffer* buffer, gk_stream* stream);

/* Size in bytes and device id of a live buffer. */
GK_API gk_status gk_buffer_size(const gk_buffer* buffer, uint64_t* out);
GK_API gk_status gk_buffer_device(const gk_buffer* buffer, int32_t* out);

/* The raw address of the buffer's memory (a CUdeviceptr for CUDA, a host pointer for
 * the cpu device), valid until the matching gk_buffer_unmap. While mapped, the buffer
 * stays at this address. Map and unmap nest. */
GK_API gk_status gk_buffer_map(gk_buffer* buffer, void** out);
GK_API gk_status gk_buffer_unmap(gk_buffer* buffer);

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

/* ---------------------------------------------------------------------------------
 * Ops. An op is named ("add", "matmul", "sum", …; docs/ops.md lists each with its
 * inputs, outputs and attributes) and served by the highest-priority plugin whose
 * manifest matches the device and whose supports() accepts the call.
 * ------------------------------------------------------------------------------- */

typedef enum gk_attr_type {
  GK_ATTR_INT = 1,    /* value.i */
  GK_ATTR_FLOAT = 2,  /* value.f */
  GK_ATTR_STRING = 3, /* value.s */
  GK_ATTR_INTS = 4    /* value.ints[0 .. count-1] */
} gk_attr_type;

typedef struct gk_attr {
  const char* name;
  int32_t type;   /* gk_attr_type */
  int32_t count;  /* number of ints for GK_ATTR_INTS, else ignored */
  union {
    int64_t i;
    double f;
    const char* s;
    const int64_t* ints;
  } value;
} gk_attr;

typedef struct gk_op_args {
  size_t struct_size;          /* sizeof(gk_op_args) */
  gk_tensor* const* inputs;
  int32_t num_inputs;
  gk_tensor* const* outputs;   /* allocated by the caller; see gk_op_output_desc */
  int32_t num_outputs;
  const gk_attr* attrs;
  int32_t num_attrs;
  gk_stream* stream;           /* NULL: the default stream of the tensors' device */
} gk_op_args;

#define GK_OP_ARGS_SIZE GK_STRUCT_SIZE(gk_op_args, stream)

/* Runs op `name` on the device of its tensors, queued on args->stream. Shape and dtype
 * errors name the op, the argument, the expected and the given value; NOT_FOUND names
 * an unknown op; UNIMPLEMENTED lists why each candidate plugin declined. The tensors
 * must stay alive until the call returns (the runtime keeps what the queued work
 * needs). Any thread. */
GK_API gk_status gk_op_call(gk_runtime* runtime, const char* name, const gk_op_args* args);

/* The descriptor output `index` of op `name` would have for these inputs and
 * attributes (args->outputs is ignored), so callers can allocate it. */
GK_API gk_status gk_op_output_desc(gk_runtime* runtime, const char* name,
                                   const gk_op_args* args, int32_t index,
                                   gk_tensor_desc* out);

/* Number of ops the runtime knows, and the name of op `index` (static storage). */
GK_API int32_t gk_op_count(const gk_runtime* runtime);
GK_API const char* gk_op_name(const gk_runtime* runtime, int32_t index);

/* ---------------------------------------------------------------------------------
 * Memory (ABI 1.1): each device has a stream-ordered pool that serves every allocation
 * (buffers, tensors, plugin scratch). Owners carry a quota on one device; a device may
 * have a budget; evictable buffers are spilled to (pinned) host memory, least recently
 * used first, when a quota, the budget or the device would be exceeded, and restored on
 * their next use. See docs/memory.md.
 * ------------------------------------------------------------------------------- */

/* gk_alloc_args.flags */
enum {
  /* The buffer may be spilled to host memory while it is neither mapped nor in use by a
   * call, and is restored on gk_buffer_map or the next op or copy that uses it, possibly
   * at a new device address. Round trips are bit-exact. */
  GK_BUFFER_EVICTABLE = 1u << 0
};

/* Creates an owner on `device`: allocations made with it (gk_alloc_args.owner) are
 * charged to it and fail with RESOURCE_EXHAUSTED (after spilling the owner's evictable
 * buffers) past `quota_bytes` in use (0: no quota). `name` is copied and appears in
 * statistics, snapshots and out-of-memory messages. The caller owns *out and frees it with
 * gk_memory_owner_destroy. Any thread. */
GK_API gk_status gk_memory_owner_create(gk_runtime* runtime, int32_t device, const char* name,
                                        uint64_t quota_bytes, gk_memory_owner** out);

/* Frees the handle; the handle must not be used again. Memory still allocated with it
 * stays charged to its name until freed. NULL is a no-op. Any thread. */
GK_API void gk_memory_owner_destroy(gk_memory_owner* owner);

/* Bytes the owner has in use now and at most so far (pool block sizes). Either out
 * pointer may be NULL. Any thread. */
GK_API gk_status gk_memory_owner_usage(const gk_memory_owner* owner, uint64_t* in_use,
                                       uint64_t* peak);

/* Limits the bytes in use on `device` (0: no limit, the default). An allocation that
 * would pass it first spills evictable buffers, then fails with RESOURCE_EXHAUSTED.
 * Memory already in use is not affected. Any thread. */
GK_API gk_status gk_memory_set_budget(gk_runtime* runtime, int32_t device, uint64_t bytes);

/* Returns every free pool segment of `device` to the driver (waiting for the streams
 * that freed into them). *out_released (may be NULL) receives the bytes released. The
 * pool also does this by itself before failing an allocation. Any thread. */
GK_API gk_status gk_memory_trim(gk_runtime* runtime, int32_t device, uint64_t* out_released);

typedef struct gk_memory_stats {
  size_t struct_size;           /* sizeof(gk_memory_stats), set by the caller */
  uint64_t bytes_in_use;        /* live blocks (request rounded to the pool's sizes) */
  uint64_t bytes_requested;     /* live blocks as requested */
  uint64_t bytes_reserved;      /* segments held from the driver */
  uint64_t peak_bytes_in_use;
  uint64_t peak_bytes_reserved;
  uint64_t alloc_count;         /* successful allocations so far */
  uint64_t free_count;
  uint64_t failure_count;       /* RESOURCE_EXHAUSTED answers */
  uint64_t segment_count;
  uint64_t largest_free_block;  /* bytes */
  double fragmentation;         /* 1 - largest free block / free reserved bytes; 0 if none */
  uint64_t budget;              /* gk_memory_set_budget, 0 for none */
  uint64_t bytes_spilled;       /* evictable bytes now in host memory */
  uint64_t spill_count;
  uint64_t restore_count;
  uint64_t cross_stream_waits;  /* reuses across streams ordered by a stream wait */
} gk_memory_stats;

#define GK_MEMORY_STATS_SIZE GK_STRUCT_SIZE(gk_memory_stats, cross_stream_waits)

/* Fills *out (the caller sets out->struct_size; fields past it are not written) with the
 * pool statistics of `device`, read at the call. Any thread. */
GK_API gk_status gk_memory_stats_get(gk_runtime* runtime, int32_t device, gk_memory_stats* out);

/* A JSON snapshot of `device`'s pool: totals, owners (name, quota, in_use, peak, allocs,
 * failures), every segment (address, size, kind) with every block (address, size, state
 * "allocated"/"free"/"free_pending", stream, and for allocated blocks requested size,
 * owner, evictable, kind "handle"/"plugin"), and the spilled buffers. The caller frees
 * *out_json with gk_string_free. Any thread. */
GK_API gk_status gk_memory_snapshot_json(gk_runtime* runtime, int32_t device, char** out_json);

/* 1 when the evictable buffer is spilled to host memory now, else 0. */
GK_API gk_status gk_buffer_is_spilled(const gk_buffer* buffer, int32_t* out);

/* ---------------------------------------------------------------------------------
 * Plugins and dispatch explanation.
 * ------------------------------------------------------------------------------- */

typedef struct gk_plugin_info {
  size_t struct_size;         /* sizeof(gk_plugin_info), set by the caller */
  /* Strings below are owned by the runtime and valid for its lifetime. */
  const char* name;           /* from the manifest, or the file name if unreadable */
  const char* version;
  const char* family;
  const char* manifest_path;
  const char* library_path;
  int32_t loaded;             /* 1 loaded and serving, 0 skipped */
  const char* reason;         /* why skipped, "" when loaded */
  int32_t priority;
  int32_t device_kind;        /* gk_device_kind */
  int32_t sm_min;             /* inclusive SM range; 0 when not CUDA */
  int32_t sm_max;
} gk_plugin_info;

#define GK_PLUGIN_INFO_SIZE GK_STRUCT_SIZE(gk_plugin_info, sm_max)

/* Number of plugin candidates found (loaded and skipped). Any thread. */
GK_API int32_t gk_plugin_count(const gk_runtime* runtime);

/* Fills *out for candidate `index`, in the order they were found. */
GK_API gk_status gk_plugin_get(const gk_runtime* runtime, int32_t index, gk_plugin_info* out);

/* A JSON description of dispatch for op `name` on the given descriptors:
 * {"op":…, "device":…, "inputs":[{"dtype":…, "shape":[…], "strides":[…]}, …],
 * "outputs":[… the same; inferred when num_outputs is 0 …], "chosen":"plugin" or null,
 * "candidates":[{"plugin":…, "priority":…, "accepted":bool, "reason":…}, …]}. `inputs` and
 * `outputs` are descriptors, so nothing is allocated or run. The caller frees *out_json with
 * gk_string_free. Any thread. */
GK_API gk_status gk_explain(gk_runtime* runtime, const char* name, int32_t device,
                            const gk_tensor_desc* inputs, int32_t num_inputs,
                            const gk_tensor_desc* outputs, int32_t num_outputs,
                            const gk_attr* attrs, int32_t num_attrs, char** out_json);

/* The same as `gpukit info --json`: versions, devices and plugins. The caller frees
 * *out_json with gk_string_free. */
GK_API gk_status gk_runtime_info_json(gk_runtime* runtime, char** out_json);

/* ---------------------------------------------------------------------------------
 * Ops, ABI 1.2
 * ------------------------------------------------------------------------------- */

/* Runs op `name` like gk_op_call, on outputs it creates: infers the outputs' descriptors
 * as gk_op_output_desc does, creates each as a new contiguous, writable tensor on the
 * device of the inputs (the cpu device when there are none), allocated in args->stream's
 * order, and runs the op on args->stream. args->outputs and args->num_outputs are ignored.
 * `num_outputs` must equal the op's number of outputs (INVALID_ARGUMENT otherwise). On
 * success out_tensors[0 .. num_outputs-1] receive one reference each (the caller releases
 * them with gk_tensor_release) and, when `out_descs` is not NULL, out_descs[i] receives
 * output i's descriptor (strides explicit); the caller sets out_descs[0].struct_size, and
 * the elements lie that many bytes apart (sizeof(gk_tensor_desc) of the caller's header).
 * On failure nothing is created and neither array is written. Errors are those of
 * gk_op_output_desc and gk_op_call. Any thread. */
GK_API gk_status gk_op_call_alloc(gk_runtime* runtime, const char* name, const gk_op_args* args,
                                  int32_t num_outputs, gk_tensor** out_tensors,
                                  gk_tensor_desc* out_descs);

/* ---------------------------------------------------------------------------------
 * Scheduler: tasks, ABI 1.3. A task is a unit of work with a QoS class, memory and SM
 * requests and limits, like a Kubernetes pod on a node (the device). Admission reserves
 * requests; memory allocated for a task is charged to it; under memory pressure
 * BestEffort buffers are spilled first, then Burstable memory above its request; a task's
 * streams get a CUDA stream priority from its class and, where the driver offers green
 * contexts, an SM partition; BestEffort launches are paced while Guaranteed work is queued.
 * Every decision is recorded with its reason. See docs/scheduling.md.
 * ------------------------------------------------------------------------------- */

typedef struct gk_task gk_task;

/* gk_task_spec.qos */
typedef enum gk_qos {
  GK_QOS_BEST_EFFORT = 0, /* no requests: admitted at once, uses what is left, spilled first */
  GK_QOS_BURSTABLE = 1,   /* requests reserved; may grow to its limits while capacity is free */
  GK_QOS_GUARANTEED = 2   /* requests = limits, reserved at admission */
} gk_qos;

/* gk_task_info.state */
typedef enum gk_task_state {
  GK_TASK_PENDING = 0,   /* waiting for its requests to fit (FIFO within priority) */
  GK_TASK_ADMITTED = 1,  /* requests reserved; no work launched yet */
  GK_TASK_RUNNING = 2,   /* launched work (first op on one of its streams, or gk_task_run) */
  GK_TASK_THROTTLED = 3, /* a BestEffort launch held back by pacing; back to RUNNING after */
  GK_TASK_COMPLETED = 4, /* terminal states: reservations and memory released */
  GK_TASK_FAILED = 5,
  GK_TASK_CANCELLED = 6
} gk_task_state;

typedef struct gk_task_spec {
  size_t struct_size;       /* sizeof(gk_task_spec), set by the caller */
  const char* name;         /* copied; appears in events, snapshots and OOM messages */
  int32_t device;
  int32_t qos;              /* gk_qos */
  int32_t priority;         /* within the class and the pending queue: higher first */
  uint32_t flags;           /* 0 */
  /* Memory in bytes. Guaranteed: limit 0 or equal to request. Burstable: request <= limit,
   * limit 0 = the device's capacity. BestEffort: request 0, limit 0 = none. */
  uint64_t memory_request;
  uint64_t memory_limit;
  /* SMs (see gk_device_props.sm_count), the same rules as memory. Guaranteed and
   * Burstable requests are reserved and, where green contexts are available, get an
   * exclusive partition of sm_request SMs rounded up to the device's granularity; a
   * BestEffort task (or one without an SM request) gets a shared partition of at most
   * sm_limit SMs, or of every SM not held exclusively once an exclusive partition exists.
   * Without green contexts: stream priorities only. */
  int32_t sm_request;
  int32_t sm_limit;
} gk_task_spec;

#define GK_TASK_SPEC_SIZE GK_STRUCT_SIZE(gk_task_spec, sm_limit)

/* Submits a task. It is admitted at once when its requests fit the device's unreserved
 * capacity (memory: the device budget if set, else its total memory; SMs: sm_count),
 * else it waits PENDING until they do (gk_task_wait). A request that can never fit
 * (larger than the device) fails with RESOURCE_EXHAUSTED naming it, and a spec that breaks
 * the rules above with INVALID_ARGUMENT; no task is created then. The caller owns *out
 * (gk_task_destroy). Any thread. */
GK_API gk_status gk_task_create(gk_runtime* runtime, const gk_task_spec* spec, gk_task** out);

/* Cancels the task unless it is in a terminal state, waits for the work queued on its
 * streams, releases its reservations, partition and memory owner, and frees the handle.
 * Buffers and tensors still allocated for it stay valid (charged to its closed owner) until
 * freed. Streams of the task must be destroyed first. NULL is a no-op. Any thread. */
GK_API void gk_task_destroy(gk_task* task);

/* Blocks until the task leaves PENDING or `timeout_ms` passes (negative: no limit).
 * *out_state (may be NULL) receives the state then. DEADLINE_EXCEEDED when still pending.
 * Any thread. */
GK_API gk_status gk_task_wait(gk_task* task, int64_t timeout_ms, int32_t* out_state);

/* ADMITTED → RUNNING (also done by the task's first op). FAILED_PRECONDITION names the
 * current state when the transition is not legal. Any thread. */
GK_API gk_status gk_task_run(gk_task* task);

/* RUNNING → COMPLETED, waiting for the work queued on the task's streams first; releases
 * its reservations and partition. FAILED_PRECONDITION from any other state. */
GK_API gk_status gk_task_complete(gk_task* task);

/* Any non-terminal state → FAILED with `reason` (copied); releases as gk_task_complete. */
GK_API gk_status gk_task_fail(gk_task* task, const char* reason);

/* Any non-terminal state → CANCELLED; a pending task leaves the queue; releases as
 * gk_task_complete. FAILED_PRECONDITION from a terminal state. */
GK_API gk_status gk_task_cancel(gk_task* task);

/* Creates a stream owned by the task: its CUDA priority comes from the task's class (and
 * `priority` within it is ignored), it runs on the task's SM partition when it has one,
 * ops on it are charged to the task and paced, and buffers allocated on it with no owner
 * are charged to the task. The task must be ADMITTED or later and not terminal. The caller
 * frees it with gk_stream_destroy before gk_task_destroy. Any thread. */
GK_API gk_status gk_task_stream_create(gk_task* task, gk_stream** out);

/* The task's memory owner, for gk_alloc_args.owner; borrowed, valid until gk_task_destroy. */
GK_API gk_status gk_task_memory_owner(gk_task* task, gk_memory_owner** out);

typedef struct gk_task_info {
  size_t struct_size;           /* sizeof(gk_task_info), set by the caller */
  int32_t state;                /* gk_task_state */
  int32_t qos;                  /* gk_qos */
  int32_t device;
  int32_t priority;             /* as given in the spec */
  int32_t stream_priority;      /* the CUDA priority of its streams */
  int32_t sm_partition;         /* SMs of its green-context partition, 0 for none */
  uint64_t memory_reserved;     /* bytes reserved at admission (its request) */
  uint64_t memory_in_use;       /* bytes charged to it now */
  uint64_t memory_peak;
  uint64_t ops_launched;
  uint64_t throttle_count;      /* launches held back by pacing */
  uint64_t throttled_ns;        /* total time held back */
  /* Nanoseconds on the scheduler's clock (monotonic), 0 until the state is reached. */
  uint64_t created_ns;
  uint64_t admitted_ns;
  uint64_t started_ns;
  uint64_t finished_ns;
  /* Why the task is in its state ("admitted: 2.00 GiB of 8.00 GiB unreserved", "pending:
   * …"), owned by the task, valid until the next call on it or its destruction. */
  const char* reason;
} gk_task_info;

#define GK_TASK_INFO_SIZE GK_STRUCT_SIZE(gk_task_info, reason)

/* Fills *out (the caller sets out->struct_size). Any thread. */
GK_API gk_status gk_task_get_info(gk_task* task, gk_task_info* out);

/* The task's events as JSON: {"name":…, "state":…, …, "events":[{"t_ns":…, "kind":
 * "state"|"eviction"|"pacing"|"partition", "text":…}, …]} (the latest 256). The caller
 * frees *out_json with gk_string_free. Any thread. */
GK_API gk_status gk_task_events_json(gk_task* task, char** out_json);

/* Every device's capacity, reservations, pacing state and tasks (with state, reason and
 * usage) as JSON; `gpukit tasks` prints it. The caller frees *out_json with gk_string_free.
 * Any thread. */
GK_API gk_status gk_scheduler_json(gk_runtime* runtime, char** out_json);

typedef struct gk_pacing {
  size_t struct_size;                /* sizeof(gk_pacing), set by the caller */
  /* While a Guaranteed task of the device is busy, a BestEffort task launches only while
   * it has fewer than this many ops in flight (0 turns pacing off). Default 1. */
  int32_t best_effort_inflight;
  /* A Guaranteed task counts as busy while it has ops in flight and for this long after
   * its last op was launched. Default 200. */
  uint32_t guaranteed_idle_us;
  /* A held BestEffort launch goes ahead after this long anyway, so it keeps making
   * progress. Default 2000. */
  uint32_t max_hold_us;
} gk_pacing;

#define GK_PACING_SIZE GK_STRUCT_SIZE(gk_pacing, max_hold_us)

/* Sets the pacing of `device`'s BestEffort tasks; takes effect at their next launch. Any
 * thread. */
GK_API gk_status gk_scheduler_set_pacing(gk_runtime* runtime, int32_t device,
                                         const gk_pacing* pacing);

/* ---------------------------------------------------------------------------------
 * Transfers, ABI 1.3. Copies between host memory and a GPU (gk_copy_from_host,
 * gk_copy_to_host, gk_copy with a cpu side) run on dedicated copy streams, one per
 * direction, ordered with the caller's stream by events: the copy starts after the work
 * queued on the caller's stream, and later work on the caller's stream waits for it.
 *
 * Pinned host memory (from gk_host_alloc, cudaMallocHost, cudaHostRegister, …) is copied
 * by DMA directly and the calls return at once, as documented under "Copies". Pageable
 * host memory (malloc, new, numpy, …) goes through pinned staging chunks, pipelined:
 *   - gk_copy_from_host returns once every byte of `src` is read (so `src` may be reused
 *     or freed on return); the DMAs may still run, in the stream's order.
 *   - gk_copy_to_host returns once `dst` is written, which includes waiting for the work
 *     queued on the stream before the copy.
 * On the cpu device every copy is a plain memcpy. See docs/memory.md, "Transfers".
 * ------------------------------------------------------------------------------- */

/* Allocates at least `bytes` of host memory, 4096-byte aligned, for fast copies: pinned
 * (page-locked and usable by every CUDA device of the process) when the runtime has a CUDA
 * device, plain host memory otherwise. Served from a pool that keeps freed blocks for reuse,
 * so allocating again after gk_host_free costs no new pinning. bytes == 0 sets *out to NULL.
 * RESOURCE_EXHAUSTED names the request when the host cannot pin it. The caller owns the
 * memory and frees it with gk_host_free before gk_runtime_destroy; memory still allocated
 * then is released with the runtime (when its last stream, event, buffer or tensor goes), so
 * it must not be used after gk_runtime_destroy. Any thread. */
GK_API gk_status gk_host_alloc(gk_runtime* runtime, uint64_t bytes, void** out);

/* Gives back memory from gk_host_alloc of the same runtime. No copy may still use it: a copy
 * queued on a stream reads or writes it until the stream reaches the copy, so synchronize
 * that stream (or an event after the copy) first. NULL is a no-op. INVALID_ARGUMENT for any
 * other pointer, or a second free. Any thread. */
GK_API gk_status gk_host_free(gk_runtime* runtime, void* ptr);

/* Returns the freed blocks that gk_host_alloc keeps for reuse to the system (unpinning
 * them). *out_released (may be NULL) receives the bytes released. Any thread. */
GK_API gk_status gk_host_trim(gk_runtime* runtime, uint64_t* out_released);

typedef struct gk_transfer_stats {
  size_t struct_size;            /* sizeof(gk_transfer_stats), set by the caller */
  /* Copies of the device so far (calls with bytes > 0), and their bytes. "to device":
   * gk_copy_from_host, and gk_copy from a cpu tensor; "to host": gk_copy_to_host, and
   * gk_copy to a cpu tensor; "device": gk_copy between tensors of GPUs (counted on the
   * destination) or of the cpu device. */
  uint64_t to_device_copies;
  uint64_t to_device_bytes;
  uint64_t to_host_copies;
  uint64_t to_host_bytes;
  uint64_t device_copies;
  uint64_t device_bytes;
  /* Copies of pageable host memory that went through the staging chunks, their bytes, and
   * the chunks used. Copies of pinned memory are not counted here. */
  uint64_t staged_copies;
  uint64_t staged_bytes;
  uint64_t staged_chunks;
  uint64_t staging_bytes;        /* pinned staging memory the device holds (0 until used) */
  uint64_t staging_chunk_bytes;  /* the size of one staging chunk */
  /* gk_host_alloc memory of the runtime (the same for every device): block sizes of live
   * allocations, and freed blocks kept for reuse. */
  uint64_t host_bytes_in_use;
  uint64_t host_bytes_cached;
} gk_transfer_stats;

#define GK_TRANSFER_STATS_SIZE GK_STRUCT_SIZE(gk_transfer_stats, host_bytes_cached)

/* Fills *out (the caller sets out->struct_size, at least GK_TRANSFER_STATS_SIZE; fields past
 * it are not written) with the transfer counters of `device`, read at the call. OUT_OF_RANGE
 * for an unknown device. Any thread. */
GK_API gk_status gk_transfer_stats_get(gk_runtime* runtime, int32_t device,
                                       gk_transfer_stats* out);

/* ---------------------------------------------------------------------------------
 * Weights, ABI 1.4. A weight set is a model's tensors as stored in a file: SafeTensors
 * (one `.safetensors` file, a sharded checkpoint's `model.safetensors.index.json`, or a
 * folder holding either) or GGUF (one `.gguf` file). Opening one reads and checks every
 * header (names, dtypes, shapes, byte spans) and maps the files; no tensor data is read
 * until a tensor is asked for. Tensors handed out are read-only: an op refuses them as
 * outputs and gk_copy/gk_copy_from_host refuse them as destinations. See docs/weights.md.
 *
 * GGUF's block-quantized types are dtypes too. A tensor of one is packed: its shape counts
 * elements, its innermost dimension is a multiple of the block's element count, it is
 * always contiguous, and it holds (elements / block elements) * block bytes bytes.
 * gk_dtype_size() is 0 for them; gk_dtype_block() gives the block. Plugins may declare
 * them in their manifests ("q4_k") to read packed weights directly.
 * ------------------------------------------------------------------------------- */

enum {
  GK_DTYPE_Q8_0 = 32, /* blocks of 32: f16 scale, 32 x i8 (34 bytes) */
  GK_DTYPE_Q4_0 = 33, /* blocks of 32: f16 scale, 32 x 4 bits (18 bytes) */
  GK_DTYPE_Q4_1 = 34, /* blocks of 32: f16 scale, f16 min, 32 x 4 bits (20 bytes) */
  GK_DTYPE_Q4_K = 35, /* super-blocks of 256 (144 bytes), as llama.cpp's block_q4_K */
  GK_DTYPE_Q5_K = 36, /* super-blocks of 256 (176 bytes), as llama.cpp's block_q5_K */
  GK_DTYPE_Q6_K = 37  /* super-blocks of 256 (210 bytes), as llama.cpp's block_q6_K */
};

/* The elements per block of `dtype` (1 for a plain dtype, 32 or 256 for a block-quantized
 * one, 0 for an unknown value) and, through `out_block_bytes` (may be NULL), the bytes
 * per block. Any thread. */
GK_API uint32_t gk_dtype_block(int32_t dtype, uint32_t* out_block_bytes);

typedef struct gk_weights gk_weights;

typedef struct gk_weights_options {
  size_t struct_size;        /* sizeof(gk_weights_options) */
  /* Owner charged for the copies of this weight set's tensors on the owner's device (those
   * on other devices are charged as if it were NULL); NULL: the task of the stream given to
   * gk_weights_get, else an owner the weight set creates per device, named "weights <file
   * name>" (it shows in gk_memory_snapshot_json). Must outlive the weights. */
  gk_memory_owner* owner;
  /* Called during gk_weights_load with the stored bytes done and the total, on the thread
   * that called gk_weights_load, last with done == total on success; NULL for none. The
   * struct is copied by gk_weights_open; the callback and its user data must stay valid
   * until gk_weights_close. */
  void (*progress)(void* user_data, uint64_t done_bytes, uint64_t total_bytes);
  void* progress_user_data;
} gk_weights_options;

#define GK_WEIGHTS_OPTIONS_SIZE GK_STRUCT_SIZE(gk_weights_options, progress_user_data)

/* Opens a weight set (see above) and checks it whole. `options` may be NULL. `path` is a
 * file (GGUF when it ends in ".gguf" or opens with the GGUF magic, an index when it ends in
 * ".json", else SafeTensors) or a folder: its model.safetensors.index.json (or its only
 * *.safetensors.index.json), else every *.safetensors file in name order, else its only
 * *.gguf file. A malformed file fails with INVALID_ARGUMENT naming the file, the tensor and
 * the offending bytes (nothing stays open); so does a tensor name found twice, also across
 * files. NOT_FOUND when the path or a shard it names is missing. The weights hold the
 * runtime alive; free them with gk_weights_close. Any thread. */
GK_API gk_status gk_weights_open(gk_runtime* runtime, const char* path,
                                 const gk_weights_options* options, gk_weights** out);

/* Closes the weight set: the handle must not be used again. Tensors handed out stay
 * valid (each keeps what it reads: its file mapping or its device copy). NULL is a no-op.
 * No other call on the weights may be in flight. */
GK_API void gk_weights_close(gk_weights* weights);

/* The format: "safetensors" or "gguf" ("" for NULL). Valid while the weights live. */
GK_API const char* gk_weights_format(const gk_weights* weights);

/* The number of tensors (0 for NULL). Tensors are in file order, shard by shard. */
GK_API int64_t gk_weights_count(const gk_weights* weights);

typedef struct gk_weight_info {
  size_t struct_size;        /* sizeof(gk_weight_info), set by the caller */
  const char* name;          /* valid while the weights live */
  /* As stored: a gk_dtype, or a block-quantized one; 0 when GPUkit has no dtype for the
   * file's type (SafeTensors U16, U32, U64, F8_*, F6_*, F4, C64; GGUF Q5_0, Q2_K, IQ*, …):
   * such a tensor is listed, and gk_weights_get refuses it with UNIMPLEMENTED naming the
   * type. */
  int32_t dtype;
  int32_t ndim;
  int64_t shape[GK_MAX_DIMS];  /* row-major, innermost last (GGUF's order reversed) */
  uint64_t bytes;            /* stored bytes */
  const char* file;          /* the file holding it; valid while the weights live */
  uint64_t file_offset;      /* where its bytes start in that file */
} gk_weight_info;

#define GK_WEIGHT_INFO_SIZE GK_STRUCT_SIZE(gk_weight_info, file_offset)

/* Describes tensor `index` (0 .. count-1; OUT_OF_RANGE otherwise). Any thread. */
GK_API gk_status gk_weights_info(const gk_weights* weights, int64_t index, gk_weight_info* out);

/* The index of the tensor named `name`; NOT_FOUND (with the closest name) otherwise. */
GK_API gk_status gk_weights_find(const gk_weights* weights, const char* name, int64_t* out_index);

/* The metadata as a JSON object: SafeTensors' "__metadata__" (strings), or every GGUF
 * key/value with its value (numbers, strings, booleans and arrays, the tokenizer's
 * included). The caller frees *out_json with gk_string_free. Any thread. */
GK_API gk_status gk_weights_metadata_json(const gk_weights* weights, char** out_json);

/* Tensor `name` on `device`, read-only, as `dtype` (0: as stored). On the cpu device and
 * as stored, the tensor is the file's bytes, mapped without a copy (a private read-only
 * mapping: do not change the file while it is in use), unless they are not aligned to the
 * dtype (2 bytes for a block-quantized one), when they are copied. Otherwise its data is
 * converted on the host (f32/f16/bf16/f64 to each other, narrowing rounded to nearest
 * even; block-quantized dequantized to f32/f16/bf16 as llama.cpp does; other changes are
 * INVALID_ARGUMENT) into pool memory and, on a GPU, uploaded once through the transfer
 * engine on `stream` (NULL: the device's default stream), charged as the options' owner
 * says; the call returns when the copy is complete. The result is cached per device and
 * dtype: a second call returns the same tensor (a new reference), also from another thread
 * at the same time. The caller releases the reference with gk_tensor_release. Errors name
 * the weight set and the tensor, out-of-memory ones included. Any thread. */
GK_API gk_status gk_weights_get(gk_weights* weights, const char* name, int32_t device,
                                int32_t dtype, gk_stream* stream, gk_tensor** out);

/* Makes every tensor available on `device` as `dtype`, as gk_weights_get would, reading
 * several files in parallel and keeping several chunks in flight, and reports progress
 * through the options' callback. A tensor that does not convert to `dtype` (an integer or
 * bool one) is made available as stored; one whose type GPUkit has no dtype for fails the
 * call with UNIMPLEMENTED (the tensors done so far stay cached). Returns when every copy is
 * complete. Any thread. */
GK_API gk_status gk_weights_load(gk_weights* weights, int32_t device, int32_t dtype,
                                 gk_stream* stream);

/* Drops the weight set's cached tensors of `device` (every device for -1; OUT_OF_RANGE for
 * an unknown id). Tensors handed out stay valid until released; the memory goes back when
 * the last of them is. */
GK_API gk_status gk_weights_release(gk_weights* weights, int32_t device);

/* ---------------------------------------------------------------------------------
 * Tokenizer, ABI 1.5. Byte-level BPE (GPT-2's scheme: Llama 3, Qwen2, SmolLM2, GPT-2, …)
 * from a GGUF weight set's vocabulary (tokenizer.ggml.*) or an HF tokenizer.json. Text is
 * cut by the model's pre-tokenizer rules (GGUF tokenizer.ggml.pre, named as llama.cpp names
 * them, or the tokenizer.json's pre_tokenizer), then BPE merges by rank run inside each
 * piece. Ids are int32_t in 0 .. vocab size - 1. A tokenizer is immutable once made: every
 * call on it may run from any thread at the same time. See docs/llm.md.
 * ------------------------------------------------------------------------------- */

typedef struct gk_tokenizer gk_tokenizer;

/* Makes a tokenizer from the GGUF metadata of `weights` (tokenizer.ggml.model "gpt2",
 * .tokens, .merges, .token_type, .pre, the bos/eos/eot/padding ids, add_bos_token). The
 * tokenizer copies what it needs: it does not keep the weights alive, and the weights may be
 * closed first. INVALID_ARGUMENT naming the file and key for a missing or malformed
 * vocabulary (a SafeTensors weight set has none) or a merge naming a token not in it;
 * UNIMPLEMENTED for another tokenizer model (SentencePiece "llama", "bert", "t5") or a
 * pre-tokenizer name the library does not know (the message lists those it does). Release
 * *out with gk_tokenizer_release. Any thread. */
GK_API gk_status gk_tokenizer_from_weights(const gk_weights* weights, gk_tokenizer** out);

/* Makes a tokenizer from an HF tokenizer.json (model.type "BPE" with a ByteLevel step;
 * vocab, merges as "a b" or ["a", "b"], added_tokens, pre_tokenizer Sequence / Split
 * (Isolated) / ByteLevel / Digits, post_processor's template for BOS/EOS). The BOS, EOS, pad
 * and unk tokens and add_bos_token come from a tokenizer_config.json beside it when there is
 * one. NOT_FOUND when the file is missing; INVALID_ARGUMENT naming the file and key when it
 * is malformed; UNIMPLEMENTED for what is not byte-level BPE or a normalizer. `runtime` is
 * only checked. Release *out with gk_tokenizer_release. Any thread. */
GK_API gk_status gk_tokenizer_open(gk_runtime* runtime, const char* tokenizer_json_path,
                                   gk_tokenizer** out);

/* Releases the tokenizer. Detokenizers made from it stay valid (they hold what they need).
 * NULL is a no-op. No other call on this tokenizer may be in flight. */
GK_API void gk_tokenizer_release(gk_tokenizer* tokenizer);

/* The number of ids (0 for NULL). Any thread. */
GK_API int32_t gk_tokenizer_vocab_size(const gk_tokenizer* tokenizer);

typedef struct gk_tokenizer_info {
  size_t struct_size;  /* sizeof(gk_tokenizer_info), set by the caller */
  int32_t vocab_size;
  int32_t bos_id;      /* -1 when the model has none */
  int32_t eos_id;      /* -1 when the model has none */
  int32_t eot_id;      /* end of turn (e.g. <|eot_id|>, <|im_end|>); -1 when none */
  int32_t pad_id;      /* -1 when none */
  int32_t unk_id;      /* -1 when none */
  uint32_t add_bos;    /* 1 when GK_TOKENIZE_ADD_SPECIAL puts bos_id first */
  uint32_t add_eos;    /* 1 when GK_TOKENIZE_ADD_SPECIAL puts eos_id last */
  /* The pre-tokenizer: GGUF's tokenizer.ggml.pre ("llama-bpe", "qwen2", "smollm", …) or
   * "tokenizer.json". Valid while the tokenizer lives. */
  const char* pre;
} gk_tokenizer_info;

#define GK_TOKENIZER_INFO_SIZE GK_STRUCT_SIZE(gk_tokenizer_info, pre)

/* Fills *out (the caller sets out->struct_size, at least GK_TOKENIZER_INFO_SIZE; fields past
 * it are not written). Any thread. */
GK_API gk_status gk_tokenizer_info_get(const gk_tokenizer* tokenizer, gk_tokenizer_info* out);

/* Flags of gk_tokenizer_encode. */
enum {
  /* Add the model's BOS (and EOS) tokens where the model says to (gk_tokenizer_info's
   * add_bos/add_eos), as llama.cpp's add_special and HF's add_special_tokens do. */
  GK_TOKENIZE_ADD_SPECIAL = 1u,
  /* Text equal to a control or unknown token's text ("<|im_start|>") becomes that token;
   * without it such text is tokenized as plain text. User-defined added tokens are always
   * matched whole, as in HF tokenizers and llama.cpp. */
  GK_TOKENIZE_PARSE_SPECIAL = 2u
};

/* Encodes `length` bytes of UTF-8 `text` (NULL only when length is 0; NUL bytes are text).
 * Invalid UTF-8 does not fail: each maximal invalid part reads as U+FFFD, as Rust's
 * String::from_utf8_lossy (and so HF tokenizers) reads it. On OK, *out_count is the number
 * of ids and ids[0 .. *out_count) hold them. When `capacity` is smaller than needed, nothing
 * is written to `ids`, *out_count is set to the number needed and the call returns
 * OUT_OF_RANGE (pass capacity 0 and ids NULL to ask for the size). INVALID_ARGUMENT for an
 * unknown flag. Any thread. */
GK_API gk_status gk_tokenizer_encode(const gk_tokenizer* tokenizer, const char* text,
                                     size_t length, uint32_t flags, int32_t* ids,
                                     size_t capacity, size_t* out_count);

/* The vocabulary's text of token `id` as stored (byte-level form: "Ġthe" for " the"; an
 * added token's text as written), `*out_length` bytes at *out_text, NUL-terminated. Valid
 * while the tokenizer lives. INVALID_ARGUMENT naming the id and the vocab size when out of
 * range. Any thread. */
GK_API gk_status gk_tokenizer_token_text(const gk_tokenizer* tokenizer, int32_t id,
                                         const char** out_text, size_t* out_length);

/* Flags of gk_tokenizer_decode and gk_detokenizer_create. */
enum {
  /* Control and unknown tokens (BOS, EOS, <|im_start|>, …) produce no text; without it they
   * produce their text, as HF's decode does by default. */
  GK_DETOKENIZE_SKIP_SPECIAL = 1u
};

/* Decodes `count` ids into the bytes they stand for (a normal token's bytes, an added
 * token's text), exactly: the result is what was encoded, and may end inside a UTF-8
 * character when the ids do. On OK, out[0 .. *out_length) hold the bytes, followed by a NUL
 * when capacity > *out_length. When `capacity` is too small, nothing is written, *out_length
 * is set to the bytes needed and the call returns OUT_OF_RANGE. INVALID_ARGUMENT naming the
 * first id out of range and the vocab size. Any thread. */
GK_API gk_status gk_tokenizer_decode(const gk_tokenizer* tokenizer, const int32_t* ids,
                                     size_t count, uint32_t flags, char* out, size_t capacity,
                                     size_t* out_length);

/* A streaming decoder for generation: fed one id at a time, it returns only whole UTF-8
 * characters, holding back the bytes of a character split across tokens until a later
 * token completes it. Bytes that can never form a valid character come out as U+FFFD, so
 * its output is always valid UTF-8. One detokenizer serves one sequence, from one thread at a
 * time. */
typedef struct gk_detokenizer gk_detokenizer;

/* Makes a detokenizer over `tokenizer` (which it keeps alive) with GK_DETOKENIZE_* `flags`.
 * Release *out with gk_detokenizer_release. Any thread. */
GK_API gk_status gk_detokenizer_create(const gk_tokenizer* tokenizer, uint32_t flags,
                                       gk_detokenizer** out);

/* Releases the detokenizer; NULL is a no-op. */
GK_API void gk_detokenizer_release(gk_detokenizer* detokenizer);

/* Feeds token `id`; *out_text and *out_length receive the text it completes (possibly empty),
 * NUL-terminated, in the detokenizer's own buffer: valid until the next call on it.
 * INVALID_ARGUMENT for an id out of range (the state is unchanged). */
GK_API gk_status gk_detokenizer_push(gk_detokenizer* detokenizer, int32_t id,
                                     const char** out_text, size_t* out_length);

/* Ends the sequence: returns what is still held back (an incomplete character, as U+FFFD)
 * as gk_detokenizer_push does, and empties the state so the detokenizer can start over. */
GK_API gk_status gk_detokenizer_flush(gk_detokenizer* detokenizer, const char** out_text,
                                      size_t* out_length);


/* ---------------------------------------------------------------------------------
 * Models (ABI 1.6): decoder-only transformers run from a weight set plus its HF
 * config.json. A model plugin (its manifest lists the architectures it builds) holds the
 * model and composes every step of ops, each served by the best kernel plugin of the
 * device. A session is one sequence with its KV cache in the device's pool.
 * ------------------------------------------------------------------------------- */

typedef struct gk_model gk_model;
typedef struct gk_session gk_session;

typedef struct gk_model_options {
  size_t struct_size;  /* sizeof(gk_model_options) */
  int32_t device;      /* runtime device id the model runs on */
  int32_t dtype;       /* weights and activations: GK_DTYPE_F32 (0 means f32), _BF16, _F16 */
} gk_model_options;

#define GK_MODEL_OPTIONS_SIZE GK_STRUCT_SIZE(gk_model_options, dtype)

/* Loads the model at `path`: a folder holding config.json and its SafeTensors weights (as
 * HF save_pretrained writes them), or a .gguf file (llama, qwen2, qwen3; quantized weights
 * are dequantized, Llama q/k rows un-permuted from llama.cpp's rope layout). The
 * architecture is config.json's architectures[0] (GGUF: general.architecture); NOT_FOUND
 * lists the known ones when no model plugin builds it. The weights are converted
 * to options->dtype and uploaded to options->device once (options NULL: device 0, f32).
 * A config that disagrees with a tensor's shape is INVALID_ARGUMENT naming the tensor and
 * both shapes; a missing tensor is NOT_FOUND naming it. *out holds the runtime alive;
 * release it with gk_model_release. Any thread. */
GK_API gk_status gk_model_load(gk_runtime* runtime, const char* path,
                               const gk_model_options* options, gk_model** out);

/* Drops the caller's reference; sessions keep the model alive until they are released.
 * NULL is a no-op. */
GK_API void gk_model_release(gk_model* model);

typedef struct gk_model_info {
  size_t struct_size;         /* sizeof(gk_model_info), set by the caller */
  const char* architecture;   /* e.g. "LlamaForCausalLM"; valid while the model lives */
  const char* plugin;         /* the model plugin's name; valid while the model lives */
  int64_t vocab_size;
  int64_t context_length;     /* the longest sequence a session may hold */
  int32_t num_layers;
  int32_t hidden_size;
  int32_t device;
  int32_t dtype;
} gk_model_info;

#define GK_MODEL_INFO_SIZE GK_STRUCT_SIZE(gk_model_info, dtype)

/* Describes the model. Any thread. */
GK_API gk_status gk_model_get_info(const gk_model* model, gk_model_info* out);

typedef struct gk_session_options {
  size_t struct_size;   /* sizeof(gk_session_options) */
  int64_t max_context;  /* positions the KV cache holds; 0: the model's context length */
  /* (ABI 1.7) The scheduler task charged for the session's memory: its KV cache (allocated
   * by gk_session_create) and the model plugin's scratch memory of every step. It must be
   * admitted and not finished; a KV cache beyond the task's memory quota is
   * RESOURCE_EXHAUSTED with the quota, the bytes asked and what is in use. The task must
   * outlive the session. NULL: charged to no task. Read when struct_size covers it. */
  gk_task* task;
} gk_session_options;

#define GK_SESSION_OPTIONS_SIZE GK_STRUCT_SIZE(gk_session_options, max_context)
#define GK_SESSION_OPTIONS_SIZE_1_7 GK_STRUCT_SIZE(gk_session_options, task)

/* Opens a session (one sequence, empty) on `model`, which it keeps alive; its KV cache is
 * allocated now, in the model device's pool (RESOURCE_EXHAUSTED when it does not fit).
 * `options` may be NULL. Release it with gk_session_release. Any thread; sessions of one
 * model may run concurrently, each from one thread at a time. */
GK_API gk_status gk_session_create(gk_model* model, const gk_session_options* options,
                                   gk_session** out);

/* Frees the session and its KV cache. NULL is a no-op. */
GK_API void gk_session_release(gk_session* session);

/* Positions the session holds (tokens stepped so far). */
GK_API int64_t gk_session_length(const gk_session* session);

/* Flags of gk_session_step. */
enum {
  /* logits_out receives every position's logits, [count][vocab], not only the last's. */
  GK_STEP_ALL_LOGITS = 1u
};

/* Appends `count` (>= 1) token ids to the sequence (prefill: many; decode: one) and
 * computes their logits; logits_out (may be NULL) receives the last token's [vocab] f32
 * logits, or every token's with GK_STEP_ALL_LOGITS. INVALID_ARGUMENT names a token id out
 * of [0, vocab); OUT_OF_RANGE when the tokens do not fit the session's context (the
 * session is unchanged by either). Returns when the logits are complete. */
GK_API gk_status gk_session_step(gk_session* session, const int32_t* tokens, int32_t count,
                                 uint32_t flags, float* logits_out);

/* Called with each generated token; a non-zero return stops the generation. */
typedef int32_t (*gk_token_callback)(void* user_data, int32_t token);

typedef struct gk_generate_options {
  size_t struct_size;          /* sizeof(gk_generate_options) */
  int32_t max_tokens;          /* the most tokens to generate (>= 0) */
  int32_t top_k;               /* 0: off */
  double temperature;          /* 0: greedy; else > 0 */
  double top_p;                /* in (0, 1]; 1: off */
  double min_p;                /* in [0, 1]; 0: off */
  double repetition_penalty;   /* > 0; 1: off. HF's: a seen token's logit is divided by it
                                  when positive, multiplied when negative */
  uint64_t seed;               /* the same seed gives the same tokens */
  const int32_t* stop_tokens;  /* generation ends after one of these (it is returned) */
  int32_t num_stop_tokens;
  gk_token_callback on_token;  /* NULL for none */
  void* user_data;
} gk_generate_options;

#define GK_GENERATE_OPTIONS_SIZE GK_STRUCT_SIZE(gk_generate_options, user_data)

/* Steps `prompt` (count >= 1 ids), then generates up to options->max_tokens tokens with the
 * sample op (greedy at temperature 0), writing them to out_tokens (capacity >= max_tokens)
 * and *out_count, calling on_token for each. It stops early at a stop token, when on_token
 * returns non-zero, or when the session is full. Each generated token but the last is
 * stepped into the session; pass the last as the next call's prompt to go on. Invalid
 * sampling parameters are INVALID_ARGUMENT naming the parameter and its range. */
GK_API gk_status gk_session_generate(gk_session* session, const int32_t* prompt, int32_t count,
                                     const gk_generate_options* options, int32_t* out_tokens,
                                     int32_t capacity, int32_t* out_count);

/* ---- Batching (ABI 1.7): several sequences per forward pass, continuous batching. ---- */

/* One decode step of `count` (>= 1) distinct sessions of one model in a single forward pass:
 * tokens[i] is appended to sessions[i], whatever its length. The row-wise work (matmuls,
 * norms) runs once over a [count, hidden] activation; attention and the KV cache stay per
 * session. logits_out (may be NULL) receives [count][vocab] f32, row i for sessions[i]: what
 * gk_session_step of that session alone gives, up to float rounding. Sequences join a batch
 * by being created and prefilled (gk_session_step) and leave it by being left out (their
 * KV cache goes with gk_session_release). INVALID_ARGUMENT for sessions of different models,
 * a session given twice or a token id out of range; OUT_OF_RANGE naming a full session; no
 * session changes then. Scratch memory is charged to sessions[0]'s task. No session may be
 * stepped from another thread meanwhile. */
GK_API gk_status gk_session_step_batch(gk_session* const* sessions, int32_t count,
                                       const int32_t* tokens, float* logits_out);

/* A generation batch: sequences with their own prompts and gk_generate_options (sampling
 * parameters, seed, stop tokens, token callback), generated together: each gk_batch_step is
 * one forward pass over every sequence still generating (gk_session_step_batch). Sequences
 * are added and removed between steps. Each owns a session made with the batch's session
 * options (max_context, task); its KV cache is freed as soon as the sequence finishes or is
 * removed. A sequence's tokens are those gk_session_generate gives for the same prompt and
 * options. Use a batch from one thread at a time. */
typedef struct gk_batch gk_batch;

/* Makes an empty batch over `model` (which it keeps alive). `options` (may be NULL; copied)
 * are the options of every sequence's session. Release with gk_batch_release. Any thread. */
GK_API gk_status gk_batch_create(gk_model* model, const gk_session_options* options,
                                 gk_batch** out);

/* Frees the batch and the sessions of its sequences. NULL is a no-op. */
GK_API void gk_batch_release(gk_batch* batch);

/* Adds a sequence: opens its session, steps `prompt` (count >= 1 ids) and samples its first
 * token (calling options->on_token), as gk_session_generate begins. `options` is copied
 * (stop tokens included; user_data is passed back as given); options->max_tokens bounds the
 * sequence's tokens (0: it finishes at once). *out_id is the sequence's id in this batch,
 * never reused. The errors of gk_session_create and gk_session_generate (a KV cache over the
 * task's quota, invalid sampling parameters, …); nothing is added then. */
GK_API gk_status gk_batch_add(gk_batch* batch, const int32_t* prompt, int32_t count,
                              const gk_generate_options* options, int64_t* out_id);

/* One token for every sequence still generating: one forward pass over their latest tokens,
 * then each samples with its own options and calls its on_token. A sequence finishes after
 * a stop token, at its max_tokens, when on_token returns non-zero or when its session is
 * full; its session is released then. *out_active (may be NULL) receives how many sequences
 * still generate. With none, it does nothing. A failed forward pass changes no sequence. */
GK_API gk_status gk_batch_step(gk_batch* batch, int32_t* out_active);

/* Sequence `id`'s generated tokens: the first min(count, capacity) go to out_tokens (may be
 * NULL when capacity is 0), *out_count receives how many it has, *out_finished (may be NULL)
 * 1 once it generates no more, else 0. NOT_FOUND for an id not in the batch. */
GK_API gk_status gk_batch_tokens(const gk_batch* batch, int64_t id, int32_t* out_tokens,
                                 int32_t capacity, int32_t* out_count, int32_t* out_finished);

/* Removes sequence `id`, finished or not, freeing its session now. NOT_FOUND for an id not
 * in the batch. */
GK_API gk_status gk_batch_remove(gk_batch* batch, int64_t id);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* Audio in (ABI 1.9): gk_audio_load, gk_audio_from_samples. */
#include "gpukit_audio.h"

/* Custom GPU kernels compiled at run time by NVRTC (ABI 1.8): gk_jit_*. */
#include "gpukit_jit.h"

/* Speech recognition (ABI 1.11): gk_session_encode, gk_asr_transcribe, gk_transcript_*. */
#include "gpukit_asr.h"

#endif /* GPUKIT_GPUKIT_H_ */
