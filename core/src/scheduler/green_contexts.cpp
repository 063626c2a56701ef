#include "scheduler/green_contexts.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace gk {

namespace {

// The driver's CUdevResource (cuda.h, RESOURCE_ABI_VERSION 1): a type, padding, then a
// union whose SM member is three unsigned ints.
struct DevResource {
  int type;
  unsigned char internal_padding[92];
  union {
    struct {
      unsigned sm_count;
      unsigned min_partition_size;
      unsigned coscheduled_alignment;
    } sm;
    unsigned char oversize[48];
  };
};
static_assert(sizeof(DevResource) == 144, "CUdevResource layout (cuda.h RESOURCE_ABI 1)");

constexpr int kResourceTypeSm = 1;
constexpr unsigned kGreenCtxDefaultStream = 0x1;  // required by cuGreenCtxCreate
constexpr unsigned kStreamNonBlocking = 0x1;

}  // namespace

struct GreenContexts::Api {
  using CUgreenCtx = void*;
  using CUdevResourceDesc = void*;
  cuda::CUresult (*cuDeviceGetDevResource)(cuda::CUdevice, DevResource*, int) = nullptr;
  cuda::CUresult (*cuDevSmResourceSplitByCount)(DevResource*, unsigned*, const DevResource*,
                                                DevResource*, unsigned, unsigned) = nullptr;
  cuda::CUresult (*cuDevResourceGenerateDesc)(CUdevResourceDesc*, DevResource*,
                                              unsigned) = nullptr;
  cuda::CUresult (*cuGreenCtxCreate)(CUgreenCtx*, CUdevResourceDesc, cuda::CUdevice,
                                     unsigned) = nullptr;
  cuda::CUresult (*cuGreenCtxDestroy)(CUgreenCtx) = nullptr;
  cuda::CUresult (*cuGreenCtxStreamCreate)(cuda::CUstream*, CUgreenCtx, unsigned, int) = nullptr;
};

GreenContexts::GreenContexts(const cuda::Driver& driver, const Device& device)
    : driver_(driver), device_(device), api_(std::make_unique<Api>()) {
  Api& a = *api_;
  struct {
    const char* name;
    void** slot;
  } symbols[] = {
      {"cuDeviceGetDevResource", reinterpret_cast<void**>(&a.cuDeviceGetDevResource)},
      {"cuDevSmResourceSplitByCount", reinterpret_cast<void**>(&a.cuDevSmResourceSplitByCount)},
      {"cuDevResourceGenerateDesc", reinterpret_cast<void**>(&a.cuDevResourceGenerateDesc)},
      {"cuGreenCtxCreate", reinterpret_cast<void**>(&a.cuGreenCtxCreate)},
      {"cuGreenCtxDestroy", reinterpret_cast<void**>(&a.cuGreenCtxDestroy)},
      {"cuGreenCtxStreamCreate", reinterpret_cast<void**>(&a.cuGreenCtxStreamCreate)},
  };
  for (auto& s : symbols) {
    *s.slot = driver.symbol(s.name);
    if (!*s.slot) {
      why_ = std::string("the CUDA driver lacks ") + s.name + " (green contexts need 12.4+)";
      return;
    }
  }
  DevResource all{};
  cuda::CUresult r = a.cuDeviceGetDevResource(device.cu_device, &all, kResourceTypeSm);
  if (r != cuda::kSuccess) {
    why_ = "cuDeviceGetDevResource failed with " + driver.error_text(r);
    return;
  }
  unsigned granule = std::max(all.sm.min_partition_size, 1u);
  unsigned count = 0;
  r = a.cuDevSmResourceSplitByCount(nullptr, &count, &all, nullptr, 0, granule);
  if (r != cuda::kSuccess || count < 2) {
    why_ = r != cuda::kSuccess ? "cuDevSmResourceSplitByCount failed with " + driver.error_text(r)
                               : "the device's SMs cannot be split into two partitions";
    return;
  }
  std::vector<DevResource> groups(count);
  DevResource rest{};
  r = a.cuDevSmResourceSplitByCount(groups.data(), &count, &all, &rest, 0, granule);
  if (r != cuda::kSuccess) {
    why_ = "cuDevSmResourceSplitByCount failed with " + driver.error_text(r);
    return;
  }
  granule_sms_ = int32_t(groups[0].sm.sm_count);
  for (unsigned i = 0; i < count; ++i) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&groups[i]);
    groups_.emplace_back(bytes, bytes + sizeof(DevResource));
  }
  remainder_sms_ = int32_t(rest.sm.sm_count);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&rest);
  remainder_.assign(bytes, bytes + sizeof(DevResource));
  available_ = true;
}

GreenContexts::~GreenContexts() = default;

void* GreenContexts::create(const std::vector<int>& set) {
  std::vector<DevResource> resources;
  for (int g : set) {
    const auto& raw = g == SmGranules::kRemainder ? remainder_ : groups_.at(size_t(g));
    if (g == SmGranules::kRemainder && remainder_sms_ == 0) continue;
    DevResource res;
    std::memcpy(&res, raw.data(), sizeof(res));
    resources.push_back(res);
  }
  Api::CUdevResourceDesc desc = nullptr;
  cuda::check(driver_, api_->cuDevResourceGenerateDesc(&desc, resources.data(),
                                                       unsigned(resources.size())),
              "cuDevResourceGenerateDesc", __FILE__, __LINE__);
  Api::CUgreenCtx green = nullptr;
  cuda::check(driver_, api_->cuGreenCtxCreate(&green, desc, device_.cu_device, kGreenCtxDefaultStream),
              "cuGreenCtxCreate", __FILE__, __LINE__);
  return green;
}

void GreenContexts::destroy(void* green_context) noexcept {
  if (green_context) api_->cuGreenCtxDestroy(green_context);
}

cuda::CUstream GreenContexts::create_stream(void* green_context, int priority) {
  cuda::CUstream stream = nullptr;
  cuda::check(driver_, api_->cuGreenCtxStreamCreate(&stream, green_context, kStreamNonBlocking,
                                                    priority),
              "cuGreenCtxStreamCreate", __FILE__, __LINE__);
  return stream;
}

}  // namespace gk
