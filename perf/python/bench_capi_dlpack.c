/*
 * bench_capi_dlpack.c — host cost of the C ABI calls behind the Python fast paths, with
 * no Python in the way:
 *
 *   1. DLPack round trip: gk_tensor_to_dlpack_versioned + gk_tensor_from_dlpack_versioned
 *      + gk_tensor_release (which calls the export's deleter). This is the "C-level
 *      export+import" number of issue 5 (target <= 100 ns).
 *   2. The export alone: gk_tensor_to_dlpack_versioned + the deleter.
 *   3. A 1-element add: gk_op_call with the output allocated once up front.
 *   4. gk_op_output_desc for that add.
 *   5. gk_tensor_create of a 1-element output + gk_tensor_release (the allocation an op
 *      call from Python made for its output before ABI 1.2).
 *   6. A 1-element add through gk_op_call_alloc (ABI 1.2: creates the output and runs the
 *      op, what an op call from Python makes now) + gk_tensor_release of the output.
 *
 *   bench_capi_dlpack [--device cpu|cuda] [--batches N] [--batch N]
 *
 * Each case runs `batch` calls per sample, `batches` samples; it prints the median and the
 * minimum per call in ns (clock_gettime(CLOCK_MONOTONIC)).
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpukit/gpukit.h"
#include "gpukit/gpukit_dlpack.h"

static void check(gk_status s, const char* what) {
  if (s != GK_OK) {
    fprintf(stderr, "%s failed: %s: %s\n", what, gk_status_name(s), gk_last_error());
    exit(1);
  }
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The state every case reads. */
typedef struct bench {
  gk_runtime* runtime;
  gk_tensor* big;   /* 1024 x 1024 f32, as in bench_dlpack.py */
  gk_tensor* a;     /* [1] f32 */
  gk_tensor* b;
  gk_tensor* out;
  gk_op_args add_args;
} bench;

static void round_trip(bench* s) {
  DLManagedTensorVersioned* m = NULL;
  gk_tensor* t = NULL;
  check(gk_tensor_to_dlpack_versioned(s->big, 0, &m), "gk_tensor_to_dlpack_versioned");
  check(gk_tensor_from_dlpack_versioned(s->runtime, m, &t), "gk_tensor_from_dlpack_versioned");
  gk_tensor_release(t);
}

static void export_only(bench* s) {
  DLManagedTensorVersioned* m = NULL;
  check(gk_tensor_to_dlpack_versioned(s->big, 0, &m), "gk_tensor_to_dlpack_versioned");
  m->deleter(m);
}

static void add_call(bench* s) { check(gk_op_call(s->runtime, "add", &s->add_args), "gk_op_call"); }

static void add_output_desc(bench* s) {
  gk_tensor_desc d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  check(gk_op_output_desc(s->runtime, "add", &s->add_args, 0, &d), "gk_op_output_desc");
}

static void add_call_alloc(bench* s) {
  gk_tensor* out = NULL;
  check(gk_op_call_alloc(s->runtime, "add", &s->add_args, 1, &out, NULL), "gk_op_call_alloc");
  gk_tensor_release(out);
}

static void create_release(bench* s) {
  gk_tensor_desc d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.dtype = GK_DTYPE_F32;
  d.ndim = 1;
  d.shape[0] = 1;
  gk_tensor* t = NULL;
  check(gk_tensor_create(s->runtime, gk_tensor_device(s->a), &d, NULL, &t), "gk_tensor_create");
  gk_tensor_release(t);
}

static void run_case(const char* name, void (*fn)(bench*), bench* s, int batches, int batch) {
  for (int i = 0; i < batch; ++i) fn(s); /* warm-up */
  double* samples = malloc(sizeof(double) * (size_t)batches);
  for (int k = 0; k < batches; ++k) {
    double t0 = now_ns();
    for (int i = 0; i < batch; ++i) fn(s);
    samples[k] = (now_ns() - t0) / batch;
  }
  qsort(samples, (size_t)batches, sizeof(double), compare_doubles);
  double median = batches % 2 ? samples[batches / 2]
                              : 0.5 * (samples[batches / 2 - 1] + samples[batches / 2]);
  printf("%-62s %9.1f ns/op  (min %.1f, %d x %d)\n", name, median, samples[0], batches, batch);
  free(samples);
}

