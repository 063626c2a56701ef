// Standalone GPU check and timing driver for kernels/reductions.
//
// (a) every op and dtype against a float64 CPU reference on fresh random inputs:
//     poisoned (NaN-filled) outputs, odd shapes, rows of 262144, non-contiguous
//     views, NaN/Inf; each call runs twice and the two outputs must be bit-identical.
// (b) timings with CUDA events (warm-up, median of many runs, inputs rotated over
//     more than L2) next to a device-to-device cudaMemcpy bandwidth measurement.
//
// Build and run (on a GPU machine, from the repository root):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I kernels \
//     tests/gpu/reductions/reductions_check.cu kernels/reductions/*.cu -o /tmp/rc && /tmp/rc
// Options: --no-perf, --perf-only, --json PATH (timings as JSON lines).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "reductions/elementwise.cuh"
#include "reductions/norm.cuh"
#include "reductions/reduce.cuh"
#include "reductions/softmax.cuh"

namespace kr = gk::kernels::reductions;
using kr::DType;

#define CUDA_OK(call)                                                                       \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)

static std::mt19937_64 g_rng;
static int g_failures = 0, g_checks = 0;
static FILE* g_json = nullptr;

static const char* dname(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

// Round a double to what dtype t stores, as a double.
static double round_to(DType t, double v) {
  switch (t) {
    case DType::f32: return static_cast<float>(v);
    case DType::f16: return __half2float(__float2half_rn(static_cast<float>(v)));
    case DType::bf16: return __bfloat162float(__float2bfloat16_rn(static_cast<float>(v)));
    case DType::i32: return static_cast<double>(static_cast<int32_t>(v));
    default: return v;
  }
}

// A dense host array of `n` values in dtype t, kept as doubles.
struct Buf {
  DType t = DType::f32;
  std::vector<double> v;
  void* dev = nullptr;
  size_t bytes = 0;
  Buf() = default;
  Buf(DType t_, size_t n) : t(t_), v(n, 0.0) {
    bytes = std::max<size_t>(n, 1) * kr::dtype_size(t);
    CUDA_OK(cudaMalloc(&dev, bytes + 64));
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept { *this = std::move(o); }
  Buf& operator=(Buf&& o) noexcept {
    std::swap(t, o.t); std::swap(v, o.v); std::swap(dev, o.dev); std::swap(bytes, o.bytes);
    return *this;
  }
  ~Buf() { if (dev) cudaFree(dev); }
  void upload() {
    std::vector<unsigned char> raw(bytes);
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = round_to(t, v[i]);
      switch (t) {
        case DType::f32: reinterpret_cast<float*>(raw.data())[i] = static_cast<float>(v[i]); break;
        case DType::f16: reinterpret_cast<__half*>(raw.data())[i] = __float2half_rn(static_cast<float>(v[i])); break;
        case DType::bf16: reinterpret_cast<__nv_bfloat16*>(raw.data())[i] = __float2bfloat16_rn(static_cast<float>(v[i])); break;
        case DType::i32: reinterpret_cast<int32_t*>(raw.data())[i] = static_cast<int32_t>(v[i]); break;
        case DType::i64: reinterpret_cast<int64_t*>(raw.data())[i] = static_cast<int64_t>(v[i]); break;
      }
    }
    CUDA_OK(cudaMemcpy(dev, raw.data(), bytes, cudaMemcpyHostToDevice));
  }
  void poison() { CUDA_OK(cudaMemset(dev, 0xff, bytes)); }  // NaN for floats, -1 for ints
  std::vector<unsigned char> raw() const {
    std::vector<unsigned char> r(bytes);
    CUDA_OK(cudaMemcpy(r.data(), dev, bytes, cudaMemcpyDeviceToHost));
    return r;
  }
  std::vector<double> download() const {
    auto r = raw();
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      switch (t) {
        case DType::f32: out[i] = reinterpret_cast<const float*>(r.data())[i]; break;
        case DType::f16: out[i] = __half2float(reinterpret_cast<const __half*>(r.data())[i]); break;
        case DType::bf16: out[i] = __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(r.data())[i]); break;
        case DType::i32: out[i] = reinterpret_cast<const int32_t*>(r.data())[i]; break;
        case DType::i64: out[i] = static_cast<double>(reinterpret_cast<const int64_t*>(r.data())[i]); break;
      }
    }
    return out;
  }
};

static void fill_normal(Buf& b, double mean = 0.0, double sd = 1.0) {
  std::normal_distribution<double> d(mean, sd);
  for (auto& x : b.v) x = d(g_rng);
}
static void fill_uniform(Buf& b, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  for (auto& x : b.v) x = d(g_rng);
}

static kr::TensorRef view(const Buf& b, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
  kr::TensorRef r;
  r.data = b.dev;
  r.dtype = b.t;
  r.ndim = static_cast<int>(shape.size());
  if (strides.empty()) {
    strides.resize(shape.size());
    int64_t s = 1;
    for (int d = r.ndim - 1; d >= 0; --d) { strides[d] = s; s *= shape[d]; }
  }
  for (int d = 0; d < r.ndim; ++d) { r.shape[d] = shape[d]; r.strides[d] = strides[d]; }
  return r;
}

// Flat element offset of logical index `idx` in a view.
static int64_t off_of(const kr::TensorRef& t, int64_t idx) {
  int64_t off = 0;
  for (int d = t.ndim - 1; d >= 0; --d) {
    off += (idx % t.shape[d]) * t.strides[d];
    idx /= t.shape[d];
  }
  return off;
}

static double tol_for(DType t) {
  return t == DType::f32 ? 2e-6 : t == DType::f16 ? 1e-3 : 8e-3;
}

// Compares `out` (read at view positions) with ref; NaN must match NaN.
// Relative L2 error, and elementwise |out-ref| ≤ tol*(|ref| + scale).
static void compare(const std::string& name, const std::vector<double>& out, const kr::TensorRef& ov,
                    const std::vector<double>& ref, double tol, double scale = 1.0) {
  ++g_checks;
  double num = 0, den = 0, worst = 0;
  int64_t bad = -1, nan_bad = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double o = out[off_of(ov, static_cast<int64_t>(i))];
    const double r = ref[i];
    if (std::isnan(r) || std::isnan(o)) {
      if (std::isnan(r) != std::isnan(o) && nan_bad < 0) nan_bad = static_cast<int64_t>(i);
      continue;
    }
    if (std::isinf(r) || std::isinf(o)) {
      if (r != o && bad < 0) bad = static_cast<int64_t>(i);
      continue;
    }
    num += (o - r) * (o - r);
    den += r * r;
    const double e = std::fabs(o - r) / (std::fabs(r) + scale);
    if (e > worst) worst = e;
    if (e > tol && bad < 0) bad = static_cast<int64_t>(i);
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  const bool ok = bad < 0 && nan_bad < 0;
  if (!ok) {
    ++g_failures;
    const int64_t i = nan_bad >= 0 ? nan_bad : bad;
    std::printf("FAIL %-58s rel_l2=%.2e worst=%.2e at %lld: out=%.9g ref=%.9g%s\n", name.c_str(), rel,
                worst, static_cast<long long>(i), out[off_of(ov, i)], ref[i],
                nan_bad >= 0 ? " (NaN mismatch)" : "");
  } else {
    std::printf("ok   %-58s rel_l2=%.2e worst=%.2e\n", name.c_str(), rel, worst);
  }
}

