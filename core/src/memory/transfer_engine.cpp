#include "memory/transfer_engine.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/environment.h"
#include "common/error.h"
#include "common/log.h"

namespace gk {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

// A whole number from variable `name` within [lo, hi], or `fallback` when unset.
uint64_t env_number(const char* name, uint64_t fallback, uint64_t lo, uint64_t hi) {
  auto value = env_value(name);
  if (!value) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(value->c_str(), &end, 10);
  if (!end || *end != '\0' || (*value)[0] == '-' || n < lo || n > hi) {
    fail(GK_INVALID_ARGUMENT, std::string(name) + "='" + *value + "' is not a whole number in " +
                                  std::to_string(lo) + ".." + std::to_string(hi));
  }
  return n;
}

// The size of host → device chunk `index` when `remaining` bytes are left to stage. The copy
// is a pipeline of host memcpys into staging and DMAs out of it, in which the first memcpy
// and the last DMA overlap nothing. So chunks ramp up from an eighth of `chunk` (the first
// DMA starts after 1 MiB instead of 8) and halve again over the last two chunks' worth of
// bytes (the last DMA is short). Whole pages, except for the very last chunk.
uint64_t staged_chunk_bytes(uint64_t chunk, uint64_t index, uint64_t remaining) {
  constexpr uint64_t kPage = 4096;
  const uint64_t smallest = std::max(chunk / 8 / kPage * kPage, kPage);
  if (remaining <= 2 * smallest) return remaining;
  uint64_t n = std::min(chunk, smallest << std::min<uint64_t>(index, 3));
  // Below 2 · chunk, half the rest (rounded up to a page) is still less than the rest.
  if (remaining <= 2 * chunk)
    n = std::min(n, std::max(smallest, ceil_div(remaining / 2, kPage) * kPage));
  return n;
}

}  // namespace

TransferTuning TransferTuning::from_environment(bool use_environment) {
  TransferTuning t;
  unsigned cores = std::thread::hardware_concurrency();
  if (cores) t.host_threads = std::clamp<int>(int(cores / 2), 1, t.host_threads);
  if (!use_environment) return t;
  t.chunk_bytes = env_number("GPUKIT_TRANSFER_CHUNK_KIB", t.chunk_bytes >> 10, 64, 1 << 20) << 10;
  t.chunks = int(env_number("GPUKIT_TRANSFER_CHUNKS", uint64_t(t.chunks), 2, 16));
  t.host_threads = int(env_number("GPUKIT_TRANSFER_HOST_THREADS", uint64_t(t.host_threads), 1, 64));
  return t;
}

// ---------------------------------------------------------------------------------------
// HostCopyPool
// ---------------------------------------------------------------------------------------

struct HostCopyPool::Job {
  char* dst;
  const char* src;
  uint64_t bytes;
  uint64_t piece;
  uint32_t pieces;
  std::atomic<uint32_t> next{0};  // the next piece to take
  std::atomic<uint32_t> done{0};  // pieces written
};

HostCopyPool::HostCopyPool(int threads) : threads_(std::max(threads, 1)) {}

HostCopyPool::~HostCopyPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stopping_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void HostCopyPool::start_helpers() {
  std::lock_guard<std::mutex> lock(sleep_mutex_);
  if (!helpers_.empty()) return;
  for (int i = 1; i < threads_; ++i) helpers_.emplace_back([this] { helper_loop(); });
}

void HostCopyPool::run_pieces(Job& job) {
  for (;;) {
    uint32_t i = job.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= job.pieces) return;
    uint64_t begin = uint64_t(i) * job.piece;
    std::memcpy(job.dst + begin, job.src + begin, std::min(job.piece, job.bytes - begin));
    job.done.fetch_add(1, std::memory_order_release);
  }
}

std::shared_ptr<HostCopyPool::Job> HostCopyPool::take_job() {
  std::lock_guard<SpinLock> lock(jobs_lock_);
  return jobs_.empty() ? nullptr : jobs_.front();
}

