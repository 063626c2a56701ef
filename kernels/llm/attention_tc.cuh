// attention_tc: the prefill form of attention on tensor cores (mma.sync m16n8k16, f16 and
// bf16 inputs, f32 accumulators), for head_dim 64 and 128. Same contract as launch_attention in
// attention.cuh, which dispatches here when attention_tc_refusal(q) is "".
#pragma once

#include "llm/common.cuh"

namespace gk::kernels::llm {

// Why the tensor-core kernel does not serve q, or "" when it does: f16 or bf16, head_dim 64
// or 128, at least 16 query tokens (one 16-row mma tile; decode stays on the split-key kernel)
// and a grid within CUDA's limits.
std::string attention_tc_refusal(const View& q);

// Launches the tensor-core kernel; needs no workspace. With block_table.data set, k and v are
// paged caches [num_blocks, block_size, Hkv, Dh], block_table i32 [B, max_blocks] lists each
// sequence's blocks in order (key t in block t / block_size, row t % block_size; an id
// outside [0, num_blocks) holds no keys), kv_lengths is required and
// max_blocks * block_size must stay under 2^31.
cudaError_t launch_attention_tc(const View& q, const View& k, const View& v, const View& kv_lengths,
                                const View& block_table, const View& out, float scale,
                                bool causal, cudaStream_t stream);

}  // namespace gk::kernels::llm