// Runs `launch` twice into a poisoned output; fails if the bits differ.
static void run_twice(const std::string& name, const std::vector<Buf*>& outs,
                      const std::function<cudaError_t()>& launch) {
  std::vector<std::vector<unsigned char>> first;
  for (int rep = 0; rep < 2; ++rep) {
    for (Buf* o : outs) o->poison();
    CUDA_OK(launch());
    CUDA_OK(cudaDeviceSynchronize());
    if (rep == 0) {
      for (Buf* o : outs) first.push_back(o->raw());
    } else {
      for (size_t k = 0; k < outs.size(); ++k) {
        if (outs[k]->raw() != first[k]) {
          ++g_failures;
          std::printf("FAIL %-58s not bit-identical across two runs\n", name.c_str());
        }
      }
    }
  }
}

// ---- elementwise ------------------------------------------------------------------
static double gelu_erf_d(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
static double gelu_tanh_d(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double sigmoid_d(double x) { return 1 / (1 + std::exp(-x)); }

static void check_unary() {
  struct U { kr::UnaryOp op; const char* name; double lo, hi; std::function<double(double)> f; };
  const std::vector<U> ops = {
      {kr::UnaryOp::neg, "neg", -4, 4, [](double x) { return -x; }},
      {kr::UnaryOp::abs, "abs", -4, 4, [](double x) { return std::fabs(x); }},
      {kr::UnaryOp::exp, "exp", -6, 6, [](double x) { return std::exp(x); }},
      {kr::UnaryOp::log, "log", 0.01, 50, [](double x) { return std::log(x); }},
      {kr::UnaryOp::sqrt, "sqrt", 0, 50, [](double x) { return std::sqrt(x); }},
      {kr::UnaryOp::rsqrt, "rsqrt", 0.01, 50, [](double x) { return 1 / std::sqrt(x); }},
      {kr::UnaryOp::tanh, "tanh", -5, 5, [](double x) { return std::tanh(x); }},
      {kr::UnaryOp::sigmoid, "sigmoid", -8, 8, sigmoid_d},
      {kr::UnaryOp::relu, "relu", -4, 4, [](double x) { return x > 0 ? x : 0.0; }},
      {kr::UnaryOp::gelu_erf, "gelu_erf", -5, 5, gelu_erf_d},
      {kr::UnaryOp::gelu_tanh, "gelu_tanh", -5, 5, gelu_tanh_d},
      {kr::UnaryOp::silu, "silu", -8, 8, [](double x) { return x * sigmoid_d(x); }},
  };
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (const auto& u : ops) {
      // contiguous odd size, and a transposed (non-contiguous) input view
      for (int layout = 0; layout < 2; ++layout) {
        const int64_t r = 333, c = 257;
        Buf x(t, r * c), out(t, r * c);
        fill_uniform(x, u.lo, u.hi);
        x.upload();
        kr::TensorRef xv = layout == 0 ? view(x, {r, c}) : view(x, {r, c}, {1, r});
        kr::TensorRef ov = view(out, {r, c});
        std::vector<double> ref(r * c);
        for (int64_t i = 0; i < r * c; ++i) ref[i] = round_to(t, u.f(x.v[off_of(xv, i)]));
        const std::string name = std::string("unary ") + u.name + " " + dname(t) + (layout ? " transposed" : "");
        run_twice(name, {&out}, [&] { return kr::launch_unary(u.op, xv, ov, nullptr); });
        compare(name, out.download(), ov, ref, tol_for(t) * 4, 1e-3);
      }
    }
  }
}

static void check_binary() {
  struct B { kr::BinaryOp op; const char* name; bool positive_a; std::function<double(double, double)> f; };
  const std::vector<B> ops = {
      {kr::BinaryOp::add, "add", false, [](double a, double b) { return a + b; }},
      {kr::BinaryOp::sub, "sub", false, [](double a, double b) { return a - b; }},
      {kr::BinaryOp::mul, "mul", false, [](double a, double b) { return a * b; }},
      {kr::BinaryOp::div, "div", false, [](double a, double b) { return a / b; }},
      {kr::BinaryOp::maximum, "maximum", false, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }},
      {kr::BinaryOp::minimum, "minimum", false, [](double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }},
      {kr::BinaryOp::pow, "pow", true, [](double a, double b) { return std::pow(a, b); }},
      {kr::BinaryOp::swiglu, "swiglu", false, [](double a, double b) { return a * sigmoid_d(a) * b; }},
      {kr::BinaryOp::geglu_erf, "geglu_erf", false, [](double a, double b) { return gelu_erf_d(a) * b; }},
      {kr::BinaryOp::geglu_tanh, "geglu_tanh", false, [](double a, double b) { return gelu_tanh_d(a) * b; }},
  };
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (const auto& o : ops) {
      const bool gated = o.op == kr::BinaryOp::swiglu || o.op == kr::BinaryOp::geglu_erf ||
                         o.op == kr::BinaryOp::geglu_tanh;
      // case 0: a [64,1,130] with b [7,130] → [64,7,130]; case 1: same shape 1<<20+3
      for (int c = 0; c < 2; ++c) {
        if (gated && c == 0) continue;
        std::vector<int64_t> as = c == 0 ? std::vector<int64_t>{64, 1, 130} : std::vector<int64_t>{(1 << 20) + 3};
        std::vector<int64_t> bs = c == 0 ? std::vector<int64_t>{7, 130} : as;
        std::vector<int64_t> os = c == 0 ? std::vector<int64_t>{64, 7, 130} : as;
        int64_t na = 1, nb = 1, no = 1;
        for (auto s : as) na *= s;
        for (auto s : bs) nb *= s;
        for (auto s : os) no *= s;
        Buf a(t, na), b(t, nb), out(t, no);
        if (o.positive_a) fill_uniform(a, 0.1, 3); else fill_normal(a);
        if (o.positive_a) fill_uniform(b, -2, 2); else fill_uniform(b, 0.5, 2);
        if (o.op == kr::BinaryOp::maximum || o.op == kr::BinaryOp::minimum) { a.v[5] = NAN; b.v[9] = NAN; }
        if (o.op == kr::BinaryOp::sub || o.op == kr::BinaryOp::add) a.v[3] = INFINITY;
        a.upload();
        b.upload();
        auto av = view(a, as), bv = view(b, bs), ov = view(out, os);
        std::vector<double> ref(no);
        for (int64_t i = 0; i < no; ++i) {
          double va, vb;
          if (c == 0) {
            const int64_t k = i % 130, j = (i / 130) % 7, m = i / 910;
            va = a.v[m * 130 + k];
            vb = b.v[j * 130 + k];
          } else {
            va = a.v[i];
            vb = b.v[i];
          }
          ref[i] = round_to(t, o.f(va, vb));
        }
        const std::string name = std::string("binary ") + o.name + " " + dname(t) + (c == 0 ? " broadcast" : " 1M+3");
        run_twice(name, {&out}, [&] { return kr::launch_binary(o.op, av, bv, ov, nullptr); });
        compare(name, out.download(), ov, ref, tol_for(t) * 4, 1e-3);
      }
    }
  }
}