void HostCopyPool::forget(const std::shared_ptr<Job>& job) {
  std::lock_guard<SpinLock> lock(jobs_lock_);
  auto it = std::find(jobs_.begin(), jobs_.end(), job);
  if (it != jobs_.end()) jobs_.erase(it);
  queued_jobs_.store(int(jobs_.size()));
}

void HostCopyPool::helper_loop() {
  // A pipelined copy queues its next chunk after the DMA of an older chunk ends, about 150 us
  // per 8 MiB. Helpers that slept in between would each need a futex wake-up, which costs tens
  // of microseconds in a virtual machine and left the copy to the caller's thread alone, so
  // they spin for longer than a chunk's DMA before sleeping.
  constexpr auto kSpinBeforeSleep = std::chrono::microseconds(1000);
  for (;;) {
    if (std::shared_ptr<Job> job = take_job()) {
      run_pieces(*job);
      forget(job);  // no pieces left: nobody needs to find it any more
      continue;
    }
    auto until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    for (int spins = 0; queued_jobs_.load(std::memory_order_relaxed) == 0 && !stopping_.load();
         ++spins) {
      if (spins % 64 == 63) {
        if (std::chrono::steady_clock::now() >= until) break;
        std::this_thread::yield();
      }
      GK_SPIN_PAUSE();
    }
    if (queued_jobs_.load() == 0) {
      // Sequentially consistent with copy(): either the caller sees this sleeper and wakes
      // it, or this thread sees the caller's job before it waits.
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return stopping_.load() || queued_jobs_.load() > 0; });
      sleepers_.fetch_sub(1);
    }
    if (stopping_.load()) return;
  }
}

void HostCopyPool::copy(void* dst, const void* src, uint64_t bytes) {
  uint64_t pieces = std::min<uint64_t>(uint64_t(threads_), bytes / kMinPieceBytes);
  if (pieces <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  start_helpers();
  auto job = std::make_shared<Job>();
  job->dst = static_cast<char*>(dst);
  job->src = static_cast<const char*>(src);
  job->bytes = bytes;
  // Whole pages per piece, so no two threads write the same cache line or page.
  job->piece = ceil_div(ceil_div(bytes, pieces), 4096) * 4096;
  job->pieces = uint32_t(ceil_div(bytes, job->piece));
  {
    std::lock_guard<SpinLock> lock(jobs_lock_);
    jobs_.push_back(job);
    queued_jobs_.store(int(jobs_.size()));
  }
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  run_pieces(*job);
  forget(job);
  // The pieces still running were taken by helpers that are copying them now.
  for (int spins = 0; job->done.load(std::memory_order_acquire) < job->pieces; ++spins) {
    if (spins % 64 == 63) std::this_thread::yield();
    GK_SPIN_PAUSE();
  }
}

// ---------------------------------------------------------------------------------------
// StagingPool
// ---------------------------------------------------------------------------------------

StagingPool::StagingPool(TransferBackend& backend, uint64_t chunk_bytes, int chunks)
    : backend_(backend), chunk_bytes_(chunk_bytes), chunk_count_(std::max(chunks, 1)) {}

StagingPool::~StagingPool() {
  for (Slot& s : slots_) {
    if (s.pending) {
      try {
        backend_.synchronize(s.event);
      } catch (...) {
        // The device failed; its memory operations are over either way.
      }
    }
    backend_.destroy_event(s.event);
    backend_.free_staging(s.data);
  }
}

bool StagingPool::ensure_allocated() {
  if (allocated_) return true;
  if (unavailable_) return false;
  std::vector<Slot> slots;
  auto undo = [&] {
    for (Slot& s : slots) {
      if (s.event) backend_.destroy_event(s.event);
      if (s.data) backend_.free_staging(s.data);
    }
  };
  try {
    for (int i = 0; i < chunk_count_; ++i) {
      Slot s;
      s.data = backend_.alloc_staging(chunk_bytes_);
      if (!s.data) {
        undo();
        unavailable_ = true;
        unavailable_reason_ = "cannot pin " + std::to_string(chunk_count_) + " staging chunks of " +
                              std::to_string(chunk_bytes_ >> 10) +
                              " KiB (pinned host memory is short)";
        return false;
      }
      slots.push_back(s);
      slots.back().event = backend_.create_event();
    }
  } catch (...) {
    undo();
    throw;
  }
  slots_ = std::move(slots);
  free_ring_.resize(slots_.size());
  for (Slot& s : slots_) free_ring_[free_count_++] = &s;
  allocated_ = true;
  return true;
}

StagingPool::Slot* StagingPool::pop_free() {
  Slot* slot = free_ring_[free_head_];
  free_head_ = (free_head_ + 1) % free_ring_.size();
  --free_count_;
  return slot;
}

StagingPool::Slot* StagingPool::ready(Slot* slot) {
  if (slot->pending) {
    try {
      backend_.synchronize(slot->event);
    } catch (...) {
      release(slot, true);
      throw;
    }
    slot->pending = false;
  }
  return slot;
}

StagingPool::Slot* StagingPool::acquire(std::string* why) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ensure_allocated()) {
    if (why) *why = unavailable_reason_;
    return nullptr;
  }
  released_.wait(lock, [&] { return free_count_ > 0; });
  Slot* slot = pop_free();
  lock.unlock();
  return ready(slot);
}

