// The transfer engine: host ↔ device copies of one device (gk_copy_from_host, gk_copy_to_host
// and the host sides of gk_copy).
//
// Every copy runs on a dedicated copy stream of its direction (host→device, device→host),
// ordered with the caller's stream by events: the copy stream first waits for the work queued
// on the caller's stream, and the caller's stream then waits for the copy. So a copy keeps the
// caller's stream semantics while the copy engines run beside compute on other streams.
//
// Host memory the DMA engines reach directly (pinned or registered host memory; device or
// managed memory) is copied in one DMA. Pageable host memory goes through a staging pool of a
// few pinned chunks, pinned once per direction and reused, each guarded by an event:
//
//   host → device, chunk i into slot s = next free slot (FIFO); chunks ramp up from 1/8 of
//   the chunk size and down again at the end, so the pipeline fills and drains quickly:
//     host-wait s.event            (the DMA that last read s is done)
//     memcpy src[i] → s            (split over the HostCopyPool's threads)
//     DMA s → dst[i]; record s.event on the copy stream
//   so the memcpy of chunk i+1 overlaps the DMA of chunk i. The call returns once every byte
//   of the source is staged: the source may be reused at once, the DMAs may still run.
//
//   device → host, up to `chunks` DMAs in flight:
//     DMA src[i] → s; record s.event          (for as many free slots as there are)
//     host-wait the oldest; memcpy it out; queue the next chunk into its slot
//   The call returns when the destination is written.
//
// The chunk scheduling is plain logic over a TransferBackend, so it runs (and is tested)
// against a fake backend without a GPU; the cpu device's backend copies with memmove.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/spin_lock.h"
#include "device/cuda_driver.h"

namespace gk {

class Logger;

// The staging pool's shape and the host copy threads. Defaults: 4 chunks of 8 MiB per
// direction and 8 host threads per chunk memcpy (at most half the host's cores), because one
// thread's memcpy (about 7 GB/s on the H100 host, a KVM guest) is far slower than a PCIe 5 x16
// DMA (about 55 GB/s one way). On that host a pipeline of 8 MiB memcpys into 4 pinned chunks
// reached 44-50 GB/s with 8 threads against 29-33 with 4. GPUKIT_TRANSFER_CHUNK_KIB,
// GPUKIT_TRANSFER_CHUNKS and GPUKIT_TRANSFER_HOST_THREADS override them (see docs/memory.md,
// "Transfers").
struct TransferTuning {
  uint64_t chunk_bytes = uint64_t(8) << 20;
  int chunks = 4;
  int host_threads = 8;  // including the calling thread; 1: memcpy in the caller only

