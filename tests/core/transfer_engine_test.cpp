// The transfer engine's chunk scheduling against a fake device whose copies and events behave
// like CUDA streams: queued work runs only when something waits for it (an event, a drain, or
// the test draining every stream), as late as a real device may run it. A staging chunk reused
// before its DMA ran, a copy not ordered after the caller's stream, or a caller stream not
// ordered after the copy, each shows up as wrong bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "common/error.h"
#include "memory/transfer_engine.h"

namespace gk {
namespace {

using Stream = cuda::CUstream;

Stream fake_stream(uintptr_t id) {
  return reinterpret_cast<Stream>(id);
}
const Stream kCaller = fake_stream(0x100);
const Stream kOtherCaller = fake_stream(0x200);

class FakeDevice final : public TransferBackend {
 public:
  struct Dma {
    CopyLane lane;
    char* dst;
    const char* src;
    uint64_t bytes;
    bool staged;  // through a staging chunk (copy_host_async with staging memory)
  };

  ~FakeDevice() override {
    for (void* p : staging_) std::free(p);
  }

  // --- TransferBackend ---------------------------------------------------------------------
  bool is_dma_capable(const void* ptr, uint64_t bytes) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    auto p = static_cast<const char*>(ptr);
    for (auto [base, size] : pinned_) {
      if (p >= base && p + bytes <= base + size) return true;
    }
    return false;
  }
  void* alloc_staging(uint64_t bytes) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (refuse_staging) return nullptr;
    void* p = std::malloc(bytes);
    staging_.insert(p);
    staging_size_ = bytes;
    ++staging_allocs;
    return p;
  }
  void free_staging(void* ptr) noexcept override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    staging_.erase(ptr);
    std::free(ptr);
    ++staging_frees;
  }
  void* create_event() override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    ++events_created;
    return new Event();
  }
  void destroy_event(void* event) noexcept override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    delete static_cast<Event*>(event);
    ++events_destroyed;
  }
  void record(void* event, CopyLane lane) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    auto* e = static_cast<Event*>(event);
    e->stream = lane_stream(lane);
    e->position = queue(e->stream).queued;
  }
  void synchronize(void* event) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    auto* e = static_cast<Event*>(event);
    if (e->stream) run(e->stream, e->position);
  }
  void lane_waits_for_caller(CopyLane lane, Stream caller) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    uint64_t upto = queue(caller).queued;
    push(lane_stream(lane), [this, caller, upto] { run(caller, upto); });
    log.push_back(std::string("lane ") + lane_name(lane) + " waits for caller");
  }
  void caller_waits_for_lane(Stream caller, CopyLane lane) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    Stream s = lane_stream(lane);
    uint64_t upto = queue(s).queued;
    push(caller, [this, s, upto] { run(s, upto); });
    log.push_back(std::string("caller waits for lane ") + lane_name(lane));
  }
  void copy_host_async(CopyLane lane, void* dst, const void* src, uint64_t bytes) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    const void* host = lane == CopyLane::kToDevice ? src : dst;
    bool staged = in_staging(host, bytes);
    dmas.push_back({lane, static_cast<char*>(dst), static_cast<const char*>(src), bytes, staged});
    if (!staged) {
      // Pageable memory: the driver copies it before returning.
      std::memmove(dst, src, bytes);
      return;
    }
    push(lane_stream(lane), [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  void copy_unified_async(CopyLane lane, void* dst, const void* src, uint64_t bytes) override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    dmas.push_back({lane, static_cast<char*>(dst), static_cast<const char*>(src), bytes, false});
    push(lane_stream(lane), [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  void drain(CopyLane lane) noexcept override {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    Stream s = lane_stream(lane);
    run(s, queue(s).queued);
  }

  // --- for the tests ------------------------------------------------------------------------
  void pin(const void* base, uint64_t size) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    pinned_.emplace_back(static_cast<const char*>(base), size);
  }
  // Work a test queues on a caller's stream (a kernel, a memset).
  void on_caller(Stream caller, std::function<void()> work) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    push(caller, std::move(work));
  }
  // Synchronizes a caller's stream (and, through its waits, the lanes).
  void synchronize_caller(Stream caller) {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    run(caller, queue(caller).queued);
  }
  // Everything still queued anywhere.
  uint64_t pending_work() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    uint64_t n = 0;
    for (auto& [s, q] : streams_) n += q.queued - q.done;
    return n;
  }
  void run_everything() {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    for (bool again = true; again;) {
      again = false;
      for (auto& [s, q] : streams_) {
        if (q.done < q.queued) {
          run(s, q.queued);
          again = true;
        }
      }
    }
  }

  bool refuse_staging = false;
  int staging_allocs = 0, staging_frees = 0, events_created = 0, events_destroyed = 0;
  std::vector<Dma> dmas;
  std::vector<std::string> log;

 private:
  struct Event {
    Stream stream = nullptr;
    uint64_t position = 0;
  };
  struct Queue {
    std::vector<std::function<void()>> work;
    uint64_t queued = 0;
    uint64_t done = 0;
  };

  static Stream lane_stream(CopyLane lane) { return fake_stream(0x10 + uintptr_t(lane)); }
  static const char* lane_name(CopyLane lane) {
    return lane == CopyLane::kToDevice ? "to_device" : "to_host";
  }
  Queue& queue(Stream s) { return streams_[s]; }
  void push(Stream s, std::function<void()> work) {
    Queue& q = queue(s);
    q.work.push_back(std::move(work));
    ++q.queued;
  }
  // Runs `s` in order up to (excluding) position `upto`.
  void run(Stream s, uint64_t upto) {
    while (queue(s).done < upto) {
      Queue& q = queue(s);
      std::function<void()> work = std::move(q.work[q.done]);
      ++q.done;
      work();
    }
  }
  bool in_staging(const void* p, uint64_t bytes) {
    auto c = static_cast<const char*>(p);
    for (void* s : staging_) {
      auto base = static_cast<const char*>(s);
      if (c >= base && c + bytes <= base + staging_size_) return true;
    }
    return false;
  }

  std::recursive_mutex mutex_;
  std::map<Stream, Queue> streams_;
  std::set<void*> staging_;
  uint64_t staging_size_ = 0;
  std::vector<std::pair<const char*, uint64_t>> pinned_;
};