StagingPool::Slot* StagingPool::try_acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!allocated_ || free_count_ == 0) return nullptr;
  Slot* slot = pop_free();
  lock.unlock();
  return ready(slot);
}

void StagingPool::release(Slot* slot, bool pending) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    slot->pending = pending;
    free_ring_[(free_head_ + free_count_++) % free_ring_.size()] = slot;
  }
  released_.notify_one();
}

uint64_t StagingPool::bytes_held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_ ? chunk_bytes_ * uint64_t(chunk_count_) : 0;
}

// ---------------------------------------------------------------------------------------
// TransferEngine
// ---------------------------------------------------------------------------------------

namespace {

// A staging slot held for one chunk. Gives it back on every path, and never leaves a queued
// DMA that still uses the slot unguarded by the slot's event.
class SlotLease {
 public:
  SlotLease(StagingPool& pool, TransferBackend& backend, CopyLane lane, StagingPool::Slot* slot)
      : pool_(pool), backend_(backend), lane_(lane), slot_(slot) {}
  SlotLease(SlotLease&& other) noexcept
      : pool_(other.pool_),
        backend_(other.backend_),
        lane_(other.lane_),
        slot_(std::exchange(other.slot_, nullptr)),
        unguarded_dma_(other.unguarded_dma_),
        guarded_(other.guarded_) {}
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  SlotLease& operator=(SlotLease&&) = delete;
  ~SlotLease() {
    if (!slot_) return;
    if (unguarded_dma_) backend_.drain(lane_);
    pool_.release(slot_, guarded_ && !unguarded_dma_);
  }

  StagingPool::Slot& slot() const { return *slot_; }

  // Queues a DMA that uses the slot on the lane and records the slot's event after it.
  void queue_dma(void* dst, const void* src, uint64_t bytes) {
    unguarded_dma_ = true;
    backend_.copy_host_async(lane_, dst, src, bytes);
    backend_.record(slot_->event, lane_);
    unguarded_dma_ = false;
    guarded_ = true;
  }
  // Gives the slot back; `done`: every DMA that used it has completed.
  void release(bool done) { pool_.release(std::exchange(slot_, nullptr), guarded_ && !done); }

 private:
  StagingPool& pool_;
  TransferBackend& backend_;
  CopyLane lane_;
  StagingPool::Slot* slot_;
  bool unguarded_dma_ = false;
  bool guarded_ = false;
};

}  // namespace

