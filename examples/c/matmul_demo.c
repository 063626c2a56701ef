/*
 * matmul_demo.c — one matmul through the GPUkit C ABI on the best device and on the cpu
 * device, printing which plugin served each (gk_explain "chosen") and the largest
 * absolute difference between the two results.
 *
 *   matmul_demo [M [N [K]]]      default 512 512 512, f32, random inputs in [-1, 1)
 *
 * Exits 0 when the results agree within 1e-3 * sqrt(K), 1 on any failure.
 */
#include <gpukit/gpukit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                             \
  do {                                                                                          \
    gk_status check_status_ = (call);                                                           \
    if (check_status_ != GK_OK) {                                                               \
      fprintf(stderr, "matmul_demo: %s failed: %s: %s\n", #call, gk_status_name(check_status_), \
              gk_last_error());                                                                 \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

static gk_tensor_desc matrix_desc(int64_t rows, int64_t cols) {
  gk_tensor_desc d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = GK_DTYPE_F32;
  d.ndim = 2;
  d.shape[0] = rows;
  d.shape[1] = cols;
  return d;
}

/* Copies the "chosen" plugin name out of gk_explain's JSON into out ("(none)" if null).
 * The key is the one followed by ':' — candidates also carry the value "chosen". */
static void chosen_plugin(const char* json, char* out, size_t capacity) {
  const char* p = json;
  snprintf(out, capacity, "(none)");
  while ((p = strstr(p, "\"chosen\"")) != NULL) {
    p += 8;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') ++p;
    if (*p != ':') continue;
    ++p;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') ++p;
    if (*p != '"') return; /* null: no plugin accepts */
    ++p;
    const char* end = strchr(p, '"');
    if (!end) return;
    size_t n = (size_t)(end - p) < capacity - 1 ? (size_t)(end - p) : capacity - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return;
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Runs out = a · b on `device`; fills `c` (M×N) and the serving plugin's name. */
static void run_matmul(gk_runtime* rt, int32_t device, int64_t m, int64_t n, int64_t k,
                       const float* a_host, const float* b_host, float* c_host, char* plugin,
                       size_t plugin_capacity, double* ms) {
  gk_tensor_desc descs[3] = {matrix_desc(m, k), matrix_desc(k, n), matrix_desc(m, n)};
  gk_stream* stream;
  gk_tensor *a, *b, *c;
  char* json = NULL;

  CHECK(gk_explain(rt, "matmul", device, descs, 2, &descs[2], 1, NULL, 0, &json));
  chosen_plugin(json, plugin, plugin_capacity);
  gk_string_free(json);

  CHECK(gk_stream_create(rt, device, 0, &stream));
  CHECK(gk_tensor_create(rt, device, &descs[0], stream, &a));
  CHECK(gk_tensor_create(rt, device, &descs[1], stream, &b));
  CHECK(gk_tensor_create(rt, device, &descs[2], stream, &c));
  CHECK(gk_copy_from_host(a, a_host, (uint64_t)(m * k) * sizeof(float), stream));
  CHECK(gk_copy_from_host(b, b_host, (uint64_t)(k * n) * sizeof(float), stream));

  gk_tensor* inputs[2] = {a, b};
  gk_op_args args;
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.inputs = inputs;
  args.num_inputs = 2;
  args.outputs = &c;
  args.num_outputs = 1;
  args.stream = stream;
  /* Once to warm up (kernel loading, pool growth), once timed. */
  CHECK(gk_op_call(rt, "matmul", &args));
  CHECK(gk_stream_synchronize(stream));
  double t0 = now_ms();
  CHECK(gk_op_call(rt, "matmul", &args));
  CHECK(gk_stream_synchronize(stream));
  *ms = now_ms() - t0;

  CHECK(gk_copy_to_host(c, c_host, (uint64_t)(m * n) * sizeof(float), stream));
  CHECK(gk_stream_synchronize(stream));
  gk_tensor_release(a);
  gk_tensor_release(b);
  gk_tensor_release(c);
  CHECK(gk_stream_destroy(stream));
}

/* Largest |got - ref|; NaN counts as infinitely wrong. */
static double max_abs_error(const float* got, const double* ref, int64_t count) {
  double worst = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    double e = fabs((double)got[i] - ref[i]);
    if (e != e) return INFINITY;
    if (e > worst) worst = e;
  }
  return worst;
}

static int64_t arg_or(int argc, char** argv, int i, int64_t fallback) {
  if (argc <= i) return fallback;
  long long v = atoll(argv[i]);
  if (v <= 0) {
    fprintf(stderr, "matmul_demo: '%s' is not a positive size\n", argv[i]);
    exit(1);
  }
  return (int64_t)v;
}

int main(int argc, char** argv) {
  const int64_t m = arg_or(argc, argv, 1, 512);
  const int64_t n = arg_or(argc, argv, 2, m);
  const int64_t k = arg_or(argc, argv, 3, m);
  gk_runtime* rt;
  gk_device_props props;
  char best_plugin[128], cpu_plugin[128];
  double best_ms = 0, cpu_ms = 0;
  int64_t i;

  CHECK(gk_runtime_create(NULL, &rt));
  const int32_t best = gk_device_default(rt);
  memset(&props, 0, sizeof props);
  props.struct_size = sizeof props;
  CHECK(gk_device_get_props(rt, best, &props));

  float* a = malloc(sizeof(float) * (size_t)(m * k));
  float* b = malloc(sizeof(float) * (size_t)(k * n));
  float* c_best = malloc(sizeof(float) * (size_t)(m * n));
  float* c_cpu = malloc(sizeof(float) * (size_t)(m * n));
  if (!a || !b || !c_best || !c_cpu) {
    fprintf(stderr, "matmul_demo: out of host memory\n");
    return 1;
  }
  srand(42);
  for (i = 0; i < m * k; ++i) a[i] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;
  for (i = 0; i < k * n; ++i) b[i] = 2.0f * (float)rand() / (float)RAND_MAX - 1.0f;

  printf("matmul f32 [%lld x %lld] x [%lld x %lld]\n", (long long)m, (long long)k, (long long)k,
         (long long)n);
  run_matmul(rt, best, m, n, k, a, b, c_best, best_plugin, sizeof best_plugin, &best_ms);
  char sm[32] = "";
  if (props.sm_version) {
    snprintf(sm, sizeof sm, ", SM %d.%d", props.sm_version / 10, props.sm_version % 10);
  }
  printf("  best device %d (%s%s): plugin %s, %.3f ms\n", best, props.name, sm, best_plugin,
         best_ms);

  /* A plain float64 product: the reference both devices are judged against, so the
   * check means something on a machine whose best device is the cpu itself. */
  double* ref = malloc(sizeof(double) * (size_t)(m * n));
  if (!ref) {
    fprintf(stderr, "matmul_demo: out of host memory\n");
    return 1;
  }
  for (i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) acc += (double)a[i * k + p] * (double)b[p * n + j];
      ref[i * n + j] = acc;
    }
  }
  const double max_err = max_abs_error(c_best, ref, m * n);
  if (best != 0) {
    run_matmul(rt, 0, m, n, k, a, b, c_cpu, cpu_plugin, sizeof cpu_plugin, &cpu_ms);
    printf("  cpu device 0: plugin %s, %.3f ms, max abs error vs float64 %.3g\n", cpu_plugin,
           cpu_ms, max_abs_error(c_cpu, ref, m * n));
  }
  const double tolerance = 1e-3 * sqrt((double)k);
  printf("  device %d: max abs error vs float64 reference %.3g (tolerance %.3g)\n", best,
         max_err, tolerance);
  free(ref);

  free(a);
  free(b);
  free(c_best);
  free(c_cpu);
  gk_runtime_destroy(rt);
  return max_err <= tolerance ? 0 : 1;
}