  // The defaults, overridden by the GPUKIT_TRANSFER_* variables when `use_environment`.
  // Throws INVALID_ARGUMENT naming a variable whose value is not a number in range.
  static TransferTuning from_environment(bool use_environment);
};

// A copy engine lane: each direction has its own copy stream.
enum class CopyLane { kToDevice = 0, kToHost = 1 };

// What the engine needs from a device. Called with the device's context current on the
// calling thread; may be called from several threads at once.
class TransferBackend {
 public:
  virtual ~TransferBackend() = default;
  // True when the DMA engines reach all of [ptr, ptr + bytes) directly: pinned or registered
  // host memory, device or managed memory. Such memory needs no staging.
  virtual bool is_dma_capable(const void* ptr, uint64_t bytes) = 0;
  // Pinned memory for one staging chunk, or nullptr when none can be had.
  virtual void* alloc_staging(uint64_t bytes) = 0;
  virtual void free_staging(void* ptr) noexcept = 0;
  // Events guarding staging chunks.
  virtual void* create_event() = 0;
  virtual void destroy_event(void* event) noexcept = 0;
  // Captures the work queued on `lane` so far.
  virtual void record(void* event, CopyLane lane) = 0;
  // Blocks the calling thread until the event's work is complete.
  virtual void synchronize(void* event) = 0;
  // Later work on `lane` waits for the work queued on `caller` so far (nullptr: the legacy
  // default stream), without blocking the host.
  virtual void lane_waits_for_caller(CopyLane lane, cuda::CUstream caller) = 0;
  // Later work on `caller` waits for the work queued on `lane` so far.
  virtual void caller_waits_for_lane(cuda::CUstream caller, CopyLane lane) = 0;
  // Queues a copy on `lane` whose host side is plain host memory: a staging chunk, or pageable
  // memory, in which case the copy is complete with respect to host memory on return (as the
  // CUDA driver does for pageable memory).
  virtual void copy_host_async(CopyLane lane, void* dst, const void* src, uint64_t bytes) = 0;
  // Queues a copy on `lane` between DMA-capable addresses of any kind (pinned, registered,
  // device or managed memory); the direction follows from the addresses.
  virtual void copy_unified_async(CopyLane lane, void* dst, const void* src, uint64_t bytes) = 0;
  // Waits for everything queued on `lane` (error paths: a DMA without a guarding event).
  virtual void drain(CopyLane lane) noexcept = 0;
};

// A CUDA device's backend: two non-blocking copy streams, events from a small cache, staging
// from cuMemHostAlloc. Streams are created on first use.
std::unique_ptr<TransferBackend> make_cuda_transfer_backend(const cuda::Driver& driver,
                                                            cuda::CUcontext context);
// The cpu device's backend: every copy is a memmove in the calling thread.
std::unique_ptr<TransferBackend> make_host_transfer_backend();

// Host memcpy split over a few threads (the caller plus helpers started on first use), so
// staging keeps up with the DMA engines. Any thread; jobs of several callers share helpers.
class HostCopyPool {
 public:
  // `threads` counts the caller: 1 means plain memcpy.
  explicit HostCopyPool(int threads);
  ~HostCopyPool();
  HostCopyPool(const HostCopyPool&) = delete;
  HostCopyPool& operator=(const HostCopyPool&) = delete;

  // Copies `bytes` (regions must not overlap); returns when every byte is written.
  void copy(void* dst, const void* src, uint64_t bytes);
  int threads() const { return threads_; }

  // Pieces are at least this large: a smaller copy is not worth waking a helper for. Small
  // enough that the 1 MiB first chunk of a staged copy is split 4 ways.
  static constexpr uint64_t kMinPieceBytes = uint64_t(256) << 10;

 private:
  struct Job;
  void start_helpers();
  void helper_loop();
  // The oldest queued job, or null when none is queued.
  std::shared_ptr<Job> take_job();
  static void run_pieces(Job& job);
  void forget(const std::shared_ptr<Job>& job);

  const int threads_;
  // Jobs are handed to spinning helpers under a spin lock, not a std::mutex: a pipelined
  // copy queues a job every chunk, and 7 helpers queueing up on a mutex each time can
  // sleep in the kernel (tens of microseconds per wake-up in a virtual machine). On the H100
  // host this read 31-43 GB/s against 28-45 for the mutex, faster in 10 of 12 interleaved
  // comparisons.
  SpinLock jobs_lock_;
  std::deque<std::shared_ptr<Job>> jobs_;  // jobs with pieces left to take, under jobs_lock_
  std::atomic<int> queued_jobs_{0};        // jobs_.size(), read by spinning helpers
  std::vector<std::thread> helpers_;       // under sleep_mutex_ while being started
  // Helpers that found no job for a while sleep on `wake_`.
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};  // changed under sleep_mutex_
  std::atomic<bool> stopping_{false};
};

// Pinned staging chunks of one direction, allocated together on first use. Each chunk is
// guarded by an event recorded after the last DMA that used it; a chunk is handed out in FIFO
// order (the one released longest ago first) once that event has completed.
class StagingPool {
 public:
  struct Slot {
    void* data = nullptr;
    void* event = nullptr;
    bool pending = false;  // `event` was recorded and may not have completed yet
  };