TransferEngine::TransferEngine(std::string label, std::unique_ptr<TransferBackend> backend,
                               const TransferTuning& tuning, HostCopyPool& host_copies,
                               const Logger* logger)
    : label_(std::move(label)),
      backend_(std::move(backend)),
      tuning_(tuning),
      host_copies_(host_copies),
      logger_(logger),
      to_device_staging_(*backend_, tuning.chunk_bytes, tuning.chunks),
      to_host_staging_(*backend_, tuning.chunk_bytes, tuning.chunks) {}

TransferEngine::~TransferEngine() {
  // Staged DMAs may still run (a host → device copy returns before its DMAs end). Draining the
  // lanes here, where the backend makes its context current, leaves only completed events for
  // the staging pools to wait on before they free their chunks.
  backend_->drain(CopyLane::kToDevice);
  backend_->drain(CopyLane::kToHost);
}

StagingPool::Slot* TransferEngine::acquire_or_log(StagingPool& pool) {
  std::string why;
  StagingPool::Slot* slot = pool.acquire(&why);
  if (!slot && logger_) {
    std::call_once(staging_warning_, [&] {
      logger_->warning(label_ + ": pageable host memory is copied through the driver's own " +
                       "staging (slower, and blocking): " + why);
    });
  }
  return slot;
}

