// dtype names and sizes, shared by the C API, the loader (manifests) and the op rules.
//
// Block-quantized dtypes (q8_0 … q6_k, GGUF's) are packed: a tensor of one holds
// (elements / block elements) blocks of block bytes, its innermost dimension a multiple of
// the block. dtype_size() is 0 for them; dtype_block() and packed_bytes() describe them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gk {

size_t dtype_size(int32_t dtype);       // 0 for an unknown or block-quantized dtype
const char* dtype_name(int32_t dtype);  // "unknown" for an unknown dtype
std::optional<int32_t> dtype_from_name(std::string_view name);
bool dtype_is_floating(int32_t dtype);
std::string all_dtype_names();  // "f32, f64, …" for error messages

// Elements per block: 1 for a plain dtype, 32 or 256 for a block-quantized one, 0 for an
// unknown value; *block_bytes (may be null) gets the bytes per block (the element size for
// a plain dtype).
uint32_t dtype_block(int32_t dtype, uint32_t* block_bytes = nullptr);
inline bool dtype_is_packed(int32_t dtype) {
  return dtype_block(dtype) > 1;
}
inline bool dtype_is_known(int32_t dtype) {
  return dtype_block(dtype) != 0;
}
// The alignment tensor data of `dtype` needs: the element size, or 2 for a block-quantized
// dtype (its blocks hold f16 scales); 0 for an unknown dtype.
size_t dtype_alignment(int32_t dtype);
// The bytes of `elements` elements of a known dtype: elements * size, or for a packed
// dtype (elements / block elements) * block bytes (elements a multiple of the block). The
// caller keeps elements within kMaxTensorBytes.
uint64_t storage_bytes(int32_t dtype, uint64_t elements);

}  // namespace gk
