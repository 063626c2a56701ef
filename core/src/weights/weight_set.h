// A weight set: the checked tensors of one or more mapped files (SafeTensors, a sharded
// SafeTensors index, or GGUF), their names and the metadata. Behind gk_weights_*
// (capi/weights_api.cpp), which hands its tensors out on devices (capi/weights_get.cpp); the
// rules are the header's "Weights, ABI 1.4".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weights/weight_file.h"

namespace gk::weights {

class WeightSet {
 public:
  // Opens `path` (a file, an index or a folder) and checks every file whole.
  explicit WeightSet(std::string path);
  WeightSet(const WeightSet&) = delete;
  WeightSet& operator=(const WeightSet&) = delete;

  const char* format() const { return format_; }
  const std::string& path() const { return path_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const std::string& file_path(uint32_t file) const { return files_[file]->path(); }
  const std::shared_ptr<MappedFile>& file(uint32_t file) const { return files_[file]; }
  size_t file_count() const { return files_.size(); }
  // The index of tensor `name`, or -1.
  int64_t find(std::string_view name) const;
  // NOT_FOUND naming the weights and `name`, with the closest tensor name.
  [[noreturn]] void fail_not_found(std::string_view name) const;
  std::string metadata_json() const;
  // The metadata object (GGUF keys and values; SafeTensors' "__metadata__" strings).
  const nlohmann::json& metadata() const { return metadata_; }

 private:
  void open_path();
  void add_file(const std::string& path, const char* format);
  void open_index(const std::string& index_path);

  std::string path_;
  const char* format_ = "";
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::vector<TensorEntry> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

}  // namespace gk::weights
