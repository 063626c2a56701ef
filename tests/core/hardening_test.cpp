// Hostile inputs through the C ABI: sizes that overflow, forged strides and DLPack tensors,
// invalid descriptors and handles, outputs that overlap inputs, names that are not UTF-8.
// Each case used to crash, hang or corrupt memory; each must now be a clear error.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpukit/gpukit_dlpack.h"
#include "test_runtime.h"

namespace gk::test {
namespace {

std::string last_error() { return gk_last_error(); }

constexpr int64_t kHuge = int64_t(1) << 61;

class HardeningTest : public ::testing::Test {
 protected:
  void SetUp() override { rt_ = make_runtime(test_options()); }
  gk_runtime* rt() { return rt_.get(); }

  gk_status create(const gk_tensor_desc& d, gk_tensor** out) {
    return gk_tensor_create(rt(), 0, &d, nullptr, out);
  }

  RuntimePtr rt_;
};

// ---- sizes that overflow ----

TEST_F(HardeningTest, tensor_create_refuses_shapes_whose_byte_size_wraps) {
  gk_tensor* t = nullptr;
  // 2^61 f64 is 2^64 bytes: wrapped to 0 before.
  EXPECT_EQ(create(desc(GK_DTYPE_F64, {kHuge}), &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("more than 2^62 bytes"), std::string::npos) << last_error();
  EXPECT_EQ(create(desc(GK_DTYPE_F32, {4, (int64_t(1) << 62) + 1}), &t), GK_INVALID_ARGUMENT);
  EXPECT_EQ(create(desc(GK_DTYPE_F32, {INT64_MAX}), &t), GK_INVALID_ARGUMENT);
  EXPECT_EQ(create(desc(GK_DTYPE_U8, {1 << 20, 1 << 20, 1 << 20, 1 << 20}), &t),
            GK_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr);
  // An empty tensor still has strides: a 0-size dimension counts as 1 for the limit, so
  // [0, 2^62] f32 (contiguous strides [2^62, 1], 2^64 bytes a step) is refused...
  EXPECT_EQ(create(desc(GK_DTYPE_F32, {0, int64_t(1) << 62}), &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("a 0-size dimension counts as 1"), std::string::npos)
      << last_error();
  gk_tensor_desc forged = desc(GK_DTYPE_F32, {0, int64_t(1) << 40, int64_t(1) << 40});
  char* json = nullptr;
  EXPECT_EQ(gk_explain(rt(), "add", 0, &forged, 1, nullptr, 0, nullptr, 0, &json),
            GK_INVALID_ARGUMENT);
  // An empty tensor is contiguous: its no bytes copy out.
  ASSERT_EQ(create(desc(GK_DTYPE_F32, {0, 0}), &t), GK_OK) << last_error();
  float none[1];
  EXPECT_EQ(gk_copy_to_host(t, none, 0, nullptr), GK_OK) << last_error();
  gk_tensor_release(t);
  // ... and a sane empty one works through an op.
  ASSERT_EQ(create(desc(GK_DTYPE_F32, {0, 1 << 20}), &t), GK_OK) << last_error();
  TensorPtr empty(t);
  gk_tensor* inputs[] = {t};
  gk_op_args args{sizeof(args), inputs, 1, nullptr, 0, nullptr, 0, nullptr};
  gk_tensor* out = nullptr;
  ASSERT_EQ(gk_op_call_alloc(rt(), "neg", &args, 1, &out, nullptr), GK_OK) << last_error();
  gk_tensor_release(out);
}

TEST_F(HardeningTest, tensor_create_refuses_strides_that_reach_past_the_limit) {
  gk_tensor_desc d = desc(GK_DTYPE_F32, {2, 2});
  d.has_strides = 1;
  d.strides[0] = kHuge;
  d.strides[1] = 1;
  gk_tensor* t = nullptr;
  EXPECT_EQ(create(d, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("strides [2305843009213693952, 1]"), std::string::npos)
      << last_error();
}

TEST_F(HardeningTest, from_buffer_refuses_views_whose_reach_wraps_or_leaves_the_buffer) {
  gk_alloc_args a{sizeof(a), 0, 16, nullptr, 0, nullptr};
  gk_buffer* buffer = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt(), &a, &buffer), GK_OK) << last_error();
  gk_tensor_desc d = desc(GK_DTYPE_F32, {2, 2});
  d.has_strides = 1;
  d.strides[0] = d.strides[1] = kHuge;  // (2^61 + 2^61) * 4 bytes wrapped to 0 before
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_from_buffer(buffer, 0, &d, &t), GK_INVALID_ARGUMENT);
  d.strides[0] = 2;
  d.strides[1] = 1;
  EXPECT_EQ(gk_tensor_from_buffer(buffer, UINT64_MAX - 3, &d, &t), GK_OUT_OF_RANGE);
  EXPECT_EQ(gk_tensor_from_buffer(buffer, uint64_t(1) << 63, &d, &t), GK_OUT_OF_RANGE);
  // A size-1 dimension reaches no byte whatever its stride, but kernels still multiply the
  // stride by the element size.
  gk_tensor_desc one = desc(GK_DTYPE_F32, {1, 2});
  one.has_strides = 1;
  one.strides[0] = int64_t(1) << 62;
  one.strides[1] = 1;
  EXPECT_EQ(gk_tensor_from_buffer(buffer, 0, &one, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("step or reach more than 2^62 bytes"), std::string::npos)
      << last_error();
  d.strides[0] = -2;  // reaches 8 bytes before the first element
  EXPECT_EQ(gk_tensor_from_buffer(buffer, 4, &d, &t), GK_OUT_OF_RANGE);
  EXPECT_EQ(gk_tensor_from_buffer(buffer, 8, &d, &t), GK_OK) << last_error();
  gk_tensor_release(t);
  // Misaligned f32 elements: the same rule as DLPack import.
  d = desc(GK_DTYPE_F32, {2});
  EXPECT_EQ(gk_tensor_from_buffer(buffer, 1, &d, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not aligned to 4-byte f32"), std::string::npos) << last_error();
  EXPECT_EQ(gk_buffer_free(buffer, nullptr), GK_OK);
}

TEST_F(HardeningTest, from_external_refuses_misaligned_data_as_dlpack_import_does) {
  alignas(8) float data[4] = {1, 2, 3, 4};
  gk_tensor_desc d = desc(GK_DTYPE_F32, {2});
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_from_external(rt(), 0, reinterpret_cast<char*>(data) + 2, &d, nullptr,
                                    nullptr, &t),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not aligned"), std::string::npos) << last_error();
  d = desc(GK_DTYPE_F32, {kHuge});
  EXPECT_EQ(gk_tensor_from_external(rt(), 0, data, &d, nullptr, nullptr, &t),
            GK_INVALID_ARGUMENT);
}

TEST_F(HardeningTest, allocations_near_two_to_the_64_fail_at_once) {
  const auto start = std::chrono::steady_clock::now();
  gk_alloc_args a{sizeof(a), 0, 0xffffffffffffefffull, nullptr, 0, nullptr};
  gk_buffer* buffer = nullptr;
  EXPECT_EQ(gk_buffer_alloc(rt(), &a, &buffer), GK_RESOURCE_EXHAUSTED);
  EXPECT_NE(last_error().find("largest allocation"), std::string::npos) << last_error();
  a.size = (uint64_t(1) << 62) + 1;
  EXPECT_EQ(gk_buffer_alloc(rt(), &a, &buffer), GK_RESOURCE_EXHAUSTED);
  void* host = nullptr;
  EXPECT_EQ(gk_host_alloc(rt(), UINT64_MAX, &host), GK_RESOURCE_EXHAUSTED);
  EXPECT_EQ(host, nullptr);
  EXPECT_EQ(gk_host_alloc(rt(), UINT64_MAX - 4096, &host), GK_RESOURCE_EXHAUSTED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(HardeningTest, op_outputs_that_outgrow_their_inputs_are_refused) {
  // [2^31, 1] @ [1, 2^31] f32: each input 8 GiB, the output 2^64 bytes.
  gk_tensor_desc in[2] = {desc(GK_DTYPE_F32, {int64_t(1) << 31, 1}),
                          desc(GK_DTYPE_F32, {1, int64_t(1) << 31})};
  char* json = nullptr;
  EXPECT_EQ(gk_explain(rt(), "matmul", 0, in, 2, nullptr, 0, nullptr, 0, &json),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("matmul: output"), std::string::npos) << last_error();
  EXPECT_EQ(json, nullptr);
}

TEST_F(HardeningTest, ops_whose_outputs_are_empty_launch_nothing) {
  // 2^40 rows of nothing: the cpu kernel walked every row before.
  TensorPtr x = make_tensor(rt(), GK_DTYPE_F32, {int64_t(1) << 40, 0});
  gk_tensor* inputs[] = {x.get()};
  gk_attr axis{"axis", GK_ATTR_INT, 0, {.i = 1}};
  gk_op_args args{sizeof(args), inputs, 1, nullptr, 0, &axis, 1, nullptr};
  gk_tensor* out = nullptr;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(gk_op_call_alloc(rt(), "softmax", &args, 1, &out, nullptr), GK_OK) << last_error();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  gk_tensor_release(out);
  // The op's rules still apply when its outputs are empty.
  TensorPtr small = make_tensor(rt(), GK_DTYPE_F32, {0, 4});
  inputs[0] = small.get();
  gk_attr bad{"axis", GK_ATTR_INT, 0, {.i = 5}};
  args.attrs = &bad;
  EXPECT_EQ(gk_op_call_alloc(rt(), "softmax", &args, 1, &out, nullptr), GK_INVALID_ARGUMENT);
}

// ---- gk_explain's descriptors ----

TEST_F(HardeningTest, explain_refuses_invalid_descriptors) {
  char* json = nullptr;
  gk_tensor_desc d = desc(GK_DTYPE_F32, {4});
  d.ndim = 40;  // wrote past a stack array before
  EXPECT_EQ(gk_explain(rt(), "neg", 0, &d, 1, nullptr, 0, nullptr, 0, &json),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("ndim 40"), std::string::npos) << last_error();
  d.ndim = -3;
  EXPECT_EQ(gk_explain(rt(), "neg", 0, &d, 1, nullptr, 0, nullptr, 0, &json),
            GK_INVALID_ARGUMENT);
  d = desc(GK_DTYPE_F32, {4, -2});
  EXPECT_EQ(gk_explain(rt(), "neg", 0, &d, 1, nullptr, 0, nullptr, 0, &json),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("negative dimension"), std::string::npos) << last_error();
  gk_tensor_desc out = desc(GK_DTYPE_F32, {4});
  d = desc(GK_DTYPE_F32, {4});
  out.ndim = 17;
  EXPECT_EQ(gk_explain(rt(), "neg", 0, &d, 1, &out, 1, nullptr, 0, &json), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("output 0"), std::string::npos) << last_error();
  d.dtype = 99;
  EXPECT_EQ(gk_explain(rt(), "neg", 0, &d, 1, nullptr, 0, nullptr, 0, &json),
            GK_INVALID_ARGUMENT);
  EXPECT_EQ(json, nullptr);
}

// ---- handles and output structs ----

TEST_F(HardeningTest, task_calls_refuse_a_null_task) {
  EXPECT_EQ(gk_task_run(nullptr), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_task_complete(nullptr), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_task_cancel(nullptr), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_task_fail(nullptr, "x"), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("task"), std::string::npos) << last_error();
}

TEST_F(HardeningTest, device_props_write_no_byte_past_the_library_struct) {
  constexpr size_t kExtra = 64;
  std::vector<unsigned char> storage(sizeof(gk_device_props) + kExtra, 0xAB);
  auto* props = reinterpret_cast<gk_device_props*>(storage.data());
  props->struct_size = storage.size();  // a caller whose header is newer, or who lies
  ASSERT_EQ(gk_device_get_props(rt(), 0, props), GK_OK) << last_error();
  EXPECT_EQ(props->struct_size, storage.size());
  EXPECT_EQ(props->kind, GK_DEVICE_KIND_CPU);
  for (size_t i = sizeof(gk_device_props); i < storage.size(); ++i) {
    ASSERT_EQ(storage[i], 0xAB) << "byte " << i << " written";
  }
}

TEST_F(HardeningTest, a_stream_of_another_runtime_is_named_as_such) {
  RuntimePtr other = make_runtime(test_options());
  gk_stream* stream = nullptr;
  ASSERT_EQ(gk_stream_create(other.get(), 0, 0, &stream), GK_OK) << last_error();
  gk_tensor_desc d = desc(GK_DTYPE_F32, {4});
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_create(rt(), 0, &d, stream, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("a stream serves only the runtime that created it"),
            std::string::npos)
      << last_error();
  gk_stream_destroy(stream);
}

// ---- DLPack ----

struct ForeignTensor {
  std::vector<int64_t> shape;
  alignas(16) float data[64] = {};
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
  int deletes = 0;

  explicit ForeignTensor(std::vector<int64_t> s) : shape(std::move(s)) {
    DLTensor t{};
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = int32_t(shape.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape.data();
    versioned.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    versioned.dl_tensor = t;
    versioned.manager_ctx = this;
    versioned.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<ForeignTensor*>(self->manager_ctx)->deletes;
    };
    legacy.dl_tensor = t;
    legacy.manager_ctx = this;
    legacy.deleter = [](DLManagedTensor* self) {
      ++static_cast<ForeignTensor*>(self->manager_ctx)->deletes;
    };
  }
};

TEST_F(HardeningTest, dlpack_import_refuses_shapes_whose_element_count_wraps) {
  ForeignTensor f({4, (int64_t(1) << 62) + 1});  // 4 * (2^62 + 1) wrapped to 4 before
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt(), &f.versioned, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("more than 2^62 bytes"), std::string::npos) << last_error();
  EXPECT_EQ(gk_tensor_from_dlpack(rt(), &f.legacy, &t), GK_INVALID_ARGUMENT);
  EXPECT_EQ(f.deletes, 0);  // a refused import leaves the tensor to the caller
}

TEST_F(HardeningTest, dlpack_import_refuses_a_byte_offset_that_wraps_the_address) {
  ForeignTensor f({2});
  f.versioned.dl_tensor.byte_offset = UINT64_MAX - 3;  // data + offset was data - 4 before
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt(), &f.versioned, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("wraps past the address space"), std::string::npos)
      << last_error();
  f.legacy.dl_tensor.byte_offset = UINT64_MAX;
  f.legacy.dl_tensor.shape[0] = 0;  // empty, but the address is still computed
  EXPECT_EQ(gk_tensor_from_dlpack(rt(), &f.legacy, &t), GK_INVALID_ARGUMENT);
}

TEST_F(HardeningTest, dlpack_import_checks_an_out_of_range_device_type_as_an_integer) {
  ForeignTensor f({4});
  const int32_t bogus = 1000;
  std::memcpy(&f.versioned.dl_tensor.device.device_type, &bogus, sizeof(bogus));
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt(), &f.versioned, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unsupported DLPack device type unknown (1000)"), std::string::npos)
      << last_error();
}

TEST_F(HardeningTest, dlpack_version_refusal_does_not_claim_a_null_deleter_ran) {
  ForeignTensor f({4});
  f.versioned.version.major = DLPACK_MAJOR_VERSION + 1;
  f.versioned.deleter = nullptr;
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt(), &f.versioned, &t), GK_FAILED_PRECONDITION);
  EXPECT_NE(last_error().find("it has no deleter to call"), std::string::npos) << last_error();
}

// ---- outputs that overlap inputs ----

TEST_F(HardeningTest, matmul_into_its_own_input_is_refused) {
  TensorPtr m = tensor_from(rt(), {1, 2, 3, 4}, {2, 2});
  gk_tensor* inputs[] = {m.get(), m.get()};
  gk_tensor* outputs[] = {m.get()};
  gk_op_args args{sizeof(args), inputs, 2, outputs, 1, nullptr, 0, nullptr};
  EXPECT_EQ(gk_op_call(rt(), "matmul", &args), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("matmul: output 'out' is input 'a'"), std::string::npos)
      << last_error();
  EXPECT_EQ(read_f32(m.get(), 4), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(HardeningTest, elementwise_ops_write_in_place_but_refuse_partial_overlap) {
  gk_alloc_args a{sizeof(a), 0, 6 * sizeof(float), nullptr, 0, nullptr};
  gk_buffer* buffer = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt(), &a, &buffer), GK_OK) << last_error();
  gk_tensor_desc forward = desc(GK_DTYPE_F32, {6});
  gk_tensor* x = nullptr;
  ASSERT_EQ(gk_tensor_from_buffer(buffer, 0, &forward, &x), GK_OK) << last_error();
  TensorPtr x_owner(x);
  const std::vector<float> values = {-5, -4, -3, 3, 4, 5};
  ASSERT_EQ(gk_copy_from_host(x, values.data(), 24, nullptr), GK_OK) << last_error();

  // x[::-1] as a view: the same memory, reversed.
  gk_tensor_desc reversed = forward;
  reversed.has_strides = 1;
  reversed.strides[0] = -1;
  gk_tensor* r = nullptr;
  ASSERT_EQ(gk_tensor_from_buffer(buffer, 20, &reversed, &r), GK_OK) << last_error();
  TensorPtr r_owner(r);
  gk_tensor* in[] = {r};
  gk_tensor* out[] = {x};
  gk_op_args args{sizeof(args), in, 1, out, 1, nullptr, 0, nullptr};
  EXPECT_EQ(gk_op_call(rt(), "neg", &args), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("neg: output 'out' overlaps input 'x'"), std::string::npos)
      << last_error();
  EXPECT_EQ(read_f32(x, 6), values);

  // neg(x, out=x): the same memory and layout, allowed.
  in[0] = x;
  ASSERT_EQ(gk_op_call(rt(), "neg", &args), GK_OK) << last_error();
  EXPECT_EQ(read_f32(x, 6), (std::vector<float>{5, 4, 3, -3, -4, -5}));
  EXPECT_EQ(gk_buffer_free(buffer, nullptr), GK_OK);
}

// ---- names that are not UTF-8 ----

TEST_F(HardeningTest, json_views_replace_bytes_that_are_not_utf8) {
  gk_memory_owner* owner = nullptr;
  ASSERT_EQ(gk_memory_owner_create(rt(), 0, "owner-\xff\xfe", 0, &owner), GK_OK) << last_error();
  gk_alloc_args a{sizeof(a), 0, 1024, nullptr, 0, owner};
  gk_buffer* buffer = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt(), &a, &buffer), GK_OK) << last_error();
  char* json = nullptr;
  ASSERT_EQ(gk_memory_snapshot_json(rt(), 0, &json), GK_OK) << last_error();
  EXPECT_NE(std::string(json).find("owner-\xef\xbf\xbd\xef\xbf\xbd"), std::string::npos) << json;
  gk_string_free(json);
  ASSERT_EQ(gk_runtime_info_json(rt(), &json), GK_OK) << last_error();
  gk_string_free(json);
  gk_buffer_free(buffer, nullptr);
  gk_memory_owner_destroy(owner);

