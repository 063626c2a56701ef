// embedding: out[s..., :] = table[ids[s...], :].
#pragma once

#include "llm/common.cuh"

namespace gk::kernels::llm {

// table [V, D] (f32/f16/bf16), ids (i32/i64, any shape S, ndim <= 7), out S + [D] of the
// table's dtype; all strided. An id outside [0, V) writes a row of zeros: a kernel cannot
// return a status, and zeros keep the step finite where a clamped row would pass for a real
// token. The cpu reference refuses such an id instead.
cudaError_t launch_embedding(const View& table, const View& ids, const View& out,
                             cudaStream_t stream);

}  // namespace gk::kernels::llm
