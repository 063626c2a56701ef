// Probe: how cuBLASLt candidates rank under different timing methods, and which candidates a
// row-order formulation offers. Usage: ltprobe M N K dtype(bf16|f16)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <string>
#include <cupti.h>

static std::vector<std::string> g_names;
static void CUPTIAPI buf_req(uint8_t** b, size_t* sz, size_t* maxr) { *sz = 1 << 20; *b = (uint8_t*)aligned_alloc(8, *sz); *maxr = 0; }
static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto* k = (CUpti_ActivityKernel9*)r;
      char line[300]; snprintf(line, sizeof line, "%s %.2fus", k->name, (k->end - k->start) / 1000.0);
      g_names.push_back(line);
    }
  }
  free(b);
}

#define CK(x) do { auto e_ = (x); if (e_ != 0) { printf("FAIL %s:%d %s -> %d\n", __FILE__, __LINE__, #x, int(e_)); exit(1);} } while (0)

__global__ void fill(uint16_t* p, size_t n, uint32_t seed, bool bf) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    float v = (h & 0xffff) / 65536.0f - 0.5f;
    if (bf) { __nv_bfloat16 b = __float2bfloat16(v); p[i] = *reinterpret_cast<uint16_t*>(&b); }
    else { __half b = __float2half(v); p[i] = *reinterpret_cast<uint16_t*>(&b); }
  }
}
__global__ void readk(const uint4* d, size_t n) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) { uint4 v = d[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x12345678u && n == 3) printf("x");
}
__global__ void spin(long long cycles) { long long t = clock64(); while (clock64() - t < cycles) {} }

static void* flushbuf; static size_t flushn;
static void flush(cudaStream_t s) { readk<<<4096, 512, 0, s>>>((const uint4*)flushbuf, flushn / 16); }

