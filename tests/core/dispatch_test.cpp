#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <string>
#include <thread>

#include "test_runtime.h"

namespace gk::test {
namespace {

std::string last_error() { return gk_last_error(); }


nlohmann::json explain(gk_runtime* rt, const char* op, std::vector<gk_tensor_desc> inputs) {
  char* text = nullptr;
  EXPECT_EQ(gk_explain(rt, op, 0, inputs.data(), int32_t(inputs.size()), nullptr, 0, nullptr, 0,
                       &text),
            GK_OK)
      << gk_last_error();
  auto j = nlohmann::json::parse(text ? text : "{}");
  gk_string_free(text);
  return j;
}

TEST(Dispatch, add_with_broadcasting_runs_on_the_cpu_plugin) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = tensor_from(rt.get(), {1, 2, 3, 4, 5, 6}, {2, 3});
  TensorPtr b = tensor_from(rt.get(), {10, 20, 30}, {3});
  TensorPtr c = make_tensor(rt.get(), GK_DTYPE_F32, {2, 3});
  ASSERT_EQ(op_call(rt.get(), "add", {a.get(), b.get()}, {c.get()}), GK_OK) << last_error();
  EXPECT_EQ(read_f32(c.get(), 6), (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(Dispatch, bad_shape_names_the_op_the_argument_and_both_shapes) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = make_tensor(rt.get(), GK_DTYPE_F32, {2, 3});
  TensorPtr b = make_tensor(rt.get(), GK_DTYPE_F32, {4});
  TensorPtr c = make_tensor(rt.get(), GK_DTYPE_F32, {2, 3});
  EXPECT_EQ(op_call(rt.get(), "add", {a.get(), b.get()}, {c.get()}), GK_INVALID_ARGUMENT);
  std::string e = last_error();
  EXPECT_NE(e.find("add: input 'b'"), std::string::npos) << e;
  EXPECT_NE(e.find("[4]"), std::string::npos) << e;
  EXPECT_NE(e.find("[2, 3]"), std::string::npos) << e;
}

TEST(Dispatch, wrong_output_shape_is_refused_with_the_expected_shape) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = make_tensor(rt.get(), GK_DTYPE_F32, {2, 3});
  TensorPtr b = make_tensor(rt.get(), GK_DTYPE_F32, {3, 5});
  TensorPtr c = make_tensor(rt.get(), GK_DTYPE_F32, {2, 4});
  EXPECT_EQ(op_call(rt.get(), "matmul", {a.get(), b.get()}, {c.get()}), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("output 'out' has shape [2, 4]; expected [2, 5]"), std::string::npos)
      << last_error();
}

TEST(Dispatch, unknown_op_is_not_found_with_a_suggestion) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = make_tensor(rt.get(), GK_DTYPE_F32, {2});
  EXPECT_EQ(op_call(rt.get(), "matmull", {a.get()}, {a.get()}), GK_NOT_FOUND);
  EXPECT_NE(last_error().find("unknown op 'matmull'"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("did you mean 'matmul'"), std::string::npos) << last_error();
}

TEST(Dispatch, unknown_attribute_is_refused) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr x = make_tensor(rt.get(), GK_DTYPE_F32, {2, 3});
  TensorPtr y = make_tensor(rt.get(), GK_DTYPE_F32, {2, 3});
  gk_attr attr{};
  attr.name = "dim";
  attr.type = GK_ATTR_INT;
  attr.value.i = 1;
  EXPECT_EQ(op_call(rt.get(), "softmax", {x.get()}, {y.get()}, {attr}), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown attribute 'dim'"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("'axis'"), std::string::npos) << last_error();
}

TEST(Dispatch, read_only_output_is_refused) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = tensor_from(rt.get(), {1, 2}, {2});
  float data[2];
  gk_tensor_desc d = desc(GK_DTYPE_F32, {2});
  d.flags = GK_TENSOR_READ_ONLY;
  gk_tensor* out = nullptr;
  ASSERT_EQ(gk_tensor_from_external(rt.get(), 0, data, &d, nullptr, nullptr, &out), GK_OK);
  EXPECT_EQ(op_call(rt.get(), "neg", {a.get()}, {out}), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("read-only"), std::string::npos) << last_error();
  gk_tensor_release(out);
}

TEST(Dispatch, output_desc_infers_the_matmul_result) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = make_tensor(rt.get(), GK_DTYPE_BF16, {5, 1, 7, 3});
  TensorPtr b = make_tensor(rt.get(), GK_DTYPE_BF16, {4, 3, 9});
  gk_tensor* inputs[] = {a.get(), b.get()};
  gk_op_args args{};
  args.struct_size = sizeof(args);
  args.inputs = inputs;
  args.num_inputs = 2;
  gk_tensor_desc out{};
  out.struct_size = sizeof(out);
  ASSERT_EQ(gk_op_output_desc(rt.get(), "matmul", &args, 0, &out), GK_OK) << last_error();
  EXPECT_EQ(out.ndim, 4);
  EXPECT_EQ(out.shape[0], 5);
  EXPECT_EQ(out.shape[1], 4);
  EXPECT_EQ(out.shape[2], 7);
  EXPECT_EQ(out.shape[3], 9);
  EXPECT_EQ(out.dtype, GK_DTYPE_BF16);
  EXPECT_EQ(gk_op_output_desc(rt.get(), "matmul", &args, 1, &out), GK_OUT_OF_RANGE);
}

