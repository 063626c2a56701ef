// cublaslt plugin: matmul through NVIDIA cuBLASLt, opened with dlopen at init, so the
// plugin needs no cuBLAS at build or load time and declines with a reason where it is
// absent. Compiled against cublasLt.h for the types; no cuBLAS symbol is linked.
//
// A call is mapped onto cuBLASLt's column-major model: when out is row-contiguous we ask
// for outᵀ = op(b)ᵀ·op(a)ᵀ (outᵀ is column-major with ld = out's row stride), so a bias
// over N is cuBLASLt's per-row bias; when out is column-contiguous (no bias) we ask for
// out = op(a)·op(b) directly. Each operand becomes N or T from whichever of its strides
// is 1. Descriptors and the heuristic's candidates are cached per (device, shape, strides,
// dtypes, epilogue, alignment) in a mutex-protected map.
//
// Choosing the algorithm: the heuristic's first pick is often not cuBLAS's fastest for the shape
// (on the H100 it cost 3-7% on tf32 4096³/8192³ and some bf16/f16 LLM shapes). So a plan keeps up
// to kTuneCandidates of the heuristic's candidates, and its first launch times each one on that
// call's operands (writing into scratch memory, not the output) from a cold L2, keeps the fastest,
// and says so in gk_op_explain. Cold, because back-to-back runs on the same operands find them in
// L2, which favours algorithms that are slower when the operands come from memory (on the H100, f16
// 1024³ timed warm kept nvjet 192x48, 10.7 µs cold, over cuBLAS's 128x64, 7.9 µs). So each timed
// run follows a read of twice L2's size (l2_flush.cu), in a buffer that lives only while the
// candidates are timed. That first launch waits for the GPU once; GPUKIT_CUBLASLT_TUNE=0 turns
// timing off (the heuristic's first is used), and a launch into a capturing stream never times (it
// uses the first until an ordinary launch has timed them). Workspace: one 32 MiB buffer per
// (device, stream), taken from host->alloc on first use on that stream and kept until shutdown
// (PyTorch keeps its cuBLAS workspace per (handle, stream) the same way); calls on one stream are
// ordered, so they can share it.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpukit/gpukit_plugin.h"
#include "gpukit/gpukit_plugin.hpp"
#include "l2_flush.h"
#include "matmul_call.h"

namespace {

using gk::matmul::Activation;
using gk::matmul::MatmulProblem;
using gk::plugin::report;

// Writes `why` into the supports() reason buffer.
void write_reason(char* reason, size_t capacity, const std::string& why) {
  if (!reason || capacity == 0) return;
  std::snprintf(reason, capacity, "%s", why.c_str());
}

constexpr uint64_t kMaxWorkspaceBytes = 32ull << 20;  // NVIDIA's advice for Hopper
constexpr size_t kMaxCachedPlans = 1024;
// Streams that get a cached workspace; calls on further streams allocate per call.
constexpr size_t kMaxCachedWorkspaces = 16;
constexpr int kTuneCandidates = 8;
// Timed runs per candidate, in rounds that take every candidate in turn (so a clock that
// ramps up during timing favours none), after one warm-up run each; the median counts.
// First kTuneRounds; then, while the candidates' timed runs stay within kTuneBudgetUs in
// all, more rounds up to kTuneMaxRounds. Short calls are noisy relative to their length:
// on the H100, bf16 128×14336×4096's two fastest candidates (44.5 and 44.1 µs over 5
// rounds) kept either one from process to process, though they are 2-8% apart in situ.
// There a 44 µs call got 21 rounds and 4096³ (180 µs) kept 5.
constexpr int kTuneRounds = 5;
constexpr int kTuneMaxRounds = 25;
constexpr float kTuneBudgetUs = 8000.0f;
// Another candidate replaces the heuristic's first only when at least this much faster:
// closer than that is timing noise, and the first is what PyTorch would run.
constexpr float kTuneMargin = 0.98f;

// The cuBLASLt entry points we call, resolved from the dlopen'ed library.
struct LtApi {
  void* lib = nullptr;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out) *missing = name;
  return *out != nullptr;
}

// One column-major operand: op, the stored matrix's ld.
struct ColMajor {
  cublasOperation_t op;
  int64_t rows, cols, ld;  // of the stored matrix
};

