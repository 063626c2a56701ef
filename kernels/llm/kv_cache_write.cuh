// kv_cache_write: rows of keys or values written into a block pool at flat slots, the cache
// append of a paged KV cache.
#pragma once

#include "llm/common.cuh"

namespace gk::kernels::llm {

// cache [num_blocks, block_size, H, Dh] (f32/f16/bf16), src [N, H, Dh] (f32/f16/bf16, cast to
// the cache's dtype), slots i32 [N]; all strided. Row n goes to block slots[n] / block_size,
// row slots[n] % block_size. A slot outside [0, num_blocks * block_size) is skipped: a kernel
// cannot return a status, and writing nowhere keeps every other sequence's keys intact. The
// cpu reference refuses such a slot instead.
cudaError_t launch_kv_cache_write(const View& cache, const View& src, const View& slots,
                                  cudaStream_t stream);

}  // namespace gk::kernels::llm
