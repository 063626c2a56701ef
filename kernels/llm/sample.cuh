// sample: one token id per row of logits, greedy or drawn from the filtered softmax.
#pragma once

#include "llm/common.cuh"
#include "llm/llm_params.h"

namespace gk::kernels::llm {

// logits [B, V] (f32/f16/bf16, any strides), ids i32 [B]. The filters and the draw follow
// docs/ops.md ("sample") and the cpu reference (plugins/cpu/llm.cpp): temperature, then
// top_k, top_p and min_p each on what the previous kept, ties at a cut kept, and the token
// where the cumulative kept weight in id order passes u · (kept weight), with
// u = gk::llm::sample_uniform(seed, offset, row). Weights are f32 here (f64 on the cpu), so
// a draw that lands within rounding of a boundary may pick the neighbouring token.
cudaError_t launch_sample(const View& logits, const View& ids, const gk::llm::SampleParams& p,
                          cudaStream_t stream);

}  // namespace gk::kernels::llm
