// attention_sm90: the prefill form of attention on Hopper's wgmma (sm_90a only), f16 and
// bf16 inputs with f32 accumulators, head_dim 64 and 128. Same contract as launch_attention
// in attention.cuh for contiguous (not paged) keys and values.
#pragma once

#include "llm/common.cuh"

namespace gk::kernels::llm {

// Why the wgmma kernel does not serve these operands, or "" when it does: f16 or bf16,
// head_dim 64 or 128, at least 64 query tokens (one warpgroup's rows), q, k and v rows of
// contiguous elements on 16-byte boundaries, and a grid within CUDA's limits.
std::string attention_sm90_refusal(const View& q, const View& k, const View& v);

// Launches the wgmma kernel (needs no workspace); the device must be SM 90 and the code
// built for sm_90a.
cudaError_t launch_attention_sm90(const View& q, const View& k, const View& v,
                                  const View& kv_lengths, const View& out, float scale,
                                  bool causal, cudaStream_t stream);

}  // namespace gk::kernels::llm
