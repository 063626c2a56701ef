#include <gtest/gtest.h>

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

// The storage of buffers is recycled per thread (device_memory.cpp): buffers allocated on
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
