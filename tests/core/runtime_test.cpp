#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "test_runtime.h"

namespace gk::test {
namespace {

std::string last_error() { return gk_last_error(); }

TEST(Runtime, version_queries_match_the_header) {
  EXPECT_EQ(gk_abi_version(), GK_ABI_VERSION);
  EXPECT_STREQ(gk_library_version(), "0.1.0");
  EXPECT_STREQ(gk_status_name(GK_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(gk_status_name(99), "UNKNOWN_STATUS");
}

TEST(Runtime, refuses_a_caller_of_another_abi_major_version) {
  gk_runtime_options o = test_options();
  o.abi_version = GK_MAKE_VERSION(GK_ABI_VERSION_MAJOR + 1, 0);
  gk_runtime* rt = nullptr;
  EXPECT_EQ(gk_runtime_create(&o, &rt), GK_FAILED_PRECONDITION);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(last_error().find("ABI 2.0"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("implements ABI 1."), std::string::npos) << last_error();
}

TEST(Runtime, accepts_a_caller_of_a_newer_minor_version) {
  gk_runtime_options o = test_options();
  o.abi_version = GK_MAKE_VERSION(GK_ABI_VERSION_MAJOR, GK_ABI_VERSION_MINOR + 5);
  RuntimePtr rt = make_runtime(o);
  EXPECT_NE(rt, nullptr);
}

TEST(Runtime, refuses_an_options_struct_smaller_than_abi_1_0) {
  gk_runtime_options o = test_options();
  o.struct_size = 8;
  gk_runtime* rt = nullptr;
  EXPECT_EQ(gk_runtime_create(&o, &rt), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("struct_size is 8"), std::string::npos) << last_error();
}

TEST(Runtime, null_out_argument_is_an_error_not_a_crash) {
  gk_runtime_options o = test_options();
  EXPECT_EQ(gk_runtime_create(&o, nullptr), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'out' is NULL"), std::string::npos) << last_error();
}

TEST(Runtime, cpu_selection_gives_the_cpu_device_alone_with_one_log_line) {
  LogCapture log;
  RuntimePtr rt = make_runtime(test_options(&log));
  int32_t count = 0;
  ASSERT_EQ(gk_device_count(rt.get(), &count), GK_OK);
  EXPECT_EQ(count, 1);
  gk_device_props p{};
  p.struct_size = sizeof(p);
  ASSERT_EQ(gk_device_get_props(rt.get(), 0, &p), GK_OK) << last_error();
  EXPECT_EQ(p.kind, GK_DEVICE_KIND_CPU);
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.total_memory, 0u);
  EXPECT_EQ(gk_device_default(rt.get()), 0);
  EXPECT_TRUE(log.contains("using the cpu device only")) << "no device log line";
}

TEST(Runtime, default_options_log_warnings_only_and_info_json_says_why_no_cuda) {
  LogCapture log;
  gk_runtime_options o = GK_RUNTIME_OPTIONS_INIT;  // the default level
  o.flags = GK_RUNTIME_IGNORE_ENVIRONMENT | GK_RUNTIME_NO_DEFAULT_PLUGINS;
  o.devices = "cpu";
  o.plugin_path = GPUKIT_TEST_MANIFESTS;
  o.log_fn = &LogCapture::sink;
  o.log_user_data = &log;
  RuntimePtr rt = make_runtime(o);
  EXPECT_TRUE(log.lines.empty()) << "logged at the default level: " << log.lines.front();
  char* json = nullptr;
  ASSERT_EQ(gk_runtime_info_json(rt.get(), &json), GK_OK) << last_error();
  EXPECT_NE(std::string(json).find("\"cuda_absent_reason\""), std::string::npos) << json;
  gk_string_free(json);
  o.log_level = GK_LOG_INFO;
  RuntimePtr verbose = make_runtime(o);
  EXPECT_TRUE(log.contains("using the cpu device only"));
}

TEST(Runtime, unknown_device_id_names_the_id_and_the_count) {
  RuntimePtr rt = make_runtime(test_options());
  gk_device_props p{};
  p.struct_size = sizeof(p);
  EXPECT_EQ(gk_device_get_props(rt.get(), 7, &p), GK_OUT_OF_RANGE);
  EXPECT_NE(last_error().find("device id 7"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("1 devices"), std::string::npos) << last_error();
}

TEST(Runtime, bad_device_selection_is_refused_with_the_value) {
  gk_runtime_options o = test_options();
  o.devices = "tpu";
  gk_runtime* rt = nullptr;
  EXPECT_EQ(gk_runtime_create(&o, &rt), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'tpu'"), std::string::npos) << last_error();
}

TEST(Runtime, environment_selects_devices_unless_ignored) {
  setenv("GPUKIT_DEVICE", "tpu", 1);
  gk_runtime_options o = test_options();
  o.devices = nullptr;
  o.flags = GK_RUNTIME_NO_DEFAULT_PLUGINS;  // environment honoured
  gk_runtime* rt = nullptr;
  EXPECT_EQ(gk_runtime_create(&o, &rt), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("GPUKIT_DEVICE"), std::string::npos) << last_error();
  o.flags |= GK_RUNTIME_IGNORE_ENVIRONMENT;
  EXPECT_EQ(gk_runtime_create(&o, &rt), GK_OK) << last_error();
  gk_runtime_destroy(rt);
  unsetenv("GPUKIT_DEVICE");
}

TEST(Runtime, bad_log_level_variable_is_refused) {
  setenv("GPUKIT_LOG_LEVEL", "loud", 1);
  gk_runtime_options o = test_options();
  o.flags = GK_RUNTIME_NO_DEFAULT_PLUGINS;
  gk_runtime* rt = nullptr;
  EXPECT_EQ(gk_runtime_create(&o, &rt), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("'loud'"), std::string::npos) << last_error();
  unsetenv("GPUKIT_LOG_LEVEL");
}

TEST(Runtime, info_json_lists_versions_devices_and_plugins) {
  RuntimePtr rt = make_runtime(test_options());
  char* text = nullptr;
  ASSERT_EQ(gk_runtime_info_json(rt.get(), &text), GK_OK) << last_error();
  auto j = nlohmann::json::parse(text);
  gk_string_free(text);
  EXPECT_EQ(j["abi_version"], std::to_string(GK_ABI_VERSION_MAJOR) + "." +
                                   std::to_string(GK_ABI_VERSION_MINOR));
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["kind"], "cpu");
  bool cpu_loaded = false;
  for (const auto& p : j["plugins"]) cpu_loaded |= p["name"] == "cpu" && p["loaded"] == true;
  EXPECT_TRUE(cpu_loaded) << j.dump(2);
}

TEST(Runtime, objects_outlive_the_runtime_handle) {
  gk_runtime_options o = test_options();
  gk_runtime* rt = nullptr;
  ASSERT_EQ(gk_runtime_create(&o, &rt), GK_OK);
  TensorPtr t = tensor_from(rt, {1, 2, 3}, {3});
  gk_runtime_destroy(rt);  // the tensor keeps the runtime alive
  std::vector<float> back = read_f32(t.get(), 3);
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3}));
}

TEST(Runtime, cpu_streams_and_events_are_always_complete) {
  RuntimePtr rt = make_runtime(test_options());
  gk_stream* s = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), 0, 0, &s), GK_OK) << last_error();
  gk_event* e = nullptr;
  ASSERT_EQ(gk_event_create(rt.get(), 0, &e), GK_OK);
  EXPECT_EQ(gk_event_record(e, s), GK_OK);
  EXPECT_EQ(gk_event_query(e), GK_OK);
  EXPECT_EQ(gk_stream_wait_event(s, e), GK_OK);
  EXPECT_EQ(gk_event_synchronize(e), GK_OK);
  float ms = 0;
  EXPECT_EQ(gk_event_elapsed_ms(e, e, &ms), GK_FAILED_PRECONDITION);
  void* native = reinterpret_cast<void*>(1);
  EXPECT_EQ(gk_stream_native(s, &native), GK_OK);
  EXPECT_EQ(native, nullptr);
  gk_event_destroy(e);
  EXPECT_EQ(gk_stream_destroy(s), GK_OK);
}

}  // namespace
}  // namespace gk::test
