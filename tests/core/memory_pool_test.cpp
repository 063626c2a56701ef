// White-box tests of the memory pool over a fake backend: host memory segments under a
// capacity, and events the test completes by hand, so stream order is observable in CI.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "common/error.h"
#include "memory/memory_pool.h"
#include "pool_trace.h"

namespace gk {
namespace {

struct FakeEvent {
  bool done = false;
  cuda::CUstream stream = nullptr;  // where it was recorded
};

// Shared with the test after the pool takes the backend.
struct FakeState {
  uint64_t capacity = uint64_t(1) << 30;
  uint64_t mapped = 0;
  int segments_mapped = 0;
  int events_live = 0;
  std::vector<FakeEvent*> events;  // every event recorded and not released
  std::vector<std::pair<cuda::CUstream, FakeEvent*>> waits;
  bool synchronous = false;  // events complete at once (like the cpu device)
  void complete_all() {
    for (FakeEvent* e : events) e->done = true;
  }
};

class FakeBackend final : public PoolBackend {
 public:
  explicit FakeBackend(FakeState& s) : s_(s) {}
  void* map_segment(uint64_t bytes) override {
    if (s_.mapped + bytes > s_.capacity) return nullptr;
    s_.mapped += bytes;
    ++s_.segments_mapped;
    return std::aligned_alloc(kPoolAlignment, bytes);
  }
  void unmap_segment(void* base, uint64_t bytes) noexcept override {
    s_.mapped -= bytes;
    --s_.segments_mapped;
    std::free(base);
  }
  void* record_event(cuda::CUstream stream) noexcept override {
    if (s_.synchronous) return nullptr;
    auto* e = new FakeEvent();
    e->stream = stream;
    s_.events.push_back(e);
    ++s_.events_live;
    return e;
  }
  bool event_complete(void* e) override { return static_cast<FakeEvent*>(e)->done; }
  void stream_wait_event(cuda::CUstream stream, void* e) override {
    s_.waits.emplace_back(stream, static_cast<FakeEvent*>(e));
  }
  void synchronize_event(void* e) noexcept override { static_cast<FakeEvent*>(e)->done = true; }
  void release_event(void* e) noexcept override {
    auto* ev = static_cast<FakeEvent*>(e);
    s_.events.erase(std::find(s_.events.begin(), s_.events.end(), ev));
    --s_.events_live;
    delete ev;
  }
  void* host_alloc(uint64_t bytes) override { return std::malloc(bytes); }
  void host_free(void* p) noexcept override { std::free(p); }
  void copy_to_host(void* d, const void* src, uint64_t n, cuda::CUstream) override {
    std::memcpy(d, src, n);
  }
  void copy_to_device(void* d, const void* src, uint64_t n, cuda::CUstream) override {
    std::memcpy(d, src, n);
  }
  uint64_t total_memory() override { return s_.capacity; }
  uint64_t free_memory() override { return s_.capacity - s_.mapped; }

 private:
  FakeState& s_;
};

cuda::CUstream stream(uintptr_t n) { return reinterpret_cast<cuda::CUstream>(n); }
// Untracked unless a test tracks them: a free there records its event at once (as on a
// wrapped foreign stream).
const cuda::CUstream S1 = stream(0x1000);
const cuda::CUstream S2 = stream(0x2000);
const cuda::CUstream S3 = stream(0x3000);
constexpr uint64_t MiB = uint64_t(1) << 20;

struct PoolFixture : ::testing::Test {
  FakeState state;
  std::unique_ptr<MemoryPool> pool =
      std::make_unique<MemoryPool>("fake:0", std::make_unique<FakeBackend>(state));
  uintptr_t addr(PoolBlock* b) { return reinterpret_cast<uintptr_t>(MemoryPool::address(b)); }
  std::string oom_message(uint64_t bytes, MemoryOwner* owner = nullptr) {
    try {
      pool->allocate(bytes, S1, owner);
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), GK_RESOURCE_EXHAUSTED);
      return e.message();
    }
    ADD_FAILURE() << "allocation of " << bytes << " did not fail";
    return "";
  }
};

TEST(MemoryPoolClasses, size_classes_round_up_and_are_aligned) {
  EXPECT_EQ(pool_rounded_size(0), 256u);
  EXPECT_EQ(pool_rounded_size(1), 256u);
  EXPECT_EQ(pool_rounded_size(257), 512u);
  EXPECT_EQ(pool_rounded_size(4096), 4096u);
  EXPECT_EQ(pool_rounded_size(4097), 5120u);
  EXPECT_EQ(pool_rounded_size(MiB), MiB);
  EXPECT_EQ(pool_rounded_size(MiB + 1), MiB + 4096);
  uint64_t previous = 0;
  for (int c = 0; c < size_class_count(); ++c) {
    uint64_t size = size_class_size(c);
    EXPECT_GT(size, previous);
    EXPECT_EQ(size % kPoolAlignment, 0u) << "class " << c;
    EXPECT_EQ(size_class_of(size), c);
    EXPECT_EQ(size_class_of(size - 1 > previous ? size - 1 : size), c);
    // Waste per class is at most a quarter of the size above 4 KiB.
    if (previous >= 4096) EXPECT_LE(size - previous, previous / 4 + 1);
    previous = size;
  }
  EXPECT_EQ(previous, kSmallLimit);
}

TEST_F(PoolFixture, small_block_is_reused_at_once_on_its_own_stream) {
  PoolBlock* a = pool->allocate(1000, S1, nullptr);
  uintptr_t where = addr(a);
  EXPECT_EQ(where % kPoolAlignment, 0u);
  pool->free(a, S1);
  PoolBlock* b = pool->allocate(900, S1, nullptr);  // same class
  EXPECT_EQ(addr(b), where);
  EXPECT_TRUE(state.waits.empty());
  pool->free(b, S1);
}