  gk_task_spec spec{};
  spec.struct_size = sizeof(spec);
  spec.name = "task-\xc3";  // a truncated two-byte sequence
  spec.qos = GK_QOS_BEST_EFFORT;
  gk_task* task = nullptr;
  ASSERT_EQ(gk_task_create(rt(), &spec, &task), GK_OK) << last_error();
  ASSERT_EQ(gk_task_events_json(task, &json), GK_OK) << last_error();
  gk_string_free(json);
  gk_task_destroy(task);
}

// ---- plugin folders with things that are not manifests ----

class PluginFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gk_hardening_plugins_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A runtime over the build tree's plugins and dir_; fails the test if creation fails.
  RuntimePtr runtime_with_folder(LogCapture& log) {
    gk_runtime_options o = test_options(&log);
    folders_ = std::string(GPUKIT_TEST_MANIFESTS) + ":" + dir_.string();
    o.plugin_path = folders_.c_str();
    return make_runtime(o);
  }

  // The skip reason of plugin `name`, "" when it is not listed.
  static std::string reason_of(gk_runtime* rt, const std::string& name) {
    for (int32_t i = 0; i < gk_plugin_count(rt); ++i) {
      gk_plugin_info info{};
      info.struct_size = sizeof(info);
      if (gk_plugin_get(rt, i, &info) == GK_OK && name == info.name) return info.reason;
    }
    return "";
  }

