// One conformance suite for every CUDA plugin: each plugin is forced in turn (the other
// CUDA plugins disabled) and every case it accepts is compared with the cpu plugin on
// the same inputs (already rounded to the dtype), on fresh random data, with the output
// poisoned (0xFF bytes: NaN for floats) so unwritten elements fail. Cases a plugin
// declines are listed with the plugin's reason, not counted as passes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "gpu_runtime.h"

namespace gk::test {
namespace {

struct Input {
  std::vector<int64_t> shape;
  float lo = -1.f, hi = 1.f;
  bool strided = false;  // a view of every other element along the last axis
};

struct Attr {
  std::string name;
  int32_t type;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
};

struct Case {
  std::string op;
  std::vector<Input> inputs;
  std::vector<Attr> attrs;
  std::vector<int32_t> dtypes;
  bool f32_output = false;  // matmul of f16/bf16 into f32
  bool reads_output = false;  // matmul with beta != 0
};

Attr iattr(const char* n, int64_t v) { return Attr{n, GK_ATTR_INT, v, 0, "", {}}; }
Attr fattr(const char* n, double v) { return Attr{n, GK_ATTR_FLOAT, 0, v, "", {}}; }
Attr sattr(const char* n, const char* v) { return Attr{n, GK_ATTR_STRING, 0, 0, v, {}}; }
Attr axes(std::vector<int64_t> v) { return Attr{"axes", GK_ATTR_INTS, 0, 0, "", std::move(v)}; }

const std::vector<int32_t> kFloat = {GK_DTYPE_F32, GK_DTYPE_F16, GK_DTYPE_BF16};

std::vector<Case> cases() {
  std::vector<Case> c;
  Input pos{{}, 0.1f, 2.f};
  for (const char* op : {"add", "sub", "mul", "maximum", "minimum"}) {
    c.push_back({op, {{{7, 33}}, {{33}}}, {}, kFloat});
    c.push_back({op, {{{3, 1, 5}}, {{1, 4, 5}}}, {}, {GK_DTYPE_F32}});
    c.push_back({op, {{{1024, 4096}}, {{1024, 4096}}}, {}, kFloat});
  }
  c.push_back({"div", {{{64, 1000}}, {{1000}, 0.5f, 2.f}}, {}, kFloat});
  c.push_back({"pow", {{{64, 1000}, 0.1f, 2.f}, {{64, 1000}, -2.f, 2.f}}, {}, kFloat});
  c.push_back({"add", {{{64, 512}, -1, 1, true}, {{64, 512}}}, {}, kFloat});
  // Comparisons (bool out). Integer inputs come from [-2, 2] truncated: mostly ties.
  const std::vector<int32_t> compared = {GK_DTYPE_F32, GK_DTYPE_F16, GK_DTYPE_BF16, GK_DTYPE_I32,
                                         GK_DTYPE_I64};
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    c.push_back({op, {{{7, 33}, -2, 2}, {{33}, -2, 2}}, {}, compared});
    c.push_back({op, {{{3, 1, 5}, -2, 2}, {{1, 4, 5}, -2, 2}}, {}, compared});
    c.push_back({op, {{{1024, 4096}, -2, 2}, {{1024, 4096}, -2, 2}}, {}, compared});
    c.push_back({op, {{{64, 512}, -2, 2, true}, {{64, 512}, -2, 2}}, {}, compared});
  }
  for (const char* op : {"neg", "abs", "exp", "tanh", "sigmoid", "relu", "silu", "gelu"}) {
    c.push_back({op, {{{5, 1000}}}, {}, kFloat});
    c.push_back({op, {{{262144}}}, {}, {GK_DTYPE_BF16}});
  }
  c.push_back({"gelu", {{{5, 1000}}}, {sattr("approximate", "tanh")}, kFloat});
  for (const char* op : {"log", "sqrt", "rsqrt"}) {
    Input in = pos;
    in.shape = {5, 1000};
    c.push_back({op, {in}, {}, kFloat});
  }
  c.push_back({"swiglu", {{{4, 4096}}, {{4, 4096}}}, {}, kFloat});
  c.push_back({"geglu", {{{4, 4096}}, {{4, 4096}}}, {}, kFloat});
  for (const char* target : {"f32", "f16", "bf16"}) {
    c.push_back({"cast", {{{33, 1000}, -100.f, 100.f}}, {sattr("dtype", target)}, kFloat});
  }
  for (const char* op : {"sum", "mean", "max", "min"}) {
    c.push_back({op, {{{7}}}, {}, kFloat});
    c.push_back({op, {{{13, 257}}}, {axes({-1})}, kFloat});
    c.push_back({op, {{{4, 262144}}}, {axes({1})}, kFloat});
    c.push_back({op, {{{64, 33, 5}}}, {axes({0, 2}), iattr("keepdims", 1)}, kFloat});
    c.push_back({op, {{{300, 70}}}, {axes({0})}, kFloat});
    // One sum over 4 Mi values: inputs in [-0.5, 1] keep it near 1 Mi. Centred on 0, the
    // sum (sd ~1200) can land near 0, where the same absolute rounding is a large relative
    // error: seed 3131972772 read 3.9e-5 on the H100 against a 1e-5 tolerance.
    c.push_back({op, {{{1 << 22}, -0.5f, 1.f}}, {}, {GK_DTYPE_F32}});
    c.push_back({op, {{{33, 200}, -1, 1, true}}, {axes({-1})}, kFloat});
  }
  c.push_back({"prod", {{{13, 30}, 0.9f, 1.1f}}, {axes({-1})}, kFloat});
  for (const char* op : {"argmax", "argmin"}) {
    c.push_back({op, {{{33, 1000}}}, {iattr("axis", -1)}, kFloat});
    c.push_back({op, {{{33, 1000}}}, {iattr("axis", 0)}, {GK_DTYPE_F32}});
  }
  for (const char* op : {"softmax", "log_softmax"}) {
    c.push_back({op, {{{1, 4096}, -5, 5}}, {}, kFloat});
    c.push_back({op, {{{33, 1000}, -5, 5}}, {}, kFloat});
    c.push_back({op, {{{2, 262144}, -5, 5}}, {}, kFloat});
    c.push_back({op, {{{33, 100}, -5, 5}}, {iattr("axis", 0)}, kFloat});
  }
  c.push_back({"layernorm", {{{7, 1000}}, {{1000}}, {{1000}}}, {fattr("eps", 1e-5)}, kFloat});
  c.push_back({"layernorm", {{{64, 4096}}}, {}, kFloat});
  c.push_back({"rmsnorm", {{{7, 1000}}, {{1000}}}, {fattr("eps", 1e-6)}, kFloat});
  c.push_back({"rmsnorm", {{{1, 4096}}, {{4096}}}, {}, kFloat});
  c.push_back({"add_layernorm", {{{64, 4096}}, {{64, 4096}}, {{4096}}, {{4096}}}, {}, kFloat});
  c.push_back({"add_rmsnorm", {{{64, 4096}}, {{64, 4096}}, {{4096}}}, {}, kFloat});
  // Strided last axes (every other element): the staged path, through the plugin's workspace.
  c.push_back(
      {"layernorm", {{{7, 1000}, -1, 1, true}, {{1000}, -1, 1, true}, {{1000}}}, {}, kFloat});
  c.push_back({"rmsnorm", {{{33, 300}, -1, 1, true}, {{300}}}, {}, kFloat});
  c.push_back(
      {"add_rmsnorm", {{{16, 512}}, {{16, 512}, -1, 1, true}, {{512}, -1, 1, true}}, {}, kFloat});
  c.push_back({"softmax", {{{33, 500}, -5, 5, true}}, {}, kFloat});