  StagingPool(TransferBackend& backend, uint64_t chunk_bytes, int chunks);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A free slot whose previous DMA is complete; blocks while all are taken. nullptr when the
  // staging memory cannot be had (then `why` says why, and staging is off for good).
  Slot* acquire(std::string* why = nullptr);
  // Like acquire, but nullptr at once when no slot is free.
  Slot* try_acquire();
  // `pending`: a DMA using the slot was queued and slot->event recorded after it.
  void release(Slot* slot, bool pending) noexcept;

  uint64_t chunk_bytes() const { return chunk_bytes_; }
  // Pinned bytes held (0 until first use).
  uint64_t bytes_held() const;

 private:
  bool ensure_allocated();
  Slot* pop_free();  // with mutex_ held and free_count_ > 0
  Slot* ready(Slot* slot);

  TransferBackend& backend_;
  const uint64_t chunk_bytes_;
  const int chunk_count_;
  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::vector<Slot> slots_;
  // Free slots, oldest release first: a ring over slots_.size() entries, so that release
  // never allocates.
  std::vector<Slot*> free_ring_;
  size_t free_head_ = 0;
  size_t free_count_ = 0;
  bool allocated_ = false;
  bool unavailable_ = false;
  std::string unavailable_reason_;
};

// Counters as gk_transfer_stats reports them.
struct TransferCounters {
  uint64_t to_device_copies = 0;
  uint64_t to_device_bytes = 0;
  uint64_t to_host_copies = 0;
  uint64_t to_host_bytes = 0;
  uint64_t device_copies = 0;
  uint64_t device_bytes = 0;
  uint64_t staged_copies = 0;
  uint64_t staged_bytes = 0;
  uint64_t staged_chunks = 0;
  uint64_t staging_bytes = 0;  // pinned staging memory held (both directions)
  uint64_t staging_chunk_bytes = 0;
};

class TransferEngine {
 public:
  // `label` names the device in messages ("cuda:0"); `logger` may be null.
  TransferEngine(std::string label, std::unique_ptr<TransferBackend> backend,
                 const TransferTuning& tuning, HostCopyPool& host_copies,
                 const Logger* logger = nullptr);
  ~TransferEngine();
  TransferEngine(const TransferEngine&) = delete;
  TransferEngine& operator=(const TransferEngine&) = delete;

  // Host → device address `dst`, ordered after the work queued on `caller`; later work on
  // `caller` waits for it. Pageable `src` is staged: it may be reused on return.
  void to_device(void* dst, const void* src, uint64_t bytes, cuda::CUstream caller);
  // Device address `src` → host, ordered the same way. Pageable `dst` is written on return
  // (the call waits for the caller's queued work); DMA-capable `dst` is written when `caller`
  // reaches the copy.
  void to_host(void* dst, const void* src, uint64_t bytes, cuda::CUstream caller);
  // Counts a device → device copy (run by the caller on its own stream).
  void count_device_copy(uint64_t bytes);

  TransferCounters counters() const;
  const TransferTuning& tuning() const { return tuning_; }

 private:
  // Staging for the remaining bytes, or nullptr (and staging is skipped) when none can be had.
  StagingPool::Slot* acquire_or_log(StagingPool& pool);
  void stage_to_device(char* dst, const char* src, uint64_t bytes);
  void stage_to_host(char* dst, const char* src, uint64_t bytes);

  const std::string label_;
  const std::unique_ptr<TransferBackend> backend_;
  const TransferTuning tuning_;
  HostCopyPool& host_copies_;
  const Logger* logger_;
  StagingPool to_device_staging_;
  StagingPool to_host_staging_;
  std::once_flag staging_warning_;

  std::atomic<uint64_t> to_device_copies_{0}, to_device_bytes_{0};
  std::atomic<uint64_t> to_host_copies_{0}, to_host_bytes_{0};
  std::atomic<uint64_t> device_copies_{0}, device_bytes_{0};
  std::atomic<uint64_t> staged_copies_{0}, staged_bytes_{0}, staged_chunks_{0};
};

}  // namespace gk