struct Cand { cublasLtMatmulAlgo_t algo; size_t ws; int form; };

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char** argv) {
  long M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
  bool bf = strcmp(argv[4], "bf16") == 0;
  cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_16F;
  cudaStream_t s; CK(cudaStreamCreate(&s));
  int l2; CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  flushn = 2 * size_t(l2); CK(cudaMalloc(&flushbuf, flushn)); CK(cudaMemset(flushbuf, 1, flushn));
  const int sets = 4;
  std::vector<uint16_t*> A(sets), B(sets), C(sets);
  for (int i = 0; i < sets; ++i) {
    CK(cudaMalloc(&A[i], M * K * 2)); CK(cudaMalloc(&B[i], K * N * 2)); CK(cudaMalloc(&C[i], M * N * 2));
    fill<<<1024, 256>>>(A[i], M * K, 17 + i, bf); fill<<<1024, 256>>>(B[i], K * N, 91 + i, bf);
  }
  void* ws; const size_t wsz = 32 << 20; CK(cudaMalloc(&ws, wsz));
  CK(cudaDeviceSynchronize());
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t desc; CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  int32_t opn = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opn, 4));
  CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opn, 4));
  // form 0: column-major swapped (ours): D^T[N x M] = B^T[N x K] A^T[K x M]
  cublasLtMatrixLayout_t L0[3];
  CK(cublasLtMatrixLayoutCreate(&L0[0], t, N, K, N));
  CK(cublasLtMatrixLayoutCreate(&L0[1], t, K, M, K));
  CK(cublasLtMatrixLayoutCreate(&L0[2], t, N, M, N));
  // form 1: row order, not swapped: D[M x N] = A[M x K] B[K x N]
  cublasLtMatrixLayout_t L1[3];
  CK(cublasLtMatrixLayoutCreate(&L1[0], t, M, K, K));
  CK(cublasLtMatrixLayoutCreate(&L1[1], t, K, N, N));
  CK(cublasLtMatrixLayoutCreate(&L1[2], t, M, N, N));
  cublasLtOrder_t row = CUBLASLT_ORDER_ROW;
  for (auto& l : L1) CK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof(row)));
  cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wl = wsz; CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wl, 8));
  std::vector<Cand> cands;
  for (int form = 0; form < 2; ++form) {
    cublasLtMatrixLayout_t* L = form ? L1 : L0;
    cublasLtMatmulHeuristicResult_t r[16]; int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt, desc, L[0], L[1], L[2], L[2], pref, 16, r, &found);
    printf("form %d (%s): heuristic status %d, %d found\n", form, form ? "row order" : "col swapped", int(st), found);
    for (int i = 0; i < found; ++i) if (r[i].state == CUBLAS_STATUS_SUCCESS) cands.push_back({r[i].algo, r[i].workspaceSize, form});
  }
  const float alpha = 1, beta = 0;
  auto run = [&](const Cand& c, int set) {
    cublasLtMatrixLayout_t* L = c.form ? L1 : L0;
    const void* x = c.form ? (const void*)A[set] : (const void*)B[set];
    const void* y = c.form ? (const void*)B[set] : (const void*)A[set];
    return cublasLtMatmul(lt, desc, &alpha, x, L[0], y, L[1], &beta, C[set], L[2], C[set], L[2], &c.algo, ws, c.ws, s);
  };
  cublasHandle_t cb; CK(cublasCreate(&cb)); CK(cublasSetStream(cb, s)); CK(cublasSetWorkspace(cb, ws, wsz));
  auto peer = [&](int set) {
    return cublasGemmEx(cb, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, B[set], t, N, A[set], t, K, &beta, C[set], t, N,
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  // Method timings. Each returns the median µs of one call.
  cudaEvent_t e0[64], e1[64];
  for (int i = 0; i < 64; ++i) { CK(cudaEventCreate(&e0[i])); CK(cudaEventCreate(&e1[i])); }
  auto timed = [&](auto&& call, int mode, int reps) {
    std::vector<float> v;
    for (int r = 0; r < reps; ++r) {
      int set = r % sets;
      if (mode == 1 || mode == 2) flush(s);
      if (mode == 2) spin<<<1, 1, 0, s>>>(20000);  // ~10 µs at 1.98 GHz
      if (mode == 3) { CK(cudaMemsetAsync(C[set], 0xff, M * N * 2, s)); flush(s); spin<<<1, 1, 0, s>>>(20000); }
      CK(cudaEventRecord(e0[r], s)); call(mode == 0 ? 0 : set); CK(cudaEventRecord(e1[r], s));
    }
    CK(cudaStreamSynchronize(s));
    for (int r = 0; r < reps; ++r) { float ms; CK(cudaEventElapsedTime(&ms, e0[r], e1[r])); v.push_back(ms * 1000); }
    return median(v);
  };
  const char* modes[] = {"warm same-set", "flush (ours)", "flush+spin", "poison+flush+spin rot"};
  printf("%dx%ldx%ld %s: candidates %zu\n", int(M), N, K, argv[4], cands.size());
  // Interleaved rounds like ours: per mode, 5 rounds over all candidates + peer.
  for (int mode = 0; mode < 4; ++mode) {
    std::vector<std::vector<float>> all(cands.size() + 1);
    for (int round = 0; round < 6; ++round) {
      for (size_t i = 0; i <= cands.size(); ++i) {
        float us = i == cands.size() ? timed([&](int set) { CK(peer(set)); }, mode, 8)
                                     : timed([&](int set) { CK(run(cands[i], set)); }, mode, 8);
        all[i].push_back(us);
      }
    }
    printf("mode %-24s", modes[mode]);
    for (size_t i = 0; i <= cands.size(); ++i) printf(" %s%zu:%.1f", i == cands.size() ? "peer" : "c", i, median(all[i]));
    printf("\n");
  }
  CK(cuptiActivityRegisterCallbacks(buf_req, buf_done));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  for (size_t i = 0; i <= cands.size(); ++i) {
    g_names.clear();
    for (int r = 0; r < 3; ++r) { flush(s); if (i == cands.size()) CK(peer(r % sets)); else CK(run(cands[i], r % sets)); }
    CK(cudaStreamSynchronize(s)); cuptiActivityFlushAll(1);
    printf("names %s%zu:", i == cands.size() ? "peer" : "c", i);
    for (auto& n : g_names) if (n.rfind("_Z", 0) != 0 || n.find("readk") == std::string::npos) printf(" | %s", n.c_str());
    printf("\n");
  }
  for (size_t i = 0; i < cands.size(); ++i) {
    int v[8] = {}; size_t w;
    cublasLtMatmulAlgoConfigAttributes_t at[] = {CUBLASLT_ALGO_CONFIG_ID, CUBLASLT_ALGO_CONFIG_TILE_ID, CUBLASLT_ALGO_CONFIG_STAGES_ID,
      CUBLASLT_ALGO_CONFIG_SPLITK_NUM, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION};
    for (int j = 0; j < 7; ++j) cublasLtMatmulAlgoConfigGetAttribute(&cands[i].algo, at[j], &v[j], 4, &w);
    printf("c%zu form %d id %d tile %d stages %d splitk %d swz %d cluster %d custom %d ws %zu\n", i, cands[i].form, v[0], v[1], v[2], v[3], v[4], v[5], v[6], cands[i].ws);
  }
  return 0;
}
