#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_runtime.h"

namespace gk::test {
namespace {

std::string last_error() { return gk_last_error(); }

gk_buffer* alloc(gk_runtime* rt, uint64_t size) {
  gk_alloc_args a{};
  a.struct_size = sizeof(a);
  a.device = 0;
  a.size = size;
  gk_buffer* b = nullptr;
  EXPECT_EQ(gk_buffer_alloc(rt, &a, &b), GK_OK) << gk_last_error();
  return b;
}

// The cpu device's pool holds nothing and has freed as often as it allocated.
void expect_everything_freed(gk_runtime* rt) {
  gk_memory_stats s{};
  s.struct_size = sizeof(s);
  ASSERT_EQ(gk_memory_stats_get(rt, 0, &s), GK_OK);
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.alloc_count, s.free_count);
}

TEST(Buffer, alloc_map_write_and_free) {
  RuntimePtr rt = make_runtime(test_options());
  gk_buffer* b = alloc(rt.get(), 1000);
  uint64_t size = 0;
  ASSERT_EQ(gk_buffer_size(b, &size), GK_OK);
  EXPECT_EQ(size, 1000u);
  void* p = nullptr;
  ASSERT_EQ(gk_buffer_map(b, &p), GK_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << "buffers are 256-byte aligned";
  std::memset(p, 0xab, 1000);
  ASSERT_EQ(gk_buffer_unmap(b), GK_OK);
  EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();
}

TEST(Buffer, zero_size_buffer_is_valid) {
  RuntimePtr rt = make_runtime(test_options());
  gk_buffer* b = alloc(rt.get(), 0);
  EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK);
}

TEST(Buffer, double_free_is_detected_as_a_stale_handle) {
  RuntimePtr rt = make_runtime(test_options());
  gk_buffer* b = alloc(rt.get(), 64);
  ASSERT_EQ(gk_buffer_free(b, nullptr), GK_OK);
  EXPECT_EQ(gk_buffer_free(b, nullptr), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("stale"), std::string::npos) << last_error();
  uint64_t size = 0;
  EXPECT_EQ(gk_buffer_size(b, &size), GK_INVALID_ARGUMENT);
}

TEST(Buffer, reused_slot_does_not_revive_a_stale_handle) {
  RuntimePtr rt = make_runtime(test_options());
  gk_buffer* first = alloc(rt.get(), 64);
  ASSERT_EQ(gk_buffer_free(first, nullptr), GK_OK);
  gk_buffer* second = alloc(rt.get(), 64);  // likely the same slot, next generation
  EXPECT_NE(first, second);
  EXPECT_EQ(gk_buffer_free(first, nullptr), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_buffer_free(second, nullptr), GK_OK) << last_error();
}

TEST(Buffer, foreign_pointer_is_not_a_buffer) {
  int x = 0;
  EXPECT_EQ(gk_buffer_free(reinterpret_cast<gk_buffer*>(&x), nullptr), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not a gk_buffer handle"), std::string::npos) << last_error();
  EXPECT_EQ(gk_buffer_free(nullptr, nullptr), GK_INVALID_ARGUMENT);
}

TEST(Buffer, free_while_mapped_is_refused_and_changes_nothing) {
  RuntimePtr rt = make_runtime(test_options());
  gk_buffer* b = alloc(rt.get(), 64);
  void* p = nullptr;
  ASSERT_EQ(gk_buffer_map(b, &p), GK_OK);
  EXPECT_EQ(gk_buffer_free(b, nullptr), GK_FAILED_PRECONDITION);
  EXPECT_NE(last_error().find("still mapped"), std::string::npos) << last_error();
  ASSERT_EQ(gk_buffer_unmap(b), GK_OK);
  EXPECT_EQ(gk_buffer_unmap(b), GK_FAILED_PRECONDITION);
  EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();
}

TEST(Buffer, tensor_view_keeps_memory_after_the_buffer_is_freed) {
  RuntimePtr rt = make_runtime(test_options());
  gk_buffer* b = alloc(rt.get(), 4 * sizeof(float));
  gk_tensor_desc d = desc(GK_DTYPE_F32, {4});
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_buffer(b, 0, &d, &t), GK_OK) << last_error();
  ASSERT_EQ(gk_buffer_free(b, nullptr), GK_OK);
  float values[4] = {1, 2, 3, 4}, back[4] = {};
  ASSERT_EQ(gk_copy_from_host(t, values, sizeof(values), nullptr), GK_OK) << last_error();
  ASSERT_EQ(gk_copy_to_host(t, back, sizeof(back), nullptr), GK_OK);
  EXPECT_EQ(std::memcmp(values, back, sizeof(values)), 0);
  gk_tensor_release(t);
}

// The pool keeps the runtime alive while anything allocated from it is live (no reference
// count per buffer): buffers, their views and tensors outlive gk_runtime_destroy.
TEST(Buffer, buffers_and_views_outlive_the_runtime_handle) {
  gk_runtime_options o = test_options();
  gk_runtime* rt = nullptr;
  ASSERT_EQ(gk_runtime_create(&o, &rt), GK_OK);
  gk_buffer* plain = alloc(rt, 1000);
  gk_alloc_args a{};
  a.struct_size = sizeof(a);
  a.device = 0;
  a.size = 64;
  a.flags = GK_BUFFER_EVICTABLE;
  gk_buffer* evictable = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt, &a, &evictable), GK_OK);
  gk_tensor_desc d = desc(GK_DTYPE_F32, {4});
  gk_tensor* view = nullptr;
  ASSERT_EQ(gk_tensor_from_buffer(plain, 0, &d, &view), GK_OK);
  gk_runtime_destroy(rt);
  void* p = nullptr;
  ASSERT_EQ(gk_buffer_map(evictable, &p), GK_OK) << last_error();
  std::memset(p, 0x5a, 64);
  ASSERT_EQ(gk_buffer_unmap(evictable), GK_OK);
  EXPECT_EQ(gk_buffer_free(evictable, nullptr), GK_OK) << last_error();
  EXPECT_EQ(gk_buffer_free(plain, nullptr), GK_OK) << last_error();
  const float four[4] = {1, 2, 3, 4};
  ASSERT_EQ(gk_copy_from_host(view, four, sizeof(four), nullptr), GK_OK) << last_error();
  float back[4] = {};
  ASSERT_EQ(gk_copy_to_host(view, back, sizeof(back), nullptr), GK_OK) << last_error();
  EXPECT_EQ(back[3], 4.0f);
  gk_tensor_release(view);  // the last holder: the runtime goes now (ASan checks the rest)
}