std::vector<char> random_bytes(uint64_t n, uint32_t seed) {
  std::vector<char> v(n);
  std::mt19937 rng(seed);
  for (auto& c : v) c = char(rng() | 1);  // never zero: a missed byte stays visible
  return v;
}

constexpr uint64_t kChunk = 64 << 10;

// The engine owns its backend; this one forwards to a FakeDevice the test keeps, so the test
// can still read the fake after the engine is gone.
class ForwardingBackend final : public TransferBackend {
 public:
  explicit ForwardingBackend(FakeDevice& f) : f_(f) {}
  bool is_dma_capable(const void* p, uint64_t n) override { return f_.is_dma_capable(p, n); }
  void* alloc_staging(uint64_t n) override { return f_.alloc_staging(n); }
  void free_staging(void* p) noexcept override { f_.free_staging(p); }
  void* create_event() override { return f_.create_event(); }
  void destroy_event(void* e) noexcept override { f_.destroy_event(e); }
  void record(void* e, CopyLane l) override { f_.record(e, l); }
  void synchronize(void* e) override { f_.synchronize(e); }
  void lane_waits_for_caller(CopyLane l, Stream c) override { f_.lane_waits_for_caller(l, c); }
  void caller_waits_for_lane(Stream c, CopyLane l) override { f_.caller_waits_for_lane(c, l); }
  void copy_host_async(CopyLane l, void* d, const void* s, uint64_t n) override {
    f_.copy_host_async(l, d, s, n);
  }
  void copy_unified_async(CopyLane l, void* d, const void* s, uint64_t n) override {
    f_.copy_unified_async(l, d, s, n);
  }
  void drain(CopyLane l) noexcept override { f_.drain(l); }

 private:
  FakeDevice& f_;
};

struct EngineFixture {
  explicit EngineFixture(int chunks = 3, int host_threads = 1, uint64_t chunk = kChunk)
      : copies(host_threads) {
    TransferTuning t;
    t.chunk_bytes = chunk;
    t.chunks = chunks;
    t.host_threads = host_threads;
    engine = std::make_unique<TransferEngine>("fake:0", std::make_unique<ForwardingBackend>(fake),
                                              t, copies);
  }
  FakeDevice fake;
  FakeDevice* device = &fake;
  HostCopyPool copies;
  std::unique_ptr<TransferEngine> engine;  // last: goes first
};

