/*
 * gpukit_plugin.h — the GPUkit plugin C ABI.
 *
 * A plugin is a shared library that exports one C symbol, gk_plugin_entry (see
 * GK_PLUGIN_ENTRY below). The runtime reads the plugin's YAML manifest first, opens
 * the library only when the manifest matches a device, calls the entry with the
 * host's services, and receives the plugin's function table.
 *
 * Version negotiation: the host offers the range [host->abi_min, host->abi_max]
 * (GK_MAKE_VERSION form). The plugin answers with the version it implements in
 * api->abi_version, which must lie in that range, or declines by returning a non-OK
 * status after host->report_error(). A plugin built against this header implements
 * GK_PLUGIN_ABI_VERSION.
 *
 * Structs open with struct_size and grow only at the end: read no field of a host
 * struct past its struct_size, and set struct_size in every struct you hand over.
 *
 * Plugins never create a CUDA context: the host passes each device's primary context,
 * and the CUDA runtime (cudart) also uses the primary context. Export nothing but the
 * entry symbol (build with hidden visibility).
 */
#ifndef GPUKIT_GPUKIT_PLUGIN_H_
#define GPUKIT_GPUKIT_PLUGIN_H_

#include <stdio.h>
#include <string.h>

#include "gpukit.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GK_PLUGIN_ABI_VERSION_MAJOR 1
#define GK_PLUGIN_ABI_VERSION_MINOR 5
#define GK_PLUGIN_ABI_VERSION \
  GK_MAKE_VERSION(GK_PLUGIN_ABI_VERSION_MAJOR, GK_PLUGIN_ABI_VERSION_MINOR)

/* The one symbol a plugin exports. */
#define GK_PLUGIN_ENTRY_SYMBOL "gk_plugin_entry"

#if defined(_WIN32)
#define GK_PLUGIN_EXPORT __declspec(dllexport)
#else
#define GK_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------
 * What the host tells a plugin about a device.
 * ------------------------------------------------------------------------------- */

typedef struct gk_plugin_device {
  size_t struct_size;
  int32_t id;             /* runtime device id, as in gpukit.h */
  int32_t kind;           /* gk_device_kind */
  int32_t ordinal;        /* CUDA ordinal */
  int32_t sm_version;     /* e.g. 90 */
  int32_t sm_count;
  uint64_t total_memory;
  void* cuda_context;     /* the device's primary CUcontext; NULL for the cpu device */
} gk_plugin_device;

#define GK_PLUGIN_DEVICE_SIZE GK_STRUCT_SIZE(gk_plugin_device, cuda_context)

/* ---------------------------------------------------------------------------------
 * Services the host passes to gk_plugin_entry and init. Valid until shutdown returns.
 * Every function may be called from any thread.
 * ------------------------------------------------------------------------------- */

typedef struct gk_kernel_args gk_kernel_args;