static void check_cast() {
  const DType ts[] = {DType::f32, DType::f16, DType::bf16, DType::i32};
  for (DType from : ts) {
    for (DType to : ts) {
      const int64_t n = 100003;
      Buf x(from, n), out(to, n);
      fill_uniform(x, -300, 300);
      if (kr::is_floating(from)) { x.v[1] = NAN; x.v[2] = 1e30; x.v[3] = -1e30; x.v[4] = -2.7; }
      x.upload();
      std::vector<double> ref(n);
      for (int64_t i = 0; i < n; ++i) {
        double v = x.v[i];
        if (to == DType::i32) {
          if (std::isnan(v)) v = 0;
          else v = std::trunc(std::min(std::max(v, -2147483648.0), 2147483647.0));
          if (std::isinf(x.v[i])) v = x.v[i] > 0 ? 2147483647.0 : -2147483648.0;
        }
        ref[i] = to == DType::i32 ? v : round_to(to, v);
      }
      auto xv = view(x, {n}), ov = view(out, {n});
      const std::string name = std::string("cast ") + dname(from) + "->" + dname(to);
      run_twice(name, {&out}, [&] { return kr::launch_cast(xv, ov, nullptr); });
      compare(name, out.download(), ov, ref, 0.0, 1.0);
    }
  }
}

// Layouts where an input's stride-1 dim is not out's (the TRANSPOSED elementwise path, tiled
// through shared memory), with partial tiles, a batch dim and a broadcast operand.
static void check_transposed_elementwise() {
  struct L {
    const char* name;
    std::vector<int64_t> shape, as, bs, os;
  };
  const std::vector<L> layouts = {
      {"[300,200] a^T", {300, 200}, {1, 300}, {200, 1}, {200, 1}},
      {"[300,200] a^T b^T", {300, 200}, {1, 300}, {1, 300}, {200, 1}},
      {"[300,200] a^T b[200]", {300, 200}, {1, 300}, {0, 1}, {200, 1}},
      {"[300,200] out^T", {300, 200}, {200, 1}, {200, 1}, {1, 300}},
      {"[5,70,40] a dims 1,2 swapped", {5, 70, 40}, {2800, 1, 70}, {2800, 40, 1}, {2800, 40, 1}},
      {"[33,17] a^T partial tiles", {33, 17}, {1, 33}, {17, 1}, {17, 1}},
  };
  auto phys = [](const std::vector<int64_t>& shape, const std::vector<int64_t>& st) {
    int64_t n = 1;
    for (size_t d = 0; d < shape.size(); ++d) n += (shape[d] - 1) * st[d];
    return n;
  };
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (const L& l : layouts) {
      int64_t n = 1;
      for (auto d : l.shape) n *= d;
      Buf a(t, phys(l.shape, l.as)), b(t, phys(l.shape, l.bs)), out(t, phys(l.shape, l.os));
      fill_uniform(a, -4, 4);
      fill_uniform(b, 0.5, 2);
      a.upload();
      b.upload();
      auto av = view(a, l.shape, l.as), bv = view(b, l.shape, l.bs), ov = view(out, l.shape, l.os);
      std::vector<double> ref(n);
      for (int64_t i = 0; i < n; ++i) ref[i] = round_to(t, a.v[off_of(av, i)] * b.v[off_of(bv, i)]);
      std::string name = std::string("binary mul ") + dname(t) + " " + l.name;
      run_twice(name, {&out},
                [&] { return kr::launch_binary(kr::BinaryOp::mul, av, bv, ov, nullptr); });
      compare(name, out.download(), ov, ref, tol_for(t) * 4, 1e-3);
      for (int64_t i = 0; i < n; ++i) ref[i] = round_to(t, std::tanh(a.v[off_of(av, i)]));
      name = std::string("unary tanh ") + dname(t) + " " + l.name;
      run_twice(name, {&out}, [&] { return kr::launch_unary(kr::UnaryOp::tanh, av, ov, nullptr); });
      compare(name, out.download(), ov, ref, tol_for(t) * 4, 1e-3);
      // cast to i32 (truncation) of the same layout
      Buf oi(DType::i32, phys(l.shape, l.os));
      auto oiv = view(oi, l.shape, l.os);
      for (int64_t i = 0; i < n; ++i) ref[i] = std::trunc(a.v[off_of(av, i)]);
      name = std::string("cast ") + dname(t) + "->i32 " + l.name;
      run_twice(name, {&oi}, [&] { return kr::launch_cast(av, oiv, nullptr); });
      compare(name, oi.download(), oiv, ref, 0.0, 1.0);
    }
  }
}

// ---- reductions -------------------------------------------------------------------
static const char* rname(kr::ReduceOp op) {
  const char* n[] = {"sum", "mean", "prod", "max", "min", "argmax", "argmin"};
  return n[static_cast<int>(op)];
}

