// GGUF v2 and v3 (little-endian): "GGUF", version, tensor count, key/value count, the
// key/values, the tensor infos (name, dims innermost first, type, offset), then the data,
// aligned to general.alignment (32 when absent). Every count is checked against the bytes
// left before anything is sized from it.
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "common/error.h"
#include "common/limits.h"
#include "weights/weight_file.h"

namespace gk::weights {

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 8;  // arrays of arrays: GGUF allows them; none nests deeper

struct GgmlType {
  uint32_t id;
  const char* name;
  uint32_t block;        // elements per block
  uint32_t block_bytes;  // bytes per block
  int32_t dtype;         // 0: GPUkit has no dtype for it
};
// Every type of ggml's table (ids never reused); the sizes are its type_traits'.
constexpr GgmlType kGgmlTypes[] = {
    {0, "F32", 1, 4, GK_DTYPE_F32},
    {1, "F16", 1, 2, GK_DTYPE_F16},
    {2, "Q4_0", 32, 18, GK_DTYPE_Q4_0},
    {3, "Q4_1", 32, 20, GK_DTYPE_Q4_1},
    {6, "Q5_0", 32, 22, 0},
    {7, "Q5_1", 32, 24, 0},
    {8, "Q8_0", 32, 34, GK_DTYPE_Q8_0},
    {9, "Q8_1", 32, 36, 0},
    {10, "Q2_K", 256, 84, 0},
    {11, "Q3_K", 256, 110, 0},
    {12, "Q4_K", 256, 144, GK_DTYPE_Q4_K},
    {13, "Q5_K", 256, 176, GK_DTYPE_Q5_K},
    {14, "Q6_K", 256, 210, GK_DTYPE_Q6_K},
    {15, "Q8_K", 256, 292, 0},
    {16, "IQ2_XXS", 256, 66, 0},
    {17, "IQ2_XS", 256, 74, 0},
    {18, "IQ3_XXS", 256, 98, 0},
    {19, "IQ1_S", 256, 50, 0},
    {20, "IQ4_NL", 32, 18, 0},
    {21, "IQ3_S", 256, 110, 0},
    {22, "IQ2_S", 256, 82, 0},
    {23, "IQ4_XS", 256, 136, 0},
    {24, "I8", 1, 1, GK_DTYPE_I8},
    {25, "I16", 1, 2, GK_DTYPE_I16},
    {26, "I32", 1, 4, GK_DTYPE_I32},
    {27, "I64", 1, 8, GK_DTYPE_I64},
    {28, "F64", 1, 8, GK_DTYPE_F64},
    {29, "IQ1_M", 256, 56, 0},
    {30, "BF16", 1, 2, GK_DTYPE_BF16},
    {34, "TQ1_0", 256, 54, 0},
    {35, "TQ2_0", 256, 66, 0},
    {39, "MXFP4", 32, 17, 0},
};

const GgmlType* ggml_type(uint32_t id) {
  for (const auto& t : kGgmlTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

enum ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// The fewest bytes a value of `type` takes: how an array's count is checked against the
// bytes left before anything is built from it. 0 for an unknown type.
uint64_t min_value_bytes(uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool:
      return 1;
    case kU16:
    case kI16:
      return 2;
    case kU32:
    case kI32:
    case kF32:
      return 4;
    case kU64:
    case kI64:
    case kF64:
    case kString:
      return 8;  // a string: its length
    case kArray:
      return 12;  // element type and count
    default:
      return 0;
  }
}

// A cursor over the mapped file that never reads past its end.
class Reader {
 public:
  explicit Reader(const MappedFile& file) : file_(file) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return file_.size() - pos_; }

  void need(uint64_t bytes, const std::string& what) const {
    if (bytes > left()) {
      fail(GK_INVALID_ARGUMENT, file_.path() + ": truncated: " + what + " at byte " +
                                    std::to_string(pos_) + " needs " + std::to_string(bytes) +
                                    " bytes; the file has " + std::to_string(left()) + " left of " +
                                    std::to_string(file_.size()));
    }
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, file_.data() + pos_, sizeof(T));  // GGUF is little-endian, as the hosts
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what) {
    const uint64_t length = read<uint64_t>(what + " (its length)");
    need(length, what + " of " + std::to_string(length) + " bytes");
    std::string s(reinterpret_cast<const char*>(file_.data() + pos_), size_t(length));
    pos_ += length;
    return s;
  }

 private:
  const MappedFile& file_;
  uint64_t pos_ = 0;
};