typedef struct gk_host_services {
  size_t struct_size;
  uint32_t abi_min;       /* lowest plugin ABI version the host accepts */
  uint32_t abi_max;       /* highest plugin ABI version the host accepts */
  void* host_context;     /* pass back as the first argument of every service */
  const char* plugin_name; /* from the manifest */

  /* Logs a line under the plugin's name (GK_LOG_* levels). */
  void (*log)(void* host_context, int32_t level, const char* message);

  /* Records why the entry or init declined; the runtime shows it as the skip reason. */
  void (*report_error)(void* host_context, const char* message);

  /* Stream-ordered scratch memory from the runtime's pool, charged to the caller of
   * the op in flight. `stream` is the native stream (CUstream) or NULL. */
  gk_status (*alloc)(void* host_context, int32_t device, uint64_t bytes, void* stream,
                     void** out);
  gk_status (*free)(void* host_context, int32_t device, void* ptr, void* stream);

  /* Address of a CUDA driver API function by name ("cuLaunchKernel", …) from the
   * driver the host opened, so plugins need not link libcuda. NOT_FOUND when the
   * driver lacks it, UNAVAILABLE when there is no driver. */
  gk_status (*cuda_driver_symbol)(void* host_context, const char* name, void** out);

  /* Device description for runtime device id `device`. */
  gk_status (*device_info)(void* host_context, int32_t device, gk_plugin_device* out);

  /* Plugin ABI 1.1. Runs op args->op as gk_op_call does: checked against the op's rules
   * and dispatched to the best kernel plugin for args->device, queued on args->stream
   * (the device's native stream; NULL for its default stream). Tensors are views of
   * memory the caller keeps valid until the stream reaches the op (host->alloc memory,
   * or tensors the host handed over). On failure the message is left for the host's
   * caller: return the status unchanged. This is how a model plugin composes ops. */
  gk_status (*op_call)(void* host_context, const gk_kernel_args* args);

  /* Plugin ABI 1.5: CUDA graphs of op calls, so that a model plugin replays a decode step
   * with one launch instead of dispatching each op again.
   * graph_begin starts capturing `stream` (one the plugin created, not the legacy default
   * stream), in the driver's relaxed mode: the op calls queued on it until graph_end are
   * recorded, not run. Memory freed on it meanwhile (host->free: the plugin's scratch and the
   * ops' own) stays allocated and becomes the graph's. Free the step's scratch before
   * graph_end, and allocate what must outlive the capture (the graph's inputs and outputs)
   * before graph_begin. UNIMPLEMENTED on the cpu device.
   * graph_end ends the capture and returns the graph, ready to launch, in *graph. When the
   * capture failed (an op synchronized or waited on work outside it, an op call failed) it
   * returns an error naming the cause, and the held memory goes back to the pool; call it
   * after a failed op call too, to end the capture.
   * graph_launch replays the graph on `stream` (any stream of the graph's device; NULL: the
   * default stream): the same kernels on the same addresses, in the stream's order.
   * graph_release waits for the graph's last launch, then frees it and its held memory. */
  gk_status (*graph_begin)(void* host_context, int32_t device, void* stream);
  gk_status (*graph_end)(void* host_context, int32_t device, void* stream, void** graph);
  gk_status (*graph_launch)(void* host_context, void* graph, void* stream);
  void (*graph_release)(void* host_context, void* graph);
} gk_host_services;

#define GK_HOST_SERVICES_SIZE GK_STRUCT_SIZE(gk_host_services, device_info)
#define GK_HOST_SERVICES_SIZE_1_1 GK_STRUCT_SIZE(gk_host_services, op_call)
#define GK_HOST_SERVICES_SIZE_1_5 GK_STRUCT_SIZE(gk_host_services, graph_release)

/* ---------------------------------------------------------------------------------
 * A call as the plugin sees it.
 * ------------------------------------------------------------------------------- */

typedef struct gk_plugin_tensor {
  void* data;              /* element [0, …, 0]; NULL when only asking supports() */
  int32_t dtype;           /* gk_dtype */
  int32_t ndim;
  const int64_t* shape;    /* ndim entries */
  const int64_t* strides;  /* ndim entries, in elements, always explicit */
  uint32_t flags;          /* GK_TENSOR_* */
} gk_plugin_tensor;

struct gk_kernel_args {
  size_t struct_size;
  const char* op;                   /* op name, as in docs/ops.md */
  int32_t device;                   /* runtime device id of every tensor */
  void* stream;                     /* native stream (CUstream); NULL on the cpu device */
  const gk_plugin_tensor* inputs;
  int32_t num_inputs;
  const gk_plugin_tensor* outputs;
  int32_t num_outputs;
  /* Attributes arrive normalised by the core's op rules (docs/ops.md), the same form in
   * supports() and launch(), valid for the length of that call: every value within the
   * op's rules (a plugin need not check range or type), names and strings in the op's own
   * spelling, a float attribute given as an int converted to GK_ATTR_FLOAT, and every
   * attribute the op defines with a default present, so a plugin reads them directly:
   *   softmax, log_softmax: `axis` int, non-negative (given -1 or absent: ndim - 1).
   *   sum, mean, prod, max, min: `axes` ints, non-negative, increasing, distinct (absent:
   *     every axis, listed); `keepdims` int (0 when absent; nonzero keeps).
   *   argmax, argmin: `axis` int, non-negative, present only when given (absent: over
   *     every element); `keepdims` int as above.
   *   layernorm, rmsnorm, add_layernorm, add_rmsnorm: `eps` float (1e-5).
   *   matmul: `transpose_a`, `transpose_b` int (0; nonzero transposes), `alpha` float (1),
   *     `beta` float (0), `activation` string (none), `precision` string (highest).
   *   gelu, swiglu, geglu: `approximate` string (none). cast: `dtype` string, the dtype's
   *     name, present only when given.
   *   rope, attention, sample, log_mel_spectrogram: every attribute, defaults filled in
   *     (attention's `scale` 1/sqrt(head_dim), rope's `rotary_dim` head_dim).
   * Normalising again (adding ndim to a negative axis, a fallback for an absent attribute)
   * stays correct: it changes nothing. */
  const gk_attr* attrs;
  int32_t num_attrs;
};