// A buffer's allocation lives in storage its pool keeps (buffer_table.h), and recycled blocks
// are kept per thread (recycled_blocks.h) for those a tensor lets go last: buffers allocated on
// one thread and freed on another, and buffers freed by a thread_local destructor after that
// thread's cache was drained, are still released exactly once (ASan checks for leaks and
// double frees, TSan for races).
struct FreeAtThreadExit {
  std::vector<gk_buffer*> buffers;
  ~FreeAtThreadExit() {
    for (gk_buffer* b : buffers) EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();
  }
};

TEST(Buffer, buffers_freed_on_other_threads_and_at_thread_exit_are_released) {
  RuntimePtr rt = make_runtime(test_options());
  std::vector<gk_buffer*> made;
  for (int i = 0; i < 100; ++i) made.push_back(alloc(rt.get(), 256));
  std::thread other([&] {
    // Destroyed after this thread's cache is drained: it is constructed before the cache's
    // first use on this thread (the frees below), and thread_local objects go in reverse.
    static thread_local FreeAtThreadExit late;
    for (int i = 0; i < 10; ++i) late.buffers.push_back(alloc(rt.get(), 512));
    for (gk_buffer* b : made) EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();
    for (int i = 0; i < 50; ++i) {
      gk_buffer* b = alloc(rt.get(), 256);
      EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();
    }
  });
  other.join();
  expect_everything_freed(rt.get());
}

