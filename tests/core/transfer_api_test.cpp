// The transfer C API (ABI 1.3) on the cpu device: gk_host_alloc's reusable pool, the transfer
// counters, and copies that keep their bytes; and the host memory pool's size classes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "memory/host_memory.h"
#include "test_runtime.h"

namespace gk::test {
namespace {

static_assert(GK_TRANSFER_STATS_SIZE == 112);

gk_transfer_stats transfer_stats(gk_runtime* rt, int32_t device = 0) {
  gk_transfer_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_EQ(gk_transfer_stats_get(rt, device, &s), GK_OK) << gk_last_error();
  return s;
}

TEST(HostAlloc, memory_is_aligned_writable_and_reused_after_free) {
  RuntimePtr rt = make_runtime(test_options());
  void* p = nullptr;
  ASSERT_EQ(gk_host_alloc(rt.get(), 10000, &p), GK_OK) << gk_last_error();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  std::memset(p, 0x5a, 10000);
  gk_transfer_stats s = transfer_stats(rt.get());
  EXPECT_EQ(s.host_bytes_in_use, HostMemory::block_size(10000));
  EXPECT_EQ(s.host_bytes_cached, 0u);
  ASSERT_EQ(gk_host_free(rt.get(), p), GK_OK);
  s = transfer_stats(rt.get());
  EXPECT_EQ(s.host_bytes_in_use, 0u);
  EXPECT_EQ(s.host_bytes_cached, HostMemory::block_size(10000));
  void* again = nullptr;
  ASSERT_EQ(gk_host_alloc(rt.get(), 9000, &again), GK_OK);  // same size class
  EXPECT_EQ(again, p) << "a freed block of the same class is handed out again";
  EXPECT_EQ(transfer_stats(rt.get()).host_bytes_cached, 0u);
  ASSERT_EQ(gk_host_free(rt.get(), again), GK_OK);
}

TEST(HostAlloc, zero_bytes_give_null_and_null_frees_nothing) {
  RuntimePtr rt = make_runtime(test_options());
  void* p = &p;
  ASSERT_EQ(gk_host_alloc(rt.get(), 0, &p), GK_OK);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(gk_host_free(rt.get(), nullptr), GK_OK);
  EXPECT_EQ(gk_host_alloc(rt.get(), 16, nullptr), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_host_alloc(nullptr, 16, &p), GK_INVALID_ARGUMENT);
}

TEST(HostAlloc, a_foreign_pointer_or_second_free_is_refused_by_address) {
  RuntimePtr rt = make_runtime(test_options());
  void* p = nullptr;
  ASSERT_EQ(gk_host_alloc(rt.get(), 64, &p), GK_OK);
  ASSERT_EQ(gk_host_free(rt.get(), p), GK_OK);
  EXPECT_EQ(gk_host_free(rt.get(), p), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("freed already"), std::string::npos)
      << gk_last_error();
  int on_stack = 0;
  EXPECT_EQ(gk_host_free(rt.get(), &on_stack), GK_INVALID_ARGUMENT);
  char address[32];
  std::snprintf(address, sizeof(address), "%p", static_cast<void*>(&on_stack));
  EXPECT_NE(std::string(gk_last_error()).find(address), std::string::npos) << gk_last_error();
}

TEST(HostAlloc, another_runtimes_memory_is_refused) {
  RuntimePtr a = make_runtime(test_options());
  RuntimePtr b = make_runtime(test_options());
  void* p = nullptr;
  ASSERT_EQ(gk_host_alloc(a.get(), 4096, &p), GK_OK);
  EXPECT_EQ(gk_host_free(b.get(), p), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_host_free(a.get(), p), GK_OK);
}

TEST(HostAlloc, trim_releases_the_cached_blocks) {
  RuntimePtr rt = make_runtime(test_options());
  void *p = nullptr, *q = nullptr;
  ASSERT_EQ(gk_host_alloc(rt.get(), 1 << 20, &p), GK_OK);
  ASSERT_EQ(gk_host_alloc(rt.get(), 3 << 20, &q), GK_OK);
  ASSERT_EQ(gk_host_free(rt.get(), p), GK_OK);
  ASSERT_EQ(gk_host_free(rt.get(), q), GK_OK);
  uint64_t released = 0;
  ASSERT_EQ(gk_host_trim(rt.get(), &released), GK_OK);
  EXPECT_EQ(released, HostMemory::block_size(1 << 20) + HostMemory::block_size(3 << 20));
  EXPECT_EQ(transfer_stats(rt.get()).host_bytes_cached, 0u);
  ASSERT_EQ(gk_host_trim(rt.get(), &released), GK_OK);
  EXPECT_EQ(released, 0u);
}

TEST(HostAlloc, threads_allocate_and_free_at_once) {
  RuntimePtr rt = make_runtime(test_options());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        void* p = nullptr;
        uint64_t bytes = 1 + uint64_t((t * 977 + i * 131) % 200000);
        if (gk_host_alloc(rt.get(), bytes, &p) != GK_OK) {
          failures.fetch_add(1);
          continue;
        }
        std::memset(p, t, bytes);  // a block handed to two threads would be caught by ASan/TSan
        if (gk_host_free(rt.get(), p) != GK_OK) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(transfer_stats(rt.get()).host_bytes_in_use, 0u);
}

TEST(HostMemory, sizes_round_to_four_classes_per_power_of_two) {
  EXPECT_EQ(HostMemory::block_size(1), 4096u);
  EXPECT_EQ(HostMemory::block_size(4096), 4096u);
  EXPECT_EQ(HostMemory::block_size(4097), 5120u);
  EXPECT_EQ(HostMemory::block_size(8192), 8192u);
  EXPECT_EQ(HostMemory::block_size(8193), 10240u);
  EXPECT_EQ(HostMemory::block_size(uint64_t(1) << 30), uint64_t(1) << 30);
  EXPECT_EQ(HostMemory::block_size((uint64_t(1) << 30) + 1), uint64_t(5) << 28);
  for (uint64_t bytes = 1; bytes < (uint64_t(1) << 40); bytes = bytes * 3 + 7) {
    uint64_t size = HostMemory::block_size(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_LE(size, std::max<uint64_t>(4096, bytes + bytes / 4 + 1)) << bytes;
  }
}

TEST(TransferStats, cpu_copies_are_counted_by_kind_and_never_staged) {
  RuntimePtr rt = make_runtime(test_options());
  gk_transfer_stats before = transfer_stats(rt.get());
  std::vector<float> in(1001), out(1001, 0.f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) * 0.5f + 1;
  TensorPtr a = make_tensor(rt.get(), GK_DTYPE_F32, {1001});
  TensorPtr b = make_tensor(rt.get(), GK_DTYPE_F32, {1001});
  ASSERT_EQ(gk_copy_from_host(a.get(), in.data(), 4004, nullptr), GK_OK);
  ASSERT_EQ(gk_copy(b.get(), a.get(), nullptr), GK_OK);
  ASSERT_EQ(gk_copy_to_host(b.get(), out.data(), 4004, nullptr), GK_OK);
  EXPECT_EQ(out, in);
  gk_transfer_stats s = transfer_stats(rt.get());
  EXPECT_EQ(s.to_device_copies - before.to_device_copies, 1u);
  EXPECT_EQ(s.to_device_bytes - before.to_device_bytes, 4004u);
  EXPECT_EQ(s.device_copies - before.device_copies, 1u);
  EXPECT_EQ(s.device_bytes - before.device_bytes, 4004u);
  EXPECT_EQ(s.to_host_copies - before.to_host_copies, 1u);
  EXPECT_EQ(s.to_host_bytes - before.to_host_bytes, 4004u);
  EXPECT_EQ(s.staged_copies, 0u) << "the cpu device has nothing to stage";
  EXPECT_EQ(s.staging_bytes, 0u);
  EXPECT_EQ(s.staging_chunk_bytes, uint64_t(8) << 20);
}

TEST(TransferStats, short_structs_and_unknown_devices_are_refused) {
  RuntimePtr rt = make_runtime(test_options());
  gk_transfer_stats s{};
  s.struct_size = GK_TRANSFER_STATS_SIZE - 8;
  EXPECT_EQ(gk_transfer_stats_get(rt.get(), 0, &s), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("struct_size"), std::string::npos);
  s.struct_size = sizeof(s);
  EXPECT_EQ(gk_transfer_stats_get(rt.get(), 7, &s), GK_OUT_OF_RANGE);
  EXPECT_EQ(gk_transfer_stats_get(rt.get(), 0, nullptr), GK_INVALID_ARGUMENT);
}

TEST(TransferStats, a_longer_struct_keeps_its_tail) {
  RuntimePtr rt = make_runtime(test_options());
  struct Longer {
    gk_transfer_stats stats;
    uint64_t future_field;
  } longer{};
  longer.stats.struct_size = sizeof(longer);
  longer.future_field = 0xabcdef;
  ASSERT_EQ(gk_transfer_stats_get(rt.get(), 0, &longer.stats), GK_OK) << gk_last_error();
  EXPECT_EQ(longer.stats.struct_size, sizeof(longer));
  EXPECT_EQ(longer.future_field, 0xabcdefu) << "the library wrote past its own struct";
}

TEST(TransferTuning, a_bad_environment_value_fails_runtime_creation_by_name) {
  setenv("GPUKIT_TRANSFER_HOST_THREADS", "zero", 1);
  gk_runtime_options o = test_options();
  o.flags = GK_RUNTIME_NO_DEFAULT_PLUGINS;  // read the environment
  gk_runtime* rt = nullptr;
  EXPECT_EQ(gk_runtime_create(&o, &rt), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("GPUKIT_TRANSFER_HOST_THREADS='zero'"),
            std::string::npos)
      << gk_last_error();
  unsetenv("GPUKIT_TRANSFER_HOST_THREADS");
  if (rt) gk_runtime_destroy(rt);
}

}  // namespace
}  // namespace gk::test