static void check_reduce_case(kr::ReduceOp op, DType t, std::vector<int64_t> shape, uint32_t mask,
                              bool keep, bool transposed, const char* label) {
  const int nd = static_cast<int>(shape.size());
  int64_t n = 1;
  for (auto s : shape) n *= s;
  Buf x(t, n);
  if (op == kr::ReduceOp::prod) fill_uniform(x, 0.98, 1.02);
  else fill_normal(x, 0.5, 1.0);
  if ((op == kr::ReduceOp::argmax || op == kr::ReduceOp::argmin) && t != DType::f32) {
    for (auto& v : x.v) v = std::round(v * 4) / 4;  // ties: the first index must win
  }
  if (op == kr::ReduceOp::max || op == kr::ReduceOp::argmax) { if (n > 100) x.v[n / 3] = NAN; }
  if (op == kr::ReduceOp::min && n > 100) x.v[n / 2] = -INFINITY;
  x.upload();
  // logical x: shape; physical: transposed (dims reversed in memory) when asked
  std::vector<int64_t> strides(nd);
  int64_t s = 1;
  if (transposed) {
    for (int d = 0; d < nd; ++d) { strides[d] = s; s *= shape[d]; }
  } else {
    for (int d = nd - 1; d >= 0; --d) { strides[d] = s; s *= shape[d]; }
  }
  auto xv = view(x, shape, strides);
  std::vector<int64_t> oshape;
  int64_t m = 1, k = 1;
  for (int d = 0; d < nd; ++d) {
    if ((mask >> d) & 1u) { k *= shape[d]; if (keep) oshape.push_back(1); }
    else { m *= shape[d]; oshape.push_back(shape[d]); }
  }
  const bool arg = op == kr::ReduceOp::argmax || op == kr::ReduceOp::argmin;
  Buf out(arg ? DType::i64 : t, m);
  auto ov = view(out, oshape);
  std::vector<double> ref(m), scale(m, 0.0);
  std::vector<double> acc(m), best(m);
  std::vector<int64_t> besti(m, -1);
  for (int64_t i = 0; i < m; ++i) {
    acc[i] = op == kr::ReduceOp::prod ? 1.0 : op == kr::ReduceOp::max ? -INFINITY : op == kr::ReduceOp::min ? INFINITY : 0.0;
  }
  // iterate logical indices row-major; split into output index and reduced index
  std::vector<int64_t> idx(nd, 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t o = 0, r = 0, xo = 0;
    for (int d = 0; d < nd; ++d) {
      xo += idx[d] * strides[d];
      if ((mask >> d) & 1u) r = r * shape[d] + idx[d];
      else o = o * shape[d] + idx[d];
    }
    const double v = x.v[xo];
    scale[o] += std::fabs(v);
    switch (op) {
      case kr::ReduceOp::sum: case kr::ReduceOp::mean: acc[o] += v; break;
      case kr::ReduceOp::prod: acc[o] *= v; break;
      case kr::ReduceOp::max: acc[o] = (std::isnan(v) || std::isnan(acc[o])) ? NAN : std::max(acc[o], v); break;
      case kr::ReduceOp::min: acc[o] = (std::isnan(v) || std::isnan(acc[o])) ? NAN : std::min(acc[o], v); break;
      case kr::ReduceOp::argmax: case kr::ReduceOp::argmin: {
        const bool better = besti[o] < 0 ||
            (!std::isnan(best[o]) && (std::isnan(v) || (op == kr::ReduceOp::argmax ? v > best[o] : v < best[o])));
        if (better) { best[o] = v; besti[o] = r; }
        break;
      }
    }
    for (int d = nd - 1; d >= 0; --d) { if (++idx[d] < shape[d]) break; idx[d] = 0; }
  }
  for (int64_t i = 0; i < m; ++i) {
    if (arg) ref[i] = static_cast<double>(besti[i]);
    else if (op == kr::ReduceOp::mean) ref[i] = k == 0 ? NAN : acc[i] / k;
    else ref[i] = acc[i];
    if (!arg) ref[i] = round_to(t, ref[i]);  // f16 sums past 65504 are inf, as stored
  }
  const int64_t ws_bytes = kr::reduce_workspace_bytes(op, xv, mask, ov);
  void* ws = nullptr;
  if (ws_bytes) CUDA_OK(cudaMalloc(&ws, ws_bytes));
  const std::string name = std::string(rname(op)) + " " + dname(t) + " " + label;
  run_twice(name, {&out}, [&] { return kr::launch_reduce(op, xv, mask, ov, ws, nullptr); });
  auto got = out.download();
  if (ws) cudaFree(ws);
  // sum/mean: error relative to Σ|x| of the row (its condition); output rounding to t
  double tol = tol_for(t);
  if (op == kr::ReduceOp::sum || op == kr::ReduceOp::mean) {
    for (int64_t i = 0; i < m; ++i) {
      const double sc = op == kr::ReduceOp::mean ? scale[i] / std::max<int64_t>(k, 1) : scale[i];
      if (!std::isnan(ref[i]) && !std::isinf(ref[i]) && std::fabs(got[off_of(ov, i)] - ref[i]) > tol * (std::fabs(ref[i]) + sc) + 1e-6 * sc) {
        ++g_failures;
        std::printf("FAIL %-58s out[%lld]=%.9g ref=%.9g\n", name.c_str(), (long long)i, got[off_of(ov, i)], ref[i]);
        return;
      }
    }
  }
  compare(name, got, ov, ref, arg ? 0.0 : (op == kr::ReduceOp::prod ? tol * 4 : (op == kr::ReduceOp::sum || op == kr::ReduceOp::mean) ? 1e9 : 0.0),
          arg ? 1.0 : 1e-30);
}

static void check_reduce() {
  const kr::ReduceOp ops[] = {kr::ReduceOp::sum, kr::ReduceOp::mean, kr::ReduceOp::prod, kr::ReduceOp::max,
                              kr::ReduceOp::min, kr::ReduceOp::argmax, kr::ReduceOp::argmin};
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (auto op : ops) {
      const bool prodlike = op == kr::ReduceOp::prod;
      check_reduce_case(op, t, {257, 1000}, 0b10, false, false, "[257,1000] axis1 warp-rows");
      check_reduce_case(op, t, {64, prodlike ? 3000 : 50001}, 0b10, true, false, "[64,50001] axis1 split keepdims");
      check_reduce_case(op, t, {3, 1 << 18, 3}, 0b111, false, false, "[3,2^18,3] all (two-pass)");
      check_reduce_case(op, t, {prodlike ? 300 : 5000, 72}, 0b01, false, false, "[5000,72] axis0 column");
      check_reduce_case(op, t, {37, 33, 65}, 0b101, false, false, "[37,33,65] axes0,2 generic");
      // GENERIC with a contiguous innermost reduced run of a multiple of V (NCHW statistics).
      check_reduce_case(op, t, {6, 40, 8, 16}, 0b1101, false, false,
                        "[6,40,8,16] axes0,2,3 generic vector");
      check_reduce_case(op, t, {4, 30, 64, prodlike ? 8 : 64}, 0b1101, true, false,
                        "[4,30,64,64] axes0,2,3 generic vector split");
      check_reduce_case(op, t, {130, 1001}, 0b10, false, true, "[130,1001] axis1 transposed");
      check_reduce_case(op, t, {1001, 130}, 0b01, false, true, "[1001,130] axis0 transposed");
      // Rows with kept dims that do not merge (x transposed): the RowParams form of the row kernel.
      check_reduce_case(op, t, {1000, 5, 7}, 0b001, false, true, "[1000,5,7] axis0 transposed");
      check_reduce_case(op, t, {prodlike ? 3000 : 50000, 3, 4}, 0b001, true, true, "[50000,3,4] axis0 transposed split");
      check_reduce_case(op, t, {7, 9, 11}, 0b010, true, false, "[7,9,11] axis1 column-generic");
      // Column reductions: ColLeanParams with outer items, split; ColParams (two reduced
      // dims that do not merge).
      check_reduce_case(op, t, {3, prodlike ? 300 : 5000, 72}, 0b010, false, false,
                        "[3,5000,72] axis1 column split");
      check_reduce_case(op, t, {6, 40, 5, 72}, 0b0101, false, false, "[6,40,5,72] axes0,2 column");
      check_reduce_case(op, t, {5}, 0b1, false, false, "[5] all");
    }
    for (auto op : {kr::ReduceOp::sum, kr::ReduceOp::prod, kr::ReduceOp::mean})
      check_reduce_case(op, t, {4, 0, 3}, 0b010, false, false, "[4,0,3] axis1 empty");
  }
}

