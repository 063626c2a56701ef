// matmul_check.cu — standalone GPU check and benchmark of the matmul plugins.
//
// Loads each plugin .so named on the command line through a stand-in host (the same
// gk_plugin_entry / init / supports / launch calls the runtime makes), then
//   1. checks every plugin that accepts a case against a float64 CPU reference on fresh
//      random data (odd/tiny shapes, transposes, padded and unaligned strides, broadcast
//      batches, alpha/beta, bias + relu/gelu/silu, f32 out), output poisoned with NaN;
//   2. times the plugins against cublasGemmEx in the same process (CUDA events, warm-up,
//      median of samples, input sets rotated so they exceed L2, random data; f32 rows
//      as tf32, and as full f32 ("highest", cuBLAS CUBLAS_COMPUTE_32F)).
// Build (no CMake needed):
//   nvcc -std=c++17 -O2 -I abi/include -Xcompiler -fopenmp tests/gpu/matmul/matmul_check.cu \
//        -lcublas -ldl -o matmul_check
// Run: matmul_check [--no-bench] [--no-check] [--only 8192x8192] libgpukit_matmul_sm90.so ...
//      (--only: benchmark the rows whose "MxNxK dtype B" label contains the text)
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpukit/gpukit_plugin.h"

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

namespace {

// ---------------------------------------------------------------- stand-in host
thread_local std::string g_last_error;
int g_sm_version = 0, g_sm_count = 0;

void host_log(void*, int32_t, const char* msg) { std::fprintf(stderr, "[plugin] %s\n", msg); }
void host_report(void*, const char* msg) { g_last_error = msg; }
gk_status host_alloc(void*, int32_t, uint64_t bytes, void* stream, void** out) {
  return cudaMallocAsync(out, bytes, static_cast<cudaStream_t>(stream)) == cudaSuccess
             ? GK_OK
             : GK_RESOURCE_EXHAUSTED;
}
gk_status host_free(void*, int32_t, void* ptr, void* stream) {
  return cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream)) == cudaSuccess ? GK_OK
                                                                              : GK_INTERNAL;
}
gk_status host_driver_symbol(void*, const char* name, void** out) {
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion(name, out, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return GK_NOT_FOUND;
  return GK_OK;
}
gk_status host_device_info(void*, int32_t device, gk_plugin_device* out) {
  if (device != 1) return GK_OUT_OF_RANGE;  // id 0 is the cpu, 1 is CUDA ordinal 0
  out->id = 1;
  out->kind = GK_DEVICE_KIND_CUDA;
  out->ordinal = 0;
  out->sm_version = g_sm_version;
  out->sm_count = g_sm_count;
  out->total_memory = 0;
  out->cuda_context = nullptr;
  return GK_OK;
}

gk_host_services make_host(const char* name) {
  gk_host_services h{};
  h.struct_size = sizeof(h);
  h.abi_min = GK_MAKE_VERSION(1, 0);
  h.abi_max = GK_MAKE_VERSION(1, 0xffff);
  h.plugin_name = name;
  h.log = host_log;
  h.report_error = host_report;
  h.alloc = host_alloc;
  h.free = host_free;
  h.cuda_driver_symbol = host_driver_symbol;
  h.device_info = host_device_info;
  return h;
}

struct Plugin {
  std::string name;
  std::string host_name;  // host.plugin_name points here
  gk_host_services host;
  const gk_plugin_api* api = nullptr;
  void* state = nullptr;
};

bool load_plugin(const char* path, Plugin* p) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("load %s: %s\n", path, dlerror());
    return false;
  }
  auto entry = reinterpret_cast<gk_plugin_entry_fn>(dlsym(lib, GK_PLUGIN_ENTRY_SYMBOL));
  if (!entry) return false;
  std::string base = path;
  base = base.substr(base.find_last_of('/') + 1);
  p->name = base;
  p->host_name = base;
  p->host = make_host(p->host_name.c_str());
  if (entry(&p->host, &p->api) != GK_OK) {
    std::printf("entry %s declined: %s\n", path, g_last_error.c_str());
    return false;
  }
  p->name = p->api->name;
  if (p->api->init(&p->host, &p->state) != GK_OK) {
    std::printf("init %s declined: %s\n", path, g_last_error.c_str());
    return false;
  }
  return true;
}

