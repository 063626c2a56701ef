/*
 * sdk_relu_check.c — run by tests/sdk/run_sdk_test.cmake with GPUKIT_PLUGIN_PATH set to
 * the out-of-tree example's build/manifests. Checks that acme_relu is loaded at priority
 * 100, that gk_explain chooses it for relu on the cpu device, and that relu is right.
 */
#include <gpukit/gpukit.h>

#include <stdio.h>
#include <string.h>

#define REQUIRE_OK(call)                                                                \
  do {                                                                                  \
    gk_status s_ = (call);                                                              \
    if (s_ != GK_OK) {                                                                  \
      fprintf(stderr, "FAIL %s: %s: %s\n", #call, gk_status_name(s_), gk_last_error()); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

int main(void) {
  const float x[6] = {-2.0f, -0.5f, 0.0f, 0.25f, 3.0f, -7.0f};
  const float expected[6] = {0.0f, 0.0f, 0.0f, 0.25f, 3.0f, 0.0f};
  float out_host[6];
  gk_runtime* rt;
  gk_tensor_desc d;
  gk_tensor *in, *out;
  gk_op_args args;
  gk_plugin_info info;
  char* json = NULL;
  int32_t i, found = 0;

  REQUIRE_OK(gk_runtime_create(NULL, &rt));

  for (i = 0; i < gk_plugin_count(rt); ++i) {
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    REQUIRE_OK(gk_plugin_get(rt, i, &info));
    if (info.name && strcmp(info.name, "acme_relu") == 0) {
      found = 1;
      printf("acme_relu: loaded=%d priority=%d library=%s reason='%s'\n", (int)info.loaded,
             (int)info.priority, info.library_path ? info.library_path : "",
             info.reason ? info.reason : "");
      if (!info.loaded || info.priority != 100) {
        fprintf(stderr, "FAIL acme_relu is not loaded at priority 100\n");
        return 1;
      }
    }
  }
  if (!found) {
    fprintf(stderr, "FAIL acme_relu not among the %d plugin candidates\n",
            (int)gk_plugin_count(rt));
    return 1;
  }

  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = GK_DTYPE_F32;
  d.ndim = 1;
  d.shape[0] = 6;
  REQUIRE_OK(gk_explain(rt, "relu", 0, &d, 1, &d, 1, NULL, 0, &json));
  printf("explain: %s\n", json);
  if (!strstr(json, "\"chosen\":\"acme_relu\"") && !strstr(json, "\"chosen\": \"acme_relu\"")) {
    fprintf(stderr, "FAIL relu on the cpu device is not served by acme_relu\n");
    gk_string_free(json);
    return 1;
  }
  gk_string_free(json);

  REQUIRE_OK(gk_tensor_create(rt, 0, &d, NULL, &in));
  REQUIRE_OK(gk_tensor_create(rt, 0, &d, NULL, &out));
  REQUIRE_OK(gk_copy_from_host(in, x, sizeof x, NULL));
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.inputs = &in;
  args.num_inputs = 1;
  args.outputs = &out;
  args.num_outputs = 1;
  REQUIRE_OK(gk_op_call(rt, "relu", &args));
  REQUIRE_OK(gk_copy_to_host(out, out_host, sizeof out_host, NULL));
  for (i = 0; i < 6; ++i) {
    if (out_host[i] != expected[i]) {
      fprintf(stderr, "FAIL relu(%g) = %g, expected %g\n", x[i], out_host[i], expected[i]);
      return 1;
    }
  }
  gk_tensor_release(in);
  gk_tensor_release(out);
  gk_runtime_destroy(rt);
  printf("acme_relu served relu correctly\n");
  return 0;
}