// ---- softmax ----------------------------------------------------------------------
// `xstrides` (when given) lays x out with those strides instead, e.g. with row groups
// apart so that its outer dims do not merge (the cached kernel's SoftmaxParams form).
static void check_softmax_case(DType t, std::vector<int64_t> shape, int axis, bool log, bool special,
                               bool transposed, const char* label, std::vector<int64_t> xstrides = {}) {
  const int nd = static_cast<int>(shape.size());
  int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<int64_t> strides(nd);
  int64_t s = 1;
  if (transposed) { for (int d = 0; d < nd; ++d) { strides[d] = s; s *= shape[d]; } }
  else { for (int d = nd - 1; d >= 0; --d) { strides[d] = s; s *= shape[d]; } }
  int64_t xn = n;
  if (!xstrides.empty()) {
    strides = xstrides;
    xn = 1;
    for (int d = 0; d < nd; ++d) xn += (shape[d] - 1) * strides[d];
  }
  Buf x(t, xn), out(t, n);
  fill_normal(x, 0.0, 3.0);
  const int64_t k = shape[axis];
  auto xv = view(x, shape, strides), ov = view(out, shape);
  // rows: every logical index with idx[axis] == 0
  std::vector<int64_t> row_starts;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, a = 0;
    for (int d = nd - 1; d >= 0; --d) { if (d == axis) a = rem % shape[d]; rem /= shape[d]; }
    if (a == 0) row_starts.push_back(i);
  }
  int64_t step = 1;
  for (int d = nd - 1; d > axis; --d) step *= shape[d];
  if (special && row_starts.size() > 3) {
    x.v[off_of(xv, row_starts[0] + step * (k / 2))] = -INFINITY;                 // one -inf
    x.v[off_of(xv, row_starts[1] + step * (k - 1))] = NAN;                       // NaN row
    for (int64_t j = 0; j < k; ++j) x.v[off_of(xv, row_starts[2] + step * j)] = -INFINITY;  // all -inf
    x.v[off_of(xv, row_starts[3])] = 80.0;                                        // large
  }
  x.upload();
  std::vector<double> ref(n);
  for (int64_t r0 : row_starts) {
    double m = -INFINITY;
    bool nan = false;
    for (int64_t j = 0; j < k; ++j) { double v = x.v[off_of(xv, r0 + j * step)]; if (std::isnan(v)) nan = true; m = std::max(m, v); }
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(x.v[off_of(xv, r0 + j * step)] - m);
    for (int64_t j = 0; j < k; ++j) {
      const double v = x.v[off_of(xv, r0 + j * step)];
      double y = log ? v - m - std::log(sum) : std::exp(v - m) / sum;
      if (nan || m == -INFINITY) y = NAN;
      ref[r0 + j * step] = round_to(t, y);
    }
  }
  const size_t wsb = kr::softmax_workspace_bytes(xv, axis, ov);
  void* ws = nullptr;
  if (wsb) CUDA_OK(cudaMalloc(&ws, wsb));
  const std::string name = std::string(log ? "log_softmax " : "softmax ") + dname(t) + " " + label;
  run_twice(name, {&out}, [&] { return kr::launch_softmax(xv, axis, log, ov, ws, nullptr); });
  // f16 softmax: probabilities under 6e-5 are subnormal, where one ulp is 6e-8 absolute.
  compare(name, out.download(), ov, ref, tol_for(t) * 4, log ? 1.0 : (t == DType::f32 ? 1e-6 : 1e-4));
  if (ws) cudaFree(ws);
}

static void check_softmax() {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (bool log : {false, true}) {
      check_softmax_case(t, {300, 1000}, 1, log, true, false, "[300,1000] warp");
      check_softmax_case(t, {5, 77}, 1, log, false, false, "[5,77] scalar");
      check_softmax_case(t, {64, 4096}, 1, log, true, false, "[64,4096] block");
      check_softmax_case(t, {8, 32768}, 1, log, true, false, "[8,32768] cached max");
      check_softmax_case(t, {4, 262144}, 1, log, true, false, "[4,262144] chunked");
      check_softmax_case(t, {4, 100003}, 1, log, true, false, "[4,100003] chunked odd");
      check_softmax_case(t, {513, 300}, 0, log, true, false, "[513,300] axis0 strided");
      check_softmax_case(t, {6, 40, 9}, 1, log, false, false, "[6,40,9] axis1 strided");
      check_softmax_case(t, {200, 3000}, 1, log, true, true, "[200,3000] transposed");
      check_softmax_case(t, {3, 4, 1000}, 2, log, true, false, "[3,4,1000] outer dims apart", {5000, 1000, 1});
      check_softmax_case(t, {3, 2, 4096}, 2, log, true, false, "[3,2,4096] outer dims apart", {12288, 4096, 1});
      // STAGED: axis-last copies in the workspace; beyond the cached limit out gets its own.
      check_softmax_case(t, {2048, 96}, 0, log, true, false, "[2048,96] axis0 staged");
      check_softmax_case(t, {40000, 3}, 0, log, true, false, "[40000,3] axis0 staged chunked");
      check_softmax_case(t, {48, 5, 64}, 1, log, true, true, "[48,5,64] axis1 transposed staged");
    }
  }
}