nlohmann::json read_value(Reader& r, const MappedFile& file, uint32_t type, const std::string& key,
                          int depth) {
  const std::string what = "the value of '" + key + "'";
  switch (type) {
    case kU8:
      return r.read<uint8_t>(what);
    case kI8:
      return r.read<int8_t>(what);
    case kU16:
      return r.read<uint16_t>(what);
    case kI16:
      return r.read<int16_t>(what);
    case kU32:
      return r.read<uint32_t>(what);
    case kI32:
      return r.read<int32_t>(what);
    case kF32:
      return r.read<float>(what);
    case kBool:
      return r.read<uint8_t>(what) != 0;
    case kString:
      return r.string(what);
    case kU64:
      return r.read<uint64_t>(what);
    case kI64:
      return r.read<int64_t>(what);
    case kF64:
      return r.read<double>(what);
    case kArray: {
      if (depth >= kMaxArrayDepth) {
        fail(GK_INVALID_ARGUMENT, file.path() + ": key '" + key + "': arrays nest deeper than " +
                                      std::to_string(kMaxArrayDepth) + " levels at byte " +
                                      std::to_string(r.pos()));
      }
      const uint32_t element_type = r.read<uint32_t>(what + " (array element type)");
      const uint64_t count = r.read<uint64_t>(what + " (array count)");
      const uint64_t each = min_value_bytes(element_type);
      if (!each) {
        fail(GK_INVALID_ARGUMENT, file.path() + ": key '" + key + "': array element type " +
                                      std::to_string(element_type) +
                                      " is not a GGUF value type (0..12)");
      }
      if (count > r.left() / each) {
        fail(GK_INVALID_ARGUMENT,
             file.path() + ": key '" + key + "': an array of " + std::to_string(count) +
                 " elements needs at least " + std::to_string(each) + " bytes each; " +
                 std::to_string(r.left()) + " bytes are left at byte " + std::to_string(r.pos()));
      }
      nlohmann::json array = nlohmann::json::array();
      array.get_ref<nlohmann::json::array_t&>().reserve(size_t(count));
      for (uint64_t i = 0; i < count; ++i) {
        array.push_back(read_value(r, file, element_type, key, depth + 1));
      }
      return array;
    }
    default:
      fail(GK_INVALID_ARGUMENT,
           file.path() + ": key '" + key + "': value type " + std::to_string(type) + " at byte " +
               std::to_string(r.pos() - 4) + " is not a GGUF value type (0..12)");
  }
}

TensorEntry read_tensor_info(Reader& r, const MappedFile& file, uint32_t file_index,
                             uint64_t index) {
  TensorEntry e;
  e.file = file_index;
  e.name = r.string("the name of tensor " + std::to_string(index));
  check_name(file, e.name);
  const std::string where = tensor_context(file, e.name);
  const uint32_t n_dims = r.read<uint32_t>("the dimension count of '" + e.name + "'");
  if (n_dims > uint32_t(GK_MAX_DIMS)) {
    fail(GK_INVALID_ARGUMENT, where + ": " + std::to_string(n_dims) +
                                  " dimensions; GPUkit holds at most " +
                                  std::to_string(GK_MAX_DIMS) + " (GK_MAX_DIMS)");
  }
  e.ndim = int32_t(n_dims);
  uint64_t dims[GK_MAX_DIMS] = {};
  for (uint32_t k = 0; k < n_dims; ++k) {
    dims[k] = r.read<uint64_t>("the dimensions of '" + e.name + "'");
    if (dims[k] > uint64_t(INT64_MAX)) {
      fail(GK_INVALID_ARGUMENT, where + ": dimension " + std::to_string(k) + " is " +
                                    std::to_string(dims[k]) + ", past 2^63-1");
    }
  }
  // GGUF lists dimensions innermost first; gk shapes are row-major, innermost last.
  for (uint32_t k = 0; k < n_dims; ++k) e.shape[k] = int64_t(dims[n_dims - 1 - k]);
  const uint32_t type_id = r.read<uint32_t>("the type of '" + e.name + "'");
  const GgmlType* type = ggml_type(type_id);
  if (!type) {
    fail(GK_INVALID_ARGUMENT, where + ": type " + std::to_string(type_id) + " is not a GGML type");
  }
  e.type_name = type->name;
  e.dtype = type->dtype;
  e.offset = r.read<uint64_t>("the data offset of '" + e.name + "'");
  const uint64_t elements = checked_elements(file, e.name, e.ndim, e.shape);
  if (type->block > 1 && (n_dims == 0 || dims[0] % type->block != 0)) {
    fail(GK_INVALID_ARGUMENT, where + ": " + type->name + " packs blocks of " +
                                  std::to_string(type->block) +
                                  " elements, but the innermost dimension is " +
                                  (n_dims ? std::to_string(dims[0]) : std::string("absent")));
  }
  const unsigned __int128 bytes = (unsigned __int128)(elements / type->block) * type->block_bytes;
  if (bytes > (unsigned __int128)kMaxTensorBytes) {
    fail(GK_INVALID_ARGUMENT, where + ": its " + std::to_string(elements) + " elements of " +
                                  type->name + " take more than 2^62 bytes (kMaxTensorBytes)");
  }
  e.bytes = uint64_t(bytes);
  return e;
}

}  // namespace

