// JIT kernels launched on a CUDA device: tensors as arguments, templates by name expression,
// argument checks, a scheduler task's stream. Skips, saying why, without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu_runtime.h"
#include "gpukit/gpukit.h"

namespace gk::test {
namespace {

struct JitObjects {
  gk_jit_module* module = nullptr;
  gk_jit_kernel* kernel = nullptr;
  ~JitObjects() {
    gk_jit_kernel_release(kernel);
    gk_jit_module_release(module);
  }
};

gk_jit_arg tensor_arg(gk_tensor* t) {
  gk_jit_arg a{};
  a.kind = GK_JIT_ARG_TENSOR;
  a.value.tensor = t;
  return a;
}
gk_jit_arg f32_arg(float v) {
  gk_jit_arg a{};
  a.kind = GK_JIT_ARG_F32;
  a.value.f32 = v;
  return a;
}
gk_jit_arg i32_arg(int32_t v) {
  gk_jit_arg a{};
  a.kind = GK_JIT_ARG_I32;
  a.value.i32 = v;
  return a;
}

gk_jit_launch_args launch_args(uint32_t grid, uint32_t block, const std::vector<gk_jit_arg>& args,
                               gk_stream* stream = nullptr) {
  gk_jit_launch_args l{};
  l.struct_size = sizeof(l);
  l.grid[0] = grid;
  l.grid[1] = l.grid[2] = 1;
  l.block[0] = block;
  l.block[1] = l.block[2] = 1;
  l.args = args.data();
  l.num_args = int32_t(args.size());
  l.stream = stream;
  return l;
}

TEST(JitLaunch, an_extern_c_kernel_writes_tensors_on_the_device) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  const char* source = R"(
extern "C" __global__ void axpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
})";
  JitObjects j;
  ASSERT_EQ(gk_jit_compile(rt.get(), dev, source, nullptr, &j.module), GK_OK) << gk_last_error();
  gk_jit_module_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(gk_jit_module_info_get(j.module, &info), GK_OK);
  EXPECT_EQ(info.loaded, 1);
  ASSERT_EQ(gk_jit_get_kernel(j.module, "axpy", &j.kernel), GK_OK) << gk_last_error();

  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[size_t(i)] = float(i), y[size_t(i)] = 1.0f;
  TensorPtr tx = make_tensor(rt.get(), GK_DTYPE_F32, {n}, dev);
  TensorPtr ty = make_tensor(rt.get(), GK_DTYPE_F32, {n}, dev);
  ASSERT_EQ(gk_copy_from_host(tx.get(), x.data(), n * 4, nullptr), GK_OK);
  ASSERT_EQ(gk_copy_from_host(ty.get(), y.data(), n * 4, nullptr), GK_OK);
  std::vector<gk_jit_arg> args = {tensor_arg(tx.get()), tensor_arg(ty.get()), f32_arg(3.0f),
                                  i32_arg(n)};
  gk_jit_launch_args l = launch_args((n + 255) / 256, 256, args);
  ASSERT_EQ(gk_jit_launch(j.kernel, &l), GK_OK) << gk_last_error();
  std::vector<float> out = read_f32(ty.get(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[size_t(i)], 3.0f * float(i) + 1.0f) << i;

  // Wrong argument count and sizes are refused before the driver sees them.
  std::vector<gk_jit_arg> short_args = {tensor_arg(tx.get())};
  l = launch_args(1, 32, short_args);
  EXPECT_EQ(gk_jit_launch(j.kernel, &l), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("takes 4 parameters; 1 arguments given"),
            std::string::npos)
      << gk_last_error();
  std::vector<gk_jit_arg> wide = args;
  wide[3].kind = GK_JIT_ARG_I64;
  l = launch_args(1, 32, wide);
  EXPECT_EQ(gk_jit_launch(j.kernel, &l), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("argument 3 is i64 (8 bytes)"), std::string::npos)
      << gk_last_error();
  // A tensor of the cpu device.
  TensorPtr host = make_tensor(rt.get(), GK_DTYPE_F32, {n}, 0);
  std::vector<gk_jit_arg> on_cpu = args;
  on_cpu[0] = tensor_arg(host.get());
  l = launch_args(1, 32, on_cpu);
  EXPECT_EQ(gk_jit_launch(j.kernel, &l), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("is a tensor on cpu"), std::string::npos);
  // Too many threads per block: the driver's refusal, as INVALID_ARGUMENT.
  l = launch_args(1, 4096, args);
  EXPECT_EQ(gk_jit_launch(j.kernel, &l), GK_INVALID_ARGUMENT) << gk_last_error();
  // Unknown kernel name.
  gk_jit_kernel* missing = nullptr;
  EXPECT_EQ(gk_jit_get_kernel(j.module, "nope", &missing), GK_NOT_FOUND);
}

