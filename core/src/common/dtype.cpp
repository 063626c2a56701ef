#include "common/dtype.h"

#include "gpukit/gpukit.h"
#include "gpukit/gpukit_plugin.hpp"

namespace gk {
namespace {
using DtypeInfo = plugin::DtypeInfo;
const DtypeInfo* find(int32_t dtype) { return plugin::dtype_info(dtype); }
constexpr const auto& kDtypes = plugin::kDtypes;
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