// ---- norms ------------------------------------------------------------------------
// `first` (when not NaN) replaces every row's first element (rows contiguous): an outlier
// there is the worst case for the 16-bit kernels' variance, shifted by that element.
// `split` (> 0): every operand is [rows / split, split, h], and x's groups of `split` rows
// lie one row apart, so its outer dims do not merge (the packed kernel's NormParams form).
static void check_norm_case(DType t, int64_t rows, int64_t h, bool rms, bool add, bool has_w, bool has_b,
                            bool transposed, const char* label, double first = NAN, int64_t split = 0) {
  const int64_t n = rows * h;
  const int64_t xn = split ? rows / split * (split + 1) * h : n;
  Buf x(t, xn), r(t, add ? n : 1), w(t, h), b(t, h), out(t, n), sum(t, add ? n : 1);
  fill_normal(x, 3.0, 2.0);  // offset mean exercises the two-pass variance
  if (!std::isnan(first)) {
    for (int64_t i = 0; i < rows; ++i) x.v[i * h] = first;
  }
  if (add) fill_normal(r, -1.0, 1.0);
  fill_normal(w, 1.0, 0.3);
  fill_normal(b, 0.0, 0.5);
  x.upload(); r.upload(); w.upload(); b.upload();
  std::vector<int64_t> shape{rows, h};
  std::vector<int64_t> xs = transposed ? std::vector<int64_t>{1, rows} : std::vector<int64_t>{h, 1};
  if (split) {
    shape = {rows / split, split, h};
    xs = {(split + 1) * h, h, 1};
  }
  kr::NormArgs a;
  a.x = view(x, shape, xs);
  a.out = view(out, shape);
  auto rv = view(r, shape), sv = view(sum, shape), wv = view(w, {h}), bv = view(b, {h});
  if (add) { a.residual = &rv; a.sum = &sv; }
  if (has_w) a.weight = &wv;
  if (has_b) a.bias = &bv;
  a.eps = 1e-5f;
  a.rms = rms;
  std::vector<double> ref(n), refsum(add ? n : 0);
  for (int64_t i = 0; i < rows; ++i) {
    std::vector<double> v(h);
    for (int64_t j = 0; j < h; ++j) {
      double val = x.v[off_of(a.x, i * h + j)];
      if (add) { val = round_to(t, val + r.v[i * h + j]); refsum[i * h + j] = val; }
      v[j] = val;
    }
    double mean = 0, var = 0;
    if (!rms) { for (double q : v) mean += q; mean /= h; }
    for (double q : v) var += (q - mean) * (q - mean);
    var /= h;
    const double inv = 1 / std::sqrt(var + 1e-5);
    for (int64_t j = 0; j < h; ++j) {
      double y = (v[j] - mean) * inv;
      if (has_w) y *= w.v[j];
      if (has_b) y += b.v[j];
      ref[i * h + j] = round_to(t, y);
    }
  }
  const size_t wsb = kr::norm_workspace_bytes(a);
  void* ws = nullptr;
  if (wsb) CUDA_OK(cudaMalloc(&ws, wsb));
  std::string name = std::string(add ? "add_" : "") + (rms ? "rmsnorm " : "layernorm ") + dname(t) + " " + label +
                     (has_w ? " w" : "") + (has_b ? " b" : "");
  std::vector<Buf*> outs = {&out};
  if (add) outs.push_back(&sum);
  run_twice(name, outs, [&] { return kr::launch_norm(a, ws, nullptr); });
  compare(name, out.download(), a.out, ref, tol_for(t) * 8, 1.0);
  if (add) compare(name + " sum", sum.download(), sv, refsum, 0.0, 1.0);
  if (ws) cudaFree(ws);
}

static void check_norm() {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (int kind = 0; kind < 4; ++kind) {
      const bool rms = kind & 1, add = kind & 2;
      check_norm_case(t, 1000, 768, rms, add, true, !rms, false, "[1000,768]");
      check_norm_case(t, 33, 4096, rms, add, add, !rms && add, false, "[33,4096]");
      check_norm_case(t, 7, 5001, rms, add, true, !rms, false, "[7,5001] odd");
      check_norm_case(t, 3, 24576, rms, add, true, !rms, false, "[3,24576]");
      check_norm_case(t, 2, 262144, rms, add, true, !rms, false, "[2,262144] chunked");
      check_norm_case(t, 300, 100, rms, add, true, !rms, true, "[300,100] transposed");
      check_norm_case(t, 1000, 768, rms, add, true, !rms, true, "[1000,768] transposed");
      check_norm_case(t, 20, 40000, rms, add, true, !rms, true, "[20,40000] transposed chunked");
      check_norm_case(t, 5, 10, rms, add, false, false, false, "[5,10] no affine");
      check_norm_case(t, 64, 4096, rms, add, true, !rms, false, "[64,4096] first 2000", 2000.0);
      check_norm_case(t, 16, 32768, rms, add, true, !rms, false, "[16,32768] first -3000", -3000.0);
      // Rows that fill a configuration exactly (the 16-bit full-row forms when a weight
      // is given): warp rows with a partial last block, block rows, weight without bias.
      check_norm_case(t, 41, 1024, rms, add, true, !rms, false, "[41,1024] full warp rows");
      check_norm_case(t, 6, 256, rms, add, true, !rms, false, "[6,256] full");
      check_norm_case(t, 9, 2048, rms, add, true, false, false, "[9,2048] full, no bias");
      check_norm_case(t, 5, 8192, rms, add, true, !rms, false, "[5,8192] full");
      check_norm_case(t, 4, 4096, rms, add, false, !rms, false, "[4,4096] bias only");
      check_norm_case(t, 12, 4096, rms, add, true, !rms, false, "[3,4,4096] outer dims apart", NAN, 4);
      check_norm_case(t, 15, 768, rms, add, true, !rms, false, "[5,3,768] outer dims apart", NAN, 3);
    }
  }
}

// ---- timing -----------------------------------------------------------------------
struct Timer {
  cudaEvent_t a, b;
  Timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
  ~Timer() { cudaEventDestroy(a); cudaEventDestroy(b); }
};

// Median time (µs) of `iters` runs of f(rep) after `warm` warm-ups, one event pair per run.
static double time_us(const std::function<void(int)>& f, int iters = 50, int warm = 5) {
  for (int i = 0; i < warm; ++i) f(i);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<cudaEvent_t> ev(2 * iters);
  for (auto& e : ev) cudaEventCreate(&e);
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(ev[2 * i]);
    f(i);
    cudaEventRecord(ev[2 * i + 1]);
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());
  std::vector<double> t(iters);
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
    t[i] = ms * 1000.0;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[iters / 2];
}

// Launch-bound: mean µs per call over a graph-free back-to-back loop of n calls.
static double time_small_us(const std::function<void()>& f, int n = 2000) {
  for (int i = 0; i < 50; ++i) f();
  CUDA_OK(cudaDeviceSynchronize());
  Timer tm;
  cudaEventRecord(tm.a);
  for (int i = 0; i < n; ++i) f();
  cudaEventRecord(tm.b);
  CUDA_OK(cudaEventSynchronize(tm.b));
  float ms = 0;
  cudaEventElapsedTime(&ms, tm.a, tm.b);
  return ms * 1000.0 / n;
}

