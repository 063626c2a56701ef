// The host's graph services (plugin ABI 1.5) where CI can reach them: the memory held for a
// capture (DeviceMemory::begin_capture / end_capture) on the cpu device's pool, and the
// services' refusals on a device that has no graphs. Capturing and replaying for real is
// tests/llm/decode_graph_test.cpp's, on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "device/device.h"
#include "memory/device_memory.h"
#include "plugin/graph_services.h"
#include "plugin/plugin_registry.h"

namespace gk {
namespace {

class GraphCapture : public ::testing::Test {
 protected:
  Logger logger_{GK_LOG_OFF, nullptr, nullptr};
  DeviceSet devices_{"cpu", logger_};
  DeviceMemory memory_{devices_};
  const Device& cpu_ = devices_.at(0);
  // Any non-null handle names a stream here: the cpu pool orders nothing by it.
  cuda::CUstream capturing_ = reinterpret_cast<cuda::CUstream>(uintptr_t(0x5100));
};

TEST_F(GraphCapture, memory_freed_on_a_capturing_stream_stays_allocated_for_the_graph) {
  MemoryPool& pool = memory_.pool(cpu_);
  void* a = memory_.allocate(cpu_, 1000, nullptr);
  void* b = memory_.allocate(cpu_, 5000, nullptr);
  void* c = memory_.allocate(cpu_, 300, nullptr);
  const uint64_t in_use = pool.stats().bytes_in_use;

  memory_.begin_capture(capturing_);
  memory_.deallocate(cpu_, a, capturing_);  // held: the graph's kernels use it on each replay
  memory_.deallocate(cpu_, b, capturing_);
  memory_.deallocate(cpu_, c, nullptr);  // another stream's free goes back at once
  EXPECT_LT(pool.stats().bytes_in_use, in_use);
  const uint64_t held_bytes = pool.stats().bytes_in_use;
  EXPECT_GT(held_bytes, 0u);
  // The held blocks are not handed out again while the graph may run.
  void* d = memory_.allocate(cpu_, 1000, nullptr);
  void* e = memory_.allocate(cpu_, 5000, nullptr);
  EXPECT_NE(d, a);
  EXPECT_NE(e, b);

  std::vector<void*> held = memory_.end_capture(capturing_);
  std::sort(held.begin(), held.end());
  std::vector<void*> expected = {a, b};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(held, expected);
  // After the capture, frees on that stream are plain frees again.
  memory_.deallocate(cpu_, d, capturing_);
  memory_.deallocate(cpu_, e, capturing_);
  EXPECT_EQ(pool.stats().bytes_in_use, held_bytes);
  for (void* p : held) memory_.deallocate(cpu_, p, nullptr);
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
  EXPECT_TRUE(memory_.end_capture(capturing_).empty());  // no capture: nothing held
}

TEST_F(GraphCapture, a_stream_is_captured_once_at_a_time) {
  memory_.begin_capture(capturing_);
  try {
    memory_.begin_capture(capturing_);
    FAIL() << "a second capture of the stream was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), GK_FAILED_PRECONDITION);
    EXPECT_NE(std::string(e.what()).find("captured already"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(memory_.end_capture(capturing_).empty());
}

TEST_F(GraphCapture, the_services_refuse_a_device_without_graphs_and_bad_handles) {
  PluginServices services;
  services.logger = &logger_;
  services.devices = &devices_;
  services.memory = &memory_;
  HostContext context{services, nullptr};
  EXPECT_EQ(service_graph_begin(&context, 0, capturing_), GK_UNIMPLEMENTED);
  EXPECT_NE(std::string(gk_last_error()).find("not a CUDA device"), std::string::npos)
      << gk_last_error();
  void* graph = reinterpret_cast<void*>(1);
  EXPECT_EQ(service_graph_end(&context, 0, capturing_, &graph), GK_UNIMPLEMENTED);
  EXPECT_EQ(service_graph_begin(&context, 7, capturing_), GK_OUT_OF_RANGE);
  EXPECT_EQ(service_graph_launch(&context, nullptr, nullptr), GK_INVALID_ARGUMENT);
  service_graph_release(&context, nullptr);  // nothing to release
  // Nothing was held by the refused captures.
  EXPECT_EQ(memory_.pool(devices_.at(0)).stats().bytes_in_use, 0u);
}

}  // namespace
}  // namespace gk
