// SafeTensors: an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and data_offsets (relative to the data that follows the header) plus an
// optional "__metadata__" object of strings, then the data.
#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "common/error.h"
#include "weights/weight_file.h"

namespace gk::weights {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the safetensors crate's own limit
// The header's deepest legitimate nesting is 3 (the object, a tensor, its shape); one more
// leaves room without letting a crafted header build deep trees.
constexpr int kMaxHeaderDepth = 4;

struct SafetensorsType {
  const char* name;
  int32_t dtype;  // 0: GPUkit has no dtype for it (listed, refused by gk_weights_get)
  uint32_t bits;
};
constexpr SafetensorsType kTypes[] = {
    {"F64", GK_DTYPE_F64, 64},
    {"F32", GK_DTYPE_F32, 32},
    {"F16", GK_DTYPE_F16, 16},
    {"BF16", GK_DTYPE_BF16, 16},
    {"I64", GK_DTYPE_I64, 64},
    {"I32", GK_DTYPE_I32, 32},
    {"I16", GK_DTYPE_I16, 16},
    {"I8", GK_DTYPE_I8, 8},
    {"U8", GK_DTYPE_U8, 8},
    {"BOOL", GK_DTYPE_BOOL, 8},
    {"U16", 0, 16},
    {"U32", 0, 32},
    {"U64", 0, 64},
    {"F8_E4M3", 0, 8},
    {"F8_E5M2", 0, 8},
    {"F8_E8M0", 0, 8},
    {"F6_E2M3", 0, 6},
    {"F6_E3M2", 0, 6},
    {"F4", 0, 4},
    {"C64", 0, 64},
};

std::string known_types() {
  std::string out;
  for (const auto& t : kTypes) out += std::string(out.empty() ? "" : ", ") + t.name;
  return out;
}

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A JSON number that is a non-negative integer within int64, or nullopt.
bool as_count(const nlohmann::json& j, int64_t* out) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > uint64_t(INT64_MAX)) return false;
    *out = int64_t(v);
    return true;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  return false;
}

TensorEntry parse_entry(const MappedFile& file, uint32_t file_index, const std::string& name,
                        const nlohmann::json& j, uint64_t data_begin) {
  const std::string where = tensor_context(file, name);
  if (!j.is_object()) fail(GK_INVALID_ARGUMENT, where + ": is " + j.dump() + ", not an object");
  TensorEntry e;
  e.name = name;
  e.file = file_index;
  auto dtype_it = j.find("dtype");
  if (dtype_it == j.end() || !dtype_it->is_string()) {
    fail(GK_INVALID_ARGUMENT, where + ": has no \"dtype\" string");
  }
  e.type_name = dtype_it->get<std::string>();
  const SafetensorsType* type = nullptr;
  for (const auto& t : kTypes) {
    if (e.type_name == t.name) type = &t;
  }
  if (!type) {
    fail(GK_INVALID_ARGUMENT, where + ": unknown dtype \"" + e.type_name +
                                  "\" (SafeTensors dtypes: " + known_types() + ")");
  }
  e.dtype = type->dtype;
  auto shape_it = j.find("shape");
  if (shape_it == j.end() || !shape_it->is_array()) {
    fail(GK_INVALID_ARGUMENT, where + ": has no \"shape\" array");
  }
  if (shape_it->size() > size_t(GK_MAX_DIMS)) {
    fail(GK_INVALID_ARGUMENT,
         where + ": shape " + shape_it->dump() + " has " + std::to_string(shape_it->size()) +
             " dimensions; GPUkit holds at most " + std::to_string(GK_MAX_DIMS) + " (GK_MAX_DIMS)");
  }
  e.ndim = int32_t(shape_it->size());
  for (int32_t k = 0; k < e.ndim; ++k) {
    if (!as_count((*shape_it)[size_t(k)], &e.shape[k])) {
      fail(GK_INVALID_ARGUMENT, where + ": shape " + shape_it->dump() + ": dimension " +
                                    std::to_string(k) + " is not an integer in 0..2^63-1");
    }
  }
  const uint64_t elements = checked_elements(file, name, e.ndim, e.shape);
  auto offsets_it = j.find("data_offsets");
  int64_t begin = 0, end = 0;
  if (offsets_it == j.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !as_count((*offsets_it)[0], &begin) || !as_count((*offsets_it)[1], &end)) {
    fail(GK_INVALID_ARGUMENT, where + ": \"data_offsets\" must be [begin, end], two integers " +
                                  "in 0..2^63-1" +
                                  (offsets_it == j.end() ? "" : "; it is " + offsets_it->dump()));
  }
  if (begin > end) {
    fail(GK_INVALID_ARGUMENT, where + ": data_offsets [" + std::to_string(begin) + ", " +
                                  std::to_string(end) + "] begin after they end");
  }
  const unsigned __int128 bits = (unsigned __int128)elements * type->bits;
  if (bits % 8 != 0) {
    fail(GK_INVALID_ARGUMENT, where + ": " + std::to_string(elements) + " elements of " +
                                  e.type_name + " do not fill whole bytes");
  }
  const uint64_t span = uint64_t(end - begin);
  if (bits / 8 != span) {
    fail(GK_INVALID_ARGUMENT, where + ": data_offsets [" + std::to_string(begin) + ", " +
                                  std::to_string(end) + "] span " + std::to_string(span) +
                                  " bytes, but " + std::to_string(elements) + " elements of " +
                                  e.type_name + " need " + std::to_string(uint64_t(bits / 8)));
  }
  e.bytes = span;
  if (uint64_t(begin) > file.size() - data_begin) {
    fail(GK_INVALID_ARGUMENT, where + ": data_offsets [" + std::to_string(begin) + ", " +
                                  std::to_string(end) + "] lie past the data's " +
                                  std::to_string(file.size() - data_begin) + " bytes");
  }
  e.offset = data_begin + uint64_t(begin);
  return e;
}

}  // namespace

