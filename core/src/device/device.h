// The devices a runtime sees: the host CPU (always id 0) and the CUDA devices, each
// CUDA device through its primary context (shared with PyTorch, CuPy and JAX).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/log.h"
#include "device/cuda_driver.h"
#include "gpukit/gpukit.h"

namespace gk {

// The oldest SM the CUDA plugins serve.
constexpr int kMinPluginSm = 80;

struct Device {
  int32_t id = 0;
  gk_device_kind kind = GK_DEVICE_KIND_CPU;
  int32_t ordinal = 0;
  std::string name;
  int32_t sm_version = 0;
  int32_t sm_count = 0;
  uint64_t total_memory = 0;
  bool plugins_eligible = true;
  std::string note;
  // CUDA only.
  cuda::CUdevice cu_device = 0;
  cuda::CUcontext context = nullptr;  // retained primary context

  bool is_cuda() const { return kind == GK_DEVICE_KIND_CUDA; }
  // "cpu" or "cuda:0".
  std::string label() const;
};

// Discovers devices. `selection` is "all", "cuda" or "cpu". Logs one line saying which
// devices are in use and, without CUDA, why.
class DeviceSet {
 public:
  DeviceSet(const std::string& selection, const Logger& logger);
  ~DeviceSet();
  DeviceSet(const DeviceSet&) = delete;
  DeviceSet& operator=(const DeviceSet&) = delete;

  const std::vector<Device>& devices() const { return devices_; }
  // Throws OUT_OF_RANGE naming the id and the count. Inline: every C entry point calls it.
  const Device& at(int32_t id) const {
    if (id < 0 || id >= int32_t(devices_.size())) fail_no_device(id);
    return devices_[size_t(id)];
  }
  // The driver, or nullptr when there is no CUDA.
  const cuda::Driver* driver() const { return driver_; }
  const std::string& cuda_absent_reason() const { return cuda_absent_reason_; }
  uint64_t free_memory(const Device& device) const;

 private:
  [[noreturn]] void fail_no_device(int32_t id) const;

  std::vector<Device> devices_;
  const cuda::Driver* driver_ = nullptr;
  std::string cuda_absent_reason_;
};

}  // namespace gk