  // matmul: every size of the set appears as M, N and K; all transpose pairs.
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 4096, 4096}, {7, 127, 1000}, {64, 64, 64}, {127, 1, 7}, {1000, 7, 127}, {4096, 1000, 64}};
  const std::vector<int32_t> mm_dtypes = {GK_DTYPE_F32, GK_DTYPE_F16, GK_DTYPE_BF16};
  for (auto [m, n, k] : shapes) {
    for (int t = 0; t < 4; ++t) {
      bool ta = t & 1, tb = t & 2;
      Input a{ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}};
      Input b{tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}};
      c.push_back({"matmul", {a, b}, {iattr("transpose_a", ta), iattr("transpose_b", tb)}, mm_dtypes});
    }
  }
  c.push_back({"matmul", {{{4096, 4096}}, {{4096, 4096}}}, {}, {GK_DTYPE_BF16, GK_DTYPE_F16}});
  c.push_back({"matmul", {{{512, 1024}}, {{1024, 768}}}, {sattr("precision", "tf32")}, {GK_DTYPE_F32}});
  // tf32 on every transpose pair, odd shapes, batches, a strided view and the epilogue
  // (matmul_sm80 serves all of them on its mma.sync path; matmul_sm90 only K-major a and b).
  const std::vector<int32_t> f32 = {GK_DTYPE_F32};
  const Attr tf32 = sattr("precision", "tf32");
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {7, 127, 1000}, {127, 1, 7}, {1000, 7, 127}, {129, 300, 64}}) {
    for (int t = 0; t < 4; ++t) {
      bool ta = t & 1, tb = t & 2;
      Input a{ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}};
      Input b{tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}};
      c.push_back(
          {"matmul", {a, b}, {iattr("transpose_a", ta), iattr("transpose_b", tb), tf32}, f32});
    }
  }
  c.push_back({"matmul", {{{3, 128, 256}}, {{3, 256, 64}}}, {tf32}, f32});
  c.push_back({"matmul", {{{2, 1, 16, 32}}, {{3, 32, 24}}}, {tf32}, f32});
  c.push_back({"matmul", {{{64, 300}, -1, 1, true}, {{300, 96}}}, {tf32}, f32});
  for (const char* act : {"relu", "gelu", "silu"}) {
    c.push_back({"matmul",
                 {{{256, 128}}, {{256, 512}}, {{512}}},
                 {iattr("transpose_a", 1), sattr("activation", act), tf32},
                 f32});
  }
  Case scaled_tf32{"matmul",
                   {{{128, 256}}, {{192, 256}}},
                   {iattr("transpose_b", 1), fattr("alpha", 0.5), fattr("beta", 2.0), tf32},
                   f32};
  scaled_tf32.reads_output = true;
  c.push_back(scaled_tf32);
  c.push_back({"matmul", {{{3, 128, 256}}, {{3, 256, 64}}}, {}, mm_dtypes});
  c.push_back({"matmul", {{{2, 1, 16, 32}}, {{3, 32, 24}}}, {}, mm_dtypes});
  for (const char* act : {"none", "relu", "gelu", "silu"}) {
    c.push_back({"matmul", {{{128, 256}}, {{256, 512}}, {{512}}}, {sattr("activation", act)}, mm_dtypes});
  }
  Case scaled{"matmul", {{{128, 256}}, {{256, 192}}}, {fattr("alpha", 0.5), fattr("beta", 2.0)}, mm_dtypes};
  scaled.reads_output = true;
  c.push_back(scaled);
  Case wide{"matmul", {{{256, 512}}, {{512, 128}}}, {}, {GK_DTYPE_F16, GK_DTYPE_BF16}};
  wide.f32_output = true;
  c.push_back(wide);
  return c;
}

