#include "common/dtype.h"

#include "gpukit/gpukit.h"

namespace gk {
namespace {
struct DtypeInfo {
  int32_t dtype;
  const char* name;
  size_t size;           // bytes per element; 0 for a packed dtype
  uint32_t block;        // elements per block (1 for a plain dtype)
  uint32_t block_bytes;  // bytes per block
};
constexpr DtypeInfo kDtypes[] = {
    {GK_DTYPE_F32, "f32", 4, 1, 4},
    {GK_DTYPE_F64, "f64", 8, 1, 8},
    {GK_DTYPE_F16, "f16", 2, 1, 2},
    {GK_DTYPE_BF16, "bf16", 2, 1, 2},
    {GK_DTYPE_I8, "i8", 1, 1, 1},
    {GK_DTYPE_I16, "i16", 2, 1, 2},
    {GK_DTYPE_I32, "i32", 4, 1, 4},
    {GK_DTYPE_I64, "i64", 8, 1, 8},
    {GK_DTYPE_U8, "u8", 1, 1, 1},
    {GK_DTYPE_BOOL, "bool", 1, 1, 1},
    // GGUF's blocks, as llama.cpp's block_q8_0 … block_q6_K lay them out.
    {GK_DTYPE_Q8_0, "q8_0", 0, 32, 34},
    {GK_DTYPE_Q4_0, "q4_0", 0, 32, 18},
    {GK_DTYPE_Q4_1, "q4_1", 0, 32, 20},
    {GK_DTYPE_Q4_K, "q4_k", 0, 256, 144},
    {GK_DTYPE_Q5_K, "q5_k", 0, 256, 176},
    {GK_DTYPE_Q6_K, "q6_k", 0, 256, 210},
};
const DtypeInfo* find(int32_t dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return &d;
  }
  return nullptr;
}
}  // namespace

size_t dtype_size(int32_t dtype) {
  const DtypeInfo* d = find(dtype);
  return d ? d->size : 0;
}

const char* dtype_name(int32_t dtype) {
  const DtypeInfo* d = find(dtype);
  return d ? d->name : "unknown";
}

std::optional<int32_t> dtype_from_name(std::string_view name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

bool dtype_is_floating(int32_t dtype) {
  return dtype == GK_DTYPE_F32 || dtype == GK_DTYPE_F64 || dtype == GK_DTYPE_F16 ||
         dtype == GK_DTYPE_BF16;
}

std::string all_dtype_names() {
  std::string out;
  for (const auto& d : kDtypes) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

uint32_t dtype_block(int32_t dtype, uint32_t* block_bytes) {
  const DtypeInfo* d = find(dtype);
  if (block_bytes) *block_bytes = d ? d->block_bytes : 0;
  return d ? d->block : 0;
}

size_t dtype_alignment(int32_t dtype) {
  const DtypeInfo* d = find(dtype);
  if (!d) return 0;
  return d->size ? d->size : 2;
}

uint64_t storage_bytes(int32_t dtype, uint64_t elements) {
  const DtypeInfo* d = find(dtype);
  if (!d) return 0;
  return elements / d->block * d->block_bytes;
}

}  // namespace gk
