// Devices, memory, copies, streams and events on a real CUDA device.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <random>

#include "gpu_runtime.h"

namespace gk::test {
namespace {

std::string last_error() { return gk_last_error(); }

TEST(GpuDevice, cuda_devices_are_listed_with_sm_and_memory) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  gk_device_props p{};
  p.struct_size = sizeof(p);
  ASSERT_EQ(gk_device_get_props(rt.get(), dev, &p), GK_OK) << last_error();
  std::printf("device %d: %s, SM %d, %d SMs, %.1f GiB, driver %d, NVRTC %d\n", dev, p.name,
              p.sm_version, p.sm_count, double(p.total_memory) / (1 << 30), p.driver_version,
              p.nvrtc_version);
  EXPECT_GE(p.sm_version, 80);
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.total_memory, 0u);
  EXPECT_GT(p.free_memory, 0u);
  EXPECT_GT(p.driver_version, 0);
  EXPECT_EQ(p.plugins_eligible, 1);
  if (std::strstr(p.name, "H100") || std::strstr(p.name, "H200")) EXPECT_EQ(p.sm_version, 90);
  EXPECT_EQ(gk_device_default(rt.get()), dev);
}

TEST(GpuDevice, cuda_plugins_are_loaded) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  int loaded_cuda = 0;
  for (int32_t i = 0; i < gk_plugin_count(rt.get()); ++i) {
    gk_plugin_info info{};
    info.struct_size = sizeof(info);
    ASSERT_EQ(gk_plugin_get(rt.get(), i, &info), GK_OK);
    std::printf("plugin %-16s %-7s %s\n", info.name, info.loaded ? "loaded" : "skipped",
                info.reason);
    if (info.device_kind == GK_DEVICE_KIND_CUDA) {
      EXPECT_TRUE(info.loaded) << info.name << ": " << info.reason;
      loaded_cuda += info.loaded;
    }
  }
  EXPECT_GT(loaded_cuda, 0) << "no CUDA plugin loaded on a CUDA machine";
}

TEST(GpuDevice, host_device_round_trip_on_a_stream) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  gk_stream* s = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), dev, 0, &s), GK_OK) << last_error();
  const size_t n = 1 << 20;
  std::vector<float> in(n), out(n, -1.f);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto& v : in) v = u(rng);
  gk_tensor_desc d = desc(GK_DTYPE_F32, {int64_t(n)});
  gk_tensor *a = nullptr, *b = nullptr;
  ASSERT_EQ(gk_tensor_create(rt.get(), dev, &d, s, &a), GK_OK) << last_error();
  ASSERT_EQ(gk_tensor_create(rt.get(), dev, &d, s, &b), GK_OK) << last_error();
  ASSERT_EQ(gk_copy_from_host(a, in.data(), n * 4, s), GK_OK) << last_error();
  ASSERT_EQ(gk_copy(b, a, s), GK_OK) << last_error();
  ASSERT_EQ(gk_copy_to_host(b, out.data(), n * 4, s), GK_OK) << last_error();
  ASSERT_EQ(gk_stream_synchronize(s), GK_OK);
  EXPECT_EQ(std::memcmp(in.data(), out.data(), n * 4), 0);
  gk_tensor_release(a);
  gk_tensor_release(b);
  EXPECT_EQ(gk_stream_destroy(s), GK_OK);
}

TEST(GpuDevice, events_time_and_order_streams) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  gk_stream *s1 = nullptr, *s2 = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), dev, 0, &s1), GK_OK);
  ASSERT_EQ(gk_stream_create(rt.get(), dev, -1, &s2), GK_OK);
  gk_event *start = nullptr, *end = nullptr;
  ASSERT_EQ(gk_event_create(rt.get(), dev, &start), GK_OK);
  ASSERT_EQ(gk_event_create(rt.get(), dev, &end), GK_OK);
  gk_tensor_desc d = desc(GK_DTYPE_F32, {1 << 24});
  gk_tensor *a = nullptr, *b = nullptr;
  ASSERT_EQ(gk_tensor_create(rt.get(), dev, &d, s1, &a), GK_OK);
  ASSERT_EQ(gk_tensor_create(rt.get(), dev, &d, s1, &b), GK_OK);
  ASSERT_EQ(gk_event_record(start, s1), GK_OK);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(gk_copy(b, a, s1), GK_OK);
  ASSERT_EQ(gk_event_record(end, s1), GK_OK);
  ASSERT_EQ(gk_stream_wait_event(s2, end), GK_OK);
  ASSERT_EQ(gk_stream_synchronize(s2), GK_OK);
  EXPECT_EQ(gk_event_query(end), GK_OK) << "s2 waited on the event, so it is complete";
  float ms = 0;
  ASSERT_EQ(gk_event_elapsed_ms(start, end, &ms), GK_OK) << last_error();
  EXPECT_GT(ms, 0.f);
  std::printf("10 device copies of 64 MiB: %.3f ms (%.0f GB/s read+write)\n", ms,
              10 * 2 * 64.0 * (1 << 20) / (ms * 1e6));
  gk_tensor_release(a);
  gk_tensor_release(b);
  gk_event_destroy(start);
  gk_event_destroy(end);
  gk_stream_destroy(s1);
  gk_stream_destroy(s2);
}

TEST(GpuDevice, out_of_memory_is_an_error_naming_the_request) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  gk_alloc_args a{};
  a.struct_size = sizeof(a);
  a.device = dev;
  a.size = uint64_t(1) << 50;  // a petabyte
  gk_buffer* b = nullptr;
  EXPECT_EQ(gk_buffer_alloc(rt.get(), &a, &b), GK_RESOURCE_EXHAUSTED);
  EXPECT_NE(last_error().find("cannot allocate"), std::string::npos) << last_error();
}

}  // namespace
}  // namespace gk::test