#define GK_KERNEL_ARGS_SIZE GK_STRUCT_SIZE(gk_kernel_args, num_attrs)

/* ---------------------------------------------------------------------------------
 * Plugin ABI 1.1: the model interface. A model plugin (its manifest lists
 * `architectures`) builds models from a weight set plus a config and runs steps by
 * composing ops through host->op_call, so every op still goes to the best kernel plugin
 * of the device. The host owns the weights and every tensor it passes; the plugin owns
 * what it allocates through host->alloc (a session's KV cache, step scratch).
 * ------------------------------------------------------------------------------- */

/* One tensor of the weight set, on the model's device in the model's dtype. */
typedef struct gk_plugin_weight {
  const char* name;        /* as stored: HF SafeTensors or GGUF name */
  gk_plugin_tensor tensor; /* read-only */
} gk_plugin_weight;

typedef struct gk_model_create_args {
  size_t struct_size;
  const char* architecture;  /* e.g. "LlamaForCausalLM", one the manifest lists */
  const char* config_json;   /* the model's HF config.json text */
  int32_t device;            /* runtime device id every op runs on */
  int32_t dtype;             /* gk_dtype of the weights and activations */
  const gk_plugin_weight* weights;
  int64_t num_weights;
  /* The weights, their names and config_json stay valid until model_destroy. */
} gk_model_create_args;

#define GK_MODEL_CREATE_ARGS_SIZE GK_STRUCT_SIZE(gk_model_create_args, num_weights)

/* What a created model reports. */
typedef struct gk_plugin_model_info {
  size_t struct_size;
  int64_t vocab_size;
  int64_t context_length;  /* the longest sequence the model was trained for */
  int32_t num_layers;
  int32_t hidden_size;
  /* Plugin ABI 1.3, for models with an encoder (session_encode); 0 for the others. */
  int32_t encoder_channels; /* rows of the encoder's features (Whisper: n_mels) */
  int64_t encoder_frames;   /* the most feature frames it takes (Whisper: 3000) */
} gk_plugin_model_info;

#define GK_PLUGIN_MODEL_INFO_SIZE GK_STRUCT_SIZE(gk_plugin_model_info, hidden_size)
#define GK_PLUGIN_MODEL_INFO_SIZE_1_3 GK_STRUCT_SIZE(gk_plugin_model_info, encoder_frames)

/* One step of one sequence: `tokens` at `positions` (the next positions of the session,
 * starting at its current length), both i32 [count] on the model's device; `logits` is
 * f32 [count, vocab] (every position) or [1, vocab] (the last), contiguous, on the device.
 * The host checks ids and lengths before the call. */
typedef struct gk_model_step_args {
  size_t struct_size;
  void* stream;                 /* native stream of the device; NULL: its default */
  gk_plugin_tensor tokens;
  gk_plugin_tensor positions;
  gk_plugin_tensor logits;
} gk_model_step_args;

#define GK_MODEL_STEP_ARGS_SIZE GK_STRUCT_SIZE(gk_model_step_args, logits)

/* Plugin ABI 1.3: an encoder's input. `features` is f32 [n_mels, frames] on the model's
 * device (any strides; Whisper: log-mel frames, 3000 for a 30 s window); `output`, when
 * its data is not NULL, receives the encoder's final hidden states f32 [positions,
 * hidden] (contiguous; Whisper: positions = frames / 2 rounded up). The host checks
 * n_mels and the frame count against the model before the call. */
typedef struct gk_model_encode_args {
  size_t struct_size;
  void* stream; /* native stream of the device; NULL: its default */
  gk_plugin_tensor features;
  gk_plugin_tensor output;
} gk_model_encode_args;

#define GK_MODEL_ENCODE_ARGS_SIZE GK_STRUCT_SIZE(gk_model_encode_args, output)