TEST(JitLaunch, template_kernels_by_name_expression_and_dynamic_shared_memory) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  const char* source = R"(
template <typename T, int K>
__global__ void reverse_scale(const T* x, T* y, int n) {
  extern __shared__ unsigned char smem[];
  T* tile = reinterpret_cast<T*>(smem);
  int i = threadIdx.x;
  if (i < n) tile[i] = x[i];
  __syncthreads();
  if (i < n) y[i] = tile[n - 1 - i] * T(K);
})";
  const char* names[] = {"reverse_scale<float, 2>", "reverse_scale<double, 5>"};
  gk_jit_options o = GK_JIT_OPTIONS_INIT;
  o.name_expressions = names;
  o.num_name_expressions = 2;
  const char* opts[] = {"-std=c++17"};
  o.options = opts;
  o.num_options = 1;
  JitObjects j;
  ASSERT_EQ(gk_jit_compile(rt.get(), dev, source, &o, &j.module), GK_OK) << gk_last_error();
  const int n = 128;
  for (int which = 0; which < 2; ++which) {
    gk_jit_kernel* k = nullptr;
    ASSERT_EQ(gk_jit_get_kernel(j.module, names[which], &k), GK_OK) << gk_last_error();
    const int32_t dtype = which == 0 ? GK_DTYPE_F32 : GK_DTYPE_F64;
    const size_t elem = which == 0 ? 4 : 8;
    TensorPtr x = make_tensor(rt.get(), dtype, {n}, dev);
    TensorPtr y = make_tensor(rt.get(), dtype, {n}, dev);
    std::vector<double> xd(n);
    std::vector<float> xf(n);
    for (int i = 0; i < n; ++i) xd[size_t(i)] = i, xf[size_t(i)] = float(i);
    ASSERT_EQ(gk_copy_from_host(x.get(), which == 0 ? static_cast<void*>(xf.data()) : xd.data(),
                                n * elem, nullptr),
              GK_OK);
    std::vector<gk_jit_arg> args = {tensor_arg(x.get()), tensor_arg(y.get()), i32_arg(n)};
    gk_jit_launch_args l = launch_args(1, n, args);
    l.shared_mem_bytes = uint32_t(n * elem);
    ASSERT_EQ(gk_jit_launch(k, &l), GK_OK) << gk_last_error();
    std::vector<double> out(n);
    std::vector<float> outf(n);
    ASSERT_EQ(gk_copy_to_host(y.get(), which == 0 ? static_cast<void*>(outf.data()) : out.data(),
                              n * elem, nullptr),
              GK_OK);
    for (int i = 0; i < n; ++i) {
      const double got = which == 0 ? outf[size_t(i)] : out[size_t(i)];
      ASSERT_EQ(got, double(n - 1 - i) * (which == 0 ? 2 : 5)) << names[which] << " " << i;
    }
    gk_jit_kernel_release(k);
  }
}

TEST(JitLaunch, a_task_stream_launch_is_counted_like_an_op) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  const char* source = R"(
extern "C" __global__ void set(int* x, int v) { x[threadIdx.x] = v; })";
  JitObjects j;
  ASSERT_EQ(gk_jit_compile(rt.get(), dev, source, nullptr, &j.module), GK_OK) << gk_last_error();
  ASSERT_EQ(gk_jit_get_kernel(j.module, "set", &j.kernel), GK_OK) << gk_last_error();
  gk_task_spec spec{};
  spec.struct_size = sizeof(spec);
  spec.qos = GK_QOS_BEST_EFFORT;
  spec.device = dev;
  spec.name = "jit";
  gk_task* task = nullptr;
  ASSERT_EQ(gk_task_create(rt.get(), &spec, &task), GK_OK) << gk_last_error();
  gk_stream* stream = nullptr;
  ASSERT_EQ(gk_task_stream_create(task, &stream), GK_OK) << gk_last_error();
  TensorPtr x = make_tensor(rt.get(), GK_DTYPE_I32, {32}, dev);
  std::vector<gk_jit_arg> args = {tensor_arg(x.get()), i32_arg(7)};
  gk_jit_launch_args l = launch_args(1, 32, args, stream);
  ASSERT_EQ(gk_jit_launch(j.kernel, &l), GK_OK) << gk_last_error();
  ASSERT_EQ(gk_stream_synchronize(stream), GK_OK);
  gk_task_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(gk_task_get_info(task, &info), GK_OK) << gk_last_error();
  EXPECT_EQ(info.state, GK_TASK_RUNNING) << "a launch on the task's stream starts the task";
  EXPECT_EQ(info.ops_launched, 1u) << "the launch is counted as an op's";
  std::vector<int32_t> out(32);
  ASSERT_EQ(gk_copy_to_host(x.get(), out.data(), 32 * 4, nullptr), GK_OK);
  for (int32_t v : out) EXPECT_EQ(v, 7);
  gk_stream_destroy(stream);
  gk_task_destroy(task);
}

