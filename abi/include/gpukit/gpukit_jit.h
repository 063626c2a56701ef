/*
 * gpukit_jit.h — custom GPU kernels: CUDA C++ source compiled at run time by NVRTC, cached
 * in the process and on disk, launched on a GPUkit stream (ABI 1.8).
 *
 * C99, no C++ types; included by gpukit.h, so a client includes gpukit.h alone. NVRTC is
 * opened at run time (libnvrtc.so.13, .so.12, .so): the library has no link-time
 * dependency on it, and every call below says GK_UNAVAILABLE with a message when it is
 * absent. See docs/jit.md for the cache (where, key, limits) and a worked example.
 *
 * A caller built against this header checks GK_VERSION_MINOR(gk_abi_version()) >= 8
 * (>= 10 for gk_jit_op_*) before calling these against a library it did not ship with.
 */
#ifndef GPUKIT_GPUKIT_JIT_H_
#define GPUKIT_GPUKIT_JIT_H_

#include "gpukit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A compiled module: the cubin for one SM and its PTX, loaded into a CUDA device's
 * context when compiled for a device. Reference-counted (ABI 1.8). */
typedef struct gk_jit_module gk_jit_module;
/* One kernel of a loaded module; keeps its module alive (ABI 1.8). */
typedef struct gk_jit_kernel gk_jit_kernel;

/* Flags of gk_jit_options (ABI 1.8). */
enum {
  /* Neither read nor write the disk cache (the in-process cache still applies). */
  GK_JIT_NO_DISK_CACHE = 1u,
  /* Compile even when the in-process and disk caches hold the module (a rebuild). */
  GK_JIT_FORCE_COMPILE = 2u
};

/* How gk_jit_compile obtained a module (gk_jit_module_info.origin, ABI 1.8). */
typedef enum gk_jit_origin {
  GK_JIT_ORIGIN_COMPILED = 1,   /* NVRTC compiled it in this call */
  GK_JIT_ORIGIN_DISK_CACHE = 2, /* read from the disk cache */
  GK_JIT_ORIGIN_MEMORY = 3      /* this process had it already (same key) */
} gk_jit_origin;

/* What to compile (ABI 1.8). Every pointer is read during gk_jit_compile only. */
typedef struct gk_jit_options {
  size_t struct_size;         /* sizeof(gk_jit_options) */
  /* NVRTC options, e.g. "-std=c++17", "--use_fast_math", "-DTILE=64", "-I/path". "-arch" is
   * refused: the SM comes from the device or sm_version. Whitespace is trimmed. */
  const char* const* options;
  int32_t num_options;
  /* Folders for #include, searched in order (the same as "-I<dir>" options). */
  const char* const* include_paths;
  int32_t num_include_paths;
  /* Kernel names with template arguments, e.g. "scale<float, 4>": each one is instantiated
   * and gk_jit_get_kernel finds it under this exact text. */
  const char* const* name_expressions;
  int32_t num_name_expressions;
  /* 0: the device's SM. Else compile for this SM (e.g. 80 for sm_80) whatever the device,
   * the cpu device included: a module compiled for an SM other than a CUDA device's own is
   * not loaded, so its kernels cannot be launched (compile-only, e.g. to fill a cache). */
  int32_t sm_version;
  /* The source's name in messages and NVRTC's log; NULL: "gpukit_jit.cu". */
  const char* program_name;
  uint32_t flags; /* GK_JIT_* */
} gk_jit_options;

#define GK_JIT_OPTIONS_SIZE GK_STRUCT_SIZE(gk_jit_options, flags)
#define GK_JIT_OPTIONS_INIT \
  { sizeof(gk_jit_options), NULL, 0, NULL, 0, NULL, 0, 0, NULL, 0u }

/* Compiles `source` (CUDA C++, NUL-terminated) for device `device` into *out (one
 * reference; release with gk_jit_module_release). The same source, headers, options, name
 * expressions, SM, NVRTC and ABI version compile once: a module alive in this runtime is
 * shared, else a valid disk cache entry is read, else NVRTC compiles and the entry is
 * written (docs/jit.md "Cache").
 * Errors: INVALID_ARGUMENT names a bad option or a compile error and carries NVRTC's log
 * with the offending source lines quoted; UNAVAILABLE when NVRTC is absent, or when
 * `device` is the cpu device and options->sm_version is 0; INVALID_ARGUMENT when NVRTC
 * does not support the SM (the message lists those it does). Any thread. */
GK_API gk_status gk_jit_compile(gk_runtime* runtime, int32_t device, const char* source,
                                const gk_jit_options* options, gk_jit_module** out);

/* Adds a reference to `module`. NULL is a no-op. Any thread. */
GK_API void gk_jit_module_retain(gk_jit_module* module);
/* Drops a reference; the last one unloads the module (kernels hold references, so a
 * kernel keeps working after its module is released). NULL is a no-op. Any thread. */
GK_API void gk_jit_module_release(gk_jit_module* module);

