// JIT kernels serving named ops, without a GPU: a kernel stand-in of the cpu device is
// registered through the core's register_op (the C entry point wants a kernel loaded on a
// CUDA device, which needs a GPU), and dispatch and gk_explain are watched with it. Only
// gk_explain and calls the cpu plugin serves are made: the stand-in has no function to run.
// jit_launch_test.cpp checks registered kernels on a GPU.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "capi/jit_handles.h"
#include "capi/jit_op.h"
#include "gpukit/gpukit.h"
#include "runtime/runtime.h"
#include "test_runtime.h"

namespace gk::test {
namespace {

// A kernel of `rt`'s cpu device taking `params` 8-byte parameters (as the driver would
// report them), never launched.
gk_jit_kernel* stand_in_kernel(gk_runtime* rt, const std::string& name, size_t params) {
  Runtime& runtime = runtime_of(rt, "test");
  auto loaded = std::make_shared<jit::LoadedModule>();
  loaded->runtime = runtime.shared_from_this();
  loaded->device = &runtime.devices().at(0);
  auto* kernel = new gk_jit_kernel();
  kernel->loaded = std::move(loaded);
  kernel->name = name;
  kernel->param_sizes.assign(params, 8);
  kernel->params_known = true;
  return kernel;
}

gk_jit_op* register_stand_in(gk_runtime* rt, const char* op, gk_jit_kernel* kernel,
                             std::vector<int32_t> dtypes, int32_t priority) {
  gk_jit_op_options o = GK_JIT_OP_OPTIONS_INIT;
  o.dtypes = dtypes.data();
  o.num_dtypes = int32_t(dtypes.size());
  o.priority = priority;
  return new gk_jit_op{jit::register_op(runtime_of(rt, "test"), op, kernel, o)};
}

nlohmann::json explain(gk_runtime* rt, const char* op, std::vector<gk_tensor_desc> inputs) {
  char* text = nullptr;
  EXPECT_EQ(
      gk_explain(rt, op, 0, inputs.data(), int32_t(inputs.size()), nullptr, 0, nullptr, 0, &text),
      GK_OK)
      << gk_last_error();
  auto j = nlohmann::json::parse(text ? text : "{}");
  gk_string_free(text);
  return j;
}

const nlohmann::json* candidate(const nlohmann::json& j, const std::string& plugin) {
  for (const auto& c : j["candidates"]) {
    if (c["plugin"] == plugin) return &c;
  }
  return nullptr;
}

struct KernelRelease {
  void operator()(gk_jit_kernel* k) const { gk_jit_kernel_release(k); }
};
using KernelPtr = std::unique_ptr<gk_jit_kernel, KernelRelease>;

TEST(JitOp, registered_kernel_with_higher_priority_is_chosen_over_the_cpu_plugin) {
  RuntimePtr rt = make_runtime(test_options());
  KernelPtr kernel(stand_in_kernel(rt.get(), "add_f32", 4));
  gk_jit_op* op = register_stand_in(rt.get(), "add", kernel.get(), {GK_DTYPE_F32}, 10);
  auto j = explain(rt.get(), "add", {desc(GK_DTYPE_F32, {2, 3}), desc(GK_DTYPE_F32, {2, 3})});
  EXPECT_EQ(j["chosen"], "jit:add_f32") << j.dump(2);
  const auto* jit = candidate(j, "jit:add_f32");
  ASSERT_NE(jit, nullptr) << j.dump(2);
  EXPECT_EQ((*jit)["priority"], 10);
  EXPECT_EQ((*jit)["reason"], "chosen: one thread per element, blocks of 256");
  const auto* cpu = candidate(j, "cpu");
  ASSERT_NE(cpu, nullptr) << j.dump(2);
  EXPECT_EQ((*cpu)["reason"], "accepts, but a higher-priority plugin was chosen");
  // Unregistered: dispatch no longer sees it.
  gk_jit_op_release(op);
  j = explain(rt.get(), "add", {desc(GK_DTYPE_F32, {2, 3}), desc(GK_DTYPE_F32, {2, 3})});
  EXPECT_EQ(j["chosen"], "cpu") << j.dump(2);
  EXPECT_EQ(candidate(j, "jit:add_f32"), nullptr) << j.dump(2);
}

TEST(JitOp, lower_priority_kernel_is_listed_after_the_plugin_that_serves_the_call) {
  RuntimePtr rt = make_runtime(test_options());
  KernelPtr kernel(stand_in_kernel(rt.get(), "add_low", 4));
  gk_jit_op* op = register_stand_in(rt.get(), "add", kernel.get(), {GK_DTYPE_F32}, -5);
  auto j = explain(rt.get(), "add", {desc(GK_DTYPE_F32, {4}), desc(GK_DTYPE_F32, {4})});
  EXPECT_EQ(j["chosen"], "cpu") << j.dump(2);
  const auto* jit = candidate(j, "jit:add_low");
  ASSERT_NE(jit, nullptr) << j.dump(2);
  EXPECT_EQ((*jit)["reason"], "accepts, but a higher-priority plugin was chosen");
  // A real call takes the cpu plugin and gives its result.
  TensorPtr a = tensor_from(rt.get(), {1, 2, 3, 4}, {4});
  TensorPtr b = tensor_from(rt.get(), {10, 20, 30, 40}, {4});
  TensorPtr c = make_tensor(rt.get(), GK_DTYPE_F32, {4});
  gk_tensor* in[] = {a.get(), b.get()};
  gk_tensor* out[] = {c.get()};
  gk_op_args args{sizeof(args), in, 2, out, 1, nullptr, 0, nullptr};
  ASSERT_EQ(gk_op_call(rt.get(), "add", &args), GK_OK) << gk_last_error();
  EXPECT_EQ(read_f32(c.get(), 4), (std::vector<float>{11, 22, 33, 44}));
  gk_jit_op_release(op);
}

TEST(JitOp, calls_the_geometry_cannot_serve_are_declined_with_the_reason) {
  RuntimePtr rt = make_runtime(test_options());
  KernelPtr kernel(stand_in_kernel(rt.get(), "add_f32", 4));
  gk_jit_op* op = register_stand_in(rt.get(), "add", kernel.get(), {GK_DTYPE_F32}, 10);
  // Another dtype: the registration's dtypes decide, as a manifest's do.
  auto j = explain(rt.get(), "add", {desc(GK_DTYPE_F64, {4}), desc(GK_DTYPE_F64, {4})});
  EXPECT_EQ(j["chosen"], "cpu") << j.dump(2);
  EXPECT_EQ((*candidate(j, "jit:add_f32"))["reason"], "manifest lists f32 for add, not f64");
  // Broadcasting: the elementwise geometry passes one element count.
  j = explain(rt.get(), "add", {desc(GK_DTYPE_F32, {2, 3}), desc(GK_DTYPE_F32, {3})});
  EXPECT_EQ(j["chosen"], "cpu") << j.dump(2);
  std::string reason = (*candidate(j, "jit:add_f32"))["reason"];
  EXPECT_EQ(reason,
            "declined: input 1 has shape [3] and output 0 [2, 3]: the elementwise "
            "geometry serves equal element counts (no broadcasting)");
  // A strided input.
  gk_tensor_desc strided = desc(GK_DTYPE_F32, {2, 2});
  strided.has_strides = 1;
  strided.strides[0] = 1;
  strided.strides[1] = 2;
  j = explain(rt.get(), "add", {strided, desc(GK_DTYPE_F32, {2, 2})});
  reason = (*candidate(j, "jit:add_f32"))["reason"];
  EXPECT_EQ(reason, "declined: input 0 is not contiguous");
  gk_jit_op_release(op);
}

TEST(JitOp, kernel_whose_parameters_do_not_match_the_call_is_declined) {
  RuntimePtr rt = make_runtime(test_options());
  // relu has one input and one output: the geometry passes 3 parameters, the kernel takes 4.
  KernelPtr kernel(stand_in_kernel(rt.get(), "two_inputs", 4));
  gk_jit_op* op = register_stand_in(rt.get(), "relu", kernel.get(), {GK_DTYPE_F32}, 10);
  auto j = explain(rt.get(), "relu", {desc(GK_DTYPE_F32, {8})});
  EXPECT_EQ(j["chosen"], "cpu") << j.dump(2);
  std::string reason = (*candidate(j, "jit:two_inputs"))["reason"];
  EXPECT_EQ(reason,
            "declined: kernel 'two_inputs' takes 4 parameters; 1 inputs, 1 outputs and "
            "the count make 3");
  gk_jit_op_release(op);
}

TEST(JitOp, registration_clears_the_dispatch_cache) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = tensor_from(rt.get(), {1, 2}, {2});
  TensorPtr c = make_tensor(rt.get(), GK_DTYPE_F32, {2});
  gk_tensor* in[] = {a.get(), a.get()};
  gk_tensor* out[] = {c.get()};
  gk_op_args args{sizeof(args), in, 2, out, 1, nullptr, 0, nullptr};
  ASSERT_EQ(gk_op_call(rt.get(), "add", &args), GK_OK) << gk_last_error();
  Runtime& runtime = runtime_of(rt.get(), "test");
  EXPECT_EQ(runtime.dispatch_cache().size(), 1u);
  KernelPtr kernel(stand_in_kernel(rt.get(), "add_f32", 4));
  gk_jit_op* op = register_stand_in(rt.get(), "add", kernel.get(), {GK_DTYPE_F32}, 10);
  EXPECT_EQ(runtime.dispatch_cache().size(), 0u);
  gk_jit_op_release(op);
  ASSERT_EQ(gk_op_call(rt.get(), "add", &args), GK_OK) << gk_last_error();
  EXPECT_EQ(read_f32(c.get(), 2), (std::vector<float>{2, 4}));
}

TEST(JitOp, bad_registrations_are_refused_with_the_problem) {
  RuntimePtr rt = make_runtime(test_options());
  KernelPtr kernel(stand_in_kernel(rt.get(), "k", 3));
  Runtime& runtime = runtime_of(rt.get(), "test");
  auto refusal = [&](const char* op, gk_jit_op_options o) -> std::string {
    try {
      jit::register_op(runtime, op, kernel.get(), o);
    } catch (const Error& e) {
      return e.message();
    }
    return "accepted";
  };
  const int32_t f32[] = {GK_DTYPE_F32};
  const int32_t bogus[] = {12345};
  gk_jit_op_options o = GK_JIT_OP_OPTIONS_INIT;
  o.dtypes = f32;
  o.num_dtypes = 1;
  EXPECT_NE(refusal("no_such_op", o).find("no_such_op"), std::string::npos);
  gk_jit_op_options none = o;
  none.num_dtypes = 0;
  EXPECT_NE(refusal("relu", none).find("no dtypes given"), std::string::npos);
  gk_jit_op_options unknown = o;
  unknown.dtypes = bogus;
  EXPECT_NE(refusal("relu", unknown).find("dtypes[0] is 12345"), std::string::npos);
  gk_jit_op_options geometry = o;
  geometry.geometry = 7;
  EXPECT_NE(refusal("relu", geometry).find("geometry 7"), std::string::npos);
  gk_jit_op_options block = o;
  block.block_size = 2048;
  EXPECT_NE(refusal("relu", block).find("block_size 2048"), std::string::npos);
  KernelPtr scalar(stand_in_kernel(rt.get(), "scale", 3));
  scalar->param_sizes[2] = 4;  // an int count
  try {
    jit::register_op(runtime, "relu", scalar.get(), o);
    ADD_FAILURE() << "a 4-byte parameter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("parameter 2 of kernel 'scale' takes 4 bytes"), std::string::npos)
        << e.message();
  }
  // The C entry point wants a kernel loaded on a CUDA device.
  gk_jit_op* out = nullptr;
  EXPECT_EQ(gk_jit_op_register(rt.get(), "relu", kernel.get(), &o, &out), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("is not loaded on a CUDA device"), std::string::npos)
      << gk_last_error();
  EXPECT_EQ(gk_jit_op_register(rt.get(), "relu", nullptr, &o, &out), GK_INVALID_ARGUMENT);
  gk_jit_op_release(nullptr);  // a no-op
}

}  // namespace
}  // namespace gk::test
