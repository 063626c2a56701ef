// Pacing of BestEffort launches, as plain logic over a clock reading, so it is tested
// deterministically with an injected clock.
//
// While a Guaranteed task of the device is busy (ops in flight, or launched within
// guaranteed_idle_us), a BestEffort task launches only while it has fewer than
// best_effort_inflight ops in flight; a launch held longer than max_hold_us goes anyway so
// BestEffort work always progresses.
#pragma once

#include <cstdint>
#include <string>

namespace gk {

struct PacingConfig {
  int32_t best_effort_inflight = 1;  // 0: pacing off
  uint32_t guaranteed_idle_us = 200;
  uint32_t max_hold_us = 2000;
};

struct PacingView {
  uint64_t now_ns = 0;
  int32_t guaranteed_inflight = 0;         // over the device's Guaranteed tasks
  uint64_t guaranteed_last_launch_ns = 0;  // 0: never
  int32_t own_inflight = 0;                // the BestEffort task's ops in flight
  uint64_t held_since_ns = 0;              // 0: not held yet
};

struct PacingDecision {
  bool go = true;
  std::string reason;  // why it is held (empty when it goes)
};

PacingDecision pace_best_effort(const PacingConfig& config, const PacingView& view);

}  // namespace gk