TEST_F(PoolFixture, small_block_freed_on_another_stream_waits_for_its_event) {
  PoolBlock* a = pool->allocate(1000, S1, nullptr);
  uintptr_t where = addr(a);
  pool->free(a, S1);
  PoolBlock* b = pool->allocate(1000, S2, nullptr);
  EXPECT_NE(addr(b), where) << "the free event on S1 has not completed";
  state.complete_all();
  PoolBlock* c = pool->allocate(1000, S2, nullptr);
  EXPECT_EQ(addr(c), where) << "reusable on S2 once the event completed";
  EXPECT_TRUE(state.waits.empty()) << "no stream wait needed for a completed event";
  pool->free(b, S2);
  pool->free(c, S2);
}

TEST_F(PoolFixture, large_block_on_another_stream_is_ordered_by_a_stream_wait_not_the_host) {
  state.capacity = 40 * MiB;
  PoolBlock* a = pool->allocate(30 * MiB, S1, nullptr);
  uintptr_t where = addr(a);
  pool->free(a, S1);
  ASSERT_EQ(state.events.size(), 1u);
  FakeEvent* event = state.events[0];
  PoolBlock* b = pool->allocate(30 * MiB, S2, nullptr);  // no room to grow: reuse, ordered
  EXPECT_EQ(addr(b), where);
  ASSERT_EQ(state.waits.size(), 1u);
  EXPECT_EQ(state.waits[0].first, S2);
  EXPECT_EQ(state.waits[0].second, event);
  EXPECT_EQ(pool->stats().cross_stream_waits, 1u);
  pool->free(b, S2);
}

TEST_F(PoolFixture, large_blocks_split_and_coalesce) {
  state.synchronous = true;
  PoolBlock* a = pool->allocate(3 * MiB, S1, nullptr);
  PoolBlock* b = pool->allocate(3 * MiB, S1, nullptr);
  PoolBlock* c = pool->allocate(3 * MiB, S1, nullptr);
  EXPECT_EQ(addr(b), addr(a) + 3 * MiB) << "split from one segment";
  EXPECT_EQ(addr(c), addr(b) + 3 * MiB);
  PoolStats s = pool->stats();
  EXPECT_EQ(s.segment_count, 1u);
  EXPECT_EQ(s.bytes_reserved, kLargeSegmentMin);
  EXPECT_EQ(s.bytes_in_use, 9 * MiB);
  EXPECT_EQ(s.largest_free_block, kLargeSegmentMin - 9 * MiB);
  pool->free(b, S1);
  pool->free(a, S1);  // merges with b
  s = pool->stats();
  EXPECT_EQ(s.largest_free_block, kLargeSegmentMin - 9 * MiB) << "11 MiB tail still largest";
  PoolBlock* d = pool->allocate(6 * MiB, S1, nullptr);
  EXPECT_EQ(addr(d), addr(c) - 6 * MiB) << "a+b coalesced into one 6 MiB block, best fit";
  pool->free(d, S1);
  pool->free(c, S1);  // everything merges back into the segment
  s = pool->stats();
  EXPECT_EQ(s.largest_free_block, kLargeSegmentMin);
  EXPECT_DOUBLE_EQ(s.fragmentation, 0.0);
  EXPECT_EQ(pool->trim(), kLargeSegmentMin);
  EXPECT_EQ(pool->stats().bytes_reserved, 0u);
  EXPECT_EQ(state.segments_mapped, 0);
}

TEST_F(PoolFixture, fragmentation_is_reported) {
  state.synchronous = true;
  std::vector<PoolBlock*> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(pool->allocate(3 * MiB, S1, nullptr));
  // 20 MiB segment: six 3 MiB blocks leave 2 MiB; free every other one.
  for (int i = 0; i < 6; i += 2) pool->free(blocks[size_t(i)], S1);
  PoolStats s = pool->stats();
  EXPECT_EQ(s.bytes_reserved - s.bytes_in_use, 11 * MiB);
  EXPECT_EQ(s.largest_free_block, 3 * MiB);
  EXPECT_NEAR(s.fragmentation, 1.0 - 3.0 / 11.0, 1e-9);
  for (int i = 1; i < 6; i += 2) pool->free(blocks[size_t(i)], S1);
}

TEST_F(PoolFixture, free_segments_are_released_under_pressure_before_failing) {
  state.synchronous = true;
  state.capacity = 64 * MiB;
  PoolBlock* a = pool->allocate(40 * MiB, S1, nullptr);
  pool->free(a, S1);
  PoolBlock* b = pool->allocate(50 * MiB, S1, nullptr);  // needs the 40 MiB back first
  EXPECT_EQ(pool->stats().segment_releases, 1u);
  EXPECT_EQ(pool->stats().bytes_reserved, 50 * MiB);
  pool->free(b, S1);
}