// ---------------------------------------------------------------- data
uint16_t f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
float bf2f(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f2h(float f) {
  __half h = __float2half_rn(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
float h2f(uint16_t u) {
  __half h;
  std::memcpy(&h, &u, 2);
  return __half2float(h);
}
size_t dsize(int dt) { return dt == GK_DTYPE_F64 ? 8 : dt == GK_DTYPE_F32 ? 4 : 2; }

// Host copy as doubles (values already rounded to dtype), device copy in dtype.
struct Buf {
  int dtype = GK_DTYPE_F32;
  std::vector<double> host;
  void* dev = nullptr;
  size_t n = 0;
  size_t offset_elems = 0;  // device data starts this many elements in (for misalignment)
};

double load_val(int dt, const void* p, size_t i) {
  switch (dt) {
    case GK_DTYPE_F64: return static_cast<const double*>(p)[i];
    case GK_DTYPE_F32: return static_cast<const float*>(p)[i];
    case GK_DTYPE_BF16: return bf2f(static_cast<const uint16_t*>(p)[i]);
    default: return h2f(static_cast<const uint16_t*>(p)[i]);
  }
}
void store_val(int dt, void* p, size_t i, double v) {
  switch (dt) {
    case GK_DTYPE_F64: static_cast<double*>(p)[i] = v; break;
    case GK_DTYPE_F32: static_cast<float*>(p)[i] = float(v); break;
    case GK_DTYPE_BF16: static_cast<uint16_t*>(p)[i] = f2bf(float(v)); break;
    default: static_cast<uint16_t*>(p)[i] = f2h(float(v)); break;
  }
}

std::mt19937_64 g_rng(12345);

void fill_random(Buf* b, int dtype, size_t n, size_t offset = 0, bool keep_host = true) {
  b->dtype = dtype;
  b->n = n;
  b->offset_elems = offset;
  std::vector<unsigned char> raw((n + offset) * dsize(dtype));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  if (keep_host) b->host.resize(n);
  for (size_t i = 0; i < n; ++i) {
    store_val(dtype, raw.data(), i + offset, u(g_rng));
    if (keep_host) b->host[i] = load_val(dtype, raw.data(), i + offset);
  }
  CHECK_CUDA(cudaMalloc(&b->dev, raw.size()));
  CHECK_CUDA(cudaMemcpy(b->dev, raw.data(), raw.size(), cudaMemcpyHostToDevice));
}
void* data_ptr(const Buf& b) { return static_cast<char*>(b.dev) + b.offset_elems * dsize(b.dtype); }

// ---------------------------------------------------------------- a call
struct Tensor {
  std::vector<int64_t> shape, strides;
  gk_plugin_tensor t{};
  void finish(void* data, int dtype) {
    t.data = data;
    t.dtype = dtype;
    t.ndim = int32_t(shape.size());
    t.shape = shape.data();
    t.strides = strides.data();
  }
};

// Row-major tensor [batch..., r, c] whose rows are `ld` apart (ld ≥ c).
Tensor make_tensor(const std::vector<int64_t>& batch, int64_t r, int64_t c, int64_t ld) {
  Tensor t;
  t.shape = batch;
  t.shape.push_back(r);
  t.shape.push_back(c);
  t.strides.assign(t.shape.size(), 0);
  t.strides.back() = 1;
  t.strides[t.shape.size() - 2] = ld;
  int64_t s = r * ld;
  for (int i = int(batch.size()) - 1; i >= 0; --i) {
    t.strides[i] = s;
    s *= batch[i];
  }
  return t;
}
size_t storage_elems(const Tensor& t) {
  size_t e = 1;
  for (size_t i = 0; i < t.shape.size(); ++i) e += size_t(t.shape[i] - 1) * size_t(t.strides[i]);
  return e;
}

struct Case {
  std::string name;
  int dtype, out_dtype;
  int64_t m, n, k;
  bool ta = false, tb = false;
  std::vector<int64_t> a_batch, b_batch;
  int64_t pad = 0;       // extra elements per row of a and b
  int misalign = 0;      // offset a's data by this many elements
  double alpha = 1.0, beta = 0.0;
  bool bias = false;
  const char* act = "none";
  bool tf32 = false;
  int check_rows = 0;    // 0: all rows; else a sample of rows per batch
};

struct Prepared {
  Tensor a, b, bias, c;
  Buf ab, bb, biasb, cb;
  std::vector<gk_attr> attrs;
  gk_kernel_args args{};
  gk_plugin_tensor inputs[3];
  std::vector<int64_t> out_batch;
  int64_t batch_count = 1;
};

void prepare(const Case& cs, Prepared* P, bool keep_host = true) {
  const int64_t ar = cs.ta ? cs.k : cs.m, ac = cs.ta ? cs.m : cs.k;
  const int64_t br = cs.tb ? cs.n : cs.k, bc = cs.tb ? cs.k : cs.n;
  P->a = make_tensor(cs.a_batch, ar, ac, ac + cs.pad);
  P->b = make_tensor(cs.b_batch, br, bc, bc + cs.pad);
  // out batch = broadcast of a's and b's batch dims
  const size_t nb = std::max(cs.a_batch.size(), cs.b_batch.size());
  P->out_batch.assign(nb, 1);
  for (size_t i = 0; i < nb; ++i) {
    int64_t x = 1, y = 1;
    if (i + cs.a_batch.size() >= nb) x = cs.a_batch[i + cs.a_batch.size() - nb];
    if (i + cs.b_batch.size() >= nb) y = cs.b_batch[i + cs.b_batch.size() - nb];
    P->out_batch[i] = std::max(x, y);
  }
  P->batch_count = 1;
  for (int64_t v : P->out_batch) P->batch_count *= v;
  P->c = make_tensor(P->out_batch, cs.m, cs.n, cs.n);
  fill_random(&P->ab, cs.dtype, storage_elems(P->a), cs.misalign, keep_host);
  fill_random(&P->bb, cs.dtype, storage_elems(P->b), 0, keep_host);
  fill_random(&P->cb, cs.out_dtype, storage_elems(P->c), 0, keep_host);
  P->a.finish(data_ptr(P->ab), cs.dtype);
  P->b.finish(data_ptr(P->bb), cs.dtype);
  P->c.finish(data_ptr(P->cb), cs.out_dtype);
  int ni = 2;
  P->inputs[0] = P->a.t;
  P->inputs[1] = P->b.t;
  if (cs.bias) {
    P->bias.shape = {cs.n};
    P->bias.strides = {1};
    fill_random(&P->biasb, cs.dtype, size_t(cs.n), 0, keep_host);
    P->bias.finish(data_ptr(P->biasb), cs.dtype);
    P->inputs[2] = P->bias.t;
    ni = 3;
  }
  auto add_int = [&](const char* n, int64_t v) {
    gk_attr a{};
    a.name = n;
    a.type = GK_ATTR_INT;
    a.value.i = v;
    P->attrs.push_back(a);
  };
  auto add_float = [&](const char* n, double v) {
    gk_attr a{};
    a.name = n;
    a.type = GK_ATTR_FLOAT;
    a.value.f = v;
    P->attrs.push_back(a);
  };
  auto add_str = [&](const char* n, const char* v) {
    gk_attr a{};
    a.name = n;
    a.type = GK_ATTR_STRING;
    a.value.s = v;
    P->attrs.push_back(a);
  };
  add_int("transpose_a", cs.ta);
  add_int("transpose_b", cs.tb);
  add_float("alpha", cs.alpha);
  add_float("beta", cs.beta);
  add_str("activation", cs.act);
  add_str("precision", cs.tf32 ? "tf32" : "highest");
  P->args.struct_size = sizeof(gk_kernel_args);
  P->args.op = "matmul";
  P->args.device = 1;
  P->args.stream = nullptr;
  P->args.inputs = P->inputs;
  P->args.num_inputs = ni;
  P->args.outputs = &P->c.t;
  P->args.num_outputs = 1;
  P->args.attrs = P->attrs.data();
  P->args.num_attrs = int32_t(P->attrs.size());
}

void release(Prepared* P) {
  cudaFree(P->ab.dev);
  cudaFree(P->bb.dev);
  cudaFree(P->cb.dev);
  if (P->biasb.dev) cudaFree(P->biasb.dev);
}

double act_ref(double x, const char* act) {
  if (!std::strcmp(act, "relu")) return x > 0 ? x : 0;
  if (!std::strcmp(act, "gelu")) return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  if (!std::strcmp(act, "silu")) return x / (1 + std::exp(-x));
  return x;
}

// Element offset of batch entry `bi` of a tensor whose batch dims are right-aligned to out's.
int64_t batch_off(const Tensor& t, const std::vector<int64_t>& out_batch, int64_t bi) {
  const int nb = int(out_batch.size());
  const int tb = int(t.shape.size()) - 2;
  int64_t off = 0;
  for (int d = nb - 1; d >= 0; --d) {
    const int64_t i = bi % out_batch[d];
    bi /= out_batch[d];
    const int td = d - (nb - tb);
    if (td >= 0 && t.shape[td] != 1) off += i * t.strides[td];
  }
  return off;
}

// Runs one plugin on the case; returns the relative Frobenius error (NaN: unwritten/NaN).
double check_one(const Case& cs, Plugin& pl, Prepared& P, std::string* note) {
  // Fresh out: poison (beta = 0) or random old values (beta != 0).
  std::vector<unsigned char> raw(P.cb.n * dsize(cs.out_dtype));
  std::vector<double> old(P.cb.n);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t i = 0; i < P.cb.n; ++i) {
    if (cs.beta == 0.0) {
      store_val(cs.out_dtype, raw.data(), i, NAN);
    } else {
      store_val(cs.out_dtype, raw.data(), i, u(g_rng));
      old[i] = load_val(cs.out_dtype, raw.data(), i);
    }
  }
  CHECK_CUDA(cudaMemcpy(P.cb.dev, raw.data(), raw.size(), cudaMemcpyHostToDevice));
  g_last_error.clear();
  const gk_status st = pl.api->launch(pl.state, &P.args);
  if (st != GK_OK) {
    *note = "launch failed: " + g_last_error;
    return NAN;
  }
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    *note = std::string("CUDA error: ") + cudaGetErrorString(e);
    std::printf("FATAL %s\n", note->c_str());
    std::exit(3);
  }
  CHECK_CUDA(cudaMemcpy(raw.data(), P.cb.dev, raw.size(), cudaMemcpyDeviceToHost));
  // Every element must be written (no NaN survives) ...
  for (size_t i = 0; i < P.cb.n; ++i)
    if (std::isnan(load_val(cs.out_dtype, raw.data(), i))) {
      *note = "NaN/unwritten at element " + std::to_string(i);
      return NAN;
    }
  // ... and match the float64 reference on the checked rows.
  double num = 0, den = 0;
  std::vector<int64_t> rows;
  if (cs.check_rows == 0 || cs.check_rows >= cs.m) {
    for (int64_t r = 0; r < cs.m; ++r) rows.push_back(r);
  } else {
    for (int i = 0; i < cs.check_rows; ++i) rows.push_back(int64_t(g_rng() % cs.m));
    rows.push_back(cs.m - 1);
  }
  const Tensor &A = P.a, &B = P.b, &C = P.c;
  const int64_t a_sr = A.strides[A.shape.size() - 2], b_sr = B.strides[B.shape.size() - 2];
  for (int64_t bi = 0; bi < P.batch_count; ++bi) {
    const int64_t oa = batch_off(A, P.out_batch, bi), ob = batch_off(B, P.out_batch, bi),
                  oc = batch_off(C, P.out_batch, bi);
#pragma omp parallel for reduction(+ : num, den) schedule(dynamic)
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      const int64_t m = rows[ri];
      for (int64_t n = 0; n < cs.n; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < cs.k; ++k) {
          const double av = cs.ta ? P.ab.host[oa + k * a_sr + m] : P.ab.host[oa + m * a_sr + k];
          const double bv = cs.tb ? P.bb.host[ob + n * b_sr + k] : P.bb.host[ob + k * b_sr + n];
          acc += av * bv;
        }
        const int64_t ci = oc + m * cs.n + n;
        double ref = cs.alpha * acc + (cs.beta != 0.0 ? cs.beta * old[ci] : 0.0);
        if (cs.bias) ref += P.biasb.host[n];
        ref = act_ref(ref, cs.act);
        const double got = load_val(cs.out_dtype, raw.data(), ci);
        num += (got - ref) * (got - ref);
        den += ref * ref;
      }
    }
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double tolerance(const Case& cs) {
  if (cs.dtype == GK_DTYPE_F64) return 1e-12;
  if (cs.dtype == GK_DTYPE_F32) return cs.tf32 ? 1e-3 : 1e-5;
  return 1e-2;
}

const char* dname(int dt) {
  switch (dt) {
    case GK_DTYPE_F64: return "f64";
    case GK_DTYPE_F32: return "f32";
    case GK_DTYPE_BF16: return "bf16";
    default: return "f16";
  }
}

std::vector<Case> check_cases() {
  std::vector<Case> cs;
  const int64_t sizes[] = {1, 7, 64, 127, 1000};
  const int dts[] = {GK_DTYPE_BF16, GK_DTYPE_F16, GK_DTYPE_F32};
  // Shape sweep: every (M, N, K) from the list for bf16, a diagonal for the others.
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : sizes) {
        if ((m * n * k) > 1000ll * 1000 * 127) continue;  // keep the CPU reference quick
        Case c;
        c.dtype = c.out_dtype = GK_DTYPE_BF16;
        c.m = m, c.n = n, c.k = k;
        c.ta = (m + n) % 2;
        c.tb = (n + k) % 2;
        c.name = "bf16 shape sweep";
        cs.push_back(c);
      }
  for (int dt : dts)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        Case c;
        c.dtype = c.out_dtype = dt;
        c.m = 300, c.n = 520, c.k = 264;
        c.ta = ta, c.tb = tb;
        c.name = std::string(dname(dt)) + " transposes";
        cs.push_back(c);
        c.m = 127, c.n = 1000, c.k = 7;
        c.name = std::string(dname(dt)) + " odd K";
        cs.push_back(c);
      }
    for (int dt : {GK_DTYPE_BF16, GK_DTYPE_F16}) {
    Case c;
    c.dtype = dt, c.out_dtype = GK_DTYPE_F32;
    c.m = 320, c.n = 768, c.k = 256;  // whole tiles and a partial one, alpha only
    c.alpha = 1.5;
    c.name = std::string(dname(dt)) + "→f32 out, alpha";
    cs.push_back(c);
    c.alpha = 1.0;
    c.m = 200, c.n = 384, c.k = 512;
    c.name = std::string(dname(dt)) + "→f32 out, alpha/beta, bias+gelu";
    c.alpha = 0.5, c.beta = -1.25, c.bias = true, c.act = "gelu";
    cs.push_back(c);
    c.out_dtype = dt, c.act = "relu", c.tb = true;
    c.name = std::string(dname(dt)) + " bias+relu, B transposed";
    cs.push_back(c);
    c.act = "silu", c.bias = false, c.beta = 0.0;
    c.name = std::string(dname(dt)) + " silu";
    cs.push_back(c);
    c.act = "none";
    c.a_batch = {3};
    c.b_batch = {3};
    c.name = std::string(dname(dt)) + " batched [3]";
    cs.push_back(c);
    c.b_batch = {};
    c.name = std::string(dname(dt)) + " batched a[3], b broadcast";
    cs.push_back(c);
    c.a_batch = {2, 3};
    c.b_batch = {3};
    c.name = std::string(dname(dt)) + " batched a[2,3] × b[3]";
    cs.push_back(c);
    c.a_batch = {2, 1};
    c.b_batch = {3};
    c.name = std::string(dname(dt)) + " batched a[2,1] × b[3] (no single stride)";
    cs.push_back(c);
    c.a_batch = {};
    c.b_batch = {};
    c.pad = 8;
    c.name = std::string(dname(dt)) + " padded rows (+8)";
    cs.push_back(c);
    c.pad = 3;
    c.name = std::string(dname(dt)) + " padded rows (+3, unaligned)";
    cs.push_back(c);
    c.pad = 0, c.misalign = 1;
    c.name = std::string(dname(dt)) + " a misaligned by 1 element";
    cs.push_back(c);
  }
  {
    Case c;
    c.dtype = c.out_dtype = GK_DTYPE_F32;
    c.m = 500, c.n = 300, c.k = 1000;
    c.tf32 = true;
    c.name = "f32 precision=tf32";
    cs.push_back(c);
    c.tf32 = false, c.bias = true, c.act = "relu", c.beta = 0.5;
    c.name = "f32 bias+relu beta";
    cs.push_back(c);
    c.dtype = c.out_dtype = GK_DTYPE_F64;
    c.name = "f64 bias+relu beta";
    cs.push_back(c);
  }
  // f32 at precision "highest": matmul_sm80's 128×128 kernel with 16-byte loads serves the
  // views it can read as aligned float4s (unit-stride dim, 16-byte aligned base, row and
  // batch strides multiples of 4); its edges are partial 128×128 tiles and partial k-tiles
  // of 8. Other views fall back to the general SIMT kernel.
  {
    const int64_t sizes[] = {1, 7, 127, 128, 129, 300};
    int i = 0;
    for (int64_t m : sizes)
      for (int64_t n : sizes)
        for (int64_t k : sizes) {
          Case c;
          c.dtype = c.out_dtype = GK_DTYPE_F32;
          c.m = m, c.n = n, c.k = k;
          c.ta = i % 2;
          c.tb = (i / 2) % 2;
          ++i;
          // Rows padded to a multiple of 4 elements where that is possible with one pad
          // for a and b, so that most cases take the float4 path.
          const int64_t a_row = c.ta ? m : k, b_row = c.tb ? k : n;
          const int64_t pad = (4 - a_row % 4) % 4;
          if ((b_row + pad) % 4 == 0) c.pad = pad;
          c.name = "f32 highest shape sweep";
          cs.push_back(c);
        }
  }
  {
    Case c;
    c.dtype = c.out_dtype = GK_DTYPE_F32;
    c.m = 129, c.n = 301, c.k = 129, c.pad = 3;  // every row 16-byte aligned via the pad
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        c.ta = ta, c.tb = tb;
        c.name = "f32 highest transposes, rows padded to 16 B";
        cs.push_back(c);
      }
    c.ta = false, c.tb = false, c.pad = 0;
    c.m = 200, c.n = 384, c.k = 512;
    c.a_batch = {3};
    c.b_batch = {3};
    c.name = "f32 highest batched [3]";
    cs.push_back(c);
    c.tb = true, c.b_batch = {};
    c.name = "f32 highest batched a[3], b broadcast, B transposed";
    cs.push_back(c);
    c.ta = true, c.tb = false, c.a_batch = {2, 1}, c.b_batch = {3};
    c.name = "f32 highest batched a[2,1] × b[3], A transposed";
    cs.push_back(c);
    c.ta = false, c.a_batch = {70000}, c.b_batch = {70000};
    c.m = c.n = c.k = 4;
    c.name = "f32 highest batched [70000] (grid z slices)";
    cs.push_back(c);
    c.a_batch = {}, c.b_batch = {};
    c.m = 129, c.n = 300, c.k = 128;
    c.alpha = 0.5, c.beta = -1.25, c.bias = true, c.act = "relu";
    c.name = "f32 highest alpha/beta, bias+relu, edge tiles";
    cs.push_back(c);
    c.tb = true, c.act = "gelu";
    c.name = "f32 highest alpha/beta, bias+gelu, B transposed";
    cs.push_back(c);
    c.alpha = 1.5, c.beta = 0.0, c.bias = false, c.act = "none", c.tb = false;
    c.m = 256, c.n = 384, c.k = 300;
    c.name = "f32 highest alpha, whole tiles";
    cs.push_back(c);
    c.alpha = 1.0;
    c.m = 300, c.n = 520, c.k = 264;
    c.misalign = 1;  // a not 16-byte aligned: the general kernel
    c.name = "f32 highest a misaligned by 1 element";
    cs.push_back(c);
    c.misalign = 0, c.pad = 1;  // rows not 16-byte aligned: the general kernel
    c.name = "f32 highest padded rows (+1, unaligned)";
    cs.push_back(c);
  }
  // tf32 (precision="tf32"). matmul_sm90 reads K-major a and b only: a [M, K] and b given
  // as [N, K] (transpose_b); it declines the other layouts, and rows that are not 16-byte
  // aligned (K = 7).
  {
    Case c;
    c.dtype = c.out_dtype = GK_DTYPE_F32;
    c.tf32 = true;
    c.tb = true;
    c.m = 300, c.n = 520, c.k = 264;  // partial tiles in M, N and K
    c.name = "tf32 B transposed, odd shapes";
    cs.push_back(c);
    c.m = 127, c.n = 1000, c.k = 7;
    c.name = "tf32 B transposed, odd K";
    cs.push_back(c);
    c.k = 12;  // one partial k-tile
    c.name = "tf32 B transposed, K=12";
    cs.push_back(c);
    c.m = 300, c.n = 520, c.k = 264;
    c.tb = false;
    c.name = "tf32 B row-major (N-contiguous)";
    cs.push_back(c);
    c.tb = true, c.ta = true;
    c.name = "tf32 A transposed (M-contiguous)";
    cs.push_back(c);
    c.ta = false;
    c.m = 320, c.n = 768, c.k = 256;  // whole tiles and a partial one, alpha only
    c.alpha = 1.5;
    c.name = "tf32 B transposed, alpha";
    cs.push_back(c);
    c.m = 200, c.n = 384, c.k = 512;
    c.alpha = 0.5, c.beta = -1.25, c.bias = true, c.act = "relu";
    c.name = "tf32 B transposed, alpha/beta, bias+relu";
    cs.push_back(c);
    c.alpha = 1.0, c.beta = 0.0, c.bias = false, c.act = "none";
    c.a_batch = {3};
    c.b_batch = {3};
    c.name = "tf32 B transposed, batched [3]";
    cs.push_back(c);
    c.b_batch = {};
    c.name = "tf32 B transposed, batched a[3], b broadcast";
    cs.push_back(c);
  }
  // tf32 on every layout: matmul_sm80's mma.sync path (m16n8k8) reads K-contiguous operands
  // with ldmatrix and M/N-contiguous ones with 64-bit (a) and 32-bit (b) shared loads;
  // rows that are not 16-byte aligned (odd K or N, pads of 3, a misaligned a) take its
  // element loads. matmul_sm90 declines the M/N-contiguous layouts and unaligned rows.
  {
    const int64_t sizes[] = {1, 7, 16, 127, 129};
    int i = 0;
    for (int64_t m : sizes)
      for (int64_t n : sizes)
        for (int64_t k : sizes) {
          Case c;
          c.dtype = c.out_dtype = GK_DTYPE_F32;
          c.tf32 = true;
          c.m = m, c.n = n, c.k = k;
          c.ta = i % 2;
          c.tb = (i / 2) % 2;
          ++i;
          c.name = "tf32 shape sweep";
          cs.push_back(c);
        }
  }
  {
    Case c;
    c.dtype = c.out_dtype = GK_DTYPE_F32;
    c.tf32 = true;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        c.ta = ta, c.tb = tb;
        c.m = 300, c.n = 520, c.k = 264;
        c.name = "tf32 transposes";
        cs.push_back(c);
        c.pad = 4;
        c.name = "tf32 transposes, rows padded (+4, aligned)";
        cs.push_back(c);
        c.pad = 3;
        c.name = "tf32 transposes, rows padded (+3, element loads)";
        cs.push_back(c);
        c.pad = 0;
        c.m = 127, c.n = 1000, c.k = 7;
        c.name = "tf32 transposes, odd K";
        cs.push_back(c);
        c.m = 129, c.n = 131, c.k = 1000;
        c.name = "tf32 transposes, long K, edge tiles";
        cs.push_back(c);
      }
    c.m = 300, c.n = 520, c.k = 264;
    c.ta = true, c.tb = false;
    c.misalign = 1;
    c.name = "tf32 a misaligned by 1 element";
    cs.push_back(c);
    c.misalign = 0;
    c.m = 200, c.n = 384, c.k = 512;
    for (int t = 0; t < 4; ++t) {
      c.ta = t & 1, c.tb = (t & 2) != 0;
      c.a_batch = {3}, c.b_batch = {3};
      c.name = "tf32 batched [3]";
      cs.push_back(c);
      c.b_batch = {};
      c.name = "tf32 batched a[3], b broadcast";
      cs.push_back(c);
      c.a_batch = {2, 3}, c.b_batch = {3};
      c.name = "tf32 batched a[2,3] × b[3]";
      cs.push_back(c);
      c.a_batch = {2, 1}, c.b_batch = {3};
      c.name = "tf32 batched a[2,1] × b[3] (no single stride)";
      cs.push_back(c);
      c.a_batch = {}, c.b_batch = {};
      c.m = 129, c.n = 300, c.k = 128;
      c.alpha = 0.5, c.beta = -1.25, c.bias = true, c.act = "relu";
      c.name = "tf32 alpha/beta, bias+relu, edge tiles";
      cs.push_back(c);
      c.act = "gelu";
      c.name = "tf32 alpha/beta, bias+gelu";
      cs.push_back(c);
      c.alpha = 1.5, c.beta = 0.0, c.bias = false, c.act = "silu";
      c.name = "tf32 alpha, silu";
      cs.push_back(c);
      c.alpha = 1.0, c.act = "none";
      c.m = 200, c.n = 384, c.k = 512;
    }
    c.ta = true, c.tb = false;
    c.a_batch = {70000}, c.b_batch = {70000};
    c.m = c.n = c.k = 4;
    c.name = "tf32 batched [70000] (grid z slices)";
    cs.push_back(c);
  }
  // Skinny products, the decode projections matmul_gemv serves (M ≤ 64, b as [N, K]
  // transposed; 65 it declines): one row (CUDA cores), 2..64 rows with bias and f32 out
  // (tensor cores, one to four m-tiles, partial ones), partial column tiles (N = 7), K not a
  // multiple of 32 (904), the epilogue's alpha / beta / activation, and a misaligned a it
  // must decline.
  const std::pair<int64_t, int64_t> skinny_nk[] = {{1152, 896}, {7, 2048}, {4864, 904}};
  for (int dt : {GK_DTYPE_BF16, GK_DTYPE_F16})
    for (int64_t m : {1, 2, 3, 5, 8, 16, 17, 33, 64, 65})
      for (const auto& nk : skinny_nk) {
        Case c;
        c.dtype = dt;
        // From 2 rows gemv serves a bias with f32 out only: M = 2 (no bias) and 8 (out in
        // the input dtype) go to the other plugins.
        c.out_dtype = m == 8 ? dt : GK_DTYPE_F32;
        c.m = m, c.n = nk.first, c.k = nk.second;
        c.tb = true;
        c.bias = m != 2;
        c.name = std::string(dname(dt)) + " skinny (decode)";
        cs.push_back(c);
      }
  {
    Case c;
    c.dtype = GK_DTYPE_BF16, c.out_dtype = GK_DTYPE_F32;
    c.m = 4, c.n = 2048, c.k = 8192, c.tb = true;
    c.alpha = 1.5, c.beta = 0.5, c.bias = true, c.act = "silu";
    c.name = "bf16 skinny alpha, beta, bias + silu";
    cs.push_back(c);
    c.misalign = 1;
    c.name = "bf16 skinny, a misaligned by one element";
    cs.push_back(c);
  }
  // Large: a sample of rows against the reference.
  for (int dt : {GK_DTYPE_BF16, GK_DTYPE_F16})
    for (int tb = 0; tb < 2; ++tb) {
      Case c;
      c.dtype = c.out_dtype = dt;
      c.m = c.n = c.k = 4096;
      c.tb = tb;
      c.check_rows = 24;
      c.name = std::string(dname(dt)) + " 4096³ (24 sampled rows)";
      cs.push_back(c);
    }
  {
    Case c;
    c.dtype = GK_DTYPE_BF16, c.out_dtype = GK_DTYPE_F32;
    c.m = 4096, c.n = 4096, c.k = 4096, c.ta = true;
    c.bias = true, c.act = "gelu", c.beta = 0.5;
    c.check_rows = 24;
    c.name = "bf16→f32 4096³ a transposed, bias+gelu, beta";
    cs.push_back(c);
  }
  {
    Case c;
    c.dtype = c.out_dtype = GK_DTYPE_F32;
    c.tf32 = true;
    c.m = c.n = c.k = 4096;
    c.tb = true;
    c.check_rows = 24;
    c.name = "tf32 4096³ B transposed (24 sampled rows)";
    cs.push_back(c);
    c.ta = true, c.tb = false;
    c.name = "tf32 4096³ A transposed, B row-major (24 sampled rows)";
    cs.push_back(c);
  }
  for (int tb = 0; tb < 2; ++tb) {
    Case c;
    c.dtype = c.out_dtype = GK_DTYPE_F32;
    c.m = c.n = c.k = 4096;
    c.tb = tb;
    c.check_rows = 24;
    c.name = "f32 highest 4096³ (24 sampled rows)";
    cs.push_back(c);
  }
  return cs;
}