static void report(const char* name, double us, double bytes, double copy_gbs) {
  const double gbs = bytes / (us * 1e-6) / 1e9;
  std::printf("perf %-44s %9.1f us %8.1f GB/s %6.1f%% of copy\n", name, us, gbs, 100.0 * gbs / copy_gbs);
  if (g_json)
    std::fprintf(g_json, "{\"name\":\"%s\",\"us\":%.3f,\"gbs\":%.1f,\"copy_gbs\":%.1f}\n", name, us, gbs, copy_gbs);
}

// Device buffers of `bytes` each, enough of them to exceed 3× L2 together.
struct Rotation {
  std::vector<void*> bufs;
  Rotation(size_t bytes, size_t l2) {
    size_t count = std::max<size_t>(1, std::min<size_t>(16, (3 * l2) / std::max<size_t>(bytes, 1) + 1));
    for (size_t i = 0; i < count; ++i) {
      void* p;
      CUDA_OK(cudaMalloc(&p, bytes));
      std::vector<float> init(bytes / 4);
      for (size_t j = 0; j < init.size(); ++j) init[j] = 0.25f + 0.5f * static_cast<float>((j * 2654435761u) % 1000) / 1000.0f;
      CUDA_OK(cudaMemcpy(p, init.data(), init.size() * 4, cudaMemcpyHostToDevice));
      bufs.push_back(p);
    }
  }
  ~Rotation() { for (void* p : bufs) cudaFree(p); }
  void* at(int i) const { return bufs[i % bufs.size()]; }
};

static kr::TensorRef raw_view(void* p, DType t, std::vector<int64_t> shape) {
  kr::TensorRef r;
  r.data = p;
  r.dtype = t;
  r.ndim = static_cast<int>(shape.size());
  int64_t s = 1;
  for (int d = r.ndim - 1; d >= 0; --d) { r.shape[d] = shape[d]; r.strides[d] = s; s *= shape[d]; }
  return r;
}