std::string case_name(const Case& c, int32_t dtype) {
  std::string s = c.op + "(" + gk_dtype_name(dtype);
  for (const auto& in : c.inputs) {
    s += " [";
    for (size_t i = 0; i < in.shape.size(); ++i) s += (i ? "x" : "") + std::to_string(in.shape[i]);
    s += in.strided ? "]s" : "]";
  }
  for (const auto& a : c.attrs) {
    s += " " + a.name + "=";
    if (a.type == GK_ATTR_INT) s += std::to_string(a.i);
    if (a.type == GK_ATTR_FLOAT) s += std::to_string(a.f).substr(0, 6);
    if (a.type == GK_ATTR_STRING) s += a.s;
    if (a.type == GK_ATTR_INTS) for (auto v : a.ints) s += std::to_string(v) + ",";
  }
  return s + (c.f32_output ? " ->f32)" : ")");
}

// Runs one case on the cpu device and on `dev`, with the plugin the runtime picks.
class Runner {
 public:
  Runner(gk_runtime* rt, int32_t dev, std::mt19937& rng) : rt_(rt), dev_(dev), rng_(rng) {}

  // Returns the relative Frobenius error; throws std::runtime_error on a failed call.
  double run(const Case& c, int32_t dtype) {
    std::vector<gk_attr> attrs = c_attrs(c);
    std::vector<TensorPtr> cpu_in, gpu_in;
    std::vector<gk_tensor*> cpu_ptrs, gpu_ptrs;
    for (const Input& in : c.inputs) {
      auto [cpu, gpu] = make_input(in, dtype);
      cpu_ptrs.push_back(cpu.get());
      gpu_ptrs.push_back(gpu.get());
      cpu_in.push_back(std::move(cpu));
      gpu_in.push_back(std::move(gpu));
    }
    gk_op_args args{};
    args.struct_size = sizeof(args);
    args.inputs = cpu_ptrs.data();
    args.num_inputs = int32_t(cpu_ptrs.size());
    args.attrs = attrs.data();
    args.num_attrs = int32_t(attrs.size());
    std::vector<TensorPtr> cpu_out, gpu_out;
    std::vector<gk_tensor*> cpu_out_ptrs, gpu_out_ptrs;
    for (int32_t i = 0;; ++i) {
      gk_tensor_desc d{};
      d.struct_size = sizeof(d);
      if (gk_op_output_desc(rt_, c.op.c_str(), &args, i, &d) != GK_OK) break;
      if (c.f32_output) d.dtype = GK_DTYPE_F32;
      std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
      cpu_out.push_back(make_tensor(rt_, d.dtype, shape, 0));
      gpu_out.push_back(make_tensor(rt_, d.dtype, shape, dev_));
      size_t bytes = byte_size(d.dtype, shape);
      if (c.reads_output) {
        TensorPtr init = random_tensor(shape, d.dtype, -1, 1);
        check(gk_copy(cpu_out.back().get(), init.get(), nullptr), "copy");
        check(gk_copy(gpu_out.back().get(), init.get(), nullptr), "copy");
      } else {
        std::vector<uint8_t> poison(bytes, 0xff);
        check(gk_copy_from_host(gpu_out.back().get(), poison.data(), bytes, nullptr), "poison");
      }
      cpu_out_ptrs.push_back(cpu_out.back().get());
      gpu_out_ptrs.push_back(gpu_out.back().get());
    }
    args.outputs = cpu_out_ptrs.data();
    args.num_outputs = int32_t(cpu_out_ptrs.size());
    check(gk_op_call(rt_, c.op.c_str(), &args), "cpu reference");
    args.inputs = gpu_ptrs.data();
    args.outputs = gpu_out_ptrs.data();
    check(gk_op_call(rt_, c.op.c_str(), &args), "gpu");
    double worst = 0;
    for (size_t i = 0; i < cpu_out.size(); ++i) {
      worst = std::max(worst, compare(cpu_out[i].get(), gpu_out[i].get()));
    }
    return worst;
  }

