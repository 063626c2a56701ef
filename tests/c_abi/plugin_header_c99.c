/*
 * plugin_header_c99.c — gpukit_plugin.h compiles as strict C99 (-pedantic -Werror) and its
 * header-only helpers work from C. Needs no library: the helpers are static inline.
 */
#include <gpukit/gpukit_plugin.h>

#include <stdio.h>

static gk_status entry_signature_check(const gk_host_services* host, const gk_plugin_api** api) {
  (void)host;
  *api = NULL;
  return GK_UNIMPLEMENTED;
}

int main(void) {
  int64_t shape[3] = {2, 3, 4};
  int64_t strides[3] = {12, 4, 1};
  int64_t transposed[3] = {12, 1, 3};
  int64_t ints[2] = {0, 1};
  gk_plugin_tensor t;
  gk_attr attrs[3];
  gk_kernel_args args;
  gk_plugin_entry_fn entry = entry_signature_check;
  const gk_plugin_api* api = NULL;
  int failures = 0;

  memset(&t, 0, sizeof t);
  t.dtype = GK_DTYPE_F32;
  t.ndim = 3;
  t.shape = shape;
  t.strides = strides;
  if (gk_tensor_numel(&t) != 24) ++failures;
  if (!gk_tensor_is_contiguous(&t)) ++failures;
  t.strides = transposed;
  if (gk_tensor_is_contiguous(&t)) ++failures;

  memset(attrs, 0, sizeof attrs);
  attrs[0].name = "eps";
  attrs[0].type = GK_ATTR_FLOAT;
  attrs[0].value.f = 0.5;
  attrs[1].name = "axis";
  attrs[1].type = GK_ATTR_INT;
  attrs[1].value.i = -1;
  attrs[2].name = "axes";
  attrs[2].type = GK_ATTR_INTS;
  attrs[2].count = 2;
  attrs[2].value.ints = ints;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.attrs = attrs;
  args.num_attrs = 3;
  if (gk_attr_float(&args, "eps", 1.0) != 0.5) ++failures;
  if (gk_attr_float(&args, "axis", 1.0) != -1.0) ++failures; /* int converts */
  if (gk_attr_int(&args, "axis", 0) != -1) ++failures;
  if (gk_attr_int(&args, "missing", 7) != 7) ++failures;
  if (gk_attr_int(&args, "eps", 7) != 7) ++failures; /* wrong type: fallback */
  if (gk_find_attr(&args, "axes") != &attrs[2]) ++failures;
  if (entry(NULL, &api) == GK_OK || api != NULL) ++failures;
  if (GK_KERNEL_ARGS_SIZE > sizeof(gk_kernel_args)) ++failures;

  if (failures) {
    fprintf(stderr, "%d plugin-header helper check(s) failed\n", failures);
    return 1;
  }
  printf("gpukit_plugin.h: C99 helpers ok\n");
  return 0;
}