// Logical R×C matrix with strides (s_r, s_c) as a column-major operand, if it is one.
bool as_col_major(int64_t r, int64_t c, int64_t s_r, int64_t s_c, ColMajor* out) {
  if (s_r == 1 || r == 1) {
    *out = {CUBLAS_OP_N, r, c, c == 1 ? (r > 1 ? r : 1) : s_c};
  } else if (s_c == 1 || c == 1) {
    *out = {CUBLAS_OP_T, c, r, r == 1 ? (c > 1 ? c : 1) : s_r};
  } else {
    return false;
  }
  if (out->ld < out->rows) {
    if (out->cols > 1) return false;
    out->ld = out->rows;
  }
  return out->ld >= 1;
}

cudaDataType_t cuda_type(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F64: return CUDA_R_64F;
    case GK_DTYPE_F16: return CUDA_R_16F;
    case GK_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// Real calls pass their pointers; gk_explain passes none, and is shown the plan of a call
// with 256-byte-aligned operands (what every pool allocation and PyTorch's give).
size_t alignment_of(const void* p) {
  if (!p) return 256;
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  size_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// Everything a plan depends on.
using PlanKey = std::array<int64_t, 24>;
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

// The cuBLASLt mapping of one call.
struct Mapping {
  bool swapped;            // computing outᵀ = op(b)ᵀ·op(a)ᵀ
  ColMajor x, y;           // cuBLASLt's A and B
  const void* x_ptr;
  const void* y_ptr;
  int64_t x_bs, y_bs, d_bs;
  int64_t rows, cols, k;   // of D
  int64_t ldd;
  cublasLtEpilogue_t epilogue;
};

// One of the heuristic's algorithms for a plan, and what it took when timed.
struct Candidate {
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
  float us = -1;  // median µs per call at the first launch; -1: not timed or it failed
};

struct Plan {
  const LtApi* api = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout[4] = {};  // A, B, C, D
  std::vector<Candidate> candidates;      // the heuristic's order, best guess first
  size_t chosen = 0;
  bool timed = false;  // the candidates were timed (or timing is off or failed: see note)
  std::string note;    // how the algorithm was chosen, for gk_op_explain
  std::mutex mu;  // the bias pointer is a descriptor attribute: one call at a time
  ~Plan() {
    if (desc) api->desc_destroy(desc);
    for (auto* l : layout)
      if (l) api->layout_destroy(l);
  }
};

// A workspace of kMaxWorkspaceBytes kept for one (runtime device, stream).
struct Workspace {
  int32_t device;  // runtime device id, as host->alloc takes it
  int ordinal;     // CUDA ordinal, for the synchronize at shutdown
  void* stream;
  void* ptr;
};

struct State {
  const gk_host_services* host = nullptr;
  LtApi api;
  cublasLtHandle_t handle = nullptr;
  std::mutex mu;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
  std::mutex workspace_mu;
  std::vector<Workspace> workspaces;  // ≤ kMaxCachedWorkspaces
  bool tune = true;  // GPUKIT_CUBLASLT_TUNE != "0"
};

std::string lt_error(const State* s, const char* what, cublasStatus_t st) {
  return std::string(what) + ": " + (s->api.status_string ? s->api.status_string(st) : "?");
}

bool map_call(const MatmulProblem& p, Mapping* m, std::string* why) {
  if (p.batch.ndim > 1) {
    *why = "batch dims do not collapse to one stride per operand (cuBLASLt strided batch)";
    return false;
  }
  if (p.act == Activation::kSilu) {
    *why = "cuBLASLt has no silu epilogue";
    return false;
  }
  if (p.act == Activation::kGelu && !p.gelu_tanh &&
      (p.in_dtype == GK_DTYPE_F32 || p.in_dtype == GK_DTYPE_F64)) {
    // cuBLASLt's GELU is the tanh form; it differs from erf by up to ~5e-4, below f16/bf16
    // rounding but far above f32's.
    *why = "cuBLASLt's gelu is the tanh approximation; f32/f64 need the erf form";
    return false;
  }
  if (p.has_bias && p.n > 1 && p.bias_s != 1) {
    *why = "bias must be contiguous for cuBLASLt";
    return false;
  }
  const bool batched = p.batch.ndim == 1;
  const int64_t a_bs = batched ? p.batch.a_stride[0] : 0;
  const int64_t b_bs = batched ? p.batch.b_stride[0] : 0;
  m->d_bs = batched ? p.batch.c_stride[0] : 0;
  m->k = p.k;
  if (p.c_sn == 1 || p.n == 1) {
    m->swapped = true;
    m->rows = p.n;
    m->cols = p.m;
    m->ldd = (p.m == 1) ? (p.n > 1 ? p.n : 1) : p.c_sm;
    if (!as_col_major(p.n, p.k, p.b_sn, p.b_sk, &m->x) ||
        !as_col_major(p.k, p.m, p.a_sk, p.a_sm, &m->y)) {
      *why = "an operand has no unit-stride dim (cuBLASLt needs one)";
      return false;
    }
    m->x_ptr = p.b;
    m->y_ptr = p.a;
    m->x_bs = b_bs;
    m->y_bs = a_bs;
  } else if (p.c_sm == 1 && !p.has_bias) {
    m->swapped = false;
    m->rows = p.m;
    m->cols = p.n;
    m->ldd = p.c_sn;
    if (!as_col_major(p.m, p.k, p.a_sm, p.a_sk, &m->x) ||
        !as_col_major(p.k, p.n, p.b_sk, p.b_sn, &m->y)) {
      *why = "an operand has no unit-stride dim (cuBLASLt needs one)";
      return false;
    }
    m->x_ptr = p.a;
    m->y_ptr = p.b;
    m->x_bs = a_bs;
    m->y_bs = b_bs;
  } else {
    *why = "out needs a unit stride along N (or along M without bias) for cuBLASLt";
    return false;
  }
  if (m->ldd < m->rows) {
    *why = "out's rows overlap";
    return false;
  }
  if (p.has_bias) {
    m->epilogue = p.act == Activation::kRelu   ? CUBLASLT_EPILOGUE_RELU_BIAS
                  : p.act == Activation::kGelu ? CUBLASLT_EPILOGUE_GELU_BIAS
                                               : CUBLASLT_EPILOGUE_BIAS;
  } else {
    m->epilogue = p.act == Activation::kRelu   ? CUBLASLT_EPILOGUE_RELU
                  : p.act == Activation::kGelu ? CUBLASLT_EPILOGUE_GELU
                                               : CUBLASLT_EPILOGUE_DEFAULT;
  }
  return true;
}

PlanKey plan_key(int ordinal, const MatmulProblem& p, const Mapping& m) {
  return {ordinal, p.in_dtype, p.out_dtype, p.allow_tf32, m.swapped, m.x.op, m.y.op, m.rows,
          m.cols, m.k, m.x.ld, m.y.ld, m.ldd, p.batch_count, m.x_bs, m.y_bs, m.d_bs,
          m.epilogue, p.has_bias,
          int64_t(alignment_of(m.x_ptr)), int64_t(alignment_of(m.y_ptr)),
          int64_t(alignment_of(p.c)), int64_t(alignment_of(p.bias)), 0};
}

// Builds descriptors and asks the heuristic for one algorithm. Null with *why on refusal.
std::unique_ptr<Plan> make_plan(State* s, const MatmulProblem& p, const Mapping& m,
                                const PlanKey& key, std::string* why) {
  const LtApi& api = s->api;
  auto plan = std::make_unique<Plan>();
  plan->api = &api;
  const bool f64 = p.in_dtype == GK_DTYPE_F64;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F
          : (p.in_dtype == GK_DTYPE_F32 && p.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                        : CUBLAS_COMPUTE_32F);
  const cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
  cublasStatus_t st = api.desc_create(&plan->desc, compute, scale);
  if (st != CUBLAS_STATUS_SUCCESS) {
    *why = lt_error(s, "cublasLtMatmulDescCreate", st);
    return nullptr;
  }
  const int32_t ta = m.x.op, tb = m.y.op;
  api.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  api.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  const cublasLtEpilogue_t epi = m.epilogue;
  api.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
  if (p.has_bias) {
    const cudaDataType_t bias_type = cuda_type(p.in_dtype);
    api.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
    const int64_t zero = 0;  // one bias for every batch entry
    api.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &zero, sizeof(zero));
  }
  const cudaDataType_t in_t = cuda_type(p.in_dtype), out_t = cuda_type(p.out_dtype);
  struct L {
    cudaDataType_t t;
    int64_t rows, cols, ld, bs;
  } ls[4] = {{in_t, m.x.rows, m.x.cols, m.x.ld, m.x_bs},
             {in_t, m.y.rows, m.y.cols, m.y.ld, m.y_bs},
             {out_t, m.rows, m.cols, m.ldd, m.d_bs},
             {out_t, m.rows, m.cols, m.ldd, m.d_bs}};
  for (int i = 0; i < 4; ++i) {
    st = api.layout_create(&plan->layout[i], ls[i].t, uint64_t(ls[i].rows), uint64_t(ls[i].cols),
                           ls[i].ld);
    if (st != CUBLAS_STATUS_SUCCESS) {
      *why = lt_error(s, "cublasLtMatrixLayoutCreate", st);
      return nullptr;
    }
    if (p.batch_count > 1) {
      const int32_t count = int32_t(p.batch_count);
      const int64_t stride = ls[i].bs;
      api.layout_set(plan->layout[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
      api.layout_set(plan->layout[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                     sizeof(stride));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  st = api.pref_create(&pref);
  if (st != CUBLAS_STATUS_SUCCESS) {
    *why = lt_error(s, "cublasLtMatmulPreferenceCreate", st);
    return nullptr;
  }
  const uint64_t ws = kMaxWorkspaceBytes;
  api.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  const uint32_t align_a = uint32_t(key[19]), align_b = uint32_t(key[20]),
                 align_cd = uint32_t(key[21]);
  api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
  api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
  api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_cd, sizeof(align_cd));
  api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_cd, sizeof(align_cd));
  cublasLtMatmulHeuristicResult_t results[kTuneCandidates] = {};
  int found = 0;
  st = api.heuristic(s->handle, plan->desc, plan->layout[0], plan->layout[1], plan->layout[2],
                     plan->layout[3], pref, s->tune ? kTuneCandidates : 1, results, &found);
  api.pref_destroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    *why = st != CUBLAS_STATUS_SUCCESS ? lt_error(s, "cublasLtMatmulAlgoGetHeuristic", st)
                                       : "cuBLASLt has no algorithm for this shape/epilogue";
    return nullptr;
  }
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS)
      plan->candidates.push_back({results[i].algo, results[i].workspaceSize});
  }
  if (plan->candidates.empty()) {
    *why = "cuBLASLt has no algorithm for this shape/epilogue";
    return nullptr;
  }
  const std::string n = std::to_string(plan->candidates.size());
  if (plan->candidates.size() == 1) {
    plan->timed = true;
    plan->note = s->tune ? "cuBLASLt: the heuristic's only algorithm"
                         : "cuBLASLt: the heuristic's first algorithm (GPUKIT_CUBLASLT_TUNE=0)";
  } else {
    plan->note = "cuBLASLt: the heuristic's first of " + n +
                 " algorithms until the first call times them all";
  }
  return plan;
}

std::string microseconds(float us) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f µs", double(us));
  return text;
}