FileContents parse_gguf(const MappedFile& file, uint32_t file_index) {
  const std::string& path = file.path();
  Reader r(file);
  r.need(4, "the magic");
  if (std::memcmp(file.data(), "GGUF", 4) != 0) {
    char text[16];
    std::snprintf(text, sizeof(text), "%02x %02x %02x %02x", file.data()[0], file.data()[1],
                  file.data()[2], file.data()[3]);
    fail(GK_INVALID_ARGUMENT,
         path + ": bytes 0..4 are " + text + ", not the GGUF magic " + "\"GGUF\" (47 47 55 46)");
  }
  r.read<uint32_t>("the magic");
  const uint32_t version = r.read<uint32_t>("the version");
  if (version != 2 && version != 3) {
    fail(GK_INVALID_ARGUMENT,
         path + ": GGUF version " + std::to_string(version) + " (bytes 4..8) is not supported; " +
             "GPUkit reads versions 2 and 3" +
             (version == 1              ? " (convert version 1 files with llama.cpp's tools)"
              : (version & 0xffff) == 0 ? " (a big-endian file?)"
                                        : ""));
  }
  const uint64_t tensor_count = r.read<uint64_t>("the tensor count");
  const uint64_t kv_count = r.read<uint64_t>("the key/value count");
  // A key/value takes at least 13 bytes (key length, value type, a byte), a tensor info 24.
  if (kv_count > r.left() / 13 || tensor_count > r.left() / 24 ||
      kv_count * 13 + tensor_count * 24 > r.left()) {
    fail(GK_INVALID_ARGUMENT, path + ": " + std::to_string(tensor_count) + " tensors and " +
                                  std::to_string(kv_count) + " key/values cannot fit in the " +
                                  std::to_string(r.left()) +
                                  " bytes after the header (truncated?)");
  }
  FileContents out;
  uint32_t alignment = kDefaultAlignment;
  std::unordered_set<std::string> keys;
  for (uint64_t i = 0; i < kv_count; ++i) {
    const uint64_t at = r.pos();
    std::string key = r.string("key " + std::to_string(i));
    if (!keys.insert(key).second) {
      fail(GK_INVALID_ARGUMENT,
           path + ": key '" + key + "' appears twice (again at byte " + std::to_string(at) + ")");
    }
    const uint32_t type = r.read<uint32_t>("the value type of '" + key + "'");
    nlohmann::json value = read_value(r, file, type, key, 0);
    if (key == "general.alignment") {
      if (type != kU32 || value.get<uint32_t>() == 0 ||
          (value.get<uint32_t>() & (value.get<uint32_t>() - 1)) != 0) {
        fail(GK_INVALID_ARGUMENT, path + ": general.alignment must be a u32 power of two; " +
                                      "it is " + value.dump() + " (value type " +
                                      std::to_string(type) + ")");
      }
      alignment = value.get<uint32_t>();
    }
    out.metadata[std::move(key)] = std::move(value);
  }
  std::unordered_set<std::string> names;
  out.tensors.reserve(size_t(tensor_count));
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorEntry e = read_tensor_info(r, file, file_index, i);
    if (!names.insert(e.name).second) {
      fail(GK_INVALID_ARGUMENT, tensor_context(file, e.name) + ": named twice");
    }
    out.tensors.push_back(std::move(e));
  }
  const uint64_t data_begin = (r.pos() + alignment - 1) / alignment * alignment;
  for (TensorEntry& e : out.tensors) {
    if (e.offset % alignment != 0) {
      fail(GK_INVALID_ARGUMENT, tensor_context(file, e.name) + ": data offset " +
                                    std::to_string(e.offset) + " is not a multiple of the " +
                                    "alignment " + std::to_string(alignment));
    }
    if (e.offset > file.size() || data_begin > file.size() - e.offset) {
      fail(GK_INVALID_ARGUMENT, tensor_context(file, e.name) + ": data offset " +
                                    std::to_string(e.offset) + " past the data section at " +
                                    std::to_string(data_begin) + " lies beyond the file's " +
                                    std::to_string(file.size()) + " bytes (truncated?)");
    }
    e.offset += data_begin;
  }
  check_spans(file, out.tensors, data_begin, file.size());
  return out;
}

}  // namespace gk::weights
