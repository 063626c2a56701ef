/*
 * fixture_plugin.c — one source for every loader fixture; FX_NAME and FX_MODE pick the
 * behaviour:
 *   FX_MODE_VALID      serves neg for contiguous f32 (out = -x)
 *   FX_MODE_NO_ENTRY   exports a misspelled entry symbol only
 *   FX_MODE_WRONG_ABI  answers with plugin ABI version 99.0
 *   FX_MODE_INIT_FAILS init reports "fixture init failure" and fails
 *   FX_MODE_UNDEFINED  needs gk_fixture_symbol_nobody_defines, which no library has, so
 *                      loading with immediate binding fails naming it
 *   FX_MODE_NEEDS_DEP  FX_MODE_VALID whose init calls gk_fixture_dep_value() of
 *                      libfx_required_dep.so (DT_NEEDED, no RUNPATH to it): it loads only when
 *                      the runtime opened that library first (the manifest's `requires`)
 */
#include <gpukit/gpukit_plugin.h>

#include <stdio.h>
#include <string.h>

#define FX_MODE_VALID 0
#define FX_MODE_NO_ENTRY 1
#define FX_MODE_WRONG_ABI 2
#define FX_MODE_INIT_FAILS 3
#define FX_MODE_UNDEFINED 4
#define FX_MODE_NEEDS_DEP 5

#ifndef FX_NAME
#error "FX_NAME must be defined"
#endif
#ifndef FX_MODE
#define FX_MODE FX_MODE_VALID
#endif

#if FX_MODE == FX_MODE_UNDEFINED
void gk_fixture_symbol_nobody_defines(void);
#endif
#if FX_MODE == FX_MODE_NEEDS_DEP
int gk_fixture_dep_value(void);
#endif

static gk_status fx_init(const gk_host_services* host, void** state) {
  *state = NULL;
#if FX_MODE == FX_MODE_UNDEFINED
  gk_fixture_symbol_nobody_defines();
#endif
#if FX_MODE == FX_MODE_NEEDS_DEP
  if (gk_fixture_dep_value() != 42) {
    host->report_error(host->host_context, "libfx_required_dep.so answered wrongly");
    return GK_INTERNAL;
  }
#endif
#if FX_MODE == FX_MODE_INIT_FAILS
  host->report_error(host->host_context, "fixture init failure");
  return GK_INTERNAL;
#else
  (void)host;
  return GK_OK;
#endif
}

static void fx_shutdown(void* state) { (void)state; }

static gk_status fx_supports(void* state, const gk_kernel_args* args, char* reason,
                             size_t reason_capacity) {
  (void)state;
  if (strcmp(args->op, "neg") != 0) {
    snprintf(reason, reason_capacity, "%s serves neg only", FX_NAME);
    return GK_UNIMPLEMENTED;
  }
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->inputs[0].dtype != GK_DTYPE_F32 ||
      !gk_tensor_is_contiguous(&args->inputs[0]) || !gk_tensor_is_contiguous(&args->outputs[0])) {
    snprintf(reason, reason_capacity, "%s takes contiguous f32 only", FX_NAME);
    return GK_UNIMPLEMENTED;
  }
  return GK_OK;
}

static gk_status fx_launch(void* state, const gk_kernel_args* args) {
  const float* x = (const float*)args->inputs[0].data;
  float* out = (float*)args->outputs[0].data;
  int64_t i, n = gk_tensor_numel(&args->inputs[0]);
  (void)state;
  for (i = 0; i < n; ++i) out[i] = -x[i];
  return GK_OK;
}

static const gk_plugin_api kApi = {
    sizeof(gk_plugin_api),
#if FX_MODE == FX_MODE_WRONG_ABI
    GK_MAKE_VERSION(99, 0),
#else
    GK_PLUGIN_ABI_VERSION,
#endif
    FX_NAME,
    "0.0.1",
    fx_init,
    fx_shutdown,
    fx_supports,
    fx_launch};

#if FX_MODE == FX_MODE_NO_ENTRY
GK_PLUGIN_EXPORT gk_status gk_plugin_entry_misspelled(const gk_host_services* host,
                                                       const gk_plugin_api** api) {
  (void)host;
  *api = &kApi;
  return GK_OK;
}
#else
GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                           const gk_plugin_api** api) {
  (void)host;
  *api = &kApi;
  return GK_OK;
}
#endif
