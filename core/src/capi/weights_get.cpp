// Handing out a weight set's tensors: mapped without a copy (cpu, as stored), converted on
// the host into pool memory, or uploaded once through the transfer engine; cached per
// (device, dtype, tensor). gk_weights_load fans the files out over a few threads.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "capi/capi_util.h"
#include "capi/weights_handle.h"
#include "dispatch/op_schema.h"
#include "memory/charge_scope.h"
#include "weights/convert.h"

namespace gk::weights {

namespace {

constexpr uint64_t kUploadChunkBytes = 16u << 20;  // converted bytes per upload
constexpr size_t kMaxLoadThreads = 4;

// The release callback of a cpu tensor over a mapping: the context is a heap-held
// shared_ptr that keeps the mapping alive.
void release_mapping(void* context) {
  delete static_cast<std::shared_ptr<MappedFile>*>(context);
}

gk_tensor_desc desc_for(const TensorEntry& e, int32_t dtype) {
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.ndim = e.ndim;
  std::copy(e.shape, e.shape + e.ndim, d.shape);
  fill_contiguous_strides(&d);
  d.flags = GK_TENSOR_READ_ONLY;
  return d;
}

uint64_t element_count(const TensorEntry& e) {
  uint64_t n = 1;
  for (int32_t k = 0; k < e.ndim; ++k) n *= uint64_t(e.shape[k]);
  return n;
}

void check_conversion(const TensorEntry& e, int32_t dtype) {
  if (!e.dtype) {
    fail(GK_UNIMPLEMENTED, "its type " + e.type_name + " has no GPUkit dtype; it is listed " +
                               "(dtype 0) but cannot be read");
  }
  if (dtype && !dtype_is_known(dtype)) {
    fail(GK_INVALID_ARGUMENT, "dtype " + std::to_string(dtype) +
                                  " is not a gk_dtype (known: " + all_dtype_names() + ")");
  }
  if (dtype && !can_convert(e.dtype, dtype)) {
    fail(GK_INVALID_ARGUMENT, std::string("it is ") + dtype_name(e.dtype) + "; converting to " +
                                  dtype_name(dtype) + " is not supported (f32, f16, bf16 and " +
                                  "f64 convert to each other; block-quantized dtypes to f32, " +
                                  "f16 and bf16)");
  }
}

}  // namespace

WeightTensors::WeightTensors(std::shared_ptr<Runtime> runtime, const WeightSet& set,
                             gk_memory_owner* owner, void (*progress)(void*, uint64_t, uint64_t),
                             void* progress_user_data)
    : runtime_(std::move(runtime)),
      set_(set),
      options_owner_(owner),
      progress_(progress),
      progress_user_data_(progress_user_data) {}

WeightTensors::~WeightTensors() {
  cache_.clear();  // the slots release their references
  for (auto& [device, owner] : owners_) {
    runtime_->memory().pool(runtime_->devices().at(device)).close_owner(owner);
  }
}

MemoryOwner* WeightTensors::owner_for(const Device& device, const gk_stream& s) {
  if (options_owner_ && options_owner_->device == &device) return options_owner_->owner;
  if (s.task) return s.task->owner;
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryOwner*& owner = owners_[device.id];
  if (!owner) {
    const std::string base = std::filesystem::path(set_.path()).filename().string();
    owner = runtime_->memory().pool(device).create_owner("weights " + base, 0);
  }
  return owner;
}

gk_tensor* WeightTensors::map_on_cpu(const TensorEntry& e, const Device& device) {
  const std::shared_ptr<MappedFile>& file = set_.file(e.file);
  void* data = const_cast<uint8_t*>(file->data()) + e.offset;
  gk_tensor* t = new_tensor(*runtime_, runtime_, device, desc_for(e, e.dtype), data);
  t->release = &release_mapping;
  t->release_context = new std::shared_ptr<MappedFile>(file);
  return t;
}

gk_tensor* WeightTensors::produce(const TensorEntry& e, const Device& device, int32_t dtype,
                                  gk_stream& s) {
  const uint8_t* src = set_.file(e.file)->data() + e.offset;
  const bool aligned = reinterpret_cast<uintptr_t>(src) % dtype_alignment(e.dtype) == 0;
  if (!device.is_cuda() && dtype == e.dtype && aligned) return map_on_cpu(e, device);
  const uint64_t elements = element_count(e);
  gk_tensor* t;
  {
    ChargeScope charge(owner_for(device, s));
    t = create_tensor(runtime_, device, desc_for(e, dtype), s.native);
  }
  const uint64_t bytes = storage_bytes(dtype, elements);
  if (!bytes) return t;
  try {
    if (!device.is_cuda()) {
      convert(e.dtype, src, dtype, t->data, elements);  // a copy for unaligned bytes
      return t;
    }
    const cuda::Driver& driver = *runtime_->devices().driver();
    cuda::ContextGuard guard(driver, device.context);
    TransferEngine& engine = runtime_->transfers(device);
    if (dtype == e.dtype) {
      engine.to_device(t->data, src, bytes, s.native);  // staged from the mapping
    } else {
      // Converted a chunk at a time (whole blocks), each staged before the next is made.
      uint32_t block_bytes = 0;
      const uint64_t block = dtype_block(e.dtype, &block_bytes);
      const uint64_t out_per_element = storage_bytes(dtype, block) / block;
      const uint64_t chunk =
          std::max<uint64_t>(block, kUploadChunkBytes / out_per_element / block * block);
      std::vector<uint8_t> host(size_t(std::min(elements, chunk) * out_per_element));
      for (uint64_t first = 0; first < elements; first += chunk) {
        const uint64_t n = std::min(chunk, elements - first);
        convert(e.dtype, src + first / block * block_bytes, dtype, host.data(), n);
        engine.to_device(static_cast<char*>(t->data) + first * out_per_element, host.data(),
                         n * out_per_element, s.native);
      }
    }
    // Complete before it is cached: any stream may use the tensor next.
    GK_CU_CHECK(driver, cuStreamSynchronize(s.native));
  } catch (...) {
    release_tensor(t);
    throw;
  }
  return t;
}

gk_tensor* WeightTensors::get(size_t index, int32_t device_id, int32_t dtype, gk_stream* stream) {
  const TensorEntry& e = set_.tensors()[index];
  return with_context("weights '" + set_.path() + "': tensor '" + e.name + "'", [&] {
    const Device& device = runtime_->devices().at(device_id);
    check_conversion(e, dtype);
    const int32_t target = dtype ? dtype : e.dtype;
    gk_stream& s = stream_for(*runtime_, stream, device, "gk_weights_get");
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::shared_ptr<Slot>& cached = cache_[Key{device_id, target, index}];
      if (!cached) cached = std::make_shared<Slot>();
      slot = cached;
    }
    std::lock_guard<std::mutex> lock(slot->mutex);
    if (!slot->tensor) slot->tensor = produce(e, device, target, s);
    retain_tensor(slot->tensor);
    return slot->tensor;
  });
}

