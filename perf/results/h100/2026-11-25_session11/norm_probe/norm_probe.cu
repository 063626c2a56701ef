// norm_probe.cu: standalone A/B of layernorm kernel variants, bf16 [16384, 4096] with
// weight and bias (the harness row that misses 1.3x torch). A measurement tool, not
// product code. It includes the plugin's norm.cu, so V0 is the shipped kernel.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I kernels/reductions \
//          -o norm_probe norm_probe.cu
// Protocol (as ew_probe): 4 buffer sets rotated; before each timed run the output is
// poisoned (memset 0xFF) and L2 scrubbed by a 128 MB read; one launch between events;
// all items interleaved per round; 5 warm-up + 30 timed rounds; median.
// Check: every variant's output equals V0's bit for bit (same arithmetic).
#include "norm.cu"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

using namespace gk::kernels::reductions;
using bf16 = __nv_bfloat16;
constexpr int kH = 4096, kTpr = 128, kE = 32, kV = 8, kU = kE / kV;

__global__ void scrub_kernel(const uint4* src, int64_t nvec, unsigned* sink) {
  unsigned acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec;
       i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = src[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

__global__ void fill_kernel(bf16* p, int64_t n, uint32_t seed, float scale, float shift) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2bfloat16((h & 0xffffff) / float(0x1000000) * scale + shift);
  }
}

struct Item {
  std::string name;
  std::function<void(int set, cudaStream_t)> run;
  int regs = 0, spill = 0, blocks_per_sm = 0;
  std::vector<float> ms;
};

template <typename K>
void attrs(K kernel, int smem, Item& it) {
  cudaFuncAttributes a{};
  CK(cudaFuncGetAttributes(&a, kernel));
  it.regs = a.numRegs;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&it.blocks_per_sm, kernel, kTpr, smem));
}