typedef struct gk_model_api {
  size_t struct_size;  /* sizeof(gk_model_api) */

  /* Builds a model; *model is the plugin's handle. Checks the config against the
   * weights: a missing tensor is NOT_FOUND, a shape that disagrees INVALID_ARGUMENT,
   * both naming the tensor (and both shapes), with host->report_error. Any thread. */
  gk_status (*model_create)(void* state, const gk_model_create_args* args, void** model);
  void (*model_destroy)(void* model);  /* no session of it is open */
  gk_status (*model_info)(void* model, gk_plugin_model_info* out);

  /* A session holds one sequence and its KV cache for up to `capacity` positions,
   * allocated through host->alloc. Sessions of one model may step concurrently from
   * different threads; one session is stepped by one thread at a time. */
  gk_status (*session_create)(void* model, int64_t capacity, void** session);
  void (*session_destroy)(void* session);
  /* Appends args->tokens to the sequence and writes their logits. */
  gk_status (*session_step)(void* session, const gk_model_step_args* args);

  /* Plugin ABI 1.2: one decode step of `count` distinct sessions of `model` in one forward
   * pass (continuous batching). args->tokens and args->positions are i32 [count]: token i
   * goes to sessions[i] at position args->positions[i], its current length; args->logits is
   * f32 [count, vocab], row i for sessions[i]. Row-wise ops (matmul, norms) see all `count`
   * rows at once; attention and the KV cache stay per session. The host checks ids and
   * that each session has room for one more position. On failure no session's length
   * changes. NULL: the host steps each session alone with session_step. */
  gk_status (*batch_step)(void* model, void* const* sessions, int32_t count,
                          const gk_model_step_args* args);

  /* Plugin ABI 1.3: encoder-decoder models (Whisper). Runs the encoder on args->features
   * and keeps, in the session, what every decoder step attends to (each layer's
   * cross-attention keys and values, computed once here). The session starts a new
   * sequence: its length goes back to 0. NULL for decoder-only plugins and architectures
   * without an encoder (the plugin reports UNIMPLEMENTED for those when non-NULL). */
  gk_status (*session_encode)(void* session, const struct gk_model_encode_args* args);

  /* Plugin ABI 1.4: `dst` (a session of the same model, capacity >= src's length) becomes a
   * copy of `src`'s sequence: its length, the KV cache of every position, and for an
   * encoder-decoder model the encoded window (which both may share, read-only). Queued on
   * `stream` (native; NULL: the device's default). Beam search forks hypotheses with it.
   * NULL: the host reports UNIMPLEMENTED. */
  gk_status (*session_copy)(void* dst, void* src, void* stream);
} gk_model_api;

#define GK_MODEL_API_SIZE GK_STRUCT_SIZE(gk_model_api, session_step)
#define GK_MODEL_API_SIZE_1_2 GK_STRUCT_SIZE(gk_model_api, batch_step)
#define GK_MODEL_API_SIZE_1_3 GK_STRUCT_SIZE(gk_model_api, session_encode)
#define GK_MODEL_API_SIZE_1_4 GK_STRUCT_SIZE(gk_model_api, session_copy)

/* ---------------------------------------------------------------------------------
 * The plugin's function table, returned by gk_plugin_entry. Static storage in the
 * plugin; the host never writes to it.
 * ------------------------------------------------------------------------------- */

typedef struct gk_plugin_api {
  size_t struct_size;     /* sizeof(gk_plugin_api) */
  uint32_t abi_version;   /* the version implemented, within the host's range */
  const char* name;       /* should equal the manifest's name */
  const char* version;

  /* Called once after the entry, before any other call. Returns the plugin's state in
   * *state (may be NULL). A non-OK status (with report_error) skips the plugin. */
  gk_status (*init)(const gk_host_services* host, void** state);

  /* Called once; no call is in flight. Frees what init made. */
  void (*shutdown)(void* state);

  /* Accepts (GK_OK) or declines (GK_UNIMPLEMENTED, with a reason written into
   * reason[0 .. reason_capacity-1], NUL-terminated) a call. When accepting, it may write
   * a short note on how it will serve the call (gk_explain shows it), or leave
   * reason[0] as it was given, NUL. Tensor data may be NULL:
   * decide on dtypes, shapes, strides, attributes and the device only. The core has
   * already checked the op's own rules (argument count, shapes, dtypes agree, attribute
   * values) and hands the attributes normalised (gk_kernel_args.attrs). Any thread,
   * concurrently. */
  gk_status (*supports)(void* state, const gk_kernel_args* args, char* reason,
                        size_t reason_capacity);

  /* Queues the op on args->stream (runs it, on the cpu device). Called only after
   * supports() accepted the same arguments. Any thread, concurrently. A failure
   * returns a status and a message through host->report_error. */
  gk_status (*launch)(void* state, const gk_kernel_args* args);

  /* Plugin ABI 1.1: the model interface, or NULL for a kernel plugin. A model plugin
   * that serves no op declines every supports(). */
  const gk_model_api* model;
} gk_plugin_api;