// Times every candidate of `plan` on this call's operands, writing D into scratch memory
// (C is only read), and keeps the fastest. Called with plan->mu held, at the plan's first
// ordinary launch; blocks the host until the timed runs are done. On any failure the plan
// keeps the heuristic's first and the note says why.
void time_candidates(State* s, Plan* plan, const MatmulProblem& p, const Mapping& m,
                     int32_t device, int ordinal, cudaStream_t stream, const void* alpha,
                     const void* beta, void* workspace, size_t workspace_bytes) {
  const LtApi& api = s->api;
  plan->timed = true;
  const size_t osz = gk::matmul::dtype_bytes(p.out_dtype);
  const int64_t batches = std::max<int64_t>(p.batch_count, 1);
  const uint64_t elements =
      uint64_t((batches - 1) * m.d_bs + (m.cols - 1) * m.ldd + m.rows);
  void* scratch = nullptr;
  if (s->host->alloc(s->host->host_context, device, elements * osz, stream, &scratch) != GK_OK) {
    plan->note = "cuBLASLt: the heuristic's first algorithm (not timed: no scratch memory for " +
                 std::to_string(elements * osz) + " bytes)";
    return;
  }
  // The flush buffer; without it (no memory, or L2 size unknown) the runs are timed warm.
  int l2_bytes = 0;
  size_t flush_bytes = 0;
  void* flush = nullptr;
  if (cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, ordinal) == cudaSuccess &&
      l2_bytes > 0) {
    flush_bytes = 2 * size_t(l2_bytes);
    if (s->host->alloc(s->host->host_context, device, flush_bytes, stream, &flush) != GK_OK ||
        cudaMemsetAsync(flush, 0, flush_bytes, stream) != cudaSuccess) {
      if (flush) s->host->free(s->host->host_context, device, flush, stream);
      flush = nullptr;
    }
  }
  const char* const warmth =
      flush ? " from a cold L2" : " with operands warm in L2 (no buffer to flush it)";
  const size_t n = plan->candidates.size();
  auto run = [&](Candidate& c) {
    return api.matmul(s->handle, plan->desc, alpha, m.x_ptr, plan->layout[0], m.y_ptr,
                      plan->layout[1], beta, p.c, plan->layout[2], scratch, plan->layout[3],
                      &c.algo, workspace, c.workspace, stream) == CUBLAS_STATUS_SUCCESS;
  };
  // A warm-up run each, which also checks that it runs here.
  std::vector<bool> usable(n, false);
  for (size_t i = 0; i < n; ++i) {
    usable[i] = plan->candidates[i].workspace <= workspace_bytes && run(plan->candidates[i]);
  }
  // events[2 * (round * n + i)] and the next bracket candidate i's run in that round.
  std::vector<cudaEvent_t> events(2 * kTuneMaxRounds * n, nullptr);
  bool ok = true;
  for (cudaEvent_t& e : events) ok = ok && cudaEventCreate(&e) == cudaSuccess;
  std::vector<std::vector<float>> times(n);
  // Runs rounds [first, last) and appends their times; clears `ok` on any failure.
  auto time_rounds = [&](int first, int last) {
    for (int round = first; round < last; ++round) {
      for (size_t i = 0; i < n; ++i) {
        if (!usable[i]) continue;
        cudaEvent_t* e = &events[2 * (size_t(round) * n + i)];
        if (flush) {
          ok = gk::cublaslt::read_through(flush, flush_bytes, stream) == cudaSuccess && ok;
        }
        cudaEventRecord(e[0], stream);
        usable[i] = run(plan->candidates[i]);
        cudaEventRecord(e[1], stream);
      }
    }
    ok = cudaStreamSynchronize(stream) == cudaSuccess && ok;
    for (int round = first; ok && round < last; ++round) {
      for (size_t i = 0; i < n; ++i) {
        float ms = 0;
        const cudaEvent_t* e = &events[2 * (size_t(round) * n + i)];
        if (usable[i] && cudaEventElapsedTime(&ms, e[0], e[1]) == cudaSuccess) {
          times[i].push_back(ms * 1000.0f);
        }
      }
    }
  };
  auto median = [](std::vector<float> t) {
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    return t[t.size() / 2];
  };
  int rounds = 0;
  if (ok) {
    time_rounds(0, kTuneRounds);
    rounds = kTuneRounds;
  }
  // One round of every candidate, from the first rounds' medians.
  float round_us = 0;
  for (size_t i = 0; ok && i < n; ++i) {
    if (usable[i] && times[i].size() == size_t(rounds)) round_us += median(times[i]);
  }
  if (ok && round_us > 0) {
    const int more = std::min(kTuneMaxRounds, int(kTuneBudgetUs / round_us)) - rounds;
    if (more > 0) {
      time_rounds(rounds, rounds + more);
      rounds += more;
    }
  }
  for (cudaEvent_t e : events) {
    if (e) cudaEventDestroy(e);
  }
  for (size_t i = 0; i < n; ++i) {
    if (usable[i] && rounds > 0 && times[i].size() == size_t(rounds)) {
      plan->candidates[i].us = median(times[i]);
    }
  }
  size_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    const float us = plan->candidates[i].us;
    if (us >= 0 && (plan->candidates[best].us < 0 || us < plan->candidates[best].us)) best = i;
  }
  const float first = plan->candidates[0].us;
  if (best != 0 && first >= 0 && plan->candidates[best].us > kTuneMargin * first) best = 0;
  if (!ok) {
    plan->note = "cuBLASLt: the heuristic's first algorithm (not timed: a CUDA event or the "
                 "L2 flush failed)";
  } else if (plan->candidates[best].us < 0) {
    plan->note = "cuBLASLt: the heuristic's first algorithm (timing failed for every one)";
  } else {
    plan->chosen = best;
    plan->note = "cuBLASLt: algorithm " + std::to_string(best + 1) + " of " + std::to_string(n) +
                 " in the heuristic's order, " + microseconds(plan->candidates[best].us) +
                 " per call (median of " + std::to_string(rounds) +
                 " runs) when timed at the first call" + warmth +
                 (best == 0 ? std::string(" (no other was 2% faster)")
                            : " (the heuristic's first: " +
                                  (first < 0 ? std::string("failed") : microseconds(first)) + ")");
  }
  s->host->free(s->host->host_context, device, scratch, stream);
  if (flush) s->host->free(s->host->host_context, device, flush, stream);
}

