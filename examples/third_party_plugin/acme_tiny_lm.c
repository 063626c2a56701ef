/*
 * acme_tiny_lm.c — a third-party GPUkit *model* plugin: it serves the architecture
 * "AcmeTinyLM" (its manifest lists it under `architectures`), a language model of two
 * weights and no attention: each token's logits are head · embed[token].
 *
 *   embed.weight  [vocab, hidden]
 *   head.weight   [vocab, hidden]
 *   config.json   {"architectures": ["AcmeTinyLM"], "max_position_embeddings": N}
 *
 * The plugin computes nothing itself: a step calls the ops "embedding" and "matmul"
 * through host->op_call, so each goes to the best kernel plugin of the model's device, and
 * takes its scratch memory from host->alloc. gk_model_load, gk_session_step and
 * gk_session_generate (sampling, stop tokens) then work for the model as for any other.
 * The single exported symbol is gk_plugin_entry.
 */
#include <gpukit/gpukit_plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct acme_model {
  const gk_host_services* host;
  int32_t device;
  int32_t dtype;
  int64_t vocab, hidden, context;
  gk_plugin_tensor embed, head; /* the host's weights, valid until model_destroy */
  int64_t embed_shape[2], embed_strides[2], head_shape[2], head_strides[2];
} acme_model;

typedef struct acme_session {
  acme_model* model;
} acme_session;

static void report(const gk_host_services* host, const char* message) {
  host->report_error(host->host_context, message);
}

static gk_status acme_init(const gk_host_services* host, void** state) {
  if (host->struct_size < GK_HOST_SERVICES_SIZE_1_1 || !host->op_call) {
    report(host, "acme_tiny_lm needs a host with the op-call service (plugin ABI 1.1)");
    return GK_FAILED_PRECONDITION;
  }
  *state = (void*)host;
  return GK_OK;
}

static void acme_shutdown(void* state) {
  (void)state;
}

/* A model plugin serves no op of its own. */
static gk_status acme_supports(void* state, const gk_kernel_args* args, char* reason,
                               size_t reason_capacity) {
  (void)state;
  snprintf(reason, reason_capacity, "acme_tiny_lm is a model plugin, it serves no op (%s)",
           args->op);
  return GK_UNIMPLEMENTED;
}

static gk_status acme_launch(void* state, const gk_kernel_args* args) {
  (void)state;
  (void)args;
  return GK_UNIMPLEMENTED;
}

/* The integer after "key": in a JSON text, or -1. The example reads one key and so gets
 * by with a scan; a real plugin would use a JSON library. */
static int64_t json_int(const char* json, const char* key) {
  char quoted[64];
  const char* at;
  snprintf(quoted, sizeof quoted, "\"%s\"", key);
  at = strstr(json, quoted);
  if (!at) return -1;
  at = strchr(at + strlen(quoted), ':');
  return at ? strtoll(at + 1, NULL, 10) : -1;
}

/* Weight `name` of shape [rows, hidden] (rows given; hidden taken from the first weight
 * when *hidden is 0) into *out, or a status with the reason reported. */
static gk_status find_weight(const gk_host_services* host, const gk_model_create_args* args,
                             const char* name, int64_t* rows, int64_t* hidden,
                             gk_plugin_tensor* out) {
  char message[256];
  int64_t i;
  for (i = 0; i < args->num_weights; ++i) {
    const gk_plugin_tensor* t = &args->weights[i].tensor;
    if (strcmp(args->weights[i].name, name) != 0) continue;
    if (t->ndim != 2) {
      snprintf(message, sizeof message, "acme_tiny_lm: tensor '%s' has %d dimensions; expected 2",
               name, (int)t->ndim);
      report(host, message);
      return GK_INVALID_ARGUMENT;
    }
    if ((*rows && t->shape[0] != *rows) || (*hidden && t->shape[1] != *hidden)) {
      snprintf(message, sizeof message,
               "acme_tiny_lm: tensor '%s' has shape [%lld, %lld]; expected [%lld, %lld] "
               "(vocab, hidden of embed.weight)",
               name, (long long)t->shape[0], (long long)t->shape[1], (long long)*rows,
               (long long)*hidden);
      report(host, message);
      return GK_INVALID_ARGUMENT;
    }
    *rows = t->shape[0];
    *hidden = t->shape[1];
    *out = *t;
    return GK_OK;
  }
  snprintf(message, sizeof message, "acme_tiny_lm: tensor '%s' is missing from the weights",
           name);
  report(host, message);
  return GK_NOT_FOUND;
}

static gk_status model_create(void* state, const gk_model_create_args* args, void** out) {
  const gk_host_services* host = (const gk_host_services*)state;
  acme_model* m;
  gk_status status;
  if (!args || args->struct_size < GK_MODEL_CREATE_ARGS_SIZE || !out) {
    report(host, "acme_tiny_lm: model_create: bad arguments");
    return GK_INVALID_ARGUMENT;
  }
  m = (acme_model*)calloc(1, sizeof *m);
  if (!m) return GK_RESOURCE_EXHAUSTED;
  m->host = host;
  m->device = args->device;
  m->dtype = args->dtype;
  m->context = json_int(args->config_json, "max_position_embeddings");
  if (m->context <= 0) {
    report(host, "acme_tiny_lm: config.json has no positive \"max_position_embeddings\"");
    free(m);
    return GK_INVALID_ARGUMENT;
  }
  status = find_weight(host, args, "embed.weight", &m->vocab, &m->hidden, &m->embed);
  if (status == GK_OK) {
    status = find_weight(host, args, "head.weight", &m->vocab, &m->hidden, &m->head);
  }
  if (status != GK_OK) {
    free(m);
    return status;
  }
  /* The weights' shape and strides live with the host's tensors; keep copies. */
  memcpy(m->embed_shape, m->embed.shape, sizeof m->embed_shape);
  memcpy(m->embed_strides, m->embed.strides, sizeof m->embed_strides);
  memcpy(m->head_shape, m->head.shape, sizeof m->head_shape);
  memcpy(m->head_strides, m->head.strides, sizeof m->head_strides);
  m->embed.shape = m->embed_shape;
  m->embed.strides = m->embed_strides;
  m->head.shape = m->head_shape;
  m->head.strides = m->head_strides;
  *out = m;
  return GK_OK;
}

