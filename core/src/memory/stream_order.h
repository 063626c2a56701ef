// Stream-ordered frees: when a block freed on one stream may be reused on another.
//
// A block freed on stream S is reusable on S at once. On another stream T it must wait for
// the work queued on S before the free. For streams the pool tracks (those made by
// gk_stream_create and the legacy default stream: their destruction is announced through
// forget), a free records nothing: when T first wants such a block, one event is recorded on
// S *then* (it covers every free made on S so far, a superset of the work at free time, so it
// is conservative but correct) and shared among all of S's pending blocks. For a stream the
// pool does not track (a wrapped foreign stream, which may be destroyed without notice), a
// free records an event at once, as the only moment the stream is known to exist. T reuses a
// pending block once that event has completed, or after being made to wait on it
// (cuStreamWaitEvent): the host never blocks on the alloc path.
//
// Not locked by itself: the pool's lock guards it. The counters it keeps (events recorded,
// cross-stream waits) are the pool's statistics, passed in by the pool.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "memory/pool_backend.h"
#include "memory/pool_block.h"
#include "memory/pool_stats.h"

namespace gk {

// A tracked stream's free epochs. Every free is numbered (pool-wide); an event recorded on
// the stream when the count was N completes after every free made there with a number <= N,
// since those were queued in the stream's order before it.
struct PoolStream {
  struct Epoch {
    void* event;
    uint64_t seq;  // the free count when recorded
  };
  cuda::CUstream stream = nullptr;
  uint64_t completed_seq = 0;   // frees here numbered <= this are complete on the device
  uint64_t last_free_seq = 0;   // the latest free made here
  std::vector<Epoch> events;    // recorded and not known complete, oldest first
};

class StreamOrder {
 public:
  explicit StreamOrder(PoolBackend& backend) : backend_(&backend) {}
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  // Releases every outstanding event; the pool calls it while its backend still lives.
  void release_events() noexcept;

  // Marks `b` freed in `stream`'s order. `ready`: its contents are known consumed already
  // (a spill's copy completed). Inline: every free comes here; a tracked stream's free makes
  // no driver call.
  void note_free(PoolBlock* b, cuda::CUstream stream, bool ready, PoolStats& stats) noexcept {
    b->free = true;
    b->stream = stream;
    b->free_seq = ++free_seq_;
    b->event = nullptr;
    b->lazy = nullptr;
    b->ready = true;
    if (ready) return;
    if (PoolStream* ps = tracked(stream)) {
      // No driver call: an event is recorded only if another stream wants the block.
      b->lazy = ps;
      b->ready = false;
      ps->last_free_seq = b->free_seq;
    } else {
      // The stream may be gone by the time another one wants the block: record now.
      b->event = backend_->record_event(stream);
      b->ready = !b->event;
      ++stats.events_recorded;
    }
  }

  // Whether a free block may be used on `stream` without waiting. A lazy block's stream is
  // alive (forget settles them all before a tracked stream goes), so its handle cannot name
  // another stream yet.
  bool usable_on(PoolBlock* b, cuda::CUstream stream, PoolStats& stats) {
    if (b->ready || b->stream == stream) return true;
    return settled(b, stats);
  }
  // Whether a free block's free is complete on the device (so it is usable on every stream
  // and may go back to the backend), without blocking; marks it ready when it is.
  bool settled(PoolBlock* b, PoolStats& stats);
  // Blocks the host until a free block's free is complete (trim, release under pressure).
  void wait_settled(PoolBlock* b, PoolStats& stats) noexcept;
  // Makes `stream` wait, on the device, for the free of a block freed on another stream.
  void wait_for(PoolBlock* b, cuda::CUstream stream, PoolStats& stats);

  // A stream tracked twice is still tracked once.
  void track(cuda::CUstream stream);
  // Before a tracked stream is destroyed: waits for the frees still pending on it (the
  // caller has synchronized it, so this returns at once) and returns it, for the pool to mark
  // its blocks ready before calling forget(); nullptr when it is not tracked.
  PoolStream* drain(cuda::CUstream stream, PoolStats& stats) noexcept;
  void forget(PoolStream* ps) noexcept;

 private:
  PoolStream* tracked(cuda::CUstream stream) noexcept {
    if (last_stream_ && last_stream_->stream == stream) return last_stream_;
    return tracked_lookup(stream);
  }
  PoolStream* tracked_lookup(cuda::CUstream stream) noexcept;
  void* covering_event(PoolStream* ps, uint64_t seq, PoolStats& stats) noexcept;
  bool stream_complete(PoolStream* ps, uint64_t seq, PoolStats& stats);

  // Cold first, so that the two counters every free touches end the object and share the
  // pool's hot cache line with the fields that follow (memory_pool.h).
  std::unordered_map<cuda::CUstream, std::unique_ptr<PoolStream>> streams_;  // tracked
  PoolBackend* backend_;
  uint64_t free_seq_ = 0;              // frees made so far, pool-wide
  PoolStream* last_stream_ = nullptr;  // the tracked stream looked up last (frees come in runs)
};

}  // namespace gk
