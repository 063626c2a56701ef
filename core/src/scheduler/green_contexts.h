// SM partitions through CUDA green contexts (driver 12.4+), for one device. The entry
// points are optional: where the driver lacks them, or the device cannot be split,
// available() is false and why() says so; tasks then get stream priorities only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "device/device.h"
#include "scheduler/sm_granules.h"

namespace gk {

class GreenContexts {
 public:
  GreenContexts(const cuda::Driver& driver, const Device& device);
  ~GreenContexts();
  GreenContexts(const GreenContexts&) = delete;
  GreenContexts& operator=(const GreenContexts&) = delete;

  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  // Granules of the one split (all zero when unavailable).
  int32_t granules() const { return int32_t(groups_.size()); }
  int32_t granule_sms() const { return granule_sms_; }
  int32_t remainder_sms() const { return remainder_sms_; }

  // A green context over the given granules (SmGranules::kRemainder for the remainder).
  // Throws with the driver's error.
  void* create(const std::vector<int>& set);
  void destroy(void* green_context) noexcept;
  // A non-blocking stream of `priority` on the green context.
  cuda::CUstream create_stream(void* green_context, int priority);

 private:
  struct Api;
  const cuda::Driver& driver_;
  const Device& device_;
  std::unique_ptr<Api> api_;
  bool available_ = false;
  std::string why_;
  std::vector<std::vector<unsigned char>> groups_;  // CUdevResource, as raw bytes
  std::vector<unsigned char> remainder_;
  int32_t granule_sms_ = 0;
  int32_t remainder_sms_ = 0;
};

}  // namespace gk