static gk_tensor* make_tensor(bench* s, int32_t device, int32_t ndim, const int64_t* shape,
                              float fill) {
  gk_tensor_desc d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.dtype = GK_DTYPE_F32;
  d.ndim = ndim;
  uint64_t n = 1;
  for (int32_t k = 0; k < ndim; ++k) d.shape[k] = shape[k], n *= (uint64_t)shape[k];
  gk_tensor* t = NULL;
  check(gk_tensor_create(s->runtime, device, &d, NULL, &t), "gk_tensor_create");
  float* host = malloc(sizeof(float) * n);
  for (uint64_t i = 0; i < n; ++i) host[i] = fill;
  check(gk_copy_from_host(t, host, sizeof(float) * n, NULL), "gk_copy_from_host");
  free(host);
  return t;
}

int main(int argc, char** argv) {
  const char* device_kind = "cpu";
  int batches = 30, batch = 20000;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) {
      device_kind = argv[++i];
    } else if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
      batches = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
      batch = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--device cpu|cuda] [--batches N] [--batch N]\n", argv[0]);
      return 2;
    }
  }
  if (batches < 1 || batch < 1) {
    fprintf(stderr, "--batches and --batch must be >= 1\n");
    return 2;
  }

  bench s;
  memset(&s, 0, sizeof(s));
  gk_runtime_options options = GK_RUNTIME_OPTIONS_INIT;
  options.devices = strcmp(device_kind, "cuda") == 0 ? "all" : "cpu";
  options.log_level = GK_LOG_WARNING;
  check(gk_runtime_create(&options, &s.runtime), "gk_runtime_create");
  int32_t device = strcmp(device_kind, "cuda") == 0 ? gk_device_default(s.runtime) : 0;
  gk_device_props props;
  memset(&props, 0, sizeof(props));
  props.struct_size = sizeof(props);
  check(gk_device_get_props(s.runtime, device, &props), "gk_device_get_props");
  printf("gpukit %s, device %d (%s)\n", gk_library_version(), device, props.name);

  const int64_t big_shape[2] = {1024, 1024};
  const int64_t one[1] = {1};
  s.big = make_tensor(&s, device, 2, big_shape, 1.0f);
  s.a = make_tensor(&s, device, 1, one, 1.0f);
  s.b = make_tensor(&s, device, 1, one, 2.0f);
  s.out = make_tensor(&s, device, 1, one, 0.0f);
  static gk_tensor* inputs[2];
  static gk_tensor* outputs[1];
  inputs[0] = s.a;
  inputs[1] = s.b;
  outputs[0] = s.out;
  memset(&s.add_args, 0, sizeof(s.add_args));
  s.add_args.struct_size = sizeof(gk_op_args);
  s.add_args.inputs = inputs;
  s.add_args.num_inputs = 2;
  s.add_args.outputs = outputs;
  s.add_args.num_outputs = 1;

  run_case("C: to_dlpack_versioned + from_dlpack_versioned + release", round_trip, &s, batches,
           batch);
  run_case("C: to_dlpack_versioned + deleter", export_only, &s, batches, batch);
  run_case("C: gk_op_call add, 1 element, output preallocated", add_call, &s, batches, batch);
  run_case("C: gk_op_output_desc add, 1 element", add_output_desc, &s, batches, batch);
  run_case("C: gk_tensor_create [1] f32 + gk_tensor_release", create_release, &s, batches, batch);
  run_case("C: gk_op_call_alloc add, 1 element + gk_tensor_release", add_call_alloc, &s, batches,
           batch);

  gk_tensor_release(s.big);
  gk_tensor_release(s.a);
  gk_tensor_release(s.b);
  gk_tensor_release(s.out);
  gk_runtime_destroy(s.runtime);
  return 0;
}
