#include "common/dtype.h"

#include "gpukit/gpukit.h"

namespace gk {
namespace {
struct DtypeInfo {
  int32_t dtype;
  const char* name;
  size_t size;
};
constexpr DtypeInfo kDtypes[] = {
    {GK_DTYPE_F32, "f32", 4}, {GK_DTYPE_F64, "f64", 8}, {GK_DTYPE_F16, "f16", 2},
    {GK_DTYPE_BF16, "bf16", 2}, {GK_DTYPE_I8, "i8", 1},  {GK_DTYPE_I16, "i16", 2},
    {GK_DTYPE_I32, "i32", 4}, {GK_DTYPE_I64, "i64", 8}, {GK_DTYPE_U8, "u8", 1},
    {GK_DTYPE_BOOL, "bool", 1},
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

}  // namespace gk