/* What a module holds (ABI 1.8). The pointers stay valid while the module lives. */
typedef struct gk_jit_module_info {
  size_t struct_size;      /* set by the caller: sizeof(gk_jit_module_info) */
  int32_t device;          /* the device it was compiled for */
  int32_t sm_version;      /* e.g. 90 */
  int32_t origin;          /* gk_jit_origin */
  int32_t loaded;          /* 1: loaded on its CUDA device (kernels can launch); 0: not */
  int32_t nvrtc_version;   /* major*1000+minor*10 of the NVRTC that compiled it */
  const char* key;         /* the cache key, 64 hex digits */
  const void* cubin;       /* the SASS for sm_version (ELF) */
  size_t cubin_size;
  const char* ptx;         /* the PTX, NUL-terminated (forward compatibility) */
  size_t ptx_size;         /* bytes before the NUL */
  const char* log;         /* NVRTC's log (warnings); "" when none */
  const char* cache_path;  /* the disk cache entry's path; "" without the disk cache */
} gk_jit_module_info;

#define GK_JIT_MODULE_INFO_SIZE GK_STRUCT_SIZE(gk_jit_module_info, cache_path)

/* Fills *info (the caller sets info->struct_size). Any thread. */
GK_API gk_status gk_jit_module_info_get(const gk_jit_module* module, gk_jit_module_info* info);

/* The mangled name NVRTC gave a name expression of the compile, in *out (valid while the
 * module lives). NOT_FOUND names the expression and lists the module's. Any thread. */
GK_API gk_status gk_jit_lowered_name(const gk_jit_module* module, const char* name_expression,
                                     const char** out);

/* The kernel `name` of a loaded module in *out (one reference; gk_jit_kernel_release):
 * `name` is a name expression of the compile (found by its lowered name), an extern "C"
 * kernel's name or a mangled name. NOT_FOUND when the module has no such kernel;
 * UNAVAILABLE when the module is not loaded (compiled for an SM only). Any thread. */
GK_API gk_status gk_jit_get_kernel(gk_jit_module* module, const char* name, gk_jit_kernel** out);

/* Drops a kernel reference. NULL is a no-op. Any thread. */
GK_API void gk_jit_kernel_release(gk_jit_kernel* kernel);

/* Kinds of gk_jit_arg (ABI 1.8). */
typedef enum gk_jit_arg_kind {
  GK_JIT_ARG_TENSOR = 1,  /* value.tensor: passed as its data's device pointer */
  GK_JIT_ARG_I32 = 2,     /* value.i32 */
  GK_JIT_ARG_I64 = 3,     /* value.i64 */
  GK_JIT_ARG_F32 = 4,     /* value.f32 */
  GK_JIT_ARG_F64 = 5,     /* value.f64 */
  GK_JIT_ARG_POINTER = 6, /* value.pointer: a device address the caller vouches for */
  GK_JIT_ARG_BYTES = 7,   /* value.bytes: `size` bytes passed by value (a struct) */
  GK_JIT_ARG_U32 = 8,     /* value.u32 */
  GK_JIT_ARG_U64 = 9      /* value.u64 */
} gk_jit_arg_kind;

/* One kernel parameter, in order. Travels in arrays, so it has no struct_size: frozen for
 * the life of major version 1. */
typedef struct gk_jit_arg {
  int32_t kind; /* gk_jit_arg_kind */
  int32_t size; /* GK_JIT_ARG_BYTES: the byte count; else ignored */
  union {
    gk_tensor* tensor;
    int32_t i32;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    double f64;
    const void* pointer;
    const void* bytes;
  } value;
} gk_jit_arg;

/* A launch (ABI 1.8). Pointers are read during gk_jit_launch only. */
typedef struct gk_jit_launch_args {
  size_t struct_size;        /* sizeof(gk_jit_launch_args) */
  uint32_t grid[3];          /* blocks in x, y, z; each >= 1 */
  uint32_t block[3];         /* threads in x, y, z; each >= 1 */
  uint32_t shared_mem_bytes; /* dynamic shared memory per block */
  const gk_jit_arg* args;
  int32_t num_args;
  /* The stream of the kernel's device to launch on; NULL: the device's default stream. A
   * scheduler task's stream counts and paces the launch as it does an op's. */
  gk_stream* stream;
} gk_jit_launch_args;

#define GK_JIT_LAUNCH_ARGS_SIZE GK_STRUCT_SIZE(gk_jit_launch_args, stream)

/* Queues `kernel` on args->stream and returns (stream-ordered, as gk_op_call). Tensor
 * arguments must be on the kernel's device; their memory stays valid for the launch.
 * INVALID_ARGUMENT names a bad grid/block, an argument of the wrong kind or size (when the
 * driver reports the kernel's parameters, their count and sizes are checked) or a tensor
 * on another device; the driver's refusal (too many threads or too much shared memory for
 * the kernel) is INVALID_ARGUMENT with the driver's words. Any thread. */
