#include "scheduler/pacer.h"

namespace gk {

PacingDecision pace_best_effort(const PacingConfig& c, const PacingView& v) {
  if (c.best_effort_inflight <= 0) return {};
  bool recent = v.guaranteed_last_launch_ns != 0 &&
                v.now_ns - v.guaranteed_last_launch_ns < uint64_t(c.guaranteed_idle_us) * 1000;
  if (v.guaranteed_inflight == 0 && !recent) return {};
  if (v.own_inflight < c.best_effort_inflight) return {};
  if (v.held_since_ns != 0 && v.now_ns - v.held_since_ns >= uint64_t(c.max_hold_us) * 1000) {
    return {};
  }
  std::string busy = v.guaranteed_inflight > 0
                         ? std::to_string(v.guaranteed_inflight) + " Guaranteed op(s) in flight"
                         : "a Guaranteed launch within the last " +
                               std::to_string(c.guaranteed_idle_us) + " us";
  return {false, "pacing: " + busy + "; this BestEffort task has " +
                     std::to_string(v.own_inflight) + " op(s) in flight (limit " +
                     std::to_string(c.best_effort_inflight) + ")"};
}

}  // namespace gk