TEST_F(PoolFixture, out_of_memory_names_request_device_pool_holders_and_eviction) {
  state.synchronous = true;
  state.capacity = 24 * MiB;
  MemoryOwner* model = pool->create_owner("model-weights", 0);
  PoolBlock* a = pool->allocate(20 * MiB, S1, model);
  std::string m = oom_message(16 * MiB);
  EXPECT_NE(m.find("fake:0: cannot allocate 16777216 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("device total 24.0 MiB, free 4.0 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("pool reserved 20.0 MiB, in use 20.0 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("largest holders: 'model-weights' 20.0 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("eviction: no evictable buffer"), std::string::npos) << m;
  EXPECT_EQ(pool->stats().failure_count, 1u);
  pool->free(a, S1);
}

TEST_F(PoolFixture, quota_is_enforced_per_owner) {
  state.synchronous = true;
  MemoryOwner* job = pool->create_owner("job-a", MiB);
  MemoryOwner* other = pool->create_owner("job-b", 0);
  PoolBlock* a = pool->allocate(512 * 1024, S1, job);
  PoolBlock* b = pool->allocate(512 * 1024, S1, job);
  std::string m = oom_message(1000, job);
  EXPECT_NE(m.find("the quota of owner 'job-a' is 1.0 MiB and 1.0 MiB of it is in use"),
            std::string::npos)
      << m;
  PoolBlock* c = pool->allocate(2 * MiB, S1, other);  // another owner is not limited
  EXPECT_EQ(pool->owner_usage(job).in_use, MiB);
  EXPECT_EQ(pool->owner_usage(job).failure_count, 1u);
  pool->free(a, S1);
  PoolBlock* d = pool->allocate(1000, S1, job);
  EXPECT_EQ(pool->owner_usage(job).peak, MiB);
  for (PoolBlock* x : {b, c, d}) pool->free(x, S1);
  EXPECT_EQ(pool->owner_usage(job).in_use, 0u);
}

void fill(void* p, uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  auto* bytes = static_cast<uint8_t*>(p);
  for (uint64_t i = 0; i < n; ++i) bytes[i] = uint8_t(rng());
}

bool check(const void* p, uint64_t n, uint32_t seed) {
  std::vector<uint8_t> expect(n);
  fill(expect.data(), n, seed);
  return std::memcmp(p, expect.data(), n) == 0;
}

TEST_F(PoolFixture, lru_spill_evicts_least_recently_used_unpinned_first_and_restores_bit_exact) {
  state.synchronous = true;
  const uint64_t size = 2 * MiB + 12345;  // not a multiple of anything
  EvictRecord* a = pool->allocate_evictable(size, S1, nullptr);
  EvictRecord* b = pool->allocate_evictable(size, S1, nullptr);
  EvictRecord* c = pool->allocate_evictable(size, S1, nullptr);
  fill(pool->locate(a, S1, false), size, 1);
  fill(pool->locate(b, S1, false), size, 2);
  fill(pool->locate(c, S1, false), size, 3);
  pool->locate(a, S1, false);       // a is now the most recently used: b, c, a
  void* pinned_c = pool->locate(c, S1, true);  // c is pinned (as if mapped)
  uint64_t in_use = pool->stats().bytes_in_use;
  pool->set_budget(in_use + MiB);   // room for 1 MiB more
  PoolBlock* d = pool->allocate(2 * MiB, S1, nullptr);  // must spill exactly one: b
  EXPECT_TRUE(pool->is_spilled(b));
  EXPECT_FALSE(pool->is_spilled(a));
  EXPECT_FALSE(pool->is_spilled(c));
  PoolStats s = pool->stats();
  EXPECT_EQ(s.spill_count, 1u);
  EXPECT_EQ(s.bytes_spilled, size);
  pool->free(d, S1);
  // b comes back on its next use, bit-exact, wherever it lands.
  void* pb = pool->locate(b, S1, false);
  EXPECT_TRUE(check(pb, size, 2));
  EXPECT_EQ(pool->stats().restore_count, 1u);
  // Most recent first: b, c (pinned), a. A budget just under the use spills a, the LRU one.
  pool->set_budget(pool->stats().bytes_in_use - 1);
  PoolBlock* e = nullptr;
  try {
    e = pool->allocate(256, S1, nullptr);
  } catch (const Error&) {
  }
  EXPECT_TRUE(pool->is_spilled(a));
  EXPECT_FALSE(pool->is_spilled(c)) << "a pinned allocation is never spilled";
  EXPECT_EQ(pool->locate(c, S1, false), pinned_c);
  EXPECT_TRUE(check(pinned_c, size, 3));
  pool->set_budget(0);
  if (e) pool->free(e, S1);
  EXPECT_TRUE(check(pool->locate(a, S1, false), size, 1));
  EXPECT_TRUE(check(pool->locate(b, S1, false), size, 2));
  pool->unpin(c);
  pool->free(a, S1);
  pool->free(b, S1);
  pool->free(c, S1);
  EXPECT_EQ(pool->stats().bytes_in_use, 0u);
  EXPECT_EQ(pool->stats().bytes_spilled, 0u);
}

TEST_F(PoolFixture, quota_spills_only_the_owners_evictable_buffers) {
  state.synchronous = true;
  MemoryOwner* job = pool->create_owner("job", 4 * MiB);
  EvictRecord* other = pool->allocate_evictable(2 * MiB, S1, nullptr);
  EvictRecord* mine = pool->allocate_evictable(2 * MiB, S1, job);
  fill(pool->locate(mine, S1, false), 2 * MiB, 7);
  pool->locate(other, S1, false);  // `mine` is older: but `other` must still not be touched
  PoolBlock* more = pool->allocate(3 * MiB, S1, job);
  EXPECT_TRUE(pool->is_spilled(mine));
  EXPECT_FALSE(pool->is_spilled(other));
  // Restoring `mine` would pass the quota again and there is nothing left of job's to spill.
  std::string m;
  try {
    pool->locate(mine, S1, false);
  } catch (const Error& e) {
    m = e.message();
  }
  EXPECT_NE(m.find("quota of owner 'job'"), std::string::npos) << m;
  pool->free(more, S1);
  EXPECT_TRUE(check(pool->locate(mine, S1, false), 2 * MiB, 7));
  pool->free(mine, S1);
  pool->free(other, S1);
}

TEST_F(PoolFixture, device_pressure_spills_evictable_buffers) {
  state.synchronous = true;
  state.capacity = 48 * MiB;
  EvictRecord* a = pool->allocate_evictable(20 * MiB, S1, nullptr);
  fill(pool->locate(a, S1, false), 20 * MiB, 9);
  PoolBlock* b = pool->allocate(40 * MiB, S1, nullptr);  // only fits once a is gone
  EXPECT_TRUE(pool->is_spilled(a));
  std::string m = oom_message(40 * MiB);
  EXPECT_NE(m.find("eviction:"), std::string::npos) << m;
  pool->free(b, S1);
  EXPECT_TRUE(check(pool->locate(a, S1, false), 20 * MiB, 9));
  pool->free(a, S1);
}

TEST_F(PoolFixture, raw_pointers_reject_foreign_pointers_and_double_free) {
  void* p = pool->allocate_raw(4096, S1);
  int x = 0;
  try {
    pool->free_raw(&x, S1, "host.free");
    ADD_FAILURE() << "foreign pointer accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), GK_INVALID_ARGUMENT);
    EXPECT_NE(e.message().find("not a live allocation of the fake:0 pool"), std::string::npos)
        << e.message();
  }
  pool->free_raw(p, S1, "host.free");
  EXPECT_THROW(pool->free_raw(p, S1, "host.free"), Error) << "second free";
  EXPECT_EQ(pool->stats().bytes_in_use, 0u);
}

TEST_F(PoolFixture, snapshot_lists_segments_blocks_owners_and_spilled) {
  state.synchronous = true;
  MemoryOwner* o = pool->create_owner("kv-cache", 0);
  PoolBlock* small = pool->allocate(300, S1, o);
  PoolBlock* large = pool->allocate(5 * MiB, S2, nullptr);
  EvictRecord* ev = pool->allocate_evictable(3 * MiB, S1, o);
  pool->set_budget(pool->stats().bytes_in_use);
  PoolBlock* x = pool->allocate(3 * MiB, S1, nullptr);  // spills ev
  auto j = nlohmann::json::parse(pool->snapshot_json());
  EXPECT_EQ(j["device"], "fake:0");
  ASSERT_EQ(j["segments"].size(), 2u);
  int allocated = 0;
  bool saw_small = false, saw_owner = false;
  for (const auto& seg : j["segments"]) {
    saw_small |= seg["kind"] == "small";
    for (const auto& b : seg["blocks"]) {
      if (b["state"] == "allocated") {
        ++allocated;
        saw_owner |= b["owner"] == "kv-cache";
      }
    }
  }
  EXPECT_EQ(allocated, 3);
  EXPECT_TRUE(saw_small);
  EXPECT_TRUE(saw_owner);
  ASSERT_EQ(j["spilled"].size(), 1u);
  EXPECT_EQ(j["spilled"][0]["owner"], "kv-cache");
  EXPECT_EQ(j["spilled"][0]["size"], 3 * MiB);
  bool found = false;
  for (const auto& ow : j["owners"]) found |= ow["name"] == "kv-cache" && ow["in_use"] == 512;
  EXPECT_TRUE(found) << j["owners"].dump();
  pool->set_budget(0);
  pool->free(small, S1);
  pool->free(large, S2);
  pool->free(x, S1);
  pool->free(ev, S1);
}

// Threads × streams × alloc/free: no two live blocks overlap, accounting returns to zero.
void run_storm(MemoryPool& pool) {
  auto addr = [](PoolBlock* b) { return reinterpret_cast<uintptr_t>(MemoryPool::address(b)); };
  std::mutex live_mutex;
  std::map<uintptr_t, uint64_t> live;
  std::atomic<bool> overlap{false};
  auto worker = [&](int t) {
    std::mt19937 rng(uint32_t(t) * 7919u);
    std::vector<std::pair<PoolBlock*, cuda::CUstream>> mine;
    for (int i = 0; i < 3000; ++i) {
      cuda::CUstream s = stream(0x1000 * uintptr_t(1 + rng() % 3));
      if (mine.size() < 16 && (rng() % 2 || mine.empty())) {
        uint64_t size = rng() % 8 == 0 ? (1 + rng() % 12) * MiB : 1 + rng() % 65536;
        PoolBlock* b = pool.allocate(size, s, nullptr);
        uintptr_t a = addr(b);
        {
          std::lock_guard<std::mutex> lock(live_mutex);
          auto next = live.lower_bound(a);
          if (next != live.end() && next->first < a + size) overlap = true;
          if (next != live.begin() && std::prev(next)->first + std::prev(next)->second > a) {
            overlap = true;
          }
          live[a] = size;
        }
        std::memset(MemoryPool::address(b), t, size_t(std::min<uint64_t>(size, 256)));
        mine.emplace_back(b, s);
      } else {
        size_t k = rng() % mine.size();
        PoolBlock* b = mine[k].first;
        {
          std::lock_guard<std::mutex> lock(live_mutex);
          live.erase(addr(b));
        }
        pool.free(b, rng() % 4 ? mine[k].second : s);
        mine.erase(mine.begin() + long(k));
      }
    }
    for (auto& [b, s] : mine) {
      {
        std::lock_guard<std::mutex> lock(live_mutex);
        live.erase(addr(b));
      }
      pool.free(b, s);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  EXPECT_FALSE(overlap.load());
  PoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.alloc_count, s.free_count);
  pool.trim();
  EXPECT_EQ(pool.stats().bytes_reserved, 0u);
}

TEST_F(PoolFixture, storm_of_threads_and_streams_keeps_blocks_disjoint) {
  state.synchronous = true;  // events complete at once; stream keys still vary
  run_storm(*pool);
}

// The same storm with tracked streams whose events complete only when waited for: every
// cross-stream reuse goes through an event recorded after the fact and a stream wait. (The
// fake backend is called with the pool's lock held, so its bookkeeping needs no lock.)
TEST_F(PoolFixture, storm_with_tracked_streams_and_pending_frees_keeps_blocks_disjoint) {
  for (uintptr_t n : {1, 2, 3}) pool->track_stream(stream(0x1000 * n));
  run_storm(*pool);
  EXPECT_GT(pool->stats().cross_stream_waits, 0u);
  EXPECT_EQ(state.events_live, 0) << "trim waited for and released every event";
}

// ---- tracked streams: free makes no driver call ----------------------------------------

TEST_F(PoolFixture, free_on_a_tracked_stream_records_nothing_and_is_reused_there_at_once) {
  pool->track_stream(S1);
  PoolBlock* a = pool->allocate(1000, S1, nullptr);
  PoolBlock* big = pool->allocate(3 * MiB, S1, nullptr);
  uintptr_t where = addr(a), big_where = addr(big);
  pool->free(a, S1);
  pool->free(big, S1);
  EXPECT_TRUE(state.events.empty()) << "no event at free on a tracked stream";
  EXPECT_EQ(pool->stats().events_recorded, 0u);
  PoolBlock* b = pool->allocate(900, S1, nullptr);
  PoolBlock* big2 = pool->allocate(3 * MiB, S1, nullptr);
  EXPECT_EQ(addr(b), where) << "stream order makes reuse on the same stream safe";
  EXPECT_EQ(addr(big2), big_where);
  EXPECT_TRUE(state.events.empty());
  EXPECT_TRUE(state.waits.empty());
  pool->free(b, S1);
  pool->free(big2, S1);
}

TEST_F(PoolFixture, another_stream_gets_one_event_recorded_then_and_shared_by_all_pending_frees) {
  pool->track_stream(S1);
  pool->track_stream(S2);
  state.capacity = 2 * kLargeSegmentMin;  // two medium segments, no room to grow
  PoolBlock* a = pool->allocate(15 * MiB, S1, nullptr);  // huge: a segment of its own
  PoolBlock* b = pool->allocate(3 * MiB, S1, nullptr);   // medium
  uintptr_t a_at = addr(a), b_at = addr(b);
  pool->free(a, S1);
  pool->free(b, S1);
  EXPECT_TRUE(state.events.empty());
  // S2 wants both: they are pending on S1 and there is no room for new segments.
  PoolBlock* a2 = pool->allocate(15 * MiB, S2, nullptr);
  ASSERT_EQ(state.events.size(), 1u) << "one event recorded on S1, at the first cross-stream use";
  FakeEvent* event = state.events[0];
  PoolBlock* b2 = pool->allocate(3 * MiB, S2, nullptr);
  EXPECT_EQ(addr(a2), a_at);
  EXPECT_EQ(addr(b2), b_at);
  EXPECT_EQ(state.events.size(), 1u) << "the same event covers both frees";
  ASSERT_EQ(state.waits.size(), 2u);
  for (auto& [s, e] : state.waits) {
    EXPECT_EQ(s, S2);
    EXPECT_EQ(e, event);
  }
  EXPECT_EQ(pool->stats().cross_stream_waits, 2u);
  EXPECT_EQ(pool->stats().events_recorded, 1u);
  pool->free(a2, S2);
  pool->free(b2, S2);
}

TEST_F(PoolFixture, blocks_of_a_tracked_stream_are_reused_elsewhere_without_a_wait_once_its_event_completed) {
  pool->track_stream(S1);
  pool->track_stream(S2);
  PoolBlock* a = pool->allocate(1000, S1, nullptr);
  uintptr_t where = addr(a);
  pool->free(a, S1);
  // S2 looks at it: pending, so a probe event is recorded on S1 and S2 is served elsewhere.
  PoolBlock* b = pool->allocate(1000, S2, nullptr);
  EXPECT_NE(addr(b), where);
  ASSERT_EQ(state.events.size(), 1u);
  PoolBlock* c = pool->allocate(1000, S2, nullptr);
  EXPECT_NE(addr(c), where);
  EXPECT_EQ(state.events.size(), 1u) << "one probe per stream while it is outstanding";
  state.complete_all();
  PoolBlock* d = pool->allocate(1000, S2, nullptr);
  EXPECT_EQ(addr(d), where) << "the event completed: the free is complete";
  EXPECT_TRUE(state.waits.empty());
  EXPECT_EQ(state.events_live, 0) << "a completed event goes back to the backend";
  for (PoolBlock* x : {b, c, d}) pool->free(x, S2);
}

TEST_F(PoolFixture, frees_after_the_streams_event_need_a_newer_event) {
  pool->track_stream(S1);
  pool->track_stream(S2);
  state.capacity = kLargeSegmentMin;  // one medium segment, filled exactly
  PoolBlock* a = pool->allocate(8 * MiB, S1, nullptr);
  PoolBlock* b = pool->allocate(8 * MiB, S1, nullptr);
  PoolBlock* c = pool->allocate(4 * MiB, S1, nullptr);
  pool->free(a, S1);
  PoolBlock* a2 = pool->allocate(8 * MiB, S2, nullptr);  // waits on event 1
  pool->free(b, S1);                                      // after event 1 was recorded
  PoolBlock* b2 = pool->allocate(8 * MiB, S2, nullptr);  // needs event 2
  ASSERT_EQ(state.waits.size(), 2u);
  EXPECT_NE(state.waits[0].second, state.waits[1].second)
      << "an event recorded before a free does not cover it";
  EXPECT_EQ(pool->stats().events_recorded, 2u);
  for (PoolBlock* x : {a2, b2}) pool->free(x, S2);
  pool->free(c, S1);
}

TEST_F(PoolFixture, forgetting_a_stream_settles_its_pending_frees_and_later_frees_record_at_once) {
  pool->track_stream(S1);
  PoolBlock* a = pool->allocate(1000, S1, nullptr);
  PoolBlock* big = pool->allocate(3 * MiB, S1, nullptr);
  uintptr_t where = addr(a);
  pool->free(a, S1);
  pool->free(big, S1);
  auto pending = [&] {
    int n = 0;
    auto j = nlohmann::json::parse(pool->snapshot_json());
    for (const auto& seg : j["segments"]) {
      for (const auto& b : seg["blocks"]) n += b["state"] == "free_pending";
    }
    return n;
  };
  EXPECT_EQ(pending(), 2);
  pool->forget_stream(S1);  // as gk_stream_destroy does before cuStreamDestroy
  EXPECT_EQ(pending(), 0) << "every free on the stream is complete before its handle is reused";
  EXPECT_EQ(state.events_live, 0);
  PoolBlock* b = pool->allocate(1000, S2, nullptr);
  EXPECT_EQ(addr(b), where) << "usable on another stream without a wait";
  EXPECT_TRUE(state.waits.empty());
  // The handle is no longer tracked: a free there records its event at once.
  PoolBlock* c = pool->allocate(1000, S1, nullptr);
  pool->free(c, S1);
  EXPECT_EQ(state.events.size(), 1u);
  pool->forget_stream(S1);  // no longer tracked: nothing to do
  pool->free(b, S2);
}

// An allocation made on a stream that is destroyed before the allocation is freed (a tensor
// that outlives its stream): its free must not name the dead handle, which the driver may
// have given to another stream, or to none.
TEST_F(PoolFixture, live_allocations_of_a_forgotten_stream_are_freed_in_the_default_streams_order) {
  pool->track_stream(S1);
  PoolBlock* small = pool->allocate(1000, S1, nullptr);
  PoolBlock* large = pool->allocate(3 * MiB, S1, nullptr);
  EvictRecord* evictable = pool->allocate_evictable(5000, S1, nullptr);
  EvictRecord* spilled = pool->allocate_evictable(7000, S1, nullptr);
  pool->set_budget(pool->stats().bytes_in_use);
  PoolBlock* pressure = pool->allocate(8192, S2, nullptr);  // spills the LRU record
  ASSERT_TRUE(pool->is_spilled(evictable) || pool->is_spilled(spilled));
  pool->set_budget(0);
  pool->forget_stream(S1);  // as gk_stream_destroy does
  pool->free(small, kOwnStream);
  pool->free(large, kOwnStream);
  pool->free(evictable, kOwnStream);
  pool->free(spilled, kOwnStream);
  // Reuse on S2 orders itself after the frees: any event recorded for them is on the
  // default stream, never on the forgotten handle.
  std::vector<PoolBlock*> again;
  for (uint64_t size : {uint64_t(1000), 3 * MiB, uint64_t(5000), uint64_t(7000)}) {
    again.push_back(pool->allocate(size, S2, nullptr));
  }
  for (FakeEvent* e : state.events) EXPECT_NE(e->stream, S1) << "an event on a destroyed stream";
  for (const auto& [waiting, e] : state.waits) EXPECT_NE(e->stream, S1);
  for (PoolBlock* b : again) pool->free(b, S2);
  pool->free(pressure, S2);
}

// A scheduler task's stream is not tracked by the pool, and a tensor made on it can outlive
// it (exported through DLPack, say): its free must not name the dead handle either.
TEST_F(PoolFixture, live_allocations_of_a_forgotten_untracked_stream_are_freed_in_the_default_order) {
  PoolBlock* small = pool->allocate(1000, S1, nullptr);
  PoolBlock* large = pool->allocate(3 * MiB, S1, nullptr);
  pool->forget_stream(S1);  // as gk_stream_destroy does for a task's stream
  pool->free(small, kOwnStream);
  pool->free(large, kOwnStream);
  std::vector<PoolBlock*> again = {pool->allocate(1000, S2, nullptr),
                                   pool->allocate(3 * MiB, S2, nullptr)};
  for (FakeEvent* e : state.events) EXPECT_NE(e->stream, S1) << "an event on a destroyed stream";
  for (const auto& [waiting, e] : state.waits) EXPECT_NE(e->stream, S1);
  for (PoolBlock* b : again) pool->free(b, S2);
}

TEST_F(PoolFixture, order_free_on_moves_a_live_blocks_free_to_another_stream) {
  pool->track_stream(S1);
  pool->track_stream(S2);
  PoolBlock* a = pool->allocate(1000, S1, nullptr);
  uintptr_t where = addr(a);
  pool->order_free_on(a, S2);  // gk_buffer_free(buffer, S2) while a tensor still views it
  pool->free(a, kOwnStream);
  PoolBlock* b = pool->allocate(1000, S2, nullptr);
  EXPECT_EQ(addr(b), where) << "freed in S2's order, so reused there at once";
  EXPECT_TRUE(state.waits.empty());
  EXPECT_EQ(state.events_live, 0);
  pool->free(b, S2);
}

TEST_F(PoolFixture, the_holder_is_kept_while_allocations_live_after_close) {
  auto holder = std::make_shared<int>(7);
  std::weak_ptr<int> watch = holder;
  pool->hold_while_live(holder);
  holder.reset();
  EXPECT_TRUE(watch.expired()) << "nothing live: the pool does not hold it";
  holder = std::make_shared<int>(8);
  watch = holder;
  pool->hold_while_live(holder);
  PoolBlock* a = pool->allocate(1000, S1, nullptr);
  EvictRecord* r = pool->allocate_evictable(1000, S1, nullptr);
  holder.reset();
  EXPECT_FALSE(watch.expired()) << "live allocations keep it";
  pool->close();  // the runtime's handle is gone
  pool->free(a, S1);
  EXPECT_FALSE(watch.expired()) << "one allocation is still live";
  pool->free(r, S1);
  EXPECT_TRUE(watch.expired()) << "the last free of a closed pool lets go";
}

TEST_F(PoolFixture, trim_waits_for_frees_pending_on_a_tracked_stream) {
  pool->track_stream(S1);
  PoolBlock* a = pool->allocate(30 * MiB, S1, nullptr);
  pool->free(a, S1);
  EXPECT_EQ(pool->trim(), 30 * MiB);
  ASSERT_EQ(pool->stats().events_recorded, 1u) << "one event recorded to wait for the free";
  EXPECT_EQ(state.events_live, 0);
  EXPECT_EQ(state.segments_mapped, 0);
}

TEST_F(PoolFixture, pending_frees_of_a_tracked_and_an_untracked_stream_do_not_coalesce) {
  pool->track_stream(S1);
  PoolBlock* a = pool->allocate(3 * MiB, S1, nullptr);
  PoolBlock* b = pool->allocate(3 * MiB, S1, nullptr);
  PoolBlock* c = pool->allocate(3 * MiB, S1, nullptr);
  pool->free(a, S1);  // pending on S1, no event
  pool->free(b, S3);  // pending on S3, its event recorded now
  EXPECT_EQ(pool->stats().largest_free_block, kLargeSegmentMin - 9 * MiB)
      << "a and b stay apart: neither one's free orders the other's";
  state.complete_all();
  pool->free(c, S1);
  pool->trim();
  EXPECT_EQ(pool->stats().bytes_reserved, 0u);
}

// ---- segment policy --------------------------------------------------------------------

TEST_F(PoolFixture, a_huge_request_is_not_cut_from_a_free_block_over_twice_its_size) {
  state.synchronous = true;
  PoolBlock* a = pool->allocate(100 * MiB, S1, nullptr);
  pool->free(a, S1);
  PoolBlock* fits = pool->allocate(60 * MiB, S1, nullptr);  // <= 2x: cut from it
  EXPECT_EQ(pool->stats().bytes_reserved, 100 * MiB);
  pool->free(fits, S1);
  PoolBlock* small = pool->allocate(30 * MiB, S1, nullptr);  // < half: a segment of its own
  PoolStats s = pool->stats();
  EXPECT_EQ(s.segment_releases, 1u) << "the idle 100 MiB segment went back first";
  EXPECT_EQ(s.bytes_reserved, 30 * MiB);
  pool->free(small, S1);
}

// A huge block freed with no free neighbour stays out of the free sets until the next large
// request (the alloc+free loop of one size makes no tree operation); stats, other streams and
// trim still see it.
TEST_F(PoolFixture, a_huge_block_freed_alone_is_reused_for_its_size_and_seen_everywhere_else) {
  pool->track_stream(S1);
  PoolBlock* a = pool->allocate(30 * MiB, S1, nullptr);
  uintptr_t where = addr(a);
  pool->free(a, S1);
  EXPECT_EQ(pool->stats().largest_free_block, 30 * MiB);
  PoolBlock* b = pool->allocate(30 * MiB, S1, nullptr);
  EXPECT_EQ(addr(b), where) << "reused at once on its own stream";
  EXPECT_EQ(pool->stats().events_recorded, 0u);
  pool->free(b, S1);
  PoolBlock* other = pool->allocate(12 * MiB, S1, nullptr);  // 30 MiB is over twice that
  EXPECT_NE(addr(other), where);
  EXPECT_EQ(pool->stats().largest_free_block, 30 * MiB);
  pool->free(other, S1);
  PoolBlock* c = pool->allocate(30 * MiB, S2, nullptr);  // pending on S1: ordered by a wait
  EXPECT_EQ(addr(c), where);
  ASSERT_EQ(state.waits.size(), 1u) << "S2 waits for the free on S1, the host does not";
  EXPECT_EQ(state.waits[0].first, S2);
  pool->free(c, S2);
  state.complete_all();
  EXPECT_EQ(pool->trim(), 42 * MiB);
  EXPECT_EQ(state.segments_mapped, 0);
}

TEST_F(PoolFixture, a_medium_request_never_lands_in_a_huge_segment) {
  state.synchronous = true;
  PoolBlock* a = pool->allocate(40 * MiB, S1, nullptr);
  PoolBlock* b = pool->allocate(40 * MiB, S1, nullptr);
  pool->free(a, S1);
  // A 2 MiB request in a's idle 40 MiB would pin it; it gets a medium segment instead,
  // and a's goes back since 80 + 20 MiB would pass the headroom over the 80 MiB peak.
  PoolBlock* m = pool->allocate(2 * MiB, S1, nullptr);
  PoolStats s = pool->stats();
  EXPECT_EQ(s.segment_releases, 1u);
  EXPECT_EQ(s.bytes_reserved, 40 * MiB + kLargeSegmentMin);
  pool->free(m, S1);
  pool->free(b, S1);
}

TEST_F(PoolFixture, idle_segments_stay_while_the_reserve_is_within_the_headroom) {
  state.synchronous = true;
  std::vector<PoolBlock*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(pool->allocate(100 * MiB, S1, nullptr));
  for (PoolBlock* b : blocks) pool->free(b, S1);
  // Peak in use 400 MiB: 100 MiB segments come back for requests that fit them.
  for (int i = 0; i < 4; ++i) blocks[size_t(i)] = pool->allocate(90 * MiB, S1, nullptr);
  PoolStats s = pool->stats();
  EXPECT_EQ(s.segment_releases, 0u);
  EXPECT_EQ(s.segment_maps, 4u);
  for (PoolBlock* b : blocks) pool->free(b, S1);
}

// ---- the replayed trace (perf/memory/pool_trace.h, bench_pool section 2) ----------------

// Segments at made-up addresses that are never touched, on a device of `capacity` bytes,
// and events that complete after `lag` queries (0: complete when recorded, as on the cpu
// device or an idle GPU).
class TraceBackend final : public PoolBackend {
 public:
  explicit TraceBackend(int lag, uint64_t capacity = uint64_t(80) << 30)
      : lag_(lag), capacity_(capacity) {}
  ~TraceBackend() override { EXPECT_EQ(events_live_, 0); }
  void* map_segment(uint64_t bytes) override {
    if (mapped_ + bytes > capacity_) return nullptr;  // the device is full
    mapped_ += bytes;
    uintptr_t base = next_;
    next_ += bytes + kSegmentRounding;  // a gap: neighbouring segments are never adjacent
    return reinterpret_cast<void*>(base);
  }
  void unmap_segment(void*, uint64_t bytes) noexcept override { mapped_ -= bytes; }
  void* record_event(cuda::CUstream) noexcept override {
    if (lag_ == 0) return nullptr;
    ++events_live_;
    return new int(lag_);
  }
  bool event_complete(void* e) override { return --*static_cast<int*>(e) <= 0; }
  void stream_wait_event(cuda::CUstream, void*) override {}
  void synchronize_event(void* e) noexcept override { *static_cast<int*>(e) = 0; }
  void release_event(void* e) noexcept override {
    --events_live_;
    delete static_cast<int*>(e);
  }
  void* host_alloc(uint64_t bytes) override { return std::malloc(bytes); }
  void host_free(void* p) noexcept override { std::free(p); }
  void copy_to_host(void*, const void*, uint64_t, cuda::CUstream) override {}
  void copy_to_device(void*, const void*, uint64_t, cuda::CUstream) override {}
  uint64_t total_memory() override { return capacity_; }
  uint64_t free_memory() override { return capacity_ - mapped_; }

 private:
  int lag_;
  uint64_t capacity_;
  uint64_t mapped_ = 0;
  int events_live_ = 0;
  uintptr_t next_ = uintptr_t(1) << 44;
};

// Replays the trace on two tracked streams, as bench_pool does through the C ABI; returns
// peak reserved / peak live. `capacity`: the device's size; `budget`: the pool's (0: none).
// An allocation that fails fails the test (the pool throws).
double replay_trace(uint64_t seed, int lag, uint64_t capacity = uint64_t(80) << 30,
                    uint64_t budget = 0) {
  std::vector<perf::TraceEvent> trace = perf::make_pool_trace(seed);
  MemoryPool pool("trace:0", std::make_unique<TraceBackend>(lag, capacity));
  pool.set_budget(budget);
  const cuda::CUstream streams[2] = {S1, S2};
  for (cuda::CUstream s : streams) pool.track_stream(s);
  std::vector<PoolBlock*> blocks(perf::trace_slots(trace), nullptr);
  std::vector<int> on(blocks.size(), 0);
  for (const perf::TraceEvent& e : trace) {
    if (e.alloc) {
      blocks[e.slot] = pool.allocate(e.size, streams[e.stream], nullptr);
      on[e.slot] = e.stream;
    } else {
      pool.free(blocks[e.slot], streams[e.free_stream ? 1 - on[e.slot] : on[e.slot]]);
    }
  }
  PoolStats s = pool.stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.alloc_count, s.free_count);
  uint64_t peak_live = perf::trace_peak_live(trace);
  std::printf("[ trace    ] seed %llu, events complete after %d queries: peak live %.1f MiB, "
              "peak reserved %.1f MiB, ratio %.3f; %llu segment maps, %llu releases, %llu "
              "cross-stream waits, %llu events\n",
              (unsigned long long)seed, lag, double(peak_live) / MiB,
              double(s.peak_bytes_reserved) / MiB, double(s.peak_bytes_reserved) / double(peak_live),
              (unsigned long long)s.segment_maps, (unsigned long long)s.segment_releases,
              (unsigned long long)s.cross_stream_waits, (unsigned long long)s.events_recorded);
  pool.trim();
  EXPECT_EQ(pool.stats().bytes_reserved, 0u);
  return double(s.peak_bytes_reserved) / double(peak_live);
}

// A memory-accounting property, not a timing: peak reserved / peak live on bench_pool's
// trace (1.333 on an H100 and 1.219 on the cpu pool before huge segments were kept whole
// and idle ones given back).
TEST(MemoryPoolTrace, replayed_trace_reserves_at_most_1_10_times_its_live_peak) {
  for (int lag : {0, 3}) {
    EXPECT_LE(replay_trace(perf::kTraceSeed, lag), 1.10) << "events complete after " << lag;
  }
}

// Other seeds of the same distribution, so the policy is not tuned to one trace: 1.05-1.10
// when this was written (2026-11); the bound leaves room for the spread between seeds.
TEST(MemoryPoolTrace, other_seeds_of_the_trace_stay_near_1_10) {
  for (uint64_t seed = 1; seed <= 8; ++seed) EXPECT_LE(replay_trace(seed, 0), 1.12) << seed;
}

// Issue 3: no out-of-memory while live memory stays within 90% of the memory there is. The
// trace's live peak is 90% of the device (segments beyond it fail to map, so the pool must
// give idle segments back and reuse free blocks), then 90% of a budget on a large device.
TEST(MemoryPoolTrace, trace_fits_a_device_or_budget_of_its_live_peak_over_0_9) {
  for (uint64_t seed : {perf::kTraceSeed, uint64_t(1), uint64_t(2), uint64_t(3)}) {
    const double peak_live = double(perf::trace_peak_live(perf::make_pool_trace(seed)));
    const auto room = static_cast<uint64_t>(peak_live / 0.9);
    for (int lag : {0, 3}) {
      EXPECT_NO_THROW(replay_trace(seed, lag, room)) << "device of " << room << " bytes, seed "
                                                     << seed << ", lag " << lag;
      EXPECT_NO_THROW(replay_trace(seed, lag, uint64_t(80) << 30, room))
          << "budget of " << room << " bytes, seed " << seed << ", lag " << lag;
    }
  }
}

}  // namespace
}  // namespace gk