// The cached plan for this call, made on first use. Null with *why when refused.
Plan* find_plan(State* s, int ordinal, const MatmulProblem& p, const Mapping& m,
                std::string* why) {
  const PlanKey key = plan_key(ordinal, p, m);
  std::lock_guard<std::mutex> lock(s->mu);
  auto it = s->plans.find(key);
  if (it != s->plans.end()) return it->second.get();
  auto plan = make_plan(s, p, m, key, why);
  if (!plan) return nullptr;
  // Plans in flight hold their own lock, so only drop the cache when it is idle-sized.
  if (s->plans.size() >= kMaxCachedPlans) {
    for (auto& kv : s->plans) std::lock_guard<std::mutex> wait(kv.second->mu);
    s->plans.clear();
  }
  return s->plans.emplace(key, std::move(plan)).first->second.get();
}

// The cached workspace of (device, stream), allocating it on the stream's first call.
// Null when the cache is full or the pool cannot spare kMaxWorkspaceBytes: the caller then
// allocates what the plan needs for this call only. Sharing one buffer between the calls
// of a stream is safe because the stream runs them one after another.
void* cached_workspace(State* s, int32_t device, int ordinal, void* stream) {
  std::lock_guard<std::mutex> lock(s->workspace_mu);
  for (const Workspace& w : s->workspaces)
    if (w.device == device && w.stream == stream) return w.ptr;
  if (s->workspaces.size() >= kMaxCachedWorkspaces) return nullptr;
  void* ptr = nullptr;
  if (s->host->alloc(s->host->host_context, device, kMaxWorkspaceBytes, stream, &ptr) != GK_OK)
    return nullptr;
  s->workspaces.push_back({device, ordinal, stream, ptr});
  return ptr;
}