TEST(Dispatch, op_listing_names_every_op_of_the_spec) {
  RuntimePtr rt = make_runtime(test_options());
  std::vector<std::string> names;
  for (int32_t i = 0; i < gk_op_count(rt.get()); ++i) names.push_back(gk_op_name(rt.get(), i));
  for (const char* op : {"add", "matmul", "sum", "softmax", "layernorm", "rmsnorm", "cast"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), op), names.end()) << op;
  }
  EXPECT_EQ(gk_op_name(rt.get(), -1), nullptr);
}

TEST(Dispatch, explain_shows_the_choice) {
  RuntimePtr rt = make_runtime(test_options());
  auto j = explain(rt.get(), "matmul", {desc(GK_DTYPE_F32, {64, 64}), desc(GK_DTYPE_F32, {64, 64})});
  EXPECT_EQ(j["chosen"], "cpu") << j.dump(2);
  // CUDA plugins present on a GPU machine are listed too, each with why it was passed over.
  int cpu_entries = 0;
  for (const auto& c : j["candidates"]) {
    if (c["plugin"] == "cpu") {
      ++cpu_entries;
      EXPECT_EQ(c["accepted"], true);
      EXPECT_EQ(c["reason"], "chosen");
    } else {
      EXPECT_EQ(c["accepted"], false) << c.dump();
      EXPECT_NE(c["reason"].get<std::string>().find("serves cuda devices"), std::string::npos);
    }
  }
  EXPECT_EQ(cpu_entries, 1) << j.dump(2);
}

TEST(Dispatch, disabled_plugin_leaves_the_op_unserved_with_every_reason) {
  gk_runtime_options o = test_options();
  o.plugins_disable = "cp*";
  RuntimePtr rt = make_runtime(o);
  TensorPtr a = tensor_from(rt.get(), {1, 2}, {2});
  TensorPtr out = make_tensor(rt.get(), GK_DTYPE_F32, {2});
  EXPECT_EQ(op_call(rt.get(), "neg", {a.get()}, {out.get()}), GK_UNIMPLEMENTED);
  std::string e = last_error();
  EXPECT_NE(e.find("no plugin accepts"), std::string::npos) << e;
  EXPECT_NE(e.find("[cpu] not loaded: disabled"), std::string::npos) << e;
  auto j = explain(rt.get(), "neg", {desc(GK_DTYPE_F32, {2})});
  EXPECT_TRUE(j["chosen"].is_null()) << j.dump(2);
}