  std::filesystem::path dir_;
  std::string folders_;
};

TEST_F(PluginFolderTest, a_fifo_or_folder_named_yaml_is_skipped_without_hanging) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo.yaml").c_str(), 0600), 0);
  std::filesystem::create_directories(dir_ / "folder.yaml");
  LogCapture log;
  const auto start = std::chrono::steady_clock::now();
  RuntimePtr rt = runtime_with_folder(log);
  ASSERT_TRUE(rt);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(reason_of(rt.get(), "fifo").find("is a FIFO, not a manifest file"), std::string::npos)
      << reason_of(rt.get(), "fifo");
  EXPECT_NE(reason_of(rt.get(), "folder").find("is a folder"), std::string::npos)
      << reason_of(rt.get(), "folder");
  // The bundled cpu plugin still serves.
  EXPECT_EQ(reason_of(rt.get(), "cpu"), "");
}

TEST_F(PluginFolderTest, a_fifo_named_as_library_is_skipped_without_hanging) {
  ASSERT_EQ(::mkfifo((dir_ / "libfifo.so").c_str(), 0600), 0);
  std::ofstream(dir_ / "fifo_lib.yaml") << "schema: 1\nname: fifo_lib\nversion: 1.0.0\n"
                                           "plugin_abi: \"1.0\"\nlibrary: libfifo.so\n"
                                           "family: test\ndevice: cpu\npriority: 1\n"
                                           "ops:\n  - {name: neg, dtypes: [f32]}\n";
  LogCapture log;
  RuntimePtr rt = runtime_with_folder(log);
  ASSERT_TRUE(rt);
  EXPECT_NE(reason_of(rt.get(), "fifo_lib").find("is a FIFO, not a shared library"),
            std::string::npos)
      << reason_of(rt.get(), "fifo_lib");
}