// Gives the cached workspaces back. A stream may be gone by now, so wait for the device
// and free on the null stream instead of the stream the buffer was used on.
void release_workspaces(State* s) {
  std::lock_guard<std::mutex> lock(s->workspace_mu);
  for (const Workspace& w : s->workspaces) {
    if (cudaSetDevice(w.ordinal) == cudaSuccess) cudaDeviceSynchronize();
    s->host->free(s->host->host_context, w.device, w.ptr, nullptr);
  }
  s->workspaces.clear();
}

bool load_cublaslt(LtApi* api, std::string* why) {
  const char* names[] = {"libcublasLt.so.13", "libcublasLt.so"};
  for (const char* n : names) {
    api->lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (api->lib) break;
  }
  if (!api->lib) {
    const char* e = dlerror();
    *why = std::string("libcublasLt.so.13 not found: ") + (e ? e : "dlopen failed");
    return false;
  }
  std::string missing;
  const bool ok =
      resolve(api->lib, "cublasLtGetVersion", &api->get_version, &missing) &&
      resolve(api->lib, "cublasLtGetStatusString", &api->status_string, &missing) &&
      resolve(api->lib, "cublasLtCreate", &api->create, &missing) &&
      resolve(api->lib, "cublasLtDestroy", &api->destroy, &missing) &&
      resolve(api->lib, "cublasLtMatmulDescCreate", &api->desc_create, &missing) &&
      resolve(api->lib, "cublasLtMatmulDescDestroy", &api->desc_destroy, &missing) &&
      resolve(api->lib, "cublasLtMatmulDescSetAttribute", &api->desc_set, &missing) &&
      resolve(api->lib, "cublasLtMatrixLayoutCreate", &api->layout_create, &missing) &&
      resolve(api->lib, "cublasLtMatrixLayoutDestroy", &api->layout_destroy, &missing) &&
      resolve(api->lib, "cublasLtMatrixLayoutSetAttribute", &api->layout_set, &missing) &&
      resolve(api->lib, "cublasLtMatmulPreferenceCreate", &api->pref_create, &missing) &&
      resolve(api->lib, "cublasLtMatmulPreferenceDestroy", &api->pref_destroy, &missing) &&
      resolve(api->lib, "cublasLtMatmulPreferenceSetAttribute", &api->pref_set, &missing) &&
      resolve(api->lib, "cublasLtMatmulAlgoGetHeuristic", &api->heuristic, &missing) &&
      resolve(api->lib, "cublasLtMatmul", &api->matmul, &missing);
  if (!ok) {
    *why = "libcublasLt lacks " + missing;
    return false;
  }
  const size_t version = api->get_version();
  if (version / 10000 != CUBLAS_VER_MAJOR) {
    *why = "libcublasLt version " + std::to_string(version) + " is not the major version " +
           std::to_string(CUBLAS_VER_MAJOR) + " this plugin was built against";
    return false;
  }
  return true;
}