// ---------------------------------------------------------------------------------------

TEST(TransferEngine, pageable_to_device_is_staged_in_chunks_with_an_odd_tail) {
  EngineFixture f;
  const uint64_t bytes = 5 * kChunk + 17;
  std::vector<char> src = random_bytes(bytes, 1), dev(bytes, 0);
  f.engine->to_device(dev.data(), src.data(), bytes, kCaller);
  // Chunks ramp up from kChunk / 8 (8 KiB), then halve over the last 2 · kChunk (whole pages)
  // until at most 2 · 8 KiB are left, which go in one odd chunk.
  const std::vector<uint64_t> sizes = {8192,  16384, 32768, 65536, 65536,
                                       65536, 40960, 20480, 12305};
  ASSERT_EQ(f.device->dmas.size(), sizes.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto& d = f.device->dmas[i];
    EXPECT_TRUE(d.staged) << "chunk " << i;
    EXPECT_EQ(d.dst, dev.data() + offset) << "chunk " << i;
    EXPECT_EQ(d.bytes, sizes[i]) << "chunk " << i;
    offset += sizes[i];
  }
  EXPECT_EQ(offset, bytes);
  // The source may be reused at once: the staged bytes are what the device receives.
  std::vector<char> original = src;
  std::fill(src.begin(), src.end(), 0);
  f.device->synchronize_caller(kCaller);
  EXPECT_EQ(f.device->pending_work(), 0u) << "the caller's stream did not wait for the copy";
  EXPECT_EQ(dev, original);
  TransferCounters c = f.engine->counters();
  EXPECT_EQ(c.to_device_copies, 1u);
  EXPECT_EQ(c.to_device_bytes, bytes);
  EXPECT_EQ(c.staged_copies, 1u);
  EXPECT_EQ(c.staged_chunks, sizes.size());
  EXPECT_EQ(c.staged_bytes, bytes);
  EXPECT_EQ(c.staging_bytes, 3 * kChunk) << "only the to-device staging was pinned";
}

TEST(TransferEngine, staged_chunks_of_any_size_cover_the_copy_in_whole_pages) {
  for (uint64_t bytes : {uint64_t(1), uint64_t(4095), uint64_t(16384), uint64_t(16385), kChunk - 1,
                         kChunk, 2 * kChunk + 1, 3 * kChunk + 4096, 40 * kChunk + 12345}) {
    EngineFixture f;
    std::vector<char> src = random_bytes(bytes, uint32_t(bytes)), dev(bytes, 0);
    f.engine->to_device(dev.data(), src.data(), bytes, kCaller);
    f.device->synchronize_caller(kCaller);
    EXPECT_EQ(dev, src) << bytes << " bytes";
    uint64_t offset = 0;
    const auto& dmas = f.device->dmas;
    for (size_t i = 0; i < dmas.size(); ++i) {
      EXPECT_EQ(dmas[i].dst, dev.data() + offset) << bytes << " bytes, chunk " << i;
      EXPECT_LE(dmas[i].bytes, kChunk) << bytes << " bytes, chunk " << i;
      if (i + 1 < dmas.size()) {
        EXPECT_EQ(dmas[i].bytes % 4096, 0u) << bytes << " bytes, chunk " << i;
      }
      offset += dmas[i].bytes;
    }
    EXPECT_EQ(offset, bytes);
    // The ramp: the first chunk is an eighth of a chunk unless the copy is small anyway.
    if (bytes > kChunk / 4) EXPECT_EQ(dmas.front().bytes, kChunk / 8) << bytes << " bytes";
    // Long copies reach whole chunks in between.
    if (bytes > 8 * kChunk) {
      EXPECT_GE(std::count_if(dmas.begin(), dmas.end(),
                              [](const FakeDevice::Dma& d) { return d.bytes == kChunk; }),
                std::ptrdiff_t(bytes / kChunk) - 3)
          << bytes << " bytes";
    }
  }
}

