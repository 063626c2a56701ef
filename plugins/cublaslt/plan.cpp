// plan.cpp — the mapping and plan of a call; see plan.h.
#include "plan.h"

#include <cstdint>
#include <memory>
#include <string>

namespace gk::cublaslt {

using gk::matmul::Activation;
using gk::matmul::MatmulProblem;

namespace {

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

}  // namespace

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

std::unique_ptr<Plan> make_plan(const LtLibrary& lt, bool tune, const MatmulProblem& p,
                                const Mapping& m, const PlanKey& key, std::string* why) {
  const LtApi& api = lt.api();
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
    *why = lt.error("cublasLtMatmulDescCreate", st);
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
      *why = lt.error("cublasLtMatrixLayoutCreate", st);
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
    *why = lt.error("cublasLtMatmulPreferenceCreate", st);
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
  st = api.heuristic(lt.handle(), plan->desc, plan->layout[0], plan->layout[1], plan->layout[2],
                     plan->layout[3], pref, tune ? kTuneCandidates : 1, results, &found);
  api.pref_destroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    *why = st != CUBLAS_STATUS_SUCCESS ? lt.error("cublasLtMatmulAlgoGetHeuristic", st)
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
    plan->note = tune ? "cuBLASLt: the heuristic's only algorithm"
                         : "cuBLASLt: the heuristic's first algorithm (GPUKIT_CUBLASLT_TUNE=0)";
  } else {
    plan->note = "cuBLASLt: the heuristic's first of " + n +
                 " algorithms until the first call times them all";
  }
  return plan;
}

}  // namespace gk::cublaslt
