#include "device/device.h"

#include <unistd.h>

#include <fstream>
#include <thread>

#include "common/error.h"

namespace gk {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "host CPU";
}

uint64_t host_memory(int name) {
  long pages = sysconf(name);
  long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

Device make_cpu_device() {
  Device cpu;
  cpu.id = 0;
  cpu.kind = GK_DEVICE_KIND_CPU;
  cpu.name = cpu_model_name();
  cpu.sm_count = int32_t(std::max(1u, std::thread::hardware_concurrency()));
  cpu.total_memory = host_memory(_SC_PHYS_PAGES);
  return cpu;
}

}  // namespace

std::string Device::label() const {
  return is_cuda() ? "cuda:" + std::to_string(ordinal) : std::string("cpu");
}

DeviceSet::DeviceSet(const std::string& selection, const Logger& logger) {
  if (selection != "all" && selection != "cuda" && selection != "cpu") {
    fail(GK_INVALID_ARGUMENT, "device selection '" + selection +
                                  "' is not one of 'all', 'cuda', 'cpu' (from options.devices "
                                  "or GPUKIT_DEVICE)");
  }
  devices_.push_back(make_cpu_device());
  if (selection == "cpu") {
    cuda_absent_reason_ = "CUDA devices not requested (device selection 'cpu')";
    logger.info("using the cpu device only: device selection is 'cpu'");
    return;
  }
  driver_ = cuda::Driver::get(&cuda_absent_reason_);
  if (!driver_) {
    logger.info("using the cpu device only: " + cuda_absent_reason_);
    return;
  }
  const auto& api = driver_->api();
  int count = 0;
  GK_CU_CHECK(*driver_, cuDeviceGetCount(&count));
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    Device d;
    d.id = int32_t(devices_.size());
    d.kind = GK_DEVICE_KIND_CUDA;
    d.ordinal = ordinal;
    GK_CU_CHECK(*driver_, cuDeviceGet(&d.cu_device, ordinal));
    char name[256] = {};
    GK_CU_CHECK(*driver_, cuDeviceGetName(name, sizeof(name) - 1, d.cu_device));
    d.name = name;
    int major = 0, minor = 0, sms = 0;
    api.cuDeviceGetAttribute(&major, cuda::kAttrComputeCapabilityMajor, d.cu_device);
    api.cuDeviceGetAttribute(&minor, cuda::kAttrComputeCapabilityMinor, d.cu_device);
    api.cuDeviceGetAttribute(&sms, cuda::kAttrMultiprocessorCount, d.cu_device);
    d.sm_version = major * 10 + minor;
    d.sm_count = sms;
    size_t total = 0;
    GK_CU_CHECK(*driver_, cuDeviceTotalMem(&total, d.cu_device));
    d.total_memory = total;
    GK_CU_CHECK(*driver_, cuDevicePrimaryCtxRetain(&d.context, d.cu_device));
    if (d.sm_version < kMinPluginSm) {
      d.plugins_eligible = false;
      d.note = "SM " + std::to_string(major) + "." + std::to_string(minor) +
               " is below SM 8.0, the oldest the CUDA plugins serve: no CUDA plugins";
      logger.warning(d.label() + " (" + d.name + "): " + d.note);
    }
    devices_.push_back(std::move(d));
  }
  if (count == 0) {
    cuda_absent_reason_ = "the CUDA driver reports no device";
    logger.info("using the cpu device only: " + cuda_absent_reason_);
  } else {
    std::string list;
    for (const Device& d : devices_) {
      if (!d.is_cuda()) continue;
      list += (list.empty() ? "" : ", ") + d.label() + " " + d.name + " (SM " +
              std::to_string(d.sm_version) + ")";
    }
    logger.info("using the cpu device and " + list);
  }
}

DeviceSet::~DeviceSet() {
  for (const Device& d : devices_) {
    if (d.context) driver_->api().cuDevicePrimaryCtxRelease(d.cu_device);
  }
}

void DeviceSet::fail_no_device(int32_t id) const {
  fail(GK_OUT_OF_RANGE, "device id " + std::to_string(id) + " does not exist (the runtime has " +
                            std::to_string(devices_.size()) + " devices, ids 0.." +
                            std::to_string(devices_.size() - 1) + ")");
}

uint64_t DeviceSet::free_memory(const Device& device) const {
  if (!device.is_cuda()) return host_memory(_SC_AVPHYS_PAGES);
  cuda::ContextGuard guard(*driver_, device.context);
  size_t free = 0, total = 0;
  GK_CU_CHECK(*driver_, cuMemGetInfo(&free, &total));
  return free;
}

}  // namespace gk