TEST(TransferEngine, pageable_to_host_is_written_on_return_with_misaligned_pointers) {
  EngineFixture f;
  const uint64_t bytes = 7 * kChunk + 4093;
  std::vector<char> dev_storage = random_bytes(bytes + 3, 2), host_storage(bytes + 1, 0);
  char* dev = dev_storage.data() + 3;    // odd device address
  char* host = host_storage.data() + 1;  // odd host address
  f.engine->to_host(host, dev, bytes, kCaller);
  EXPECT_EQ(std::memcmp(host, dev, bytes), 0);
  EXPECT_EQ(host_storage[0], 0) << "wrote before the destination";
  ASSERT_EQ(f.device->dmas.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(f.device->dmas[i].src, dev + i * kChunk);
    EXPECT_EQ(f.device->dmas[i].bytes, i < 7 ? kChunk : 4093);
  }
  EXPECT_EQ(f.device->pending_work(), 0u) << "a staged copy to host leaves nothing queued";
  EXPECT_EQ(f.engine->counters().staged_chunks, 8u);
}

TEST(TransferEngine, zero_bytes_queue_nothing_and_count_nothing) {
  EngineFixture f;
  f.engine->to_device(nullptr, nullptr, 0, kCaller);
  f.engine->to_host(nullptr, nullptr, 0, kCaller);
  f.engine->count_device_copy(0);
  EXPECT_TRUE(f.device->dmas.empty());
  EXPECT_TRUE(f.device->log.empty());
  TransferCounters c = f.engine->counters();
  EXPECT_EQ(c.to_device_copies + c.to_host_copies + c.device_copies, 0u);
  EXPECT_EQ(c.staging_bytes, 0u) << "nothing pinned for an empty copy";
}

TEST(TransferEngine, one_byte_goes_through_one_chunk_each_way) {
  EngineFixture f;
  char in = 'x', dev = 0, out = 0;
  f.engine->to_device(&dev, &in, 1, kCaller);
  f.device->synchronize_caller(kCaller);
  f.engine->to_host(&out, &dev, 1, kCaller);
  EXPECT_EQ(out, 'x');
  EXPECT_EQ(f.engine->counters().staged_chunks, 2u);
}

TEST(TransferEngine, pinned_memory_is_copied_in_one_dma_without_staging) {
  EngineFixture f;
  const uint64_t bytes = 10 * kChunk + 1;
  std::vector<char> src = random_bytes(bytes, 3), dev(bytes, 0), back(bytes, 0);
  f.device->pin(src.data(), bytes);
  f.device->pin(back.data(), bytes);
  f.engine->to_device(dev.data(), src.data(), bytes, kCaller);
  f.engine->to_host(back.data(), dev.data(), bytes, kCaller);
  ASSERT_EQ(f.device->dmas.size(), 2u);
  EXPECT_FALSE(f.device->dmas[0].staged);
  EXPECT_EQ(f.device->dmas[0].bytes, bytes);
  EXPECT_NE(back, src) << "a pinned copy to host is asynchronous: nothing ran yet";
  f.device->synchronize_caller(kCaller);
  EXPECT_EQ(back, src);
  TransferCounters c = f.engine->counters();
  EXPECT_EQ(c.staged_copies, 0u);
  EXPECT_EQ(c.staging_bytes, 0u) << "pinned copies pin no staging";
  EXPECT_EQ(f.device->staging_allocs, 0);
}

TEST(TransferEngine, memory_pinned_only_at_its_start_is_staged) {
  EngineFixture f;
  const uint64_t bytes = 2 * kChunk;
  std::vector<char> src = random_bytes(bytes, 4), dev(bytes, 0);
  f.device->pin(src.data(), kChunk);  // the second half is pageable
  f.engine->to_device(dev.data(), src.data(), bytes, kCaller);
  f.device->synchronize_caller(kCaller);
  EXPECT_EQ(dev, src);
  EXPECT_EQ(f.engine->counters().staged_copies, 1u);
}

