/*
 * gpukit_runtime.h — versions, status and errors, logging, the runtime, devices, streams and events
 *
 * Part of the GPUkit C ABI; a client includes gpukit.h, which includes every part (each
 * part also compiles on its own). Rules for every part: gpukit.h's opening comment.
 */
#ifndef GPUKIT_GPUKIT_RUNTIME_H_
#define GPUKIT_GPUKIT_RUNTIME_H_

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
#define GK_ABI_VERSION_MINOR 12
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_RUNTIME_H_ */