// A kernel registered for "add" serves gk_op_call on its device, is named by gk_explain, and
// declines calls it cannot serve (broadcasting) with the reason; unregistered, it is gone and
// a plugin serves add again.
TEST(JitLaunch, a_registered_kernel_serves_an_op_and_explain_names_it) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  const char* source = R"(
extern "C" __global__ void add_plus_one(const float* a, const float* b, float* out, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i] + 1.0f;
})";
  JitObjects j;
  ASSERT_EQ(gk_jit_compile(rt.get(), dev, source, nullptr, &j.module), GK_OK) << gk_last_error();
  ASSERT_EQ(gk_jit_get_kernel(j.module, "add_plus_one", &j.kernel), GK_OK) << gk_last_error();
  const int32_t dtypes[] = {GK_DTYPE_F32};
  gk_jit_op_options o = GK_JIT_OP_OPTIONS_INIT;
  o.dtypes = dtypes;
  o.num_dtypes = 1;
  o.priority = 1000;  // above every plugin
  o.block_size = 128;
  gk_jit_op* op = nullptr;
  ASSERT_EQ(gk_jit_op_register(rt.get(), "add", j.kernel, &o, &op), GK_OK) << gk_last_error();

  // 1000 elements: 8 blocks of 128, the last one partial. The "+ 1" tells the kernel's
  // result from a plugin's.
  const int n = 1000;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) a[size_t(i)] = float(i), b[size_t(i)] = 0.5f * float(i);
  TensorPtr ta = make_tensor(rt.get(), GK_DTYPE_F32, {n}, dev);
  TensorPtr tb = make_tensor(rt.get(), GK_DTYPE_F32, {n}, dev);
  TensorPtr tc = make_tensor(rt.get(), GK_DTYPE_F32, {n}, dev);
  ASSERT_EQ(gk_copy_from_host(ta.get(), a.data(), n * 4, nullptr), GK_OK);
  ASSERT_EQ(gk_copy_from_host(tb.get(), b.data(), n * 4, nullptr), GK_OK);
  gk_tensor* in[] = {ta.get(), tb.get()};
  gk_tensor* out[] = {tc.get()};
  gk_op_args args{sizeof(args), in, 2, out, 1, nullptr, 0, nullptr};
  ASSERT_EQ(gk_op_call(rt.get(), "add", &args), GK_OK) << gk_last_error();
  std::vector<float> c = read_f32(tc.get(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[size_t(i)], 1.5f * float(i) + 1.0f) << i;

  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = GK_DTYPE_F32;
  d.ndim = 1;
  d.shape[0] = n;
  gk_tensor_desc descs[] = {d, d};
  char* json = nullptr;
  ASSERT_EQ(gk_explain(rt.get(), "add", dev, descs, 2, nullptr, 0, nullptr, 0, &json), GK_OK);
  std::string text = json;
  gk_string_free(json);
  EXPECT_NE(text.find("\"chosen\": \"jit:add_plus_one\""), std::string::npos) << text;
  EXPECT_NE(text.find("one thread per element, blocks of 128"), std::string::npos) << text;

  // Broadcasting is declined with the reason; the plugins that list add decide then.
  gk_tensor_desc one = d;
  one.shape[0] = 1;
  gk_tensor_desc broadcast[] = {d, one};
  ASSERT_EQ(gk_explain(rt.get(), "add", dev, broadcast, 2, nullptr, 0, nullptr, 0, &json), GK_OK);
  text = json;
  gk_string_free(json);
  EXPECT_EQ(text.find("\"chosen\": \"jit:add_plus_one\""), std::string::npos) << text;
  EXPECT_NE(text.find("input 1 has shape [1] and output 0 [1000]"), std::string::npos) << text;

  gk_jit_op_release(op);
  ASSERT_EQ(gk_op_call(rt.get(), "add", &args), GK_OK) << gk_last_error();
  c = read_f32(tc.get(), n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[size_t(i)], 1.5f * float(i)) << "unregistered " << i;
}

}  // namespace
}  // namespace gk::test
