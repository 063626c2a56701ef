// Evicting a matmul's operands from L2 between timed runs (l2_flush.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace gk::cublaslt {

// Reads `bytes` of `buffer` (16-byte aligned) on `stream`; writes nothing.
cudaError_t read_through(const void* buffer, size_t bytes, cudaStream_t stream);

}  // namespace gk::cublaslt
