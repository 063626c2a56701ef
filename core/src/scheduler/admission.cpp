#include "scheduler/admission.h"

#include <algorithm>

namespace gk {

const char* qos_name(Qos qos) {
  switch (qos) {
    case Qos::kGuaranteed: return "Guaranteed";
    case Qos::kBurstable: return "Burstable";
    case Qos::kBestEffort: return "BestEffort";
  }
  return "unknown";
}

Admission::Admission(uint64_t memory_capacity, int32_t sm_capacity)
    : memory_capacity_(memory_capacity), sm_capacity_(sm_capacity) {}

bool Admission::fits(const Requests& r) const {
  uint64_t free_memory = memory_capacity_ > memory_reserved_ ? memory_capacity_ - memory_reserved_ : 0;
  return r.memory <= free_memory && r.sms <= sm_capacity_ - sms_reserved_;
}

std::string Admission::shortfall(const AdmissionRequest& r) const {
  uint64_t free_memory = memory_capacity_ > memory_reserved_ ? memory_capacity_ - memory_reserved_ : 0;
  std::string why;
  if (r.requests.memory > free_memory) {
    why = "its memory request " + human_bytes(r.requests.memory) + " exceeds the " +
          human_bytes(free_memory) + " unreserved (" + human_bytes(memory_reserved_) + " of " +
          human_bytes(memory_capacity_) + " reserved by " + std::to_string(reserved_.size()) +
          " task(s))";
  }
  if (r.requests.sms > sm_capacity_ - sms_reserved_) {
    if (!why.empty()) why += "; ";
    why += "its SM request " + std::to_string(r.requests.sms) + " exceeds the " +
           std::to_string(sm_capacity_ - sms_reserved_) + " SMs unreserved (" +
           std::to_string(sms_reserved_) + " of " + std::to_string(sm_capacity_) + " reserved)";
  }
  return why;
}

std::string Admission::admitted_reason(const AdmissionRequest& r) const {
  if (r.qos == Qos::kBestEffort) return "admitted: BestEffort needs no reservation";
  return "admitted: reserved " + human_bytes(r.requests.memory) + " and " +
         std::to_string(r.requests.sms) + " SMs (" + human_bytes(memory_reserved_) + " of " +
         human_bytes(memory_capacity_) + " and " + std::to_string(sms_reserved_) + " of " +
         std::to_string(sm_capacity_) + " SMs reserved now)";
}

void Admission::reserve(const AdmissionRequest& r) {
  memory_reserved_ += r.requests.memory;
  sms_reserved_ += r.requests.sms;
  reserved_.push_back({r, 0});
}

Admission::Decision Admission::submit(const AdmissionRequest& r) {
  if (r.qos == Qos::kBestEffort) return {Verdict::kAdmitted, admitted_reason(r)};
  if (r.requests.memory > memory_capacity_ || r.requests.sms > sm_capacity_) {
    std::string why = "rejected: it can never fit: ";
    if (r.requests.memory > memory_capacity_) {
      why += "memory request " + human_bytes(r.requests.memory) + " > device capacity " +
             human_bytes(memory_capacity_);
    } else {
      why += "SM request " + std::to_string(r.requests.sms) + " > the device's " +
             std::to_string(sm_capacity_) + " SMs";
    }
    return {Verdict::kRejected, why};
  }
  // Behind an earlier pending task of the same or higher rank it waits its turn.
  auto ahead = [&](const Entry& e) {
    return e.request.qos > r.qos || (e.request.qos == r.qos && e.request.priority >= r.priority);
  };
  bool queued_ahead = std::any_of(queue_.begin(), queue_.end(), ahead);
  if (!queued_ahead && fits(r.requests)) {
    reserve(r);
    return {Verdict::kAdmitted, admitted_reason(r)};
  }
  Entry entry{r, next_seq_++};
  auto pos = std::find_if(queue_.begin(), queue_.end(), [&](const Entry& e) { return !ahead(e); });
  queue_.insert(pos, entry);
  return {Verdict::kPending, pending_reason(r.id)};
}

std::vector<Admission::Admitted> Admission::admit_from_queue() {
  std::vector<Admitted> admitted;
  while (!queue_.empty() && fits(queue_.front().request.requests)) {
    AdmissionRequest r = queue_.front().request;
    queue_.erase(queue_.begin());
    reserve(r);
    admitted.push_back({r.id, admitted_reason(r)});
  }
  return admitted;
}

std::vector<Admission::Admitted> Admission::release(uint64_t id) {
  auto by_id = [id](const Entry& e) { return e.request.id == id; };
  auto it = std::find_if(reserved_.begin(), reserved_.end(), by_id);
  if (it != reserved_.end()) {
    memory_reserved_ -= it->request.requests.memory;
    sms_reserved_ -= it->request.requests.sms;
    reserved_.erase(it);
  } else {
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(), by_id), queue_.end());
  }
  return admit_from_queue();
}

std::vector<Admission::Admitted> Admission::set_memory_capacity(uint64_t bytes) {
  memory_capacity_ = bytes;
  return admit_from_queue();
}

std::vector<uint64_t> Admission::pending() const {
  std::vector<uint64_t> ids;
  for (const Entry& e : queue_) ids.push_back(e.request.id);
  return ids;
}

std::string Admission::pending_reason(uint64_t id) const {
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (queue_[i].request.id != id) continue;
    if (i > 0) {
      return "pending: position " + std::to_string(i + 1) + " in the queue, behind '" +
             queue_[0].request.name + "' (FIFO within priority)";
    }
    std::string why = shortfall(queue_[i].request);
    return "pending: " + (why.empty() ? std::string("waiting for the queue") : why);
  }
  return "";
}

}  // namespace gk