 private:
  static void check(gk_status s, const char* what) {
    if (s != GK_OK) throw std::runtime_error(std::string(what) + ": " + gk_last_error());
  }

  static size_t byte_size(int32_t dtype, const std::vector<int64_t>& shape) {
    size_t n = gk_dtype_size(dtype);
    for (auto v : shape) n *= size_t(v);
    return n;
  }

  std::vector<gk_attr> c_attrs(const Case& c) {
    std::vector<gk_attr> out;
    for (const Attr& a : c.attrs) {
      gk_attr g{};
      g.name = a.name.c_str();
      g.type = a.type;
      if (a.type == GK_ATTR_INT) g.value.i = a.i;
      if (a.type == GK_ATTR_FLOAT) g.value.f = a.f;
      if (a.type == GK_ATTR_STRING) g.value.s = a.s.c_str();
      if (a.type == GK_ATTR_INTS) {
        g.count = int32_t(a.ints.size());
        g.value.ints = a.ints.data();
      }
      out.push_back(g);
    }
    return out;
  }

  // A contiguous cpu tensor of `dtype` with uniform random values (cast on the cpu).
  TensorPtr random_tensor(const std::vector<int64_t>& shape, int32_t dtype, float lo, float hi) {
    size_t n = byte_size(GK_DTYPE_F32, shape) / 4;
    std::vector<float> host(n);
    std::uniform_real_distribution<float> u(lo, hi);
    for (auto& v : host) v = u(rng_);
    TensorPtr f32 = make_tensor(rt_, GK_DTYPE_F32, shape, 0);
    check(gk_copy_from_host(f32.get(), host.data(), n * 4, nullptr), "copy");
    if (dtype == GK_DTYPE_F32) return f32;
    return cast(f32.get(), dtype, shape);
  }

