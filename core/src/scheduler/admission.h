// Admission control for one device, as plain logic (no driver, no clock), so every rule is
// tested deterministically on any machine.
//
// Kubernetes' node-level rules, for memory and SMs: Guaranteed and Burstable tasks are
// admitted when their requests fit the unreserved capacity, and their requests are then
// reserved; BestEffort tasks have no requests and are admitted at once. A task that does
// not fit waits in the pending queue, ordered by class, then priority, then arrival
// (strict FIFO: the head blocks those behind it, so a large task is never starved by small
// ones). A request larger than the device is rejected: it could never fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/bytes.h"

namespace gk {

enum class Qos : int32_t { kBestEffort = 0, kBurstable = 1, kGuaranteed = 2 };
const char* qos_name(Qos qos);

struct Requests {
  uint64_t memory = 0;  // bytes
  int32_t sms = 0;      // streaming multiprocessors (rounded to the partition granularity)
};

struct AdmissionRequest {
  uint64_t id = 0;
  std::string name;
  Qos qos = Qos::kBestEffort;
  int32_t priority = 0;
  Requests requests;
};

class Admission {
 public:
  Admission(uint64_t memory_capacity, int32_t sm_capacity);

  enum class Verdict { kAdmitted, kPending, kRejected };
  struct Decision {
    Verdict verdict;
    std::string reason;
  };
  // Admits (reserving its requests), queues or rejects a new task.
  Decision submit(const AdmissionRequest& request);
  // Releases an admitted task's reservation or takes a pending one out of the queue, then
  // admits from the queue's head while the head fits. Returns those admitted, with reasons.
  struct Admitted {
    uint64_t id;
    std::string reason;
  };
  std::vector<Admitted> release(uint64_t id);
  // The capacity changed (a device budget was set): admits from the queue if it can.
  std::vector<Admitted> set_memory_capacity(uint64_t bytes);

  uint64_t memory_capacity() const { return memory_capacity_; }
  int32_t sm_capacity() const { return sm_capacity_; }
  uint64_t memory_reserved() const { return memory_reserved_; }
  int32_t sms_reserved() const { return sms_reserved_; }
  // Ids of pending tasks, head first, and why the head waits.
  std::vector<uint64_t> pending() const;
  std::string pending_reason(uint64_t id) const;

 private:
  struct Entry {
    AdmissionRequest request;
    uint64_t seq;
  };
  bool fits(const Requests& r) const;
  std::string shortfall(const AdmissionRequest& r) const;
  std::string admitted_reason(const AdmissionRequest& r) const;
  void reserve(const AdmissionRequest& r);
  std::vector<Admitted> admit_from_queue();

  uint64_t memory_capacity_;
  int32_t sm_capacity_;
  uint64_t memory_reserved_ = 0;
  int32_t sms_reserved_ = 0;
  uint64_t next_seq_ = 0;
  std::vector<Entry> reserved_;  // admitted Guaranteed and Burstable tasks
  std::vector<Entry> queue_;     // pending, in admission order
};


}  // namespace gk