FileContents parse_safetensors(const MappedFile& file, uint32_t file_index) {
  const std::string& path = file.path();
  if (file.size() < 8) {
    fail(GK_INVALID_ARGUMENT, path + ": " + std::to_string(file.size()) +
                                  " bytes; a SafeTensors file opens with an 8-byte header " +
                                  "length (truncated?)");
  }
  const uint64_t header_bytes = read_le64(file.data());
  if (header_bytes > kMaxHeaderBytes) {
    fail(GK_INVALID_ARGUMENT, path + ": header length " + std::to_string(header_bytes) +
                                  " (bytes 0..8) is past the 100 MB (" +
                                  std::to_string(kMaxHeaderBytes) +
                                  " bytes) limit for a SafeTensors header");
  }
  if (header_bytes > file.size() - 8) {
    fail(GK_INVALID_ARGUMENT, path + ": header length " + std::to_string(header_bytes) +
                                  " (bytes 0..8) runs past the end of the file (" +
                                  std::to_string(file.size()) + " bytes; truncated?)");
  }
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, size_t(header_bytes));
  const int depth = json_depth(text);
  if (depth > kMaxHeaderDepth) {
    fail(GK_INVALID_ARGUMENT, path + ": the JSON header nests " + std::to_string(depth) +
                                  " levels deep; a SafeTensors header needs at most 3 (limit " +
                                  std::to_string(kMaxHeaderDepth) + ")");
  }
  // Duplicate top-level keys would silently replace each other in the parsed object.
  std::unordered_set<std::string> names;
  std::string duplicate;
  auto on_event = [&](int level, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && level == 1 && duplicate.empty() &&
        parsed.is_string() && !names.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text.begin(), text.end(), on_event);
  } catch (const nlohmann::json::exception& e) {
    fail(GK_INVALID_ARGUMENT, path + ": the JSON header (bytes 8.." +
                                  std::to_string(8 + header_bytes) + ") is malformed: " + e.what());
  }
  if (!duplicate.empty()) {
    fail(GK_INVALID_ARGUMENT, tensor_context(file, duplicate) + ": named twice in the header");
  }
  if (!header.is_object()) {
    fail(GK_INVALID_ARGUMENT, path + ": the JSON header is not an object");
  }
  const uint64_t data_begin = 8 + header_bytes;
  FileContents out;
  out.tensors.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) {
        fail(GK_INVALID_ARGUMENT, path + ": \"__metadata__\" is not an object of strings");
      }
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          fail(GK_INVALID_ARGUMENT, path + ": \"__metadata__\" value '" + m.key() + "' is " +
                                        m->dump() + ", not a string");
        }
      }
      out.metadata = *it;
      continue;
    }
    check_name(file, it.key());
    out.tensors.push_back(parse_entry(file, file_index, it.key(), *it, data_begin));
  }
  check_spans(file, out.tensors, data_begin, file.size());
  // File order: by where the bytes lie (the JSON object's order is the parser's).
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [](const TensorEntry& a, const TensorEntry& b) { return a.offset < b.offset; });
  return out;
}

}  // namespace gk::weights
