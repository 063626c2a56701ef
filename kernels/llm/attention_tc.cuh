// attention_tc: the prefill form of attention on tensor cores (wmma 16x16x16, f16 and bf16
// inputs, f32 accumulators), for head_dim 64 and 128. Same contract as launch_attention in
// attention.cuh, which dispatches here when attention_tc_refusal(q) is "".
#pragma once

#include "llm/common.cuh"

namespace gk::kernels::llm {

// Why the tensor-core kernel does not serve q, or "" when it does: f16 or bf16, head_dim 64
// or 128, at least 16 query tokens (one wmma row tile; decode stays on the split-key kernel)
// and a grid within CUDA's limits.
std::string attention_tc_refusal(const View& q);

// Launches the tensor-core kernel; needs no workspace.
cudaError_t launch_attention_tc(const View& q, const View& k, const View& v, const View& kv_lengths,
                                const View& out, float scale, bool causal, cudaStream_t stream);

}  // namespace gk::kernels::llm