static void perf() {
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  const size_t l2 = prop.l2CacheSize;
  std::printf("device %s, %d SMs, L2 %zu MB\n", prop.name, prop.multiProcessorCount, l2 >> 20);
  // copy bandwidth: 1 GiB device-to-device, read + write bytes
  const size_t cb = size_t{1} << 30;
  void *src, *dst;
  CUDA_OK(cudaMalloc(&src, cb));
  CUDA_OK(cudaMalloc(&dst, cb));
  CUDA_OK(cudaMemset(src, 1, cb));
  const double copy_us = time_us([&](int) { cudaMemcpyAsync(dst, src, cb, cudaMemcpyDeviceToDevice); }, 20, 3);
  const double copy_gbs = 2.0 * cb / (copy_us * 1e-6) / 1e9;
  std::printf("perf %-44s %9.1f us %8.1f GB/s (reference)\n", "cudaMemcpy D2D 1 GiB", copy_us, copy_gbs);
  if (g_json) std::fprintf(g_json, "{\"name\":\"copy\",\"us\":%.3f,\"gbs\":%.1f}\n", copy_us, copy_gbs);
  CUDA_OK(cudaFree(src));
  CUDA_OK(cudaFree(dst));

  void* out;
  CUDA_OK(cudaMalloc(&out, size_t{1} << 30));
  void* ws;
  CUDA_OK(cudaMalloc(&ws, size_t{64} << 20));

  struct Case { const char* name; DType t; std::vector<int64_t> shape; };
  auto elems = [](const std::vector<int64_t>& s) { int64_t n = 1; for (auto v : s) n *= v; return n; };

  // elementwise
  for (auto c : {Case{"add f32 [64M]", DType::f32, {1 << 26}}, Case{"add bf16 [16384,8192]", DType::bf16, {16384, 8192}}}) {
    const size_t bytes = elems(c.shape) * kr::dtype_size(c.t);
    Rotation ra(bytes, l2), rb(bytes, l2);
    const double us = time_us([&](int i) {
      kr::launch_binary(kr::BinaryOp::add, raw_view(ra.at(i), c.t, c.shape), raw_view(rb.at(i), c.t, c.shape),
                        raw_view(out, c.t, c.shape), nullptr);
    });
    report(c.name, us, 3.0 * bytes, copy_gbs);
  }
  {
    const std::vector<int64_t> s = {16384, 8192};
    const size_t bytes = elems(s) * 2;
    Rotation ra(bytes, l2), rb(2 * 8192, l2);
    const double us = time_us([&](int i) {
      kr::launch_binary(kr::BinaryOp::add, raw_view(ra.at(i), DType::bf16, s), raw_view(rb.at(i), DType::bf16, {8192}),
                        raw_view(out, DType::bf16, s), nullptr);
    });
    report("add bf16 [16384,8192]+[8192] bcast", us, 2.0 * bytes, copy_gbs);
  }
  for (auto c : {Case{"gelu bf16 [128M]", DType::bf16, {1 << 27}}, Case{"silu f32 [64M]", DType::f32, {1 << 26}}}) {
    const size_t bytes = elems(c.shape) * kr::dtype_size(c.t);
    Rotation ra(bytes, l2);
    const auto op = c.t == DType::bf16 ? kr::UnaryOp::gelu_erf : kr::UnaryOp::silu;
    const double us = time_us([&](int i) {
      kr::launch_unary(op, raw_view(ra.at(i), c.t, c.shape), raw_view(out, c.t, c.shape), nullptr);
    });
    report(c.name, us, 2.0 * bytes, copy_gbs);
  }
  {
    const std::vector<int64_t> s = {1 << 27};
    Rotation ra(elems(s) * 4, l2);
    const double us = time_us([&](int i) {
      kr::launch_cast(raw_view(ra.at(i), DType::f32, s), raw_view(out, DType::bf16, s), nullptr);
    });
    report("cast f32->bf16 [128M]", us, 6.0 * elems(s), copy_gbs);
  }
  {
    const std::vector<int64_t> s = {8192, 8192};
    Rotation ra(elems(s) * 4, l2), rb(elems(s) * 4, l2);
    const double us = time_us([&](int i) {
      kr::launch_binary(kr::BinaryOp::swiglu, raw_view(ra.at(i), DType::bf16, s), raw_view(rb.at(i), DType::bf16, s),
                        raw_view(out, DType::bf16, s), nullptr);
    });
    report("swiglu bf16 [8192,8192]", us, 6.0 * elems(s), copy_gbs);
  }
  // reductions
  struct RCase { const char* name; DType t; std::vector<int64_t> shape; uint32_t mask; };
  for (auto c : {RCase{"sum f32 all [256M]", DType::f32, {1 << 28}, 1u},
                 RCase{"sum bf16 all [256M]", DType::bf16, {1 << 28}, 1u},
                 RCase{"sum f32 rows [16384,4096] axis1", DType::f32, {16384, 4096}, 2u},
                 RCase{"max bf16 rows [65536,1024] axis1", DType::bf16, {65536, 1024}, 2u},
                 RCase{"sum f32 cols [16384,4096] axis0", DType::f32, {16384, 4096}, 1u},
                 RCase{"sum bf16 cols [4096,16384] axis0", DType::bf16, {4096, 16384}, 1u},
                 RCase{"argmax f32 rows [4096,32000] axis1", DType::f32, {4096, 32000}, 2u},
                 RCase{"mean f32 [64,1M] axis1 (split)", DType::f32, {64, 1 << 20}, 2u}}) {
    const size_t bytes = elems(c.shape) * kr::dtype_size(c.t);
    Rotation ra(bytes, l2);
    const bool arg = std::strstr(c.name, "argmax") != nullptr;
    const kr::ReduceOp op = arg ? kr::ReduceOp::argmax : std::strstr(c.name, "max") ? kr::ReduceOp::max
                          : std::strstr(c.name, "mean") ? kr::ReduceOp::mean : kr::ReduceOp::sum;
    std::vector<int64_t> os;
    for (size_t d = 0; d < c.shape.size(); ++d) if (!((c.mask >> d) & 1u)) os.push_back(c.shape[d]);
    auto ov = raw_view(out, arg ? DType::i64 : c.t, os);
    const double us = time_us([&](int i) {
      kr::launch_reduce(op, raw_view(ra.at(i), c.t, c.shape), c.mask, ov, ws, nullptr);
    });
    report(c.name, us, static_cast<double>(bytes), copy_gbs);
  }
  // softmax
  for (auto c : {Case{"softmax bf16 [16384,4096]", DType::bf16, {16384, 4096}},
                 Case{"softmax f32 [32768,1000]", DType::f32, {32768, 1000}},
                 Case{"softmax f16 [4096,32000]", DType::f16, {4096, 32000}},
                 Case{"softmax f32 [256,32768]", DType::f32, {256, 32768}},
                 Case{"log_softmax f32 [32,262144]", DType::f32, {32, 262144}},
                 Case{"softmax bf16 [1024,262144]", DType::bf16, {1024, 262144}}}) {
    const size_t bytes = elems(c.shape) * kr::dtype_size(c.t);
    Rotation ra(bytes, l2);
    const bool log = std::strncmp(c.name, "log", 3) == 0;
    const double us = time_us([&](int i) {
      kr::launch_softmax(raw_view(ra.at(i), c.t, c.shape), 1, log, raw_view(out, c.t, c.shape), ws, nullptr);
    });
    report(c.name, us, 2.0 * bytes, copy_gbs);
  }
  // norms
  for (int kind = 0; kind < 4; ++kind) {
    const bool rms = kind & 1, add = kind & 2;
    for (auto c : {Case{"bf16 [16384,4096]", DType::bf16, {16384, 4096}}, Case{"f32 [8192,1024]", DType::f32, {8192, 1024}},
                   Case{"bf16 [64,262144]", DType::bf16, {64, 262144}}}) {
      const int64_t h = c.shape[1];
      const size_t bytes = elems(c.shape) * kr::dtype_size(c.t);
      Rotation ra(bytes, l2), rr(add ? bytes : 16, l2), rw(h * 4, l2);
      void* sum_out;
      CUDA_OK(cudaMalloc(&sum_out, add ? bytes : 16));
      const double us = time_us([&](int i) {
        kr::NormArgs a;
        a.x = raw_view(ra.at(i), c.t, c.shape);
        a.out = raw_view(out, c.t, c.shape);
        kr::TensorRef r = raw_view(rr.at(i), c.t, c.shape), s = raw_view(sum_out, c.t, c.shape);
        kr::TensorRef w = raw_view(rw.at(i), c.t, {h}), b = raw_view(rw.at(i + 1), c.t, {h});
        if (add) { a.residual = &r; a.sum = &s; }
        a.weight = &w;
        if (!rms) a.bias = &b;
        a.rms = rms;
        kr::launch_norm(a, ws, nullptr);
      });
      CUDA_OK(cudaFree(sum_out));
      const std::string name = std::string(add ? "add_" : "") + (rms ? "rmsnorm " : "layernorm ") + c.name;
      report(name.c_str(), us, (add ? 4.0 : 2.0) * bytes, copy_gbs);
    }
  }
  // launch-bound small shapes (µs per call, back-to-back)
  {
    Rotation ra(1 << 20, 0);
    auto x = raw_view(ra.at(0), DType::f32, {8, 128});
    std::printf("small softmax f32 [8,128]        %6.2f us/call\n",
                time_small_us([&] { kr::launch_softmax(x, 1, false, raw_view(out, DType::f32, {8, 128}), ws, nullptr); }));
    auto xl = raw_view(ra.at(0), DType::bf16, {4, 768});
    auto w = raw_view(ra.at(0), DType::bf16, {768});
    std::printf("small layernorm bf16 [4,768]     %6.2f us/call\n", time_small_us([&] {
      kr::NormArgs a; a.x = xl; a.out = raw_view(out, DType::bf16, {4, 768}); a.weight = &w; a.bias = &w;
      kr::launch_norm(a, ws, nullptr);
    }));
    auto xs = raw_view(ra.at(0), DType::f32, {1000});
    std::printf("small sum f32 [1000] all         %6.2f us/call\n", time_small_us([&] {
      kr::launch_reduce(kr::ReduceOp::sum, xs, 1u, raw_view(out, DType::f32, {}), ws, nullptr);
    }));
    auto xa = raw_view(ra.at(0), DType::f32, {4096});
    std::printf("small add f32 [4096]             %6.2f us/call\n", time_small_us([&] {
      kr::launch_binary(kr::BinaryOp::add, xa, xa, raw_view(out, DType::f32, {4096}), nullptr);
    }));
    std::printf("small empty-kernel reference: cudaMemsetAsync 4 B %6.2f us/call\n",
                time_small_us([&] { cudaMemsetAsync(out, 0, 4); }));
  }
  CUDA_OK(cudaFree(out));
  CUDA_OK(cudaFree(ws));
}

int main(int argc, char** argv) {
  bool do_check = true, do_perf = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-perf")) do_perf = false;
    if (!std::strcmp(argv[i], "--perf-only")) do_check = false;
    if (!std::strcmp(argv[i], "--json") && i + 1 < argc) g_json = std::fopen(argv[++i], "w");
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a crash must not swallow the log
  const uint64_t seed = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
  g_rng.seed(seed);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  if (do_check) {
    check_unary();
    check_binary();
    check_cast();
    check_transposed_elementwise();
    check_reduce();
    check_softmax();
    check_norm();
    std::printf("checks: %d compared, %d failures\n", g_checks, g_failures);
  }
  if (do_perf) perf();
  if (g_json) std::fclose(g_json);
  if (do_check) std::printf("RESULT: %s (%d failures)\n", g_failures ? "FAIL" : "PASS", g_failures);
  return g_failures ? 1 : 0;
}
