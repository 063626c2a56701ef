// attention: softmax(q k^T · scale) v over a KV cache, causal or not, with grouped-query heads.
#pragma once

#include "llm/common.cuh"

namespace gk::kernels::llm {

// The largest head_dim the kernel holds in registers (8 values per lane of a warp).
inline constexpr int64_t kMaxAttentionHeadDim = 256;

// q [B, Tq, Hq, Dh], k and v [B, Tk, Hkv, Dh] (f32/f16/bf16, any strides: k and v may be
// views of a larger cache), kv_lengths i32 [B] or data NULL (every sequence holds Tk keys),
// out [B, Tq, Hq, Dh]. Query i of sequence b sees keys 0 .. L - Tq + i (causal) or 0 .. L - 1,
// where L = kv_lengths[b] clamped to [0, Tk] (a kernel cannot return a status: the op rule
// and docs/ops.md say what a length outside that range means). A query with no key gets 0.
// With block_table (i32 [B, max_blocks]; data NULL: none), k and v are block pools
// [num_blocks, block_size, Hkv, Dh], Tk is max_blocks * block_size and key j of sequence b is
// row j % block_size of block block_table[b, j / block_size]; a block id outside
// [0, num_blocks) holds no key (its keys are left out of the softmax), and kv_lengths is
// required. `workspace` holds attention_workspace_bytes(q, k, v, block_table) bytes (NULL when
// that is 0): the partial results of a decode whose keys are split over several blocks.
cudaError_t launch_attention(const View& q, const View& k, const View& v, const View& kv_lengths,
                             const View& block_table, const View& out, float scale, bool causal,
                             void* workspace, cudaStream_t stream);
size_t attention_workspace_bytes(const View& q, const View& k, const View& v,
                                 const View& block_table);

// Why a shape cannot be served, or "" when it can.
std::string attention_refusal(const View& q);

}  // namespace gk::kernels::llm
