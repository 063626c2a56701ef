#include "memory/stream_order.h"

#include <algorithm>

namespace gk {

namespace {

// The first `n` events of `ps` are known complete.
void complete_through(PoolStream* ps, size_t n, PoolBackend& backend) noexcept {
  if (n == 0) return;
  ps->completed_seq = std::max(ps->completed_seq, ps->events[n - 1].seq);
  for (size_t i = 0; i < n; ++i) backend.release_event(ps->events[i].event);
  ps->events.erase(ps->events.begin(), ps->events.begin() + long(n));
}

}  // namespace

PoolStream* StreamOrder::tracked_lookup(cuda::CUstream stream) noexcept {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return nullptr;
  last_stream_ = it->second.get();
  return last_stream_;
}

void StreamOrder::release_events() noexcept {
  for (auto& [stream, ps] : streams_) {
    for (const PoolStream::Epoch& e : ps->events) backend_->release_event(e.event);
    ps->events.clear();
  }
}

// An event on ps's stream that completes after every free made there numbered up to `seq`:
// the oldest outstanding one that covers it, else one recorded now (recording later than
// the free only captures more work, never less). nullptr when that work is complete.
void* StreamOrder::covering_event(PoolStream* ps, uint64_t seq, PoolStats& stats) noexcept {
  if (seq <= ps->completed_seq) return nullptr;
  for (const PoolStream::Epoch& e : ps->events) {
    if (e.seq >= seq) return e.event;
  }
  void* event = backend_->record_event(ps->stream);
  ++stats.events_recorded;
  if (event) {
    try {
      ps->events.push_back({event, free_seq_});
      return event;
    } catch (...) {
      backend_->synchronize_event(event);  // no room to keep it: wait for it here instead
      backend_->release_event(event);
    }
  }
  // Complete already: so is every older event of the stream.
  complete_through(ps, ps->events.size(), *backend_);
  ps->completed_seq = free_seq_;
  return nullptr;
}

// Whether every free made on ps's stream up to `seq` is complete, without blocking.
bool StreamOrder::stream_complete(PoolStream* ps, uint64_t seq, PoolStats& stats) {
  if (seq <= ps->completed_seq) return true;
  size_t done = 0;
  while (done < ps->events.size() && backend_->event_complete(ps->events[done].event)) ++done;
  complete_through(ps, done, *backend_);
  if (seq <= ps->completed_seq) return true;
  // Nothing outstanding covers it: record an event now, so that a later look can find it
  // complete. While an older event is outstanding, a newer one cannot have completed, so
  // one probe per stream at a time is enough.
  if (ps->events.empty()) covering_event(ps, seq, stats);
  return seq <= ps->completed_seq;
}

bool StreamOrder::settled(PoolBlock* b, PoolStats& stats) {
  if (b->ready) return true;
  if (b->lazy ? !stream_complete(b->lazy, b->free_seq, stats)
              : !backend_->event_complete(b->event)) {
    return false;
  }
  if (b->event) backend_->release_event(b->event);
  b->event = nullptr;
  b->lazy = nullptr;
  b->ready = true;
  return true;
}

void StreamOrder::wait_settled(PoolBlock* b, PoolStats& stats) noexcept {
  if (b->ready) return;
  if (PoolStream* ps = b->lazy) {
    if (void* e = covering_event(ps, b->free_seq, stats)) {
      backend_->synchronize_event(e);
      size_t n = 0;
      while (ps->events[n].event != e) ++n;
      complete_through(ps, n + 1, *backend_);  // and every older event of the stream
    }
  } else {
    backend_->synchronize_event(b->event);
    backend_->release_event(b->event);
  }
  b->event = nullptr;
  b->lazy = nullptr;
  b->ready = true;
}

void StreamOrder::wait_for(PoolBlock* b, cuda::CUstream stream, PoolStats& stats) {
  void* e = b->lazy ? covering_event(b->lazy, b->free_seq, stats) : b->event;
  if (!e) return;  // complete meanwhile
  backend_->stream_wait_event(stream, e);
  ++stats.cross_stream_waits;
}

void StreamOrder::track(cuda::CUstream stream) {
  if (streams_.count(stream)) return;
  auto ps = std::make_unique<PoolStream>();
  ps->stream = stream;
  streams_.emplace(stream, std::move(ps));
}

PoolStream* StreamOrder::drain(cuda::CUstream stream, PoolStats& stats) noexcept {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return nullptr;
  PoolStream* ps = it->second.get();
  // The handle may name another stream once this one is destroyed: every block pending on
  // it must be complete first. The caller synchronized the stream, so this is quick; it
  // does not rely on that having succeeded.
  if (void* e = covering_event(ps, ps->last_free_seq, stats)) backend_->synchronize_event(e);
  return ps;
}

void StreamOrder::forget(PoolStream* ps) noexcept {
  for (const PoolStream::Epoch& e : ps->events) backend_->release_event(e.event);
  if (last_stream_ == ps) last_stream_ = nullptr;
  streams_.erase(ps->stream);
}

}  // namespace gk
