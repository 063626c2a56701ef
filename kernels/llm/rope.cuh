// rope: rotary position embedding of x [B, T, H, Dh] by positions [T] or [B, T].
#pragma once

#include "llm/common.cuh"
#include "llm/llm_params.h"

namespace gk::kernels::llm {

// x and out [B, T, H, Dh] (f32/f16/bf16, any strides; out may be x itself), positions i32
// [T] or [B, T]. `inv_freq` holds rotary_dim / 2 inverse frequencies (gk::llm::rope_inv_freq,
// computed by the caller so that every device uses the same float32 values).
cudaError_t launch_rope(const View& x, const View& positions, const View& out,
                        const float* inv_freq, int64_t rotary_dim, bool interleaved,
                        cudaStream_t stream);

}  // namespace gk::kernels::llm