gk_status plugin_init(const gk_host_services* host, void** state) {
  try {
    auto s = std::make_unique<State>();
    s->host = host;
    std::string why;
    if (!load_cublaslt(&s->api, &why)) {
      if (s->api.lib) dlclose(s->api.lib);
      report(host, why);
      return GK_UNAVAILABLE;
    }
    const char* tune = std::getenv("GPUKIT_CUBLASLT_TUNE");
    s->tune = !(tune && std::strcmp(tune, "0") == 0);
    const cublasStatus_t st = s->api.create(&s->handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
      report(host, lt_error(s.get(), "cublasLtCreate", st));
      dlclose(s->api.lib);
      return GK_UNAVAILABLE;
    }
    *state = s.release();
    return GK_OK;
  } catch (const std::exception& e) {
    report(host, std::string("cublaslt init: ") + e.what());
    return GK_INTERNAL;
  } catch (...) {
    return GK_INTERNAL;
  }
}

void plugin_shutdown(void* state) {
  try {
    auto* s = static_cast<State*>(state);
    if (!s) return;
    release_workspaces(s);
    s->plans.clear();
    if (s->handle) s->api.destroy(s->handle);
    void* lib = s->api.lib;
    delete s;
    if (lib) dlclose(lib);
  } catch (...) {
  }
}