TEST(Dispatch, manifest_dtype_filter_explains_refusal) {
  RuntimePtr rt = make_runtime(test_options());
  // The op rules refuse bool for add before any plugin is asked.
  TensorPtr a = make_tensor(rt.get(), GK_DTYPE_BOOL, {2});
  TensorPtr c = make_tensor(rt.get(), GK_DTYPE_BOOL, {2});
  EXPECT_EQ(op_call(rt.get(), "add", {a.get(), a.get()}, {c.get()}), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("has dtype bool; expected one of"), std::string::npos) << last_error();
}

TEST(Dispatch, concurrent_calls_from_several_threads_are_correct) {
  RuntimePtr rt = make_runtime(test_options());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        float v = float(t * 1000 + i);
        TensorPtr a = tensor_from(rt.get(), {v, v}, {2});
        TensorPtr c = make_tensor(rt.get(), GK_DTYPE_F32, {2});
        if (op_call(rt.get(), "add", {a.get(), a.get()}, {c.get()}) != GK_OK) ++failures;
        if (read_f32(c.get(), 2) != std::vector<float>{2 * v, 2 * v}) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}


// gk_op_call_alloc (ABI 1.2): outputs created and the op run in one call.
gk_status call_alloc(gk_runtime* rt, const char* op, std::vector<gk_tensor*> inputs,
                     int32_t num_outputs, gk_tensor** out, gk_tensor_desc* out_descs = nullptr) {
  gk_op_args a{};
  a.struct_size = sizeof(a);
  a.inputs = inputs.data();
  a.num_inputs = int32_t(inputs.size());
  return gk_op_call_alloc(rt, op, &a, num_outputs, out, out_descs);
}

uint64_t bytes_in_use(gk_runtime* rt) {
  gk_memory_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_EQ(gk_memory_stats_get(rt, 0, &s), GK_OK) << gk_last_error();
  return s.bytes_in_use;
}

TEST(Dispatch, call_alloc_creates_the_broadcast_output_and_runs_add) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = tensor_from(rt.get(), {1, 2, 3, 4, 5, 6}, {2, 3});
  TensorPtr b = tensor_from(rt.get(), {10, 20, 30}, {3});
  gk_tensor* out = nullptr;
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  ASSERT_EQ(call_alloc(rt.get(), "add", {a.get(), b.get()}, 1, &out, &d), GK_OK) << last_error();
  TensorPtr c(out);
  EXPECT_EQ(read_f32(c.get(), 6), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(gk_tensor_device(c.get()), 0);
  EXPECT_EQ(d.struct_size, sizeof(d));
  EXPECT_EQ(d.dtype, GK_DTYPE_F32);
  ASSERT_EQ(d.ndim, 2);
  EXPECT_EQ(d.shape[0], 2);
  EXPECT_EQ(d.shape[1], 3);
  EXPECT_EQ(d.has_strides, 1);
  EXPECT_EQ(d.strides[0], 3);
  EXPECT_EQ(d.strides[1], 1);
  EXPECT_EQ(d.flags, 0u);
  gk_tensor_desc got{};
  got.struct_size = sizeof(got);
  ASSERT_EQ(gk_tensor_get_desc(c.get(), &got), GK_OK);
  EXPECT_EQ(std::memcmp(&got, &d, sizeof(d)), 0);
}

TEST(Dispatch, call_alloc_matches_output_desc_for_a_reduction_without_out_descs) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = tensor_from(rt.get(), {1, 2, 3, 4, 5, 6}, {2, 3});
  int64_t axes[1] = {1};
  gk_attr attr{};
  attr.name = "axes";
  attr.type = GK_ATTR_INTS;
  attr.count = 1;
  attr.value.ints = axes;
  gk_tensor* inputs[1] = {a.get()};
  gk_op_args args{};
  args.struct_size = sizeof(args);
  args.inputs = inputs;
  args.num_inputs = 1;
  args.attrs = &attr;
  args.num_attrs = 1;
  gk_tensor_desc expected{};
  expected.struct_size = sizeof(expected);
  ASSERT_EQ(gk_op_output_desc(rt.get(), "sum", &args, 0, &expected), GK_OK) << last_error();
  gk_tensor* out = nullptr;
  ASSERT_EQ(gk_op_call_alloc(rt.get(), "sum", &args, 1, &out, nullptr), GK_OK) << last_error();
  TensorPtr c(out);
  gk_tensor_desc got{};
  got.struct_size = sizeof(got);
  ASSERT_EQ(gk_tensor_get_desc(c.get(), &got), GK_OK);
  ASSERT_EQ(got.ndim, expected.ndim);
  for (int32_t k = 0; k < got.ndim; ++k) EXPECT_EQ(got.shape[k], expected.shape[k]);
  EXPECT_EQ(read_f32(c.get(), 2), (std::vector<float>{6, 15}));
}