TEST(TransferEngine, copies_start_after_the_callers_queued_work) {
  EngineFixture f;
  const uint64_t bytes = 4 * kChunk + 5;
  std::vector<char> dev(bytes, 0), host(bytes, 0), pinned_host(bytes, 0);
  f.device->pin(pinned_host.data(), bytes);
  std::vector<char> pattern = random_bytes(bytes, 5);
  // A "kernel" queued before the copy writes what the copy must read.
  f.device->on_caller(kCaller, [&] { dev = pattern; });
  f.engine->to_host(host.data(), dev.data(), bytes, kCaller);
  EXPECT_EQ(host, pattern) << "the staged copy read the device before the caller's kernel";
  std::fill(dev.begin(), dev.end(), 0);
  f.device->on_caller(kCaller, [&] { dev = pattern; });
  f.engine->to_host(pinned_host.data(), dev.data(), bytes, kCaller);
  f.device->synchronize_caller(kCaller);
  EXPECT_EQ(pinned_host, pattern) << "the pinned copy read the device before the caller's kernel";
}

TEST(TransferEngine, the_callers_later_work_sees_the_copied_bytes) {
  EngineFixture f;
  const uint64_t bytes = 6 * kChunk + 99;
  std::vector<char> src = random_bytes(bytes, 6), dev(bytes, 0);
  f.engine->to_device(dev.data(), src.data(), bytes, kCaller);
  std::vector<char> seen;
  f.device->on_caller(kCaller, [&] { seen = dev; });  // a kernel queued after the copy
  f.device->synchronize_caller(kCaller);
  EXPECT_EQ(seen, src);
  ASSERT_GE(f.device->log.size(), 2u);
  EXPECT_EQ(f.device->log.front(), "lane to_device waits for caller");
  EXPECT_EQ(f.device->log.back(), "caller waits for lane to_device");
}

TEST(TransferEngine, a_staging_chunk_is_not_refilled_before_its_dma_ran) {
  // Two chunks for twelve: every chunk is reused five times. The fake runs a DMA only when
  // the engine waits for the chunk's event, so refilling early would corrupt the result.
  EngineFixture f(2);
  const uint64_t bytes = 12 * kChunk;
  std::vector<char> src = random_bytes(bytes, 7), dev(bytes, 0), back(bytes, 0);
  f.engine->to_device(dev.data(), src.data(), bytes, kCaller);
  f.device->synchronize_caller(kCaller);
  EXPECT_EQ(dev, src);
  std::vector<char> pattern = random_bytes(bytes, 8);
  dev = pattern;
  f.engine->to_host(back.data(), dev.data(), bytes, kCaller);
  EXPECT_EQ(back, pattern);
  EXPECT_EQ(f.device->staging_allocs, 4) << "each direction pins its chunks once";
}

TEST(TransferEngine, staging_is_pinned_once_and_reused_across_copies) {
  EngineFixture f;
  std::vector<char> src = random_bytes(3 * kChunk, 9), dev(3 * kChunk, 0);
  for (int i = 0; i < 5; ++i) {
    f.engine->to_device(dev.data(), src.data(), src.size(), kCaller);
    f.engine->to_host(src.data(), dev.data(), src.size(), kCaller);
  }
  EXPECT_EQ(f.device->staging_allocs, 6);
  EXPECT_EQ(f.engine->counters().staging_bytes, 6 * kChunk);
}

TEST(TransferEngine, without_staging_memory_pageable_copies_still_arrive) {
  EngineFixture f;
  f.device->refuse_staging = true;
  const uint64_t bytes = 3 * kChunk + 1;
  std::vector<char> src = random_bytes(bytes, 10), dev(bytes, 0), back(bytes, 0);
  f.engine->to_device(dev.data(), src.data(), bytes, kCaller);
  f.device->synchronize_caller(kCaller);
  EXPECT_EQ(dev, src);
  f.engine->to_host(back.data(), dev.data(), bytes, kCaller);
  EXPECT_EQ(back, src);
  EXPECT_EQ(f.engine->counters().staged_copies, 0u);
  ASSERT_EQ(f.device->dmas.size(), 2u) << "one driver-staged copy each way";
}

TEST(TransferEngine, the_engine_frees_its_staging_and_events_and_drains_its_lanes) {
  EngineFixture f;
  std::vector<char> src = random_bytes(5 * kChunk, 11), dev(src.size(), 0);
  f.engine->to_device(dev.data(), src.data(), src.size(), kCaller);
  EXPECT_NE(dev, src) << "the last staged DMAs are still queued";
  f.engine.reset();
  EXPECT_EQ(f.device->staging_allocs, 3);
  EXPECT_EQ(f.device->staging_frees, 3);
  EXPECT_EQ(f.device->events_destroyed, f.device->events_created);
  EXPECT_EQ(dev, src) << "staged DMAs must be done before the staging memory is freed";
}