void TransferEngine::to_device(void* dst, const void* src, uint64_t bytes, cuda::CUstream caller) {
  if (!bytes) return;
  to_device_copies_.fetch_add(1, std::memory_order_relaxed);
  to_device_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  bool direct = backend_->is_dma_capable(src, bytes);
  backend_->lane_waits_for_caller(CopyLane::kToDevice, caller);
  if (direct) {
    backend_->copy_unified_async(CopyLane::kToDevice, dst, src, bytes);
  } else {
    stage_to_device(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
  }
  backend_->caller_waits_for_lane(caller, CopyLane::kToDevice);
}

void TransferEngine::stage_to_device(char* dst, const char* src, uint64_t bytes) {
  uint64_t chunk = to_device_staging_.chunk_bytes();
  for (uint64_t offset = 0, index = 0; offset < bytes; ++index) {
    StagingPool::Slot* slot = acquire_or_log(to_device_staging_);
    if (!slot) {
      backend_->copy_host_async(CopyLane::kToDevice, dst + offset, src + offset, bytes - offset);
      return;
    }
    SlotLease lease(to_device_staging_, *backend_, CopyLane::kToDevice, slot);
    uint64_t n = staged_chunk_bytes(chunk, index, bytes - offset);
    host_copies_.copy(slot->data, src + offset, n);
    lease.queue_dma(dst + offset, slot->data, n);
    lease.release(false);  // the DMA may still read it: the next user waits for its event
    if (offset == 0) staged_copies_.fetch_add(1, std::memory_order_relaxed);
    staged_chunks_.fetch_add(1, std::memory_order_relaxed);
    staged_bytes_.fetch_add(n, std::memory_order_relaxed);
    offset += n;
  }
}

void TransferEngine::to_host(void* dst, const void* src, uint64_t bytes, cuda::CUstream caller) {
  if (!bytes) return;
  to_host_copies_.fetch_add(1, std::memory_order_relaxed);
  to_host_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  bool direct = backend_->is_dma_capable(dst, bytes);
  backend_->lane_waits_for_caller(CopyLane::kToHost, caller);
  if (direct) {
    backend_->copy_unified_async(CopyLane::kToHost, dst, src, bytes);
    backend_->caller_waits_for_lane(caller, CopyLane::kToHost);
    return;
  }
  // Every chunk's DMA has completed when this returns, so `caller` has nothing to wait for.
  stage_to_host(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
}

void TransferEngine::stage_to_host(char* dst, const char* src, uint64_t bytes) {
  struct InFlight {
    SlotLease lease;
    uint64_t offset;
    uint64_t bytes;
  };
  std::deque<InFlight> in_flight;
  uint64_t chunk = to_host_staging_.chunk_bytes();
  uint64_t next = 0;  // the first byte not yet queued
  while (next < bytes || !in_flight.empty()) {
    // Keep as many DMAs in flight as there are free slots; wait for one only when none is.
    while (next < bytes) {
      StagingPool::Slot* slot =
          in_flight.empty() ? acquire_or_log(to_host_staging_) : to_host_staging_.try_acquire();
      if (!slot) break;
      uint64_t n = std::min(chunk, bytes - next);
      in_flight.push_back(
          {SlotLease(to_host_staging_, *backend_, CopyLane::kToHost, slot), next, n});
      in_flight.back().lease.queue_dma(slot->data, src + next, n);
      if (next == 0) staged_copies_.fetch_add(1, std::memory_order_relaxed);
      staged_chunks_.fetch_add(1, std::memory_order_relaxed);
      staged_bytes_.fetch_add(n, std::memory_order_relaxed);
      next += n;
    }
    if (in_flight.empty()) {  // no staging to be had: the driver stages (synchronously)
      backend_->copy_host_async(CopyLane::kToHost, dst + next, src + next, bytes - next);
      return;
    }
    InFlight& oldest = in_flight.front();
    backend_->synchronize(oldest.lease.slot().event);
    host_copies_.copy(dst + oldest.offset, oldest.lease.slot().data, oldest.bytes);
    oldest.lease.release(true);
    in_flight.pop_front();
  }
}

void TransferEngine::count_device_copy(uint64_t bytes) {
  if (!bytes) return;
  device_copies_.fetch_add(1, std::memory_order_relaxed);
  device_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

TransferCounters TransferEngine::counters() const {
  TransferCounters c;
  c.to_device_copies = to_device_copies_.load(std::memory_order_relaxed);
  c.to_device_bytes = to_device_bytes_.load(std::memory_order_relaxed);
  c.to_host_copies = to_host_copies_.load(std::memory_order_relaxed);
  c.to_host_bytes = to_host_bytes_.load(std::memory_order_relaxed);
  c.device_copies = device_copies_.load(std::memory_order_relaxed);
  c.device_bytes = device_bytes_.load(std::memory_order_relaxed);
  c.staged_copies = staged_copies_.load(std::memory_order_relaxed);
  c.staged_bytes = staged_bytes_.load(std::memory_order_relaxed);
  c.staged_chunks = staged_chunks_.load(std::memory_order_relaxed);
  c.staging_bytes = to_device_staging_.bytes_held() + to_host_staging_.bytes_held();
  c.staging_chunk_bytes = tuning_.chunk_bytes;
  return c;
}

// ---------------------------------------------------------------------------------------
// The cpu device
// ---------------------------------------------------------------------------------------

namespace {

// Host memory is all the cpu device has: every copy is direct and done on return.
class HostTransferBackend final : public TransferBackend {
 public:
  bool is_dma_capable(const void*, uint64_t) override { return true; }
  void* alloc_staging(uint64_t) override { return nullptr; }
  void free_staging(void*) noexcept override {}
  void* create_event() override { return nullptr; }
  void destroy_event(void*) noexcept override {}
  void record(void*, CopyLane) override {}
  void synchronize(void*) override {}
  void lane_waits_for_caller(CopyLane, cuda::CUstream) override {}
  void caller_waits_for_lane(cuda::CUstream, CopyLane) override {}
  void copy_host_async(CopyLane, void* dst, const void* src, uint64_t bytes) override {
    std::memmove(dst, src, bytes);
  }
  void copy_unified_async(CopyLane, void* dst, const void* src, uint64_t bytes) override {
    std::memmove(dst, src, bytes);
  }
  void drain(CopyLane) noexcept override {}
};

}  // namespace

std::unique_ptr<TransferBackend> make_host_transfer_backend() {
  return std::make_unique<HostTransferBackend>();
}

}  // namespace gk