// A buffer and a tensor over it hold one reference each to the allocation (counted in the
// allocation itself): whichever lets go last frees the memory, once, from either thread.
TEST(Buffer, a_view_and_its_buffer_let_go_on_two_threads_free_the_memory_once) {
  RuntimePtr rt = make_runtime(test_options());
  gk_tensor_desc d = desc(GK_DTYPE_F32, {16});
  for (int i = 0; i < 200; ++i) {
    gk_buffer* b = alloc(rt.get(), 16 * sizeof(float));
    gk_tensor* t = nullptr;
    ASSERT_EQ(gk_tensor_from_buffer(b, 0, &d, &t), GK_OK) << last_error();
    std::thread releaser([t] { gk_tensor_release(t); });
    EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();
    releaser.join();
  }
  expect_everything_freed(rt.get());
}

// gk_buffer_free takes the lock of the buffer's pool, found through the handle's slot: two
// threads freeing one handle at once free it once, and the other finds it stale; a third
// reading its size sees it live or stale, never half freed.
TEST(Buffer, one_handle_freed_on_two_threads_at_once_is_freed_once) {
  RuntimePtr rt = make_runtime(test_options());
  for (int i = 0; i < 300; ++i) {
    gk_buffer* b = alloc(rt.get(), 256 * (1 + i % 8));
    std::atomic<int> go{0}, ok{0}, stale{0}, sized{0};
    auto free_it = [&] {
      ++go;
      while (go.load() < 3) {
      }
      gk_status s = gk_buffer_free(b, nullptr);
      if (s == GK_OK) ++ok;
      if (s == GK_INVALID_ARGUMENT && last_error().find("stale") != std::string::npos) ++stale;
    };
    std::thread t1(free_it), t2(free_it);
    ++go;
    while (go.load() < 3) {
    }
    uint64_t size = 0;
    gk_status s = gk_buffer_size(b, &size);
    if (s == GK_OK) {
      ++sized;
      EXPECT_EQ(size, uint64_t(256 * (1 + i % 8)));
    } else {
      EXPECT_EQ(s, GK_INVALID_ARGUMENT);
    }
    t1.join();
    t2.join();
    EXPECT_EQ(ok.load(), 1);
    EXPECT_EQ(stale.load(), 1);
  }
  expect_everything_freed(rt.get());
}

// Each pool keeps free handle slots of its own; when the pool goes (its runtime and last
// buffer gone), its slots go back to the table and another runtime's pool takes them. The old
// handles stay stale, the new ones work, and a handle past every slot made is no handle.
TEST(Buffer, slots_of_a_finished_runtime_serve_the_next_and_its_handles_stay_stale) {
  std::vector<gk_buffer*> old_handles;
  {
    RuntimePtr first = make_runtime(test_options());
    // More than one chunk of slots (1024), so refills and chunk growth are covered.
    for (int i = 0; i < 2500; ++i) old_handles.push_back(alloc(first.get(), 64));
    for (gk_buffer* b : old_handles) ASSERT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();
  }
  RuntimePtr second = make_runtime(test_options());
  std::vector<gk_buffer*> fresh;
  for (int i = 0; i < 2500; ++i) fresh.push_back(alloc(second.get(), 128));
  for (gk_buffer* b : old_handles) {
    uint64_t size = 0;
    ASSERT_EQ(gk_buffer_size(b, &size), GK_INVALID_ARGUMENT);
    ASSERT_NE(last_error().find("stale"), std::string::npos) << last_error();
  }
  for (gk_buffer* b : fresh) {
    uint64_t size = 0;
    ASSERT_EQ(gk_buffer_size(b, &size), GK_OK) << last_error();
    ASSERT_EQ(size, 128u);
  }
  uint64_t past = (uint64_t(1) << 32) | 0x7fffffffu;  // slot 2^31 - 1: never made
  uint64_t size = 0;
  EXPECT_EQ(gk_buffer_size(reinterpret_cast<gk_buffer*>(past), &size), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not a gk_buffer handle"), std::string::npos) << last_error();
  for (gk_buffer* b : fresh) ASSERT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();
  expect_everything_freed(second.get());
}

// A thread that found a handle live, and takes its pool's lock just as another thread frees
// the runtime's last buffer (so the pool itself goes), still takes a valid lock (they outlive
// pools, spin_lock.h) and finds the handle stale. ASan and TSan builds check the memory.
TEST(Buffer, a_handle_used_while_its_runtime_goes_is_stale_and_safe) {
  for (int i = 0; i < 200; ++i) {
    gk_runtime_options o = test_options();
    gk_runtime* rt = nullptr;
    ASSERT_EQ(gk_runtime_create(&o, &rt), GK_OK);
    gk_buffer* b = alloc(rt, 512);
    gk_runtime_destroy(rt);  // the buffer keeps the pool, and the runtime, alive
    std::atomic<bool> go{false};
    std::thread reader([&] {
      while (!go.load()) {
      }
      for (int k = 0; k < 50; ++k) {
        uint64_t size = 0;
        gk_status s = gk_buffer_size(b, &size);
        EXPECT_TRUE(s == GK_OK || s == GK_INVALID_ARGUMENT) << s;
      }
    });
    go = true;
    EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK) << last_error();  // the pool goes here
    reader.join();
    uint64_t size = 0;
    EXPECT_EQ(gk_buffer_size(b, &size), GK_INVALID_ARGUMENT);
  }
}

