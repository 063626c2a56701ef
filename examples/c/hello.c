/* hello.c — add two vectors through the GPUkit C ABI, on the best device there is. */
#include <gpukit/gpukit.h>
#include <stdio.h>

#define CHECK(call) if ((call) != GK_OK) { fprintf(stderr, "%s\n", gk_last_error()); return 1; }

int main(void) {
  gk_runtime* rt; gk_stream* s; gk_tensor *a, *b, *c;
  float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40}, z[4];
  gk_tensor_desc desc = {.struct_size = sizeof desc, .dtype = GK_DTYPE_F32, .ndim = 1,
                         .shape = {4}};
  CHECK(gk_runtime_create(NULL, &rt));
  int32_t dev = gk_device_default(rt);
  CHECK(gk_stream_create(rt, dev, 0, &s));
  CHECK(gk_tensor_create(rt, dev, &desc, s, &a)); CHECK(gk_tensor_create(rt, dev, &desc, s, &b));
  CHECK(gk_tensor_create(rt, dev, &desc, s, &c));
  CHECK(gk_copy_from_host(a, x, sizeof x, s)); CHECK(gk_copy_from_host(b, y, sizeof y, s));
  gk_tensor* in[2] = {a, b};
  gk_op_args args = {.struct_size = sizeof args, .inputs = in, .num_inputs = 2,
                     .outputs = &c, .num_outputs = 1, .stream = s};
  CHECK(gk_op_call(rt, "add", &args));
  CHECK(gk_copy_to_host(c, z, sizeof z, s)); CHECK(gk_stream_synchronize(s));
  printf("device %d: %g %g %g %g\n", dev, z[0], z[1], z[2], z[3]);
  gk_tensor_release(a); gk_tensor_release(b); gk_tensor_release(c);
  gk_stream_destroy(s); gk_runtime_destroy(rt);
  return 0;
}