  TensorPtr cast(gk_tensor* x, int32_t dtype, const std::vector<int64_t>& shape) {
    TensorPtr out = make_tensor(rt_, dtype, shape, 0);
    gk_tensor* in[] = {x};
    gk_tensor* o[] = {out.get()};
    gk_op_args a{};
    a.struct_size = sizeof(a);
    a.inputs = in;
    a.num_inputs = 1;
    a.outputs = o;
    a.num_outputs = 1;
    check(gk_op_call(rt_, "cast", &a), "cast");
    return out;
  }

  // The same values on the cpu and on the GPU; strided inputs are views of every other
  // element of a twice-as-wide array on both sides.
  std::pair<TensorPtr, TensorPtr> make_input(const Input& in, int32_t dtype) {
    std::vector<int64_t> full = in.shape;
    if (in.strided) full.back() *= 2;
    TensorPtr cpu_full = random_tensor(full, dtype, in.lo, in.hi);
    if (!in.strided) {
      TensorPtr gpu = make_tensor(rt_, dtype, full, dev_);
      check(gk_copy(gpu.get(), cpu_full.get(), nullptr), "copy to gpu");
      return {std::move(cpu_full), std::move(gpu)};
    }
    return {strided_view(cpu_full.get(), 0, dtype, in.shape), strided_on(dev_, cpu_full.get(), dtype, full, in.shape)};
  }

  TensorPtr strided_on(int32_t device, gk_tensor* src, int32_t dtype, const std::vector<int64_t>& full,
                       const std::vector<int64_t>& shape) {
    gk_alloc_args a{};
    a.struct_size = sizeof(a);
    a.device = device;
    a.size = byte_size(dtype, full);
    gk_buffer* b = nullptr;
    check(gk_buffer_alloc(rt_, &a, &b), "alloc");
    gk_tensor_desc d = desc(dtype, full);
    gk_tensor* whole = nullptr;
    check(gk_tensor_from_buffer(b, 0, &d, &whole), "view");
    check(gk_copy(whole, src, nullptr), "copy to gpu");
    gk_tensor_release(whole);
    TensorPtr view = view_of(b, dtype, shape);
    gk_buffer_free(b, nullptr);
    return view;
  }

  TensorPtr strided_view(gk_tensor* src, int32_t device, int32_t dtype, const std::vector<int64_t>& shape) {
    std::vector<int64_t> full = shape;
    full.back() *= 2;
    return strided_on(device, src, dtype, full, shape);
  }

  TensorPtr view_of(gk_buffer* b, int32_t dtype, const std::vector<int64_t>& shape) {
    gk_tensor_desc d = desc(dtype, shape);
    d.has_strides = 1;
    d.strides[d.ndim - 1] = 2;
    int64_t row = shape.back() * 2;  // the full row is twice the view's last dimension
    for (int32_t k = d.ndim - 2; k >= 0; --k) {
      d.strides[k] = row;
      row *= shape[size_t(k)];
    }
    gk_tensor* t = nullptr;
    check(gk_tensor_from_buffer(b, 0, &d, &t), "strided view");
    return TensorPtr(t);
  }

  std::vector<double> as_f64(gk_tensor* t) {
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    check(gk_tensor_get_desc(t, &d), "desc");
    std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
    TensorPtr f64 = d.dtype == GK_DTYPE_F64 ? nullptr : cast(t, GK_DTYPE_F64, shape);
    size_t n = byte_size(GK_DTYPE_F64, shape) / 8;
    std::vector<double> out(n);
    check(gk_copy_to_host(f64 ? f64.get() : t, out.data(), n * 8, nullptr), "read");
    return out;
  }