gk_status plugin_supports(void* state, const gk_kernel_args* args, char* reason,
                          size_t capacity) {
  try {
    auto* s = static_cast<State*>(state);
    gk_plugin_device dev;
    Mapping m;
    std::string why;
    if (!args || args->struct_size < GK_KERNEL_ARGS_SIZE || !args->op) {
      write_reason(reason, capacity, "malformed gk_kernel_args");
      return GK_UNIMPLEMENTED;
    }
    const MatmulProblem p = gk::plugins::matmul_call(s->host, *args, 80, 999, &dev);
    const bool ok = map_call(p, &m, &why);
    if (ok && p.m > 0 && p.n > 0 && p.batch_count > 0) {
      // Only zero-size calls skip the heuristic (launch does nothing for them).
      Plan* plan = find_plan(s, dev.ordinal, p, m, &why);
      if (plan == nullptr) {
        write_reason(reason, capacity, why);
        return GK_UNIMPLEMENTED;
      }
      std::lock_guard<std::mutex> lock(plan->mu);
      write_reason(reason, capacity, plan->note);  // how it will be served
    }
    if (!ok) {
      write_reason(reason, capacity, why);
      return GK_UNIMPLEMENTED;
    }
    return GK_OK;
  } catch (const gk::plugin::Failure& e) {
    write_reason(reason, capacity, e.message);
    return GK_UNIMPLEMENTED;
  } catch (const std::exception& e) {
    write_reason(reason, capacity, std::string("cublaslt: ") + e.what());
    return GK_UNIMPLEMENTED;
  } catch (...) {
    return GK_UNIMPLEMENTED;
  }
}

