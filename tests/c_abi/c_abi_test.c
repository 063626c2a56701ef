/*
 * c_abi_test.c — the runtime C ABI from plain C99: only <gpukit/gpukit.h>, libgpukit,
 * -std=c99 -Wall -Wextra -pedantic -Werror.
 *
 * Creates a runtime, allocates tensors, copies in, runs "add" on the cpu device and on
 * the default device, reads back and checks; then checks the error model: a bad shape
 * is INVALID_ARGUMENT naming the op, an unknown op is NOT_FOUND naming it, a stale
 * buffer handle is INVALID_ARGUMENT, and a struct_size-versioned call still works; opens a
 * small SafeTensors file as weights.
 * Prints one line per check; exits 1 on the first failure.
 */
#include <gpukit/gpukit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;

#define EXPECT(cond, ...)                                             \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

#define REQUIRE_OK(call)                                                             \
  do {                                                                               \
    gk_status require_status_ = (call);                                              \
    if (require_status_ != GK_OK) {                                                  \
      fprintf(stderr, "FAIL %s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call, \
              gk_status_name(require_status_), gk_last_error());                     \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

static gk_tensor_desc desc2(int32_t dtype, int64_t rows, int64_t cols) {
  gk_tensor_desc d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = dtype;
  d.ndim = 2;
  d.shape[0] = rows;
  d.shape[1] = cols;
  return d;
}

static gk_op_args op_args(gk_tensor* const* inputs, int32_t num_inputs, gk_tensor* const* outputs,
                          int32_t num_outputs, gk_stream* stream) {
  gk_op_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  a.inputs = inputs;
  a.num_inputs = num_inputs;
  a.outputs = outputs;
  a.num_outputs = num_outputs;
  a.stream = stream;
  return a;
}

/* add on `device`: [3,4] + [1,4] (broadcast) → [3,4]. */
static void check_add(gk_runtime* rt, int32_t device) {
  float a_host[12], b_host[4], out_host[12];
  gk_tensor_desc a_desc = desc2(GK_DTYPE_F32, 3, 4);
  gk_tensor_desc b_desc = desc2(GK_DTYPE_F32, 1, 4);
  gk_tensor *a, *b, *out;
  gk_stream* stream;
  gk_tensor* inputs[2];
  gk_op_args args;
  int i;

  for (i = 0; i < 12; ++i) a_host[i] = (float)i;
  for (i = 0; i < 4; ++i) b_host[i] = 100.0f * (float)(i + 1);

  REQUIRE_OK(gk_stream_create(rt, device, 0, &stream));
  REQUIRE_OK(gk_tensor_create(rt, device, &a_desc, stream, &a));
  REQUIRE_OK(gk_tensor_create(rt, device, &b_desc, stream, &b));
  REQUIRE_OK(gk_tensor_create(rt, device, &a_desc, stream, &out));
  EXPECT(gk_tensor_device(a) == device, "tensor on device %d", gk_tensor_device(a));
  REQUIRE_OK(gk_copy_from_host(a, a_host, sizeof a_host, stream));
  REQUIRE_OK(gk_copy_from_host(b, b_host, sizeof b_host, stream));

  inputs[0] = a;
  inputs[1] = b;
  args = op_args(inputs, 2, &out, 1, stream);
  REQUIRE_OK(gk_op_call(rt, "add", &args));
  REQUIRE_OK(gk_copy_to_host(out, out_host, sizeof out_host, stream));
  REQUIRE_OK(gk_stream_synchronize(stream));
  for (i = 0; i < 12; ++i) {
    float expected = (float)i + 100.0f * (float)(i % 4 + 1);
    EXPECT(out_host[i] == expected, "device %d: out[%d] = %g, expected %g", device, i, out_host[i],
           expected);
  }

  gk_tensor_release(a);
  gk_tensor_release(b);
  gk_tensor_release(out);
  REQUIRE_OK(gk_stream_destroy(stream));
  printf("ok   add [3,4] + [1,4] on device %d\n", device);
}

static void check_errors(gk_runtime* rt) {
  gk_tensor_desc a_desc = desc2(GK_DTYPE_F32, 2, 3);
  gk_tensor_desc b_desc = desc2(GK_DTYPE_F32, 4, 5);
  gk_tensor *a, *b, *out;
  gk_tensor* inputs[2];
  gk_op_args args;
  gk_status status;

  REQUIRE_OK(gk_tensor_create(rt, 0, &a_desc, NULL, &a));
  REQUIRE_OK(gk_tensor_create(rt, 0, &b_desc, NULL, &b));
  REQUIRE_OK(gk_tensor_create(rt, 0, &a_desc, NULL, &out));
  inputs[0] = a;
  inputs[1] = b;
  args = op_args(inputs, 2, &out, 1, NULL);

  status = gk_op_call(rt, "add", &args);
  EXPECT(status == GK_INVALID_ARGUMENT, "bad shape gave %s", gk_status_name(status));
  EXPECT(strstr(gk_last_error(), "add") != NULL, "message does not name the op: '%s'",
         gk_last_error());
  printf("ok   add [2,3] + [4,5] -> %s: %s\n", gk_status_name(status), gk_last_error());

  status = gk_op_call(rt, "no_such_op_xyz", &args);
  EXPECT(status == GK_NOT_FOUND, "unknown op gave %s", gk_status_name(status));
  EXPECT(strstr(gk_last_error(), "no_such_op_xyz") != NULL, "message does not name it: '%s'",
         gk_last_error());
  printf("ok   no_such_op_xyz -> %s: %s\n", gk_status_name(status), gk_last_error());

  /* A successful call after a failed one still works. */
  args.num_inputs = 1;
  status = gk_op_call(rt, "neg", &args);
  EXPECT(status == GK_OK, "neg after errors gave %s: %s", gk_status_name(status), gk_last_error());

  gk_tensor_release(a);
  gk_tensor_release(b);
  gk_tensor_release(out);
}

static void check_buffers(gk_runtime* rt) {
  gk_alloc_args alloc;
  gk_buffer* buffer;
  uint64_t size = 0;
  gk_status status;

  memset(&alloc, 0, sizeof alloc);
  alloc.struct_size = GK_ALLOC_ARGS_SIZE; /* the 1.0 size: struct_size versioning */
  alloc.device = 0;
  alloc.size = 1000;
  REQUIRE_OK(gk_buffer_alloc(rt, &alloc, &buffer));
  REQUIRE_OK(gk_buffer_size(buffer, &size));
  EXPECT(size >= 1000, "buffer size %llu", (unsigned long long)size);
  REQUIRE_OK(gk_buffer_free(buffer, NULL));
  status = gk_buffer_free(buffer, NULL);
  EXPECT(status == GK_INVALID_ARGUMENT, "double free gave %s", gk_status_name(status));
  EXPECT(strlen(gk_last_error()) > 0, "double free left no message");
  printf("ok   buffer alloc/free, double free -> %s\n", gk_status_name(status));
}

/* ABI 1.3: host memory from gk_host_alloc, a copy in and out of it, the transfer counters. */
static void check_transfers(gk_runtime* rt, int32_t device) {
  const uint64_t count = 4099; /* odd: no size is a multiple of a chunk or a page */
  gk_tensor_desc d = desc2(GK_DTYPE_U8, 1, (int64_t)count);
  gk_tensor* t = NULL;
  gk_transfer_stats before, after;
  void *in_memory = NULL, *out_memory = NULL;
  unsigned char *in, *out;
  void* empty = &empty;
  uint64_t i;

  REQUIRE_OK(gk_host_alloc(rt, count, &in_memory));
  REQUIRE_OK(gk_host_alloc(rt, count, &out_memory));
  in = (unsigned char*)in_memory;
  out = (unsigned char*)out_memory;
  EXPECT(((uintptr_t)in & 4095u) == 0, "gk_host_alloc gave %p, not 4096-aligned", (void*)in);
  for (i = 0; i < count; ++i) {
    in[i] = (unsigned char)(i * 7u + 1u);
    out[i] = 0;
  }
  memset(&before, 0, sizeof before);
  before.struct_size = sizeof before;
  after = before;
  REQUIRE_OK(gk_transfer_stats_get(rt, device, &before));
  REQUIRE_OK(gk_tensor_create(rt, device, &d, NULL, &t));
  REQUIRE_OK(gk_copy_from_host(t, in, count, NULL));
  REQUIRE_OK(gk_copy_to_host(t, out, count, NULL));
  EXPECT(memcmp(in, out, count) == 0, "round trip through device %d differs", (int)device);
  REQUIRE_OK(gk_transfer_stats_get(rt, device, &after));
  EXPECT(after.to_device_bytes - before.to_device_bytes == count, "to_device_bytes grew by %llu",
         (unsigned long long)(after.to_device_bytes - before.to_device_bytes));
  EXPECT(after.to_host_copies - before.to_host_copies == 1, "to_host_copies grew by %llu",
         (unsigned long long)(after.to_host_copies - before.to_host_copies));
  EXPECT(after.staged_copies == before.staged_copies, "host_alloc memory was staged");
  EXPECT(after.host_bytes_in_use >= 2 * count, "host_bytes_in_use %llu",
         (unsigned long long)after.host_bytes_in_use);
  gk_tensor_release(t);
  REQUIRE_OK(gk_host_free(rt, in));
  REQUIRE_OK(gk_host_free(rt, out));
  EXPECT(gk_host_free(rt, in) == GK_INVALID_ARGUMENT, "a second gk_host_free was accepted");
  REQUIRE_OK(gk_host_alloc(rt, 0, &empty));
  EXPECT(empty == NULL, "gk_host_alloc(0) gave %p", empty);
  REQUIRE_OK(gk_host_free(rt, NULL));
  REQUIRE_OK(gk_host_trim(rt, NULL));
  printf("ok   gk_host_alloc round trip of %llu bytes on device %d, transfer counters\n",
         (unsigned long long)count, (int)device);
}

static void check_basics(void) {
  EXPECT(GK_VERSION_MAJOR(gk_abi_version()) == GK_ABI_VERSION_MAJOR, "library ABI %u.%u",
         (unsigned)GK_VERSION_MAJOR(gk_abi_version()),
         (unsigned)GK_VERSION_MINOR(gk_abi_version()));
  EXPECT(gk_library_version() != NULL && gk_library_version()[0] != '\0', "no library version");
  EXPECT(strcmp(gk_status_name(GK_OK), "OK") == 0, "%s", gk_status_name(GK_OK));
  EXPECT(strcmp(gk_status_name(GK_INVALID_ARGUMENT), "INVALID_ARGUMENT") == 0, "%s",
         gk_status_name(GK_INVALID_ARGUMENT));
  EXPECT(strcmp(gk_status_name(12345), "UNKNOWN_STATUS") == 0, "%s", gk_status_name(12345));
  EXPECT(gk_dtype_size(GK_DTYPE_BF16) == 2, "bf16 size %u", (unsigned)gk_dtype_size(GK_DTYPE_BF16));
  EXPECT(gk_dtype_size(999) == 0, "unknown dtype size %u", (unsigned)gk_dtype_size(999));
  EXPECT(strcmp(gk_dtype_name(GK_DTYPE_BF16), "bf16") == 0, "%s", gk_dtype_name(GK_DTYPE_BF16));
  gk_string_free(NULL);
  gk_runtime_destroy(NULL);
  printf("ok   versions %s / ABI %u.%u, status and dtype names\n", gk_library_version(),
         (unsigned)GK_VERSION_MAJOR(gk_abi_version()),
         (unsigned)GK_VERSION_MINOR(gk_abi_version()));
}

/* Writes a SafeTensors file of one f32 tensor "w" = [1.5, -2], opens it as weights, lists,
 * reads and closes it; the tensor outlives the weights. */
static void check_weights(gk_runtime* rt) {
  static const char header[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  /* 1.5f and -2.0f, little-endian. */
  static const unsigned char data[8] = {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x00, 0xc0};
  char path[64];
  unsigned char length[8];
  size_t header_bytes = sizeof header - 1;
  size_t padded = (header_bytes + 7) / 8 * 8;
  size_t i;
  FILE* f;
  gk_weights* weights = NULL;
  gk_weight_info info;
  gk_tensor* t = NULL;
  float values[2] = {0, 0};
  int64_t index = -1;
  gk_status status;

  sprintf(path, "gk_c_abi_weights_%lu.safetensors", (unsigned long)clock());
  f = fopen(path, "wb");
  EXPECT(f != NULL, "cannot write %s", path);
  if (!f) return;
  for (i = 0; i < 8; ++i) length[i] = (unsigned char)((padded >> (8 * i)) & 0xff);
  fwrite(length, 1, 8, f);
  fwrite(header, 1, header_bytes, f);
  for (i = header_bytes; i < padded; ++i) fputc(' ', f);
  fwrite(data, 1, sizeof data, f);
  fclose(f);

  REQUIRE_OK(gk_weights_open(rt, path, NULL, &weights));
  EXPECT(strcmp(gk_weights_format(weights), "safetensors") == 0, "format %s",
         gk_weights_format(weights));
  EXPECT(gk_weights_count(weights) == 1, "count %lld", (long long)gk_weights_count(weights));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  REQUIRE_OK(gk_weights_info(weights, 0, &info));
  EXPECT(strcmp(info.name, "w") == 0 && info.dtype == GK_DTYPE_F32 && info.ndim == 1 &&
             info.shape[0] == 2 && info.bytes == 8,
         "info %s dtype %d", info.name, (int)info.dtype);
  REQUIRE_OK(gk_weights_find(weights, "w", &index));
  EXPECT(index == 0, "index %lld", (long long)index);
  status = gk_weights_find(weights, "v", &index);
  EXPECT(status == GK_NOT_FOUND, "find 'v' -> %s", gk_status_name(status));
  REQUIRE_OK(gk_weights_get(weights, "w", 0, 0, NULL, &t));
  gk_weights_close(weights);
  REQUIRE_OK(gk_copy_to_host(t, values, sizeof values, NULL));
  EXPECT(values[0] == 1.5f && values[1] == -2.0f, "values %g %g", values[0], values[1]);
  gk_tensor_release(t);
  remove(path);
  printf("ok   weights: open, list, find, get, close (tensor outlives the weights)\n");
}

int main(void) {
  gk_runtime_options options = GK_RUNTIME_OPTIONS_INIT;
  gk_runtime* rt = NULL;
  int32_t count = 0;
  int32_t best;

  check_basics();

  options.flags = GK_RUNTIME_IGNORE_ENVIRONMENT;
  options.log_level = GK_LOG_WARNING;
  REQUIRE_OK(gk_runtime_create(&options, &rt));
  REQUIRE_OK(gk_device_count(rt, &count));
  EXPECT(count >= 1, "device count %d", (int)count);
  best = gk_device_default(rt);
  EXPECT(best >= 0 && best < count, "default device %d of %d", (int)best, (int)count);
  EXPECT(gk_op_count(rt) > 0, "no ops");

  check_add(rt, 0);
  if (best != 0) check_add(rt, best);
  check_errors(rt);
  check_buffers(rt);
  check_transfers(rt, 0);
  if (best != 0) check_transfers(rt, best);
  check_weights(rt);

  gk_runtime_destroy(rt);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("all C ABI checks passed\n");
  return 0;
}