GK_API gk_status gk_jit_launch(gk_jit_kernel* kernel, const gk_jit_launch_args* args);

/* The disk cache (ABI 1.8): where it is and what it holds. `dir` stays valid until the
 * calling thread's next gk_jit_cache_stats_get. */
typedef struct gk_jit_cache_stats {
  size_t struct_size;  /* set by the caller: sizeof(gk_jit_cache_stats) */
  const char* dir;     /* $GPUKIT_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/gpukit/jit */
  int64_t entries;     /* valid-looking entry files (*.gkjit) */
  int64_t bytes;       /* their total size */
  int64_t limit_bytes; /* $GPUKIT_CACHE_MAX_BYTES, default 1 GiB: past it, least recently
                          used entries are removed after a write */
} gk_jit_cache_stats;

#define GK_JIT_CACHE_STATS_SIZE GK_STRUCT_SIZE(gk_jit_cache_stats, limit_bytes)

/* Fills *stats; a missing folder is an empty cache. Needs no runtime. Any thread. */
GK_API gk_status gk_jit_cache_stats_get(gk_jit_cache_stats* stats);

/* Removes every entry (and stale temporary and lock files) of the disk cache; *out_removed
 * (may be NULL) receives the number of entries removed. Modules already loaded keep
 * working. Needs no runtime. Any thread. */
GK_API gk_status gk_jit_cache_clear(int64_t* out_removed);

/* ---------------------------------------------------------------------------------
 * A JIT kernel serving a named op (ABI 1.10): gk_op_call and gk_explain see it beside the
 * plugins' kernels, under the name "jit:<kernel name>".
 * ------------------------------------------------------------------------------- */

/* One registration of a kernel as an op's implementation (ABI 1.10). */
typedef struct gk_jit_op gk_jit_op;

/* How a registered kernel is launched for a call (gk_jit_op_options.geometry, ABI 1.10). */
typedef enum gk_jit_op_geometry {
  /* One thread per output element: the kernel takes the inputs' data pointers, then the
   * outputs', then the element count as a 64-bit integer, e.g.
   *   extern "C" __global__ void add_f32(const float* a, const float* b, float* out,
   *                                      long long n)
   * and is launched with ceil(n / block_size) blocks of block_size threads, so it must
   * test i < n. It serves calls whose tensors are all contiguous with the output's
   * element count (no broadcasting) and that carry no attributes; others are declined
   * with the reason, and the next candidate serves them. */
  GK_JIT_OP_ELEMENTWISE = 1
} gk_jit_op_geometry;

/* What a registration serves and how it competes (ABI 1.10). Pointers are read during
 * gk_jit_op_register only. */
typedef struct gk_jit_op_options {
  size_t struct_size;     /* sizeof(gk_jit_op_options) */
  /* The dtypes of the call's input 0 it serves (gk_dtype), as a manifest lists them. */
  const int32_t* dtypes;
  int32_t num_dtypes;     /* >= 1 */
  /* Against the plugins' manifest priorities (cpu 0, CUDA kernel plugins 50-80): the
   * highest accepting candidate serves the call. */
  int32_t priority;
  int32_t geometry;       /* gk_jit_op_geometry */
  uint32_t block_size;    /* threads per block, 1-1024; 0: 256 */
} gk_jit_op_options;

#define GK_JIT_OP_OPTIONS_SIZE GK_STRUCT_SIZE(gk_jit_op_options, block_size)
#define GK_JIT_OP_OPTIONS_INIT { sizeof(gk_jit_op_options), NULL, 0, 0, GK_JIT_OP_ELEMENTWISE, 0u }

/* Registers `kernel` as an implementation of op `op` (a name of gk_op_name) on the
 * kernel's device of `runtime`, in *out (one handle; gk_jit_op_release unregisters it).
 * From then on gk_op_call / gk_op_call_alloc of that op, with input 0 of a listed dtype
 * on that device, consider it with the plugins that list the op: highest priority first,
 * and gk_explain lists it as "jit:<kernel name>" with its priority and, when declined,
 * why (another device, another dtype, a shape or layout the geometry cannot serve,
 * attributes, a parameter count that does not match the call's tensors). The registration
 * holds a reference to the kernel (the caller may release its own).
 * Errors: NOT_FOUND for an unknown op; INVALID_ARGUMENT for a kernel of another runtime
 * or not loaded, no or unknown dtypes, an unknown geometry, a block size past 1024, or a
 * kernel whose parameters (when the driver reports them) are not all 8 bytes (pointers and
 * the count). Any thread. */
GK_API gk_status gk_jit_op_register(gk_runtime* runtime, const char* op, gk_jit_kernel* kernel,
                                    const gk_jit_op_options* options, gk_jit_op** out);

/* Unregisters: calls made after it returns no longer see the kernel (a call already
 * launching it finishes first). Releases the registration's kernel reference. NULL is a
 * no-op. Any thread. */
GK_API void gk_jit_op_release(gk_jit_op* op);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_JIT_H_ */
