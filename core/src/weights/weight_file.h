// What the weight-file parsers produce: a read-only mapping of a file and the tensors it
// holds, checked. Shared by safetensors.cpp, gguf.cpp and the weight set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpukit/gpukit.h"

namespace gk::weights {

// A file mapped read-only (MAP_PRIVATE, PROT_READ) whole; unmapped when the last holder
// goes (a weight set, or a cpu tensor over its bytes).
class MappedFile {
 public:
  // NOT_FOUND when the path does not exist; INVALID_ARGUMENT when it is not a regular file
  // or cannot be read or mapped.
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;  // null for an empty file
  uint64_t size_ = 0;
};

// One tensor as its file stores it.
struct TensorEntry {
  std::string name;
  int32_t dtype = 0;      // a gk dtype (block-quantized included), or 0 when GPUkit has none
  std::string type_name;  // the file's name of its type: "BF16", "F8_E4M3", "Q5_0"
  int32_t ndim = 0;
  int64_t shape[GK_MAX_DIMS] = {};  // row-major, innermost last
  uint64_t bytes = 0;               // stored bytes
  uint32_t file = 0;                // index of its file in the weight set
  uint64_t offset = 0;              // where its bytes start in that file
};

// The tensors of one file, in file order, and its metadata as JSON (an object).
struct FileContents {
  std::vector<TensorEntry> tensors;
  nlohmann::json metadata = nlohmann::json::object();
};

// Parse `file` (the file_index-th of its weight set). INVALID_ARGUMENT naming the file, the
// tensor and the offending bytes or values for anything malformed.
FileContents parse_safetensors(const MappedFile& file, uint32_t file_index);
FileContents parse_gguf(const MappedFile& file, uint32_t file_index);

// Shared checks of the parsers. "<path>: tensor '<name>'" for messages.
std::string tensor_context(const MappedFile& file, const std::string& name);
// Checks the dimension count and the element count (each dimension >= 0, the product within
// kMaxTensorBytes with a 0-size dimension counted as 1) and returns the element count; fails
// naming the tensor.
uint64_t checked_elements(const MappedFile& file, const std::string& name, int32_t ndim,
                          const int64_t* shape);
// Checks that the tensors' byte spans [offset, offset + bytes) lie within
// [data_begin, data_end) of the file and do not overlap; fails naming both tensors.
void check_spans(const MappedFile& file, const std::vector<TensorEntry>& tensors,
                 uint64_t data_begin, uint64_t data_end);
// The nesting depth of a JSON text, strings skipped, without parsing it: a crafted header is
// refused before a parser builds anything from it.
int json_depth(std::string_view text);
// Tensor names must be non-empty and hold no NUL byte (they cross the C ABI as strings).
void check_name(const MappedFile& file, const std::string& name);

}  // namespace gk::weights