TEST(TransferEngine, concurrent_callers_each_get_their_bytes) {
  // Two staging chunks for eight threads: slots are contended in both directions.
  EngineFixture f(2, 3);
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Stream caller = fake_stream(0x1000 + uintptr_t(t));
      std::mt19937 rng(100 + t);
      for (int round = 0; round < 6; ++round) {
        uint64_t bytes = 1 + rng() % (5 * kChunk);
        std::vector<char> src = random_bytes(bytes, rng()), dev(bytes + 1, 0), back(bytes, 0);
        f.engine->to_device(dev.data() + 1, src.data(), bytes, caller);
        f.device->synchronize_caller(caller);
        f.engine->to_host(back.data(), dev.data() + 1, bytes, caller);
        if (back != src) {
          failures[t] = "round " + std::to_string(round) + ", " + std::to_string(bytes) + " bytes";
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_EQ(f.engine->counters().to_device_copies, uint64_t(kThreads) * 6);
}

TEST(TransferEngine, copies_of_two_callers_share_the_direction_copy_stream_in_order) {
  EngineFixture f;
  std::vector<char> a = random_bytes(kChunk, 13), b = random_bytes(kChunk, 14);
  std::vector<char> dev_a(kChunk, 0), dev_b(kChunk, 0);
  bool slow_kernel_ran = false;
  f.device->on_caller(kCaller, [&] { slow_kernel_ran = true; });
  f.engine->to_device(dev_a.data(), a.data(), kChunk, kCaller);
  f.engine->to_device(dev_b.data(), b.data(), kChunk, kOtherCaller);
  f.device->synchronize_caller(kOtherCaller);
  EXPECT_EQ(dev_b, b);
  // One copy stream per direction: the second copy queues behind the first, which waits for
  // the first caller's kernel. Documented; asserted so a change is deliberate.
  EXPECT_TRUE(slow_kernel_ran);
}

// ---------------------------------------------------------------------------------------

TEST(HostCopyPool, copies_every_size_and_alignment_exactly) {
  HostCopyPool pool(4);
  const uint64_t piece = HostCopyPool::kMinPieceBytes;
  for (uint64_t bytes : {uint64_t(0), uint64_t(1), uint64_t(4097), piece - 1, piece, 2 * piece,
                         2 * piece + 13, 4 * piece + 4095, 9 * piece + 1}) {
    for (uint64_t misalign : {0, 1, 7}) {
      std::vector<char> src = random_bytes(bytes + 8, uint32_t(bytes)), dst(bytes + 16, 0);
      pool.copy(dst.data() + misalign, src.data() + 1, bytes);
      EXPECT_EQ(std::memcmp(dst.data() + misalign, src.data() + 1, bytes), 0)
          << bytes << " bytes, misaligned by " << misalign;
      for (uint64_t i = 0; i < misalign; ++i) EXPECT_EQ(dst[i], 0) << "wrote before dst";
      for (uint64_t i = misalign + bytes; i < dst.size(); ++i) {
        ASSERT_EQ(dst[i], 0) << "wrote past dst (" << bytes << " bytes)";
      }
    }
  }
}

TEST(HostCopyPool, callers_on_many_threads_share_the_helpers) {
  HostCopyPool pool(3);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        uint64_t bytes = HostCopyPool::kMinPieceBytes * (1 + (t + i) % 4) + uint64_t(t * 31 + i);
        std::vector<char> src = random_bytes(bytes, uint32_t(t * 100 + i)), dst(bytes, 0);
        pool.copy(dst.data(), src.data(), bytes);
        if (dst != src) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// ---------------------------------------------------------------------------------------

TEST(StagingPool, a_released_chunk_comes_back_only_after_its_event) {
  FakeDevice device;
  StagingPool pool(device, 4096, 1);
  StagingPool::Slot* slot = pool.acquire();
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(pool.try_acquire(), nullptr) << "the only chunk is taken";
  char dev[4096] = {};
  std::memset(slot->data, 'q', 4096);
  device.copy_host_async(CopyLane::kToDevice, dev, slot->data, 4096);
  device.record(slot->event, CopyLane::kToDevice);
  pool.release(slot, true);
  EXPECT_EQ(dev[0], 0) << "the fake has not run the DMA yet";
  StagingPool::Slot* again = pool.acquire();
  EXPECT_EQ(again, slot);
  EXPECT_EQ(dev[4095], 'q') << "acquire returned before the chunk's DMA completed";
  EXPECT_FALSE(again->pending);
  pool.release(again, false);
}

TEST(StagingPool, chunks_are_handed_out_oldest_release_first) {
  FakeDevice device;
  StagingPool pool(device, 4096, 3);
  StagingPool::Slot* a = pool.acquire();
  StagingPool::Slot* b = pool.acquire();
  StagingPool::Slot* c = pool.acquire();
  pool.release(b, false);
  pool.release(a, false);
  pool.release(c, false);
  EXPECT_EQ(pool.acquire(), b);
  EXPECT_EQ(pool.acquire(), a);
  EXPECT_EQ(pool.acquire(), c);
  EXPECT_EQ(pool.bytes_held(), 3u * 4096);
}

TEST(StagingPool, a_waiting_acquire_wakes_when_a_chunk_is_released) {
  FakeDevice device;
  StagingPool pool(device, 4096, 1);
  StagingPool::Slot* held = pool.acquire();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    StagingPool::Slot* s = pool.acquire();
    got = true;
    pool.release(s, false);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(got.load()) << "acquire returned while the only chunk was held";
  pool.release(held, false);
  waiter.join();
  EXPECT_TRUE(got.load());
}

TEST(StagingPool, refused_staging_says_why_and_stays_off) {
  FakeDevice device;
  device.refuse_staging = true;
  StagingPool pool(device, 8192, 3);
  std::string why;
  EXPECT_EQ(pool.acquire(&why), nullptr);
  EXPECT_NE(why.find("cannot pin 3 staging chunks of 8 KiB"), std::string::npos) << why;
  device.refuse_staging = false;
  EXPECT_EQ(pool.acquire(), nullptr) << "a refused pool must not retry on every copy";
  EXPECT_EQ(pool.bytes_held(), 0u);
}

// ---------------------------------------------------------------------------------------

TEST(TransferTuning, environment_overrides_and_bad_values_are_named) {
  setenv("GPUKIT_TRANSFER_CHUNK_KIB", "4096", 1);
  setenv("GPUKIT_TRANSFER_CHUNKS", "5", 1);
  setenv("GPUKIT_TRANSFER_HOST_THREADS", "2", 1);
  TransferTuning t = TransferTuning::from_environment(true);
  EXPECT_EQ(t.chunk_bytes, uint64_t(4) << 20);
  EXPECT_EQ(t.chunks, 5);
  EXPECT_EQ(t.host_threads, 2);
  TransferTuning ignored = TransferTuning::from_environment(false);
  EXPECT_EQ(ignored.chunk_bytes, uint64_t(8) << 20);
  EXPECT_EQ(ignored.chunks, 4);
  // The default leaves half the host's cores to the application.
  const int cores = int(std::thread::hardware_concurrency());
  EXPECT_GE(ignored.host_threads, 1);
  if (cores > 0) EXPECT_LE(ignored.host_threads, std::max(1, cores / 2));
  setenv("GPUKIT_TRANSFER_CHUNKS", "1", 1);
  try {
    TransferTuning::from_environment(true);
    ADD_FAILURE() << "one chunk cannot pipeline and must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), GK_INVALID_ARGUMENT);
    EXPECT_NE(e.message().find("GPUKIT_TRANSFER_CHUNKS='1'"), std::string::npos) << e.message();
  }
  setenv("GPUKIT_TRANSFER_CHUNKS", "3", 1);
  setenv("GPUKIT_TRANSFER_CHUNK_KIB", "8M", 1);
  EXPECT_THROW(TransferTuning::from_environment(true), Error);
  unsetenv("GPUKIT_TRANSFER_CHUNK_KIB");
  unsetenv("GPUKIT_TRANSFER_CHUNKS");
  unsetenv("GPUKIT_TRANSFER_HOST_THREADS");
}

}  // namespace
}  // namespace gk
