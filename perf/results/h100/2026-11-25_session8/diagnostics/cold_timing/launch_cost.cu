// Host cost per call of bare launches and of the CUDA runtime calls a plugin makes.
#include <cuda_runtime.h>
#include <cstdio>
#include <chrono>
#include <algorithm>
#include <vector>
struct Big { char b[336]; };
__global__ void empty() {}
__global__ void big(Big p) { if (p.b[0] == 123 && threadIdx.x == 9999) printf("x"); }
template <class F> double per_call_ns(F f, int batch = 2000, int reps = 15) {
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    v.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / batch);
  }
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
int main() {
  cudaFree(0);
  Big b{};
  int d;
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  printf("empty<<<1,32>>> legacy stream      %8.1f ns\n", per_call_ns([] { empty<<<1, 32>>>(); }));
  printf("empty<<<1,32>>> own stream         %8.1f ns\n", per_call_ns([&] { empty<<<1, 32, 0, s>>>(); }));
  printf("big(336 B)<<<1,32>>> legacy        %8.1f ns\n", per_call_ns([&] { big<<<1, 32>>>(b); }));
  printf("empty + cudaGetLastError           %8.1f ns\n", per_call_ns([] { empty<<<1, 32>>>(); cudaGetLastError(); }));
  printf("cudaGetDevice                      %8.1f ns\n", per_call_ns([&] { cudaGetDevice(&d); }));
  cudaEvent_t e; cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  printf("cudaEventRecord                    %8.1f ns\n", per_call_ns([&] { cudaEventRecord(e, 0); }));
  cudaStreamCaptureStatus cs;
  printf("cudaStreamIsCapturing              %8.1f ns\n", per_call_ns([&] { cudaStreamIsCapturing(0, &cs); }));
}