// ---------------------------------------------------------------- benchmark
struct BenchShape {
  int64_t m, n, k;
  int dtype;  // f32 runs as tf32 (precision="tf32"; cuBLAS: CUBLAS_COMPUTE_32F_FAST_TF32)
  bool tb;
  bool highest = false;  // f32 at precision "highest" (cuBLAS: CUBLAS_COMPUTE_32F)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// `only`: when not empty, the rows whose "MxNxK dtype B" label contains it (e.g.
// "8192x8192x8192 bf16 N").
void bench(std::vector<Plugin>& plugins, cublasHandle_t blas, const std::string& only) {
  constexpr int kSamples = 15;
  const BenchShape shapes[] = {
      {4096, 4096, 4096, GK_DTYPE_BF16, false}, {4096, 4096, 4096, GK_DTYPE_BF16, true},
      {4096, 4096, 4096, GK_DTYPE_F16, false},  {8192, 8192, 8192, GK_DTYPE_BF16, false},
      {8192, 8192, 8192, GK_DTYPE_BF16, true},  {8192, 8192, 8192, GK_DTYPE_F16, false},
      {4096, 14336, 4096, GK_DTYPE_BF16, false}, {4096, 14336, 4096, GK_DTYPE_BF16, true},
      {1, 14336, 4096, GK_DTYPE_BF16, true},    {16, 14336, 4096, GK_DTYPE_BF16, true},
      {1, 2048, 2048, GK_DTYPE_BF16, true},     {1, 8192, 2048, GK_DTYPE_BF16, true},
      {1, 2048, 8192, GK_DTYPE_BF16, true},     {2, 8192, 2048, GK_DTYPE_BF16, true},
      {4, 8192, 2048, GK_DTYPE_BF16, true},     {8, 8192, 2048, GK_DTYPE_BF16, true},
      {16, 8192, 2048, GK_DTYPE_BF16, true},    {32, 8192, 2048, GK_DTYPE_BF16, true},
      {64, 8192, 2048, GK_DTYPE_BF16, true},    {32, 2048, 8192, GK_DTYPE_BF16, true},
      {16, 384, 384, GK_DTYPE_F16, true},       {16, 51864, 384, GK_DTYPE_F16, true},
      {16, 1280, 5120, GK_DTYPE_F16, true},
      {1, 128256, 2048, GK_DTYPE_BF16, true},
      {128, 14336, 4096, GK_DTYPE_BF16, true},  {128, 14336, 4096, GK_DTYPE_BF16, false},
      {4096, 4096, 4096, GK_DTYPE_F32, true},   {8192, 8192, 8192, GK_DTYPE_F32, true},
      {4096, 4096, 4096, GK_DTYPE_F32, false},
      {4096, 4096, 4096, GK_DTYPE_F32, false, true}, {4096, 4096, 4096, GK_DTYPE_F32, true, true},
  };
  std::printf(
      "\n== benchmark (TFLOP/s, median of %d samples, each contender's samples interleaved "
      "with the others'; ratio = plugin / cublasGemmEx; drift = cuBLAS's last third of "
      "samples against its first, in speed) ==\n", kSamples);
  std::printf("%-26s %-5s %-2s", "shape MxNxK", "dtype", "B");
  std::printf(" %10s %6s", "cuBLAS", "drift");
  for (auto& p : plugins) std::printf(" %12s %6s", p.name.c_str(), "ratio");
  std::printf("\n");
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cublasSetStream(blas, stream) == CUBLAS_STATUS_SUCCESS ? cudaSuccess
                                                                     : cudaErrorUnknown);
  for (const auto& s : shapes) {
    char shape[64];
    std::snprintf(shape, sizeof(shape), "%lldx%lldx%lld", (long long)s.m, (long long)s.n,
                  (long long)s.k);
    Case c;
    c.dtype = c.out_dtype = s.dtype;
    c.m = s.m, c.n = s.n, c.k = s.k, c.tb = s.tb;
    c.tf32 = s.dtype == GK_DTYPE_F32 && !s.highest;
    const std::string label = std::string(shape) + " " + (c.tf32 ? "tf32" : dname(s.dtype)) +
                              " " + (s.tb ? "T" : "N");
    if (!only.empty() && label.find(only) == std::string::npos) continue;
    const double set_bytes = double(s.m * s.k + s.k * s.n) * double(dsize(s.dtype));
    const int sets = int(std::min(8.0, std::max(1.0, std::ceil(128e6 / set_bytes))));
    std::vector<Prepared> P(sets);
    for (auto& p : P) {
      prepare(c, &p, false);
      p.args.stream = stream;
    }
    const double flops = 2.0 * s.m * s.n * s.k;
    const int reps = flops > 1e11 ? 5 : 20;
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    const cudaDataType_t dt = s.dtype == GK_DTYPE_F32    ? CUDA_R_32F
                              : s.dtype == GK_DTYPE_BF16 ? CUDA_R_16BF
                                                         : CUDA_R_16F;
    const cublasComputeType_t compute =
        c.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float one = 1.0f, zero = 0.0f;
    // The contenders: cuBLAS, then each plugin that accepts the shape.
    std::vector<std::function<bool(Prepared&)>> calls;
    calls.push_back([&](Prepared& p) {
      // row-major out = a·op(b)  ⇔  column-major outᵀ = op(b)ᵀ·aᵀ
      return cublasGemmEx(blas, s.tb ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, int(s.n), int(s.m),
                          int(s.k), &one, p.b.t.data, dt, int(s.tb ? s.k : s.n), p.a.t.data, dt,
                          int(s.k), &zero, p.c.t.data, dt, int(s.n), compute,
                          CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
    });
    std::vector<int> slot(plugins.size(), -1);  // plugin → index in calls, -1 declined
    for (size_t i = 0; i < plugins.size(); ++i) {
      Plugin& pl = plugins[i];
      char reason[256] = "";
      if (pl.api->supports(pl.state, &P[0].args, reason, sizeof(reason)) != GK_OK) continue;
      slot[i] = int(calls.size());
      calls.push_back([&pl](Prepared& p) { return pl.api->launch(pl.state, &p.args) == GK_OK; });
    }
    // Samples are interleaved: in sample k every contender runs `reps` calls, starting with
    // contender k % n, so a drift of the GPU's clock over the row (power, heat: several
    // percent at 8192³ on the H100) reaches all alike instead of favouring whoever ran first.
    const size_t n_calls = calls.size();
    std::vector<std::vector<double>> times(n_calls);
    std::vector<bool> failed(n_calls, false);
    int it = 0;
    for (size_t j = 0; j < n_calls; ++j)
      for (int w = 0; w < 3; ++w) failed[j] = !calls[j](P[w % sets]) || failed[j];
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (int sm = 0; sm < kSamples; ++sm) {
      for (size_t q = 0; q < n_calls; ++q) {
        const size_t j = (q + size_t(sm)) % n_calls;
        CHECK_CUDA(cudaEventRecord(e0, stream));
        for (int r = 0; r < reps; ++r) failed[j] = !calls[j](P[(it++) % sets]) || failed[j];
        CHECK_CUDA(cudaEventRecord(e1, stream));
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        times[j].push_back(ms / reps);
      }
    }
    auto tflops = [&](const std::vector<double>& t) { return flops / (median(t) * 1e-3) / 1e12; };
    const double cublas_tflops = tflops(times[0]);
    // drift: cuBLAS's last third of samples against its first third.
    const size_t third = times[0].size() / 3;
    const double drift =
        median(std::vector<double>(times[0].begin(), times[0].begin() + third)) /
        median(std::vector<double>(times[0].end() - third, times[0].end()));
    std::vector<double> ours;  // TFLOP/s; 0 declined, -1 failed
    for (size_t i = 0; i < plugins.size(); ++i) {
      if (slot[i] < 0) ours.push_back(0);
      else ours.push_back(failed[slot[i]] ? -1 : tflops(times[slot[i]]));
    }
    std::printf("%-26s %-5s %-2s %10.1f %6.3f", shape, c.tf32 ? "tf32" : dname(s.dtype),
                s.tb ? "T" : "N", cublas_tflops, drift);
    for (double tf : ours) {
      if (tf == 0)
        std::printf(" %12s %6s", "declined", "-");
      else if (tf < 0)
        std::printf(" %12s %6s", "FAILED", "-");
      else
        std::printf(" %12.1f %6.3f", tf, tf / cublas_tflops);
    }
    std::printf("\n");
    std::fflush(stdout);
    for (auto& p : P) release(&p);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool do_check = true, do_bench = true;
  std::string only;
  std::vector<const char*> paths;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-bench")) do_bench = false;
    else if (!std::strcmp(argv[i], "--no-check")) do_check = false;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else paths.push_back(argv[i]);
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  g_sm_version = prop.major * 10 + prop.minor;
  g_sm_count = prop.multiProcessorCount;
  std::printf("device: %s, SM %d, %d SMs\n", prop.name, g_sm_version, g_sm_count);
  // The host services handed to a plugin must outlive it: keep each Plugin in place.
  std::vector<Plugin> plugins;
  plugins.reserve(paths.size());
  for (const char* p : paths) {
    plugins.emplace_back();
    if (!load_plugin(p, &plugins.back())) plugins.pop_back();
  }
  int failures = 0;
  if (do_check) {
    std::printf("\n== correctness vs float64 reference (rel. Frobenius error) ==\n");
    for (const Case& cs : check_cases()) {
      Prepared P;
      prepare(cs, &P);
      for (auto& pl : plugins) {
        char reason[512] = "";
        if (pl.api->supports(pl.state, &P.args, reason, sizeof(reason)) != GK_OK) {
          std::printf("%-13s %-52s M=%-4lld N=%-4lld K=%-4lld ta=%d tb=%d  declined: %s\n",
                      pl.name.c_str(), cs.name.c_str(), (long long)cs.m, (long long)cs.n,
                      (long long)cs.k, cs.ta, cs.tb, reason);
          continue;
        }
        std::string note;
        const double err = check_one(cs, pl, P, &note);
        const bool ok = !std::isnan(err) && err <= tolerance(cs);
        failures += !ok;
        std::printf("%-13s %-52s M=%-4lld N=%-4lld K=%-4lld ta=%d tb=%d  err=%.2e %s %s\n",
                    pl.name.c_str(), cs.name.c_str(), (long long)cs.m, (long long)cs.n,
                    (long long)cs.k, cs.ta, cs.tb, err, ok ? "ok" : "FAIL", note.c_str());
      }
      release(&P);
    }
    std::printf("\ncorrectness failures: %d\n", failures);
    std::fflush(stdout);
  }
  if (do_bench) {
    cublasHandle_t blas;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 2;
    bench(plugins, blas, only);
    cublasDestroy(blas);
  }
  for (auto& pl : plugins) pl.api->shutdown(pl.state);
  return failures ? 1 : 0;
}
