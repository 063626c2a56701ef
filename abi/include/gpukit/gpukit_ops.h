/*
 * gpukit_ops.h — ops: calls, output descriptors, plugins and dispatch explanation
 *
 * Part of the GPUkit C ABI; a client includes gpukit.h, which includes every part (each
 * part also compiles on its own). Rules for every part: gpukit.h's opening comment.
 */
#ifndef GPUKIT_GPUKIT_OPS_H_
#define GPUKIT_GPUKIT_OPS_H_

#include "gpukit_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_OPS_H_ */