  double compare(gk_tensor* cpu, gk_tensor* gpu) {
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    check(gk_tensor_get_desc(gpu, &d), "desc");
    std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
    TensorPtr back = make_tensor(rt_, d.dtype, shape, 0);
    check(gk_copy(back.get(), gpu, nullptr), "copy back");
    if (d.dtype == GK_DTYPE_BOOL) {
      // Exact: every byte 0 or 1 (the poison is 0xFF) and equal to the reference's.
      const size_t n = byte_size(GK_DTYPE_BOOL, shape);
      std::vector<uint8_t> ref(n), got(n);
      check(gk_copy_to_host(cpu, ref.data(), n, nullptr), "read");
      check(gk_copy_to_host(back.get(), got.data(), n, nullptr), "read");
      return ref == got ? 0.0 : INFINITY;
    }
    std::vector<double> ref = as_f64(cpu), got = as_f64(back.get());
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (std::isnan(ref[i]) != std::isnan(got[i])) return INFINITY;  // unwritten or wrong NaN
      if (std::isnan(ref[i]) || (std::isinf(ref[i]) && ref[i] == got[i])) continue;
      num += (got[i] - ref[i]) * (got[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  }

  gk_runtime* rt_;
  int32_t dev_;
  std::mt19937& rng_;
};

double tolerance(const Case& c, int32_t dtype) {
  if (dtype == GK_DTYPE_F16 || dtype == GK_DTYPE_BF16) return 1e-2;
  for (const auto& a : c.attrs) {
    if (a.name == "precision" && a.s == "tf32") return 1e-3;
  }
  return 1e-5;
}

std::vector<std::string> cuda_plugins(gk_runtime* rt) {
  std::vector<std::string> names;
  for (int32_t i = 0; i < gk_plugin_count(rt); ++i) {
    gk_plugin_info info{};
    info.struct_size = sizeof(info);
    if (gk_plugin_get(rt, i, &info) == GK_OK && info.loaded &&
        info.device_kind == GK_DEVICE_KIND_CUDA) {
      names.push_back(info.name);
    }
  }
  return names;
}

TEST(GpuConformance, every_cuda_plugin_matches_the_cpu_reference) {
  RuntimePtr probe = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(probe.get(), dev);
  std::vector<std::string> plugins = cuda_plugins(probe.get());
  ASSERT_FALSE(plugins.empty()) << "a CUDA device but no CUDA plugin loaded";
  unsigned seed = std::random_device{}();
  std::printf("conformance seed %u\n", seed);
  std::mt19937 rng(seed);
  std::vector<Case> all = cases();
  int passed = 0, failed = 0;
  for (const std::string& plugin : plugins) {
    // Plugins whose ops this table has no case for are checked against the cpu reference by
    // a suite of their own.
    if (plugin == "llm_cuda" || plugin == "attention_sm90" || plugin == "asr_cuda") {
      std::printf("plugin %-16s no case here: tests/gpu/%s checks its ops\n", plugin.c_str(),
                  plugin == "asr_cuda" ? "asr_log_mel_test.cpp" : "llm_ops_test.cpp");
      continue;
    }
    std::string disable;
    for (const std::string& other : plugins) {
      if (other != plugin) disable += (disable.empty() ? "" : ",") + other;
    }
    RuntimePtr rt = make_gpu_runtime(disable.empty() ? nullptr : disable.c_str());
    Runner runner(rt.get(), dev, rng);
    int served = 0, declined = 0;
    for (const Case& c : all) {
      for (int32_t dtype : c.dtypes) {
        std::string name = case_name(c, dtype);
        try {
          double err = runner.run(c, dtype);
          ++served;
          if (err <= tolerance(c, dtype)) {
            ++passed;
          } else {
            ++failed;
            ADD_FAILURE() << plugin << ": " << name << " error " << err << " > "
                          << tolerance(c, dtype) << " (seed " << seed << ")";
          }
        } catch (const std::exception& e) {
          std::string what = e.what();
          if (what.find("no plugin accepts") != std::string::npos ||
              what.find("UNIMPLEMENTED") != std::string::npos) {
            ++declined;  // the cpu plugin ran, this plugin declined: not coverage
          } else {
            ++failed;
            ADD_FAILURE() << plugin << ": " << name << ": " << what;
          }
        }
      }
    }
    std::printf("plugin %-16s cases served %4d, declined %4d\n", plugin.c_str(), served, declined);
    EXPECT_GT(served, 0) << plugin << " served no case";
  }
  std::printf("conformance: %d passed, %d failed\n", passed, failed);
}

}  // namespace
}  // namespace gk::test