// Two runtimes (two pools, two locks) and threads allocating, using and freeing buffers of
// both at once: every handle stays its own, and both pools end empty.
TEST(Buffer, buffers_of_two_runtimes_on_several_threads_stay_apart) {
  RuntimePtr rts[2] = {make_runtime(test_options()), make_runtime(test_options())};
  std::atomic<int> wrong{0};
  auto worker = [&](int t) {
    std::vector<std::pair<gk_buffer*, uint64_t>> live;
    for (int i = 0; i < 3000; ++i) {
      if (live.size() < 40 && (live.empty() || (i * 7 + t) % 3 != 0)) {
        uint64_t n = 64 + uint64_t((i * 131 + t * 17) % 9000);
        gk_buffer* b = alloc(rts[(i + t) % 2].get(), n);
        void* p = nullptr;
        if (gk_buffer_map(b, &p) != GK_OK) ++wrong;
        std::memset(p, t + 1, 8);
        gk_buffer_unmap(b);
        live.push_back({b, n});
      } else {
        size_t k = size_t(i) % live.size();
        uint64_t size = 0;
        void* p = nullptr;
        if (gk_buffer_size(live[k].first, &size) != GK_OK || size != live[k].second) ++wrong;
        if (gk_buffer_map(live[k].first, &p) != GK_OK || static_cast<char*>(p)[7] != t + 1) {
          ++wrong;
        }
        gk_buffer_unmap(live[k].first);
        if (gk_buffer_free(live[k].first, nullptr) != GK_OK) ++wrong;
        live.erase(live.begin() + long(k));
      }
    }
    for (auto& l : live) gk_buffer_free(l.first, nullptr);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  expect_everything_freed(rts[0].get());
  expect_everything_freed(rts[1].get());
}

TEST(Buffer, view_reaching_outside_the_buffer_is_refused) {
  RuntimePtr rt = make_runtime(test_options());
  gk_buffer* b = alloc(rt.get(), 16 * sizeof(float));
  gk_tensor_desc d = desc(GK_DTYPE_F32, {4, 4});
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_from_buffer(b, 4, &d, &t), GK_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("outside the buffer"), std::string::npos) << last_error();
  // A reversed view: stride -1 from the last element reaches back to byte 0.
  gk_tensor_desc r = desc(GK_DTYPE_F32, {16});
  r.has_strides = 1;
  r.strides[0] = -1;
  EXPECT_EQ(gk_tensor_from_buffer(b, 15 * sizeof(float), &r, &t), GK_OK) << last_error();
  gk_tensor_release(t);
  EXPECT_EQ(gk_tensor_from_buffer(b, 14 * sizeof(float), &r, &t), GK_OUT_OF_RANGE);
  EXPECT_EQ(gk_buffer_free(b, nullptr), GK_OK);
}

}  // namespace
}  // namespace gk::test
