// The gk_weights handle, shared by the weights and tokenizer entry points: a weight set
// (weights/weight_set.h) and the tensors handed out from it on the runtime's devices
// (weights_get.cpp). The handle keeps its runtime alive.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "runtime/objects.h"
#include "weights/weight_set.h"

namespace gk::weights {

// The tensors of a weight set handed out on devices: mapped, converted or uploaded, and
// cached per device and dtype.
class WeightTensors {
 public:
  // `set` outlives this. `owner` (may be null) is charged for the copies on its device.
  WeightTensors(std::shared_ptr<Runtime> runtime, const WeightSet& set, gk_memory_owner* owner,
                void (*progress)(void*, uint64_t, uint64_t), void* progress_user_data);
  ~WeightTensors();
  WeightTensors(const WeightTensors&) = delete;
  WeightTensors& operator=(const WeightTensors&) = delete;

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

  gk_tensor* produce(const TensorEntry& e, const Device& device, int32_t dtype, gk_stream& s);
  gk_tensor* map_on_cpu(const TensorEntry& e, const Device& device);
  MemoryOwner* owner_for(const Device& device, const gk_stream& s);

  std::shared_ptr<Runtime> runtime_;
  const WeightSet& set_;
  gk_memory_owner* options_owner_;
  void (*progress_)(void*, uint64_t, uint64_t);
  void* progress_user_data_;

  std::mutex mutex_;  // guards cache_ and owners_
  std::map<Key, std::shared_ptr<Slot>> cache_;
  std::map<int32_t, MemoryOwner*> owners_;  // the set's own owner per device, made on need
};

}  // namespace gk::weights

struct gk_weights {
  std::shared_ptr<gk::Runtime> runtime;  // first: destroyed last
  std::unique_ptr<gk::weights::WeightSet> set;
  std::unique_ptr<gk::weights::WeightTensors> tensors;  // over *set: destroyed first
};
