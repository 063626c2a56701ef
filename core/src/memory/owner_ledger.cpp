#include "memory/owner_ledger.h"

#include <chrono>

#include "common/bytes.h"

namespace gk {

OwnerLedger::OwnerLedger() { unowned_.name = "(no owner)"; }

MemoryOwner* OwnerLedger::create(const std::string& name, uint64_t quota) {
  auto o = std::make_unique<MemoryOwner>();
  o->name = name;
  o->quota = quota;
  owners_.push_back(std::move(o));
  return owners_.back().get();
}

void OwnerLedger::close(MemoryOwner* owner) noexcept {
  owner->closed = true;
  unused_reservations_ -= unused_reservation(owner);
  owner->request = 0;  // a closed owner holds no reservation
}

void OwnerLedger::set_class(MemoryOwner* owner, int32_t eviction_class, uint64_t request) {
  unused_reservations_ -= unused_reservation(owner);
  owner->eviction_class = eviction_class;
  owner->request = owner->closed ? 0 : request;
  unused_reservations_ += unused_reservation(owner);
}

void OwnerLedger::note(MemoryOwner* owner, std::string text) {
  if (owner == &unowned_) return;
  if (owner->events.size() == kOwnerEventLimit) {
    owner->events.erase(owner->events.begin());
    ++owner->events_dropped;
  }
  uint64_t now = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now().time_since_epoch())
                              .count());
  owner->events.push_back({now, std::move(text)});
}

std::string OwnerLedger::holders_text() const {
  std::vector<const MemoryOwner*> all{&unowned_};
  for (auto& o : owners_) all.push_back(o.get());
  std::sort(all.begin(), all.end(),
            [](const MemoryOwner* a, const MemoryOwner* b) { return a->in_use > b->in_use; });
  std::string t;
  int shown = 0;
  for (const MemoryOwner* o : all) {
    if (o->in_use == 0 || shown == 5) continue;
    t += (shown++ ? ", '" : "'") + o->name + "' " + human_bytes(o->in_use);
    if (o->quota) t += " (quota " + human_bytes(o->quota) + ")";
  }
  return shown ? t : "none";
}

}  // namespace gk