TEST(Dispatch, call_alloc_refuses_bad_inputs_and_creates_nothing) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = make_tensor(rt.get(), GK_DTYPE_F32, {2, 3});
  TensorPtr b = make_tensor(rt.get(), GK_DTYPE_F32, {4});
  uint64_t before = bytes_in_use(rt.get());
  gk_tensor* sentinel = reinterpret_cast<gk_tensor*>(uintptr_t(0x1));
  gk_tensor* out = sentinel;
  EXPECT_EQ(call_alloc(rt.get(), "add", {a.get(), b.get()}, 1, &out), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("add: input 'b'"), std::string::npos) << last_error();
  EXPECT_EQ(out, sentinel);
  // The op has one output.
  gk_tensor* outs[2] = {sentinel, sentinel};
  EXPECT_EQ(call_alloc(rt.get(), "add", {a.get(), a.get()}, 2, outs), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("2 outputs asked; the op has 1"), std::string::npos)
      << last_error();
  EXPECT_EQ(outs[0], sentinel);
  EXPECT_EQ(call_alloc(rt.get(), "add", {a.get(), a.get()}, 1, nullptr), GK_INVALID_ARGUMENT);
  EXPECT_EQ(call_alloc(rt.get(), "no_such_op", {a.get()}, 1, &out), GK_NOT_FOUND);
  EXPECT_EQ(out, sentinel);
  EXPECT_EQ(bytes_in_use(rt.get()), before);
}

TEST(Dispatch, call_alloc_releases_its_outputs_when_no_plugin_accepts) {
  gk_runtime_options o = test_options();
  o.plugins_disable = "cp*";
  RuntimePtr rt = make_runtime(o);
  TensorPtr a = tensor_from(rt.get(), {1, 2}, {2});
  uint64_t before = bytes_in_use(rt.get());
  gk_tensor* sentinel = reinterpret_cast<gk_tensor*>(uintptr_t(0x1));
  gk_tensor* out = sentinel;
  EXPECT_EQ(call_alloc(rt.get(), "neg", {a.get()}, 1, &out), GK_UNIMPLEMENTED);
  EXPECT_NE(last_error().find("no plugin accepts"), std::string::npos) << last_error();
  EXPECT_EQ(out, sentinel);
  EXPECT_EQ(bytes_in_use(rt.get()), before);
}

// The dispatch cache (DispatchCache): a call seen before skips the op's rules and
// supports(); anything that differs in the call is checked and decided again.
TEST(DispatchCache, repeated_call_with_a_changed_attribute_value_uses_the_new_value) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr x = tensor_from(rt.get(), {1, 1}, {1, 2});
  TensorPtr w = tensor_from(rt.get(), {1, 1}, {2});
  TensorPtr y = make_tensor(rt.get(), GK_DTYPE_F32, {1, 2});
  for (int round = 0; round < 2; ++round) {  // the second round is served by the cache
    ASSERT_EQ(op_call(rt.get(), "rmsnorm", {x.get(), w.get()}, {y.get()}, {float_attr("eps", 0.0)}),
              GK_OK)
        << last_error();
    EXPECT_EQ(read_f32(y.get(), 2), (std::vector<float>{1, 1}));
    // x / sqrt(mean(x^2) + eps) = 1 / sqrt(1 + 3)
    ASSERT_EQ(op_call(rt.get(), "rmsnorm", {x.get(), w.get()}, {y.get()}, {float_attr("eps", 3.0)}),
              GK_OK)
        << last_error();
    EXPECT_EQ(read_f32(y.get(), 2), (std::vector<float>{0.5f, 0.5f}));
  }
}