int main() {
  const int64_t rows = 16384;
  const int64_t n = rows * kH;
  constexpr int kSets = 4, kWarm = 5, kTimed = 30;
  int dev = 0, sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("device %s, %d SMs; layernorm bf16 [%lld, %d] with weight and bias\n", prop.name, sms,
         (long long)rows, kH);
  bf16 *x[kSets], *out[kSets], *w, *b, *ref;
  for (int s = 0; s < kSets; ++s) {
    CK(cudaMalloc(&x[s], n * 2));
    CK(cudaMalloc(&out[s], n * 2));
    fill_kernel<<<sms * 8, 256>>>(x[s], n, 17 + s, 4.0f, -1.5f);
  }
  CK(cudaMalloc(&w, kH * 2));
  CK(cudaMalloc(&b, kH * 2));
  CK(cudaMalloc(&ref, n * 2));
  fill_kernel<<<8, 256>>>(w, kH, 99, 2.0f, 0.0f);
  fill_kernel<<<8, 256>>>(b, kH, 7, 1.0f, -0.5f);
  const int64_t scrub_vec = (128ll << 20) / 16;
  uint4* scrub;
  unsigned* sink;
  CK(cudaMalloc(&scrub, scrub_vec * 16));
  CK(cudaMemset(scrub, 0x5a, scrub_vec * 16));
  CK(cudaMalloc(&sink, 4));
  auto params = [&](int s, bool rms) {
    NormParams p{};
    p.x = x[s];
    p.weight = w;
    p.bias = rms ? nullptr : b;
    p.out = out[s];
    p.k = kH;
    p.rows = rows;
    p.eps = 1e-5f;
    p.rms = rms;
    p.ops.outer.n = 1;
    p.ops.outer.size[0] = rows;
    p.ops.stride[0][0] = kH;
    p.ops.stride[1][0] = kH;
    return p;
  };
  std::vector<Item> items;
  {
    Item it{"memcpy (same bytes)"};
    it.run = [&](int s, cudaStream_t st) { CK(cudaMemcpyAsync(out[s], x[s], n * 2, cudaMemcpyDeviceToDevice, st)); };
    items.push_back(it);
  }
  std::vector<int> is_rms(1, -1);
  auto add = [&](std::string name, auto kernel, int tpr, bool rms) {
    const int rows_per_block = 1;
    Item it{name + (rms ? " rms" : " ln")};
    cudaFuncAttributes a{};
    CK(cudaFuncGetAttributes(&a, kernel));
    it.regs = a.numRegs;
    it.spill = int(a.localSizeBytes);
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&it.blocks_per_sm, kernel, tpr, 0));
    it.run = [&, kernel, tpr, rms, rows_per_block](int s, cudaStream_t st) {
      kernel<<<int((rows + rows_per_block - 1) / rows_per_block), tpr, 0, st>>>(params(s, rms));
    };
    items.push_back(it);
    is_rms.push_back(rms);
  };
  using PF = PackedForm;
  for (int rms = 0; rms < 2; ++rms) {
    add("G general form (before)", norm_packed_kernel<bf16, 128, 32, false>, 128, rms);
    if (!rms) {
      add("F full_weight_bias form", norm_packed_kernel<bf16, 128, 32, false, PF::full_weight_bias>, 128, rms);
    } else {
      add("F full_weight form", norm_packed_kernel<bf16, 128, 32, false, PF::full_weight>, 128, rms);
    }
  }
  const size_t rms0 = std::find(is_rms.begin(), is_rms.end(), 1) - is_rms.begin();

  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  // Check: bitwise equal to the shipped kernel (item 1 for layernorm, rms0 for rmsnorm).
  std::vector<std::string> check(items.size(), "-");
  std::vector<uint16_t> h_ref[2], h_out(n);
  for (int r = 0; r < 2; ++r) {
    h_ref[r].resize(n);
    CK(cudaMemsetAsync(out[0], 0xFF, n * 2, st));
    items[r ? rms0 : 1].run(0, st);
    CK(cudaMemcpyAsync(h_ref[r].data(), out[0], n * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
  }
  for (size_t i = 1; i < items.size(); ++i) {
    CK(cudaMemsetAsync(out[0], 0xFF, n * 2, st));
    items[i].run(0, st);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(h_out.data(), out[0], n * 2, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    int64_t diff = 0;
    for (int64_t j = 0; j < n; ++j) diff += h_out[j] != h_ref[is_rms[i]][j];
    check[i] = diff == 0 ? "bit-equal" : ("DIFF " + std::to_string(diff));
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  int set = 0;
  for (int r = 0; r < kWarm + kTimed; ++r) {
    for (auto& it : items) {
      set = (set + 1) % kSets;
      CK(cudaMemsetAsync(out[set], 0xFF, n * 2, st));
      scrub_kernel<<<sms * 8, 512, 0, st>>>(scrub, scrub_vec, sink);
      CK(cudaEventRecord(e0, st));
      it.run(set, st);
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      CK(cudaGetLastError());
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (r >= kWarm) it.ms.push_back(ms);
    }
  }
  auto med = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  const double copy_ms = med(items[0].ms);
  const double base_ms[2] = {med(items[1].ms), med(items[rms0].ms)};
  printf("%-44s %9s %8s %8s %6s %5s %6s  %s\n", "variant", "ms", "%copy", "vs S0", "spread",
         "regs/spill", "blk/SM", "check");
  for (size_t i = 0; i < items.size(); ++i) {
    auto v = items[i].ms;
    std::sort(v.begin(), v.end());
    const double m = med(items[i].ms);
    const double spread = 100.0 * (v[v.size() * 9 / 10] - v[v.size() / 10]) / m;
    printf("%-44s %9.4f %7.1f%% %8.4f %5.1f%% %3d/%-3d %6d  %s\n", items[i].name.c_str(), m,
           100.0 * copy_ms / m, i ? base_ms[is_rms[i]] / m : 0.0, spread, items[i].regs,
           items[i].spill, items[i].blocks_per_sm,
           check[i].c_str());
  }
  return 0;
}
