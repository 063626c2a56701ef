// Which SMs each task may use, as plain logic over "granules": the device's SMs split once
// into equal groups of the smallest partition size the driver allows (8 SMs on H100, where
// the driver gives 15 granules and a remainder of 12), because green contexts may only combine groups from
// one split. A Guaranteed or Burstable task gets exclusive granules; a BestEffort task with
// an SM limit shares the granules no one holds exclusively (and the remainder).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gk {

class SmGranules {
 public:
  static constexpr int kRemainder = -1;  // the split's remainder, in a shared set

  SmGranules(int32_t granules, int32_t granule_sms, int32_t remainder_sms);

  int32_t granule_sms() const { return granule_sms_; }
  // The granules a request of `sms` needs (rounded up).
  int32_t granules_for(int32_t sms) const;
  int32_t sms_of(const std::vector<int>& set) const;

  // `count` granules no other task holds exclusively, preferring ones no BestEffort task
  // shares; empty when fewer are free. *note says when a shared granule had to be taken.
  std::vector<int> take_exclusive(int32_t count, std::string* note);
  // Up to `count` granules no task holds exclusively (least shared first), plus the
  // remainder; empty when every granule is held exclusively and there is no remainder.
  std::vector<int> take_shared(int32_t count);
  void give_back(const std::vector<int>& set, bool exclusive);
  int32_t exclusive_free() const;

 private:
  struct Granule {
    bool exclusive = false;
    int32_t sharers = 0;
  };
  std::vector<Granule> granules_;
  int32_t granule_sms_;
  int32_t remainder_sms_;
};

}  // namespace gk
