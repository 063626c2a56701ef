// Converting weights on the host: f32/f16/bf16/f64 to each other (narrowing rounds to
// nearest even), and block-quantized dtypes dequantized to f32 bit-exactly as llama.cpp's
// dequantize_row_* and gguf-py's quants.py compute them (then rounded to f16/bf16 as f32 is).
#pragma once

#include <cstdint>

namespace gk::weights {

// Whether `from` converts to `to`: equal dtypes, floating to floating, or a block-quantized
// dtype to f32, f16 or bf16.
bool can_convert(int32_t from, int32_t to);

// `blocks` blocks of the block-quantized `dtype` at `src` to f32, as llama.cpp does.
void dequantize(int32_t dtype, const uint8_t* src, uint64_t blocks, float* dst);

// Converts `elements` elements (a multiple of the block for a block-quantized `from`) from
// `src` to `dst`; can_convert(from, to) must hold. Both sides are packed, little-endian.
void convert(int32_t from, const void* src, int32_t to, void* dst, uint64_t elements);

}  // namespace gk::weights