static void model_destroy(void* model) {
  free(model);
}

static gk_status model_info(void* model, gk_plugin_model_info* out) {
  const acme_model* m = (const acme_model*)model;
  if (!out || out->struct_size < GK_PLUGIN_MODEL_INFO_SIZE) return GK_INVALID_ARGUMENT;
  out->vocab_size = m->vocab;
  out->context_length = m->context;
  out->num_layers = 0;
  out->hidden_size = (int32_t)m->hidden;
  return GK_OK;
}

/* No KV cache: a token's logits depend on that token alone. */
static gk_status session_create(void* model, int64_t capacity, void** out) {
  acme_session* s;
  (void)capacity;
  s = (acme_session*)calloc(1, sizeof *s);
  if (!s) return GK_RESOURCE_EXHAUSTED;
  s->model = (acme_model*)model;
  *out = s;
  return GK_OK;
}

static void session_destroy(void* session) {
  free(session);
}

static gk_status call_op(const acme_model* m, void* stream, const char* op,
                         const gk_plugin_tensor* inputs, int32_t num_inputs,
                         const gk_plugin_tensor* output, const gk_attr* attrs, int32_t num_attrs) {
  gk_kernel_args k;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.op = op;
  k.device = m->device;
  k.stream = stream;
  k.inputs = inputs;
  k.num_inputs = num_inputs;
  k.outputs = output;
  k.num_outputs = 1;
  k.attrs = attrs;
  k.num_attrs = num_attrs;
  return m->host->op_call(m->host->host_context, &k);
}

/* logits [rows, vocab] = embedding(embed, the last `rows` tokens) @ head^T. */
static gk_status session_step(void* session, const gk_model_step_args* args) {
  const acme_model* m = ((acme_session*)session)->model;
  const int64_t count = args->tokens.shape[0], rows = args->logits.shape[0];
  const int64_t element = m->dtype == GK_DTYPE_F32 ? 4 : 2; /* f32, or bf16 / f16 */
  int64_t ids_shape[1], ids_strides[1] = {1}, hidden_shape[2], hidden_strides[2];
  gk_plugin_tensor ids = args->tokens, hidden, inputs[2];
  gk_attr transpose_b;
  void* scratch = NULL;
  gk_status status;

  /* Only the rows the host asks logits for: the last token's, or every token's. */
  ids_shape[0] = rows;
  ids.data = (char*)args->tokens.data + (count - rows) * 4;
  ids.shape = ids_shape;
  ids.strides = ids_strides;

  status = m->host->alloc(m->host->host_context, m->device,
                          (uint64_t)(rows * m->hidden * element), args->stream, &scratch);
  if (status != GK_OK) return status;
  hidden_shape[0] = rows;
  hidden_shape[1] = m->hidden;
  hidden_strides[0] = m->hidden;
  hidden_strides[1] = 1;
  memset(&hidden, 0, sizeof hidden);
  hidden.data = scratch;
  hidden.dtype = m->dtype;
  hidden.ndim = 2;
  hidden.shape = hidden_shape;
  hidden.strides = hidden_strides;

  inputs[0] = m->embed;
  inputs[1] = ids;
  status = call_op(m, args->stream, "embedding", inputs, 2, &hidden, NULL, 0);
  if (status == GK_OK) {
    memset(&transpose_b, 0, sizeof transpose_b);
    transpose_b.name = "transpose_b";
    transpose_b.type = GK_ATTR_INT;
    transpose_b.value.i = 1;
    inputs[0] = hidden;
    inputs[1] = m->head;
    status = call_op(m, args->stream, "matmul", inputs, 2, &args->logits, &transpose_b, 1);
  }
  m->host->free(m->host->host_context, m->device, scratch, args->stream);
  return status; /* an op's failure message is already recorded by the host */
}

/* Designated: entries a later plugin ABI appends stay NULL (the host then does without). */
static const gk_model_api kAcmeModelApi = {
    .struct_size = sizeof(gk_model_api),
    .model_create = model_create,
    .model_destroy = model_destroy,
    .model_info = model_info,
    .session_create = session_create,
    .session_destroy = session_destroy,
    .session_step = session_step,
};

static const gk_plugin_api kAcmeApi = {
    .struct_size = sizeof(gk_plugin_api),
    .abi_version = GK_PLUGIN_ABI_VERSION,
    .name = "acme_tiny_lm",
    .version = "1.0.0",
    .init = acme_init,
    .shutdown = acme_shutdown,
    .supports = acme_supports,
    .launch = acme_launch,
    .model = &kAcmeModelApi,
};

GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                           const gk_plugin_api** api) {
  gk_status status = gk_plugin_check_host(host, "acme_tiny_lm");
  if (status != GK_OK) return status;
  *api = &kAcmeApi;
  return GK_OK;
}
