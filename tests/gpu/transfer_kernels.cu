// Device work for the transfer tests: a kernel that keeps a stream busy for a while before it
// touches memory, so a copy that is not ordered after it reads or writes too early and the
// test sees the wrong bytes.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "transfer_kernels.h"

namespace {

// Every block spins on its own clock first, then copies its grid-stride share.
__global__ void spin_then_copy(const uint8_t* src, uint8_t* dst, size_t bytes,
                               long long spin_cycles) {
  if (threadIdx.x == 0) {
    long long start = clock64();
    while (clock64() - start < spin_cycles) {
    }
  }
  __syncthreads();
  if (!src) return;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes;
       i += size_t(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

}  // namespace

int launch_spin_then_copy(const void* src, void* dst, size_t bytes, int spin_ms, void* stream) {
  int device = 0, clock_khz = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device);
  if (e != cudaSuccess) return int(e);
  long long cycles = (long long)clock_khz * spin_ms;
  spin_then_copy<<<132, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst), bytes, cycles);
  return int(cudaGetLastError());
}
