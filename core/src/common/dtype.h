// dtype names and sizes, shared by the C API, the loader (manifests) and the op rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gk {

size_t dtype_size(int32_t dtype);         // 0 for an unknown dtype
const char* dtype_name(int32_t dtype);    // "unknown" for an unknown dtype
std::optional<int32_t> dtype_from_name(std::string_view name);
bool dtype_is_floating(int32_t dtype);
std::string all_dtype_names();            // "f32, f64, …" for error messages

}  // namespace gk