#define GK_PLUGIN_API_SIZE GK_STRUCT_SIZE(gk_plugin_api, launch)
#define GK_PLUGIN_API_SIZE_1_1 GK_STRUCT_SIZE(gk_plugin_api, model)

/* The exported entry. Returns GK_OK and *api, or declines with a status after
 * host->report_error(). Called once per runtime that loads the plugin. */
typedef gk_status (*gk_plugin_entry_fn)(const gk_host_services* host,
                                        const gk_plugin_api** api);

/* ---------------------------------------------------------------------------------
 * Helpers for plugin authors (header-only).
 * ------------------------------------------------------------------------------- */

/* The version check every gk_plugin_entry starts with: GK_OK when the host accepts the
 * plugin ABI this header implements (GK_PLUGIN_ABI_VERSION); otherwise it reports the
 * plugin's version and the host's range through host->report_error (naming `plugin`) and
 * returns the status the entry should return. */
static inline gk_status gk_plugin_check_host(const gk_host_services* host, const char* plugin) {
  char message[192];
  if (!host) return GK_INVALID_ARGUMENT;
  if (host->struct_size < GK_STRUCT_SIZE(gk_host_services, report_error)) {
    return GK_FAILED_PRECONDITION;
  }
  if (GK_PLUGIN_ABI_VERSION >= host->abi_min && GK_PLUGIN_ABI_VERSION <= host->abi_max) {
    return GK_OK;
  }
  snprintf(message, sizeof(message),
           "%s implements plugin ABI %u.%u, outside the host's range %u.%u .. %u.%u", plugin,
           (unsigned)GK_PLUGIN_ABI_VERSION_MAJOR, (unsigned)GK_PLUGIN_ABI_VERSION_MINOR,
           (unsigned)GK_VERSION_MAJOR(host->abi_min), (unsigned)GK_VERSION_MINOR(host->abi_min),
           (unsigned)GK_VERSION_MAJOR(host->abi_max), (unsigned)GK_VERSION_MINOR(host->abi_max));
  if (host->report_error) host->report_error(host->host_context, message);
  return GK_FAILED_PRECONDITION;
}

/* The attribute called `name`, or NULL. */
static inline const gk_attr* gk_find_attr(const gk_kernel_args* args, const char* name) {
  int32_t i;
  for (i = 0; i < args->num_attrs; ++i) {
    if (strcmp(args->attrs[i].name, name) == 0) return &args->attrs[i];
  }
  return NULL;
}

/* Integer attribute `name`, or `fallback` when absent. */
static inline int64_t gk_attr_int(const gk_kernel_args* args, const char* name,
                                  int64_t fallback) {
  const gk_attr* a = gk_find_attr(args, name);
  return (a && a->type == GK_ATTR_INT) ? a->value.i : fallback;
}

/* Float attribute `name` (an integer one is converted), or `fallback` when absent. */
static inline double gk_attr_float(const gk_kernel_args* args, const char* name,
                                   double fallback) {
  const gk_attr* a = gk_find_attr(args, name);
  if (!a) return fallback;
  if (a->type == GK_ATTR_FLOAT) return a->value.f;
  if (a->type == GK_ATTR_INT) return (double)a->value.i;
  return fallback;
}

/* 1 when the tensor is contiguous row-major. */
static inline int gk_tensor_is_contiguous(const gk_plugin_tensor* t) {
  int64_t expected = 1;
  int32_t d;
  for (d = t->ndim - 1; d >= 0; --d) {
    if (t->shape[d] != 1 && t->strides[d] != expected) return 0;
    expected *= t->shape[d];
  }
  return 1;
}

/* Number of elements. */
static inline int64_t gk_tensor_numel(const gk_plugin_tensor* t) {
  int64_t n = 1;
  int32_t d;
  for (d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_PLUGIN_H_ */