gk_status plugin_launch(void* state, const gk_kernel_args* args) {
  auto* s = static_cast<State*>(state);
  try {
    gk_plugin_device dev;
    Mapping m;
    std::string why;
    if (!args || args->struct_size < GK_KERNEL_ARGS_SIZE || !args->op) {
      report(s->host, "matmul: malformed gk_kernel_args");
      return GK_INVALID_ARGUMENT;
    }
    const MatmulProblem p = gk::plugins::matmul_call(s->host, *args, 80, 999, &dev);
    if (!map_call(p, &m, &why)) {
      report(s->host, "matmul: " + why);
      return GK_INVALID_ARGUMENT;
    }
    if (p.m == 0 || p.n == 0 || p.batch_count == 0) return GK_OK;
    // Kept per call: it also makes the device's primary context (the one the runtime's
    // tensors and streams live in) current, which cudaGetDevice alone would not check.
    cudaError_t cerr = cudaSetDevice(dev.ordinal);
    if (cerr != cudaSuccess) {
      report(s->host, std::string("matmul: ") + cudaGetErrorString(cerr));
      return GK_INTERNAL;
    }
    Plan* plan = find_plan(s, dev.ordinal, p, m, &why);
    if (!plan) {
      report(s->host, "matmul: " + why);
      return GK_INTERNAL;
    }
    // The largest workspace any candidate may need (they may all be timed on this call).
    size_t workspace_bytes = 0;
    for (const Candidate& c : plan->candidates) workspace_bytes = std::max(workspace_bytes, c.workspace);
    void* workspace = nullptr;
    bool workspace_per_call = false;
    if (workspace_bytes > 0) {
      workspace = cached_workspace(s, args->device, dev.ordinal, args->stream);
      if (workspace) {
        workspace_bytes = kMaxWorkspaceBytes;
      } else {
        const gk_status ast = s->host->alloc(s->host->host_context, args->device,
                                             workspace_bytes, args->stream, &workspace);
        if (ast != GK_OK) return ast;  // the host has recorded why
        workspace_per_call = true;
      }
    }
    const double alpha64 = p.alpha, beta64 = p.beta;
    const float alpha32 = float(p.alpha), beta32 = float(p.beta);
    const bool f64 = p.in_dtype == GK_DTYPE_F64;
    const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
    const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
    const auto stream = static_cast<cudaStream_t>(args->stream);
    cublasStatus_t st;
    {
      std::lock_guard<std::mutex> lock(plan->mu);
      if (p.has_bias)
        s->api.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias));
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      if (!plan->timed && cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
          capture == cudaStreamCaptureStatusNone) {
        time_candidates(s, plan, p, m, args->device, dev.ordinal, stream, alpha, beta,
                        workspace, workspace_bytes);
      }
      const Candidate& c = plan->candidates[plan->chosen];
      st = s->api.matmul(s->handle, plan->desc, alpha, m.x_ptr, plan->layout[0], m.y_ptr,
                         plan->layout[1], beta, p.c, plan->layout[2], p.c, plan->layout[3],
                         &c.algo, workspace, c.workspace, stream);
    }
    if (workspace_per_call)
      s->host->free(s->host->host_context, args->device, workspace, args->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
      report(s->host, lt_error(s, "matmul: cublasLtMatmul", st));
      return GK_INTERNAL;
    }
    return GK_OK;
  } catch (const gk::plugin::Failure& e) {
    report(s->host, "matmul: " + e.message);
    return e.status;
  } catch (const std::exception& e) {
    report(s->host, std::string("matmul: ") + e.what());
    return GK_INTERNAL;
  } catch (...) {
    return GK_INTERNAL;
  }
}

const gk_plugin_api kApi = {sizeof(gk_plugin_api), GK_PLUGIN_ABI_VERSION, "cublaslt", "0.1.0",
                            plugin_init, plugin_shutdown, plugin_supports, plugin_launch};

}  // namespace

extern "C" GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                                      const gk_plugin_api** api) {
  const gk_status status = gk_plugin_check_host(host, "cublaslt");
  if (status == GK_OK) *api = &kApi;
  return status;
}