TEST_F(PluginFolderTest, a_manifest_with_bytes_that_are_not_utf8_keeps_json_views_working) {
  std::ofstream(dir_ / "latin.yaml") << "schema: 1\nname: latin\nversion: 1.0.\xe9\n"
                                        "plugin_abi: \"1.0\"\nlibrary: missing.so\n"
                                        "family: caf\xe9\ndevice: cpu\npriority: 1\n"
                                        "ops:\n  - {name: neg, dtypes: [f32]}\n";
  LogCapture log;
  RuntimePtr rt = runtime_with_folder(log);
  ASSERT_TRUE(rt);
  char* json = nullptr;
  ASSERT_EQ(gk_runtime_info_json(rt.get(), &json), GK_OK) << last_error();
  EXPECT_NE(std::string(json).find("latin"), std::string::npos);
  gk_string_free(json);
}

TEST_F(PluginFolderTest, a_folder_that_is_a_file_or_a_symlink_loop_is_named_as_such) {
  std::ofstream(dir_ / "plain_file") << "x";
  std::filesystem::create_symlink(dir_ / "loop_a", dir_ / "loop_b");
  std::filesystem::create_symlink(dir_ / "loop_b", dir_ / "loop_a");
  LogCapture log;
  gk_runtime_options o = test_options(&log);
  std::string folders = (dir_ / "plain_file").string() + ":" + (dir_ / "loop_a").string() + ":" +
                        (dir_ / "absent").string();
  o.plugin_path = folders.c_str();
  RuntimePtr rt = make_runtime(o);
  ASSERT_TRUE(rt);
  EXPECT_TRUE(log.contains("plain_file' is a file, not a folder")) << "log lacks the file";
  EXPECT_TRUE(log.contains("loop_a' is a symbolic link loop, not a folder")) << "log lacks loop";
  EXPECT_TRUE(log.contains("absent' does not exist; skipped")) << "log lacks absent";
}

// ---- released tensors under AddressSanitizer ----

#if defined(__SANITIZE_ADDRESS__)
#define GK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GK_TEST_ASAN 1
#endif
#endif

#ifdef GK_TEST_ASAN
TEST_F(HardeningTest, a_double_release_is_reported_by_asan) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        gk_tensor* t = make_tensor(rt(), GK_DTYPE_F32, {4}).release();
        gk_tensor_release(t);
        gk_tensor_release(t);
      },
      "heap-use-after-free");
  EXPECT_DEATH(
      {
        gk_tensor* t = make_tensor(rt(), GK_DTYPE_F32, {4}).release();
        gk_tensor_release(t);
        gk_tensor_desc d{};
        d.struct_size = sizeof(d);
        gk_tensor_get_desc(t, &d);
      },
      "heap-use-after-free");
}
#endif

}  // namespace
}  // namespace gk::test