void WeightTensors::load(int32_t device_id, int32_t dtype, gk_stream* stream) {
  const Device& device = runtime_->devices().at(device_id);
  if (dtype && !dtype_is_known(dtype)) {
    fail(GK_INVALID_ARGUMENT, "weights '" + set_.path() + "': dtype " + std::to_string(dtype) +
                                  " is not a gk_dtype (known: " + all_dtype_names() + ")");
  }
  stream_for(*runtime_, stream, device, "gk_weights_load");  // checked before any thread
  std::vector<std::vector<size_t>> by_file(set_.file_count());
  uint64_t total = 0;
  for (size_t i = 0; i < set_.tensors().size(); ++i) {
    by_file[set_.tensors()[i].file].push_back(i);
    total += set_.tensors()[i].bytes;
  }
  std::atomic<uint64_t> done{0};
  std::atomic<size_t> next_file{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable changed;
  std::exception_ptr error;
  size_t running = std::min(kMaxLoadThreads, std::max<size_t>(set_.file_count(), 1));
  auto work = [&] {
    try {
      for (size_t f; !failed && (f = next_file++) < by_file.size();) {
        for (size_t i : by_file[f]) {
          if (failed) break;
          const TensorEntry& e = set_.tensors()[i];
          // Tensors that do not convert to `dtype` (integers, bool) come as stored.
          const int32_t as = e.dtype && dtype && can_convert(e.dtype, dtype) ? dtype : 0;
          release_tensor(get(i, device_id, as, stream));
          done += e.bytes;
          changed.notify_one();
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
    std::lock_guard<std::mutex> lock(mutex);
    --running;
    changed.notify_one();
  };
  std::vector<std::thread> threads;
  const size_t count = running;
  for (size_t k = 0; k < count; ++k) {
    try {
      threads.emplace_back(work);
    } catch (...) {  // no thread to be had: the started ones stop, then the error goes up
      {
        std::lock_guard<std::mutex> lock(mutex);
        failed = true;
        running -= count - k;
      }
      for (auto& t : threads) t.join();
      throw;
    }
  }
  uint64_t reported = UINT64_MAX;
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (true) {
      const uint64_t now = done.load();
      if (progress_ && now != reported) {
        reported = now;
        lock.unlock();
        progress_(progress_user_data_, now, total);
        lock.lock();
        continue;
      }
      if (running == 0) break;
      changed.wait_for(lock, std::chrono::milliseconds(50));
    }
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

void WeightTensors::release(int32_t device_id) {
  if (device_id != -1) runtime_->devices().at(device_id);  // OUT_OF_RANGE for an unknown id
  std::vector<std::shared_ptr<Slot>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end();) {
      if (device_id == -1 || std::get<0>(it->first) == device_id) {
        dropped.push_back(std::move(it->second));
        it = cache_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // The slots release their references here, outside the lock.
}

}  // namespace gk::weights
