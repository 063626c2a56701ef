#include "scheduler/sm_granules.h"

#include <algorithm>
#include <numeric>

namespace gk {

SmGranules::SmGranules(int32_t granules, int32_t granule_sms, int32_t remainder_sms)
    : granules_(size_t(std::max(granules, 0))),
      granule_sms_(std::max(granule_sms, 1)),
      remainder_sms_(remainder_sms) {}

int32_t SmGranules::granules_for(int32_t sms) const {
  return (sms + granule_sms_ - 1) / granule_sms_;
}

int32_t SmGranules::sms_of(const std::vector<int>& set) const {
  int32_t sms = 0;
  for (int g : set) sms += g == kRemainder ? remainder_sms_ : granule_sms_;
  return sms;
}

int32_t SmGranules::exclusive_free() const {
  return int32_t(std::count_if(granules_.begin(), granules_.end(),
                               [](const Granule& g) { return !g.exclusive; }));
}

std::vector<int> SmGranules::take_exclusive(int32_t count, std::string* note) {
  if (count <= 0 || exclusive_free() < count) return {};
  std::vector<int> order(granules_.size());
  std::iota(order.begin(), order.end(), 0);
  // Unshared granules first; among equals, the lowest index, so partitions stay compact.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return granules_[size_t(a)].sharers < granules_[size_t(b)].sharers;
  });
  std::vector<int> set;
  int32_t shared = 0;
  for (int g : order) {
    if (int32_t(set.size()) == count) break;
    if (granules_[size_t(g)].exclusive) continue;
    granules_[size_t(g)].exclusive = true;
    if (granules_[size_t(g)].sharers > 0) ++shared;
    set.push_back(g);
  }
  std::sort(set.begin(), set.end());
  if (note && shared > 0) {
    *note = std::to_string(shared) + " of its " + std::to_string(count) +
            " granules are also used by BestEffort tasks created earlier";
  }
  return set;
}

std::vector<int> SmGranules::take_shared(int32_t count) {
  std::vector<int> order;
  for (size_t g = 0; g < granules_.size(); ++g) {
    if (!granules_[g].exclusive) order.push_back(int(g));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return granules_[size_t(a)].sharers < granules_[size_t(b)].sharers;
  });
  std::vector<int> set;
  // The remainder counts towards the limit; at least one granule when there is no remainder.
  int32_t limit_sms = count * granule_sms_;
  int32_t sms = std::max(remainder_sms_, 0);
  for (int g : order) {
    if (sms + granule_sms_ > limit_sms && (!set.empty() || remainder_sms_ > 0)) break;
    ++granules_[size_t(g)].sharers;
    set.push_back(g);
    sms += granule_sms_;
  }
  std::sort(set.begin(), set.end());
  if (remainder_sms_ > 0) set.push_back(kRemainder);
  return set;
}

void SmGranules::give_back(const std::vector<int>& set, bool exclusive) {
  for (int g : set) {
    if (g == kRemainder) continue;
    Granule& granule = granules_[size_t(g)];
    if (exclusive) {
      granule.exclusive = false;
    } else if (granule.sharers > 0) {
      --granule.sharers;
    }
  }
}

}  // namespace gk