TEST(DispatchCache, repeated_call_with_a_refused_attribute_is_still_refused) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr x = tensor_from(rt.get(), {1, 2, 3, 4, 5, 6}, {2, 3});
  TensorPtr y = make_tensor(rt.get(), GK_DTYPE_F32, {2, 3});
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(op_call(rt.get(), "softmax", {x.get()}, {y.get()}, {int_attr("axis", -1)}), GK_OK)
        << last_error();
  }
  // The same value as a float: the op wants an int.
  EXPECT_EQ(op_call(rt.get(), "softmax", {x.get()}, {y.get()}, {float_attr("axis", -1.0)}),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("softmax: attribute 'axis' has type float; expected int"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(op_call(rt.get(), "softmax", {x.get()}, {y.get()}, {int_attr("axis", 2)}),
            GK_INVALID_ARGUMENT);
  EXPECT_EQ(
      op_call(rt.get(), "softmax", {x.get()}, {y.get()}, {int_attr("axis", -1), int_attr("dim", 1)}),
      GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("unknown attribute 'dim'"), std::string::npos) << last_error();
  ASSERT_EQ(op_call(rt.get(), "softmax", {x.get()}, {y.get()}, {int_attr("axis", -1)}), GK_OK)
      << last_error();
}

TEST(DispatchCache, repeated_call_with_a_changed_shape_or_flag_is_checked_again) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = tensor_from(rt.get(), {1, 2, 3, 4, 5, 6}, {2, 3});
  TensorPtr b = tensor_from(rt.get(), {10, 20, 30}, {3});
  float data[6] = {};
  gk_tensor_desc d = desc(GK_DTYPE_F32, {2, 3});
  gk_tensor* out = nullptr;
  ASSERT_EQ(gk_tensor_from_external(rt.get(), 0, data, &d, nullptr, nullptr, &out), GK_OK);
  TensorPtr writable(out);
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(op_call(rt.get(), "add", {a.get(), b.get()}, {writable.get()}), GK_OK) << last_error();
  }
  EXPECT_EQ(read_f32(writable.get(), 6), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  // The same memory, read-only.
  d.flags = GK_TENSOR_READ_ONLY;
  ASSERT_EQ(gk_tensor_from_external(rt.get(), 0, data, &d, nullptr, nullptr, &out), GK_OK);
  TensorPtr read_only(out);
  EXPECT_EQ(op_call(rt.get(), "add", {a.get(), b.get()}, {read_only.get()}), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("read-only"), std::string::npos) << last_error();
  // The same memory as [3, 2]: the output's shape no longer matches.
  d = desc(GK_DTYPE_F32, {3, 2});
  ASSERT_EQ(gk_tensor_from_external(rt.get(), 0, data, &d, nullptr, nullptr, &out), GK_OK);
  TensorPtr reshaped(out);
  EXPECT_EQ(op_call(rt.get(), "add", {a.get(), b.get()}, {reshaped.get()}), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("add: output 'out' has shape [3, 2]; expected [2, 3]"),
            std::string::npos)
      << last_error();
  // A broadcast input that no longer broadcasts.
  TensorPtr c = tensor_from(rt.get(), {1, 2}, {2});
  EXPECT_EQ(op_call(rt.get(), "add", {a.get(), c.get()}, {writable.get()}), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("add: input 'b'"), std::string::npos) << last_error();
}

TEST(DispatchCache, repeated_call_on_a_new_runtime_decides_again) {
  for (int round = 0; round < 2; ++round) {
    RuntimePtr rt = make_runtime(test_options());
    TensorPtr a = tensor_from(rt.get(), {1, 2}, {2});
    TensorPtr c = make_tensor(rt.get(), GK_DTYPE_F32, {2});
    ASSERT_EQ(op_call(rt.get(), "neg", {a.get()}, {c.get()}), GK_OK) << last_error();
    EXPECT_EQ(read_f32(c.get(), 2), (std::vector<float>{-1, -2}));
  }
}

}  // namespace
}  // namespace gk::test
