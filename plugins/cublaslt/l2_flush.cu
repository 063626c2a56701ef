// A read-only pass over a buffer larger than L2, run before each timed candidate so that
// every candidate starts from the same cold L2 (see time_candidates in plugin.cpp). Reads,
// not writes: a write would leave dirty lines whose write-back lands inside the timed run.
#include "l2_flush.h"

namespace gk::cublaslt {
namespace {

__global__ void read_through_kernel(const uint4* data, size_t count, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = data[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  // sink is null: the store never happens, but the compiler cannot drop the loads.
  if (sink) sink[0] = acc;
}

}  // namespace

cudaError_t read_through(const void* buffer, size_t bytes, cudaStream_t stream) {
  const size_t count = bytes / sizeof(uint4);
  if (count == 0) return cudaSuccess;
  constexpr unsigned kThreads = 512, kMaxBlocks = 4096;
  const size_t blocks = (count + kThreads - 1) / kThreads;
  read_through_kernel<<<unsigned(blocks < kMaxBlocks ? blocks : kMaxBlocks), kThreads, 0, stream>>>(
      static_cast<const uint4*>(buffer), count, nullptr);
  return cudaGetLastError();
}

}  // namespace gk::cublaslt
