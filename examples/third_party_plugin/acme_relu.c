/*
 * acme_relu.c — a third-party GPUkit plugin: relu (out = max(x, 0)) on the cpu device,
 * f32 and f64, any strides. The single exported symbol is gk_plugin_entry.
 */
#include <gpukit/gpukit_plugin.h>

#include <stdio.h>

static const gk_host_services* g_host; /* valid from init until shutdown returns */

static gk_status acme_init(const gk_host_services* host, void** state) {
  g_host = host;
  *state = NULL;
  host->log(host->host_context, GK_LOG_DEBUG, "acme_relu ready");
  return GK_OK;
}

static void acme_shutdown(void* state) {
  (void)state;
  g_host = NULL;
}

static gk_status acme_supports(void* state, const gk_kernel_args* args, char* reason,
                               size_t reason_capacity) {
  int32_t dtype;
  (void)state;
  if (strcmp(args->op, "relu") != 0) {
    snprintf(reason, reason_capacity, "acme_relu serves relu only, not %s", args->op);
    return GK_UNIMPLEMENTED;
  }
  dtype = args->inputs[0].dtype;
  if (dtype != GK_DTYPE_F32 && dtype != GK_DTYPE_F64) {
    /* (plugins do not link libgpukit, so no gk_dtype_name here) */
    snprintf(reason, reason_capacity, "acme_relu takes f32 or f64, not dtype %d", (int)dtype);
    return GK_UNIMPLEMENTED;
  }
  return GK_OK;
}

/* Byte offset of element `linear` (row-major order over `shape`) under `strides`. */
static int64_t element_offset(const gk_plugin_tensor* t, int64_t linear) {
  int64_t offset = 0;
  int32_t d;
  for (d = t->ndim - 1; d >= 0; --d) {
    offset += (linear % t->shape[d]) * t->strides[d];
    linear /= t->shape[d];
  }
  return offset;
}

static gk_status acme_launch(void* state, const gk_kernel_args* args) {
  const gk_plugin_tensor* x = &args->inputs[0];
  const gk_plugin_tensor* out = &args->outputs[0];
  int64_t i, n = gk_tensor_numel(x);
  (void)state;
  for (i = 0; i < n; ++i) {
    int64_t xi = element_offset(x, i), oi = element_offset(out, i);
    if (x->dtype == GK_DTYPE_F32) {
      float v = ((const float*)x->data)[xi];
      ((float*)out->data)[oi] = v > 0.0f ? v : (v == v ? 0.0f : v); /* NaN propagates */
    } else {
      double v = ((const double*)x->data)[xi];
      ((double*)out->data)[oi] = v > 0.0 ? v : (v == v ? 0.0 : v);
    }
  }
  return GK_OK;
}

static const gk_plugin_api kAcmeApi = {
    sizeof(gk_plugin_api), GK_PLUGIN_ABI_VERSION, "acme_relu", "1.0.0", acme_init,
    acme_shutdown,         acme_supports,         acme_launch};

GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                           const gk_plugin_api** api) {
  gk_status status = gk_plugin_check_host(host, "acme_relu");
  if (status != GK_OK) return status;
  *api = &kAcmeApi;
  return GK_OK;
}
