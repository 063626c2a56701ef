// A weight set: the checked tensors of one or more mapped files (SafeTensors, a sharded
// SafeTensors index, or GGUF) and a cache of the tensors handed out, per device and dtype.
// Behind gk_weights_* (capi/weights_api.cpp); the rules are the header's "Weights, ABI 1.4".
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "runtime/objects.h"
#include "weights/weight_file.h"

namespace gk::weights {

class WeightSet {
 public:
  // Opens `path` (a file, an index or a folder) and checks every file whole. `owner` (may
  // be null) is charged for the copies on its device.
  WeightSet(std::shared_ptr<Runtime> runtime, std::string path, gk_memory_owner* owner,
            void (*progress)(void*, uint64_t, uint64_t), void* progress_user_data);
  ~WeightSet();
  WeightSet(const WeightSet&) = delete;
  WeightSet& operator=(const WeightSet&) = delete;

  const char* format() const { return format_; }
  const std::string& path() const { return path_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const std::string& file_path(uint32_t file) const { return files_[file]->path(); }
  // The index of tensor `name`, or -1.
  int64_t find(std::string_view name) const;
  // NOT_FOUND naming the weights and `name`, with the closest tensor name.
  [[noreturn]] void fail_not_found(std::string_view name) const;
  std::string metadata_json() const;
  // The metadata object (GGUF keys and values; SafeTensors' "__metadata__" strings).
  const nlohmann::json& metadata() const { return metadata_; }

  // Tensor `index` on `device` as `dtype` (0: as stored): a new reference, cached.
  gk_tensor* get(size_t index, int32_t device, int32_t dtype, gk_stream* stream);
  // Every tensor on `device` as `dtype` where it converts (else as stored), files in
  // parallel; progress reported on the calling thread.
  void load(int32_t device, int32_t dtype, gk_stream* stream);
  // Drops the cached tensors of `device` (-1: every device).
  void release(int32_t device);

 private:
  // One cached tensor; its mutex makes concurrent first requests produce it once.
  struct Slot {
    std::mutex mutex;
    gk_tensor* tensor = nullptr;  // one reference, held by the cache
    ~Slot() { release_tensor(tensor); }
  };
  using Key = std::tuple<int32_t, int32_t, size_t>;  // device, dtype, tensor

  void open_path();
  void add_file(const std::string& path, const char* format);
  void open_index(const std::string& index_path);
  gk_tensor* produce(const TensorEntry& e, const Device& device, int32_t dtype, gk_stream& s);
  gk_tensor* map_on_cpu(const TensorEntry& e, const Device& device);
  MemoryOwner* owner_for(const Device& device, const gk_stream& s);

  std::shared_ptr<Runtime> runtime_;  // first: destroyed last
  std::string path_;
  const char* format_ = "";
  gk_memory_owner* options_owner_;
  void (*progress_)(void*, uint64_t, uint64_t);
  void* progress_user_data_;
  std::vector<std::shared_ptr<MappedFile>> files_;
  std::vector<TensorEntry> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  nlohmann::json metadata_ = nlohmann::json::object();

  std::mutex mutex_;  // guards cache_ and owners_
  std::map<Key, std::shared_ptr<Slot>> cache_;
  std::map<int32_t, MemoryOwner*> owners_;  // the set's own owner per device, made on need
};

}  // namespace gk::weights
