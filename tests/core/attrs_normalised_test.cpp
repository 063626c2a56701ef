// The guarantee of gpukit_plugin.h, "attributes arrive normalised": what a plugin's
// supports() and launch() receive for calls that give negative, absent or int-for-float
// attributes, through gk_op_call (first call and dispatch-cache hit) and gk_explain, and the
// op rules' NormalAttrs white-box.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "dispatch/dispatcher.h"
#include "dispatch/op_schema.h"
#include "runtime/objects.h"
#include "runtime/runtime.h"
#include "test_runtime.h"

namespace gk::test {
namespace {

// One attribute as a plugin saw it, copied out of the call.
struct Seen {
  std::string name;
  int32_t type = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
};

struct Observed {
  std::mutex mutex;
  std::vector<Seen> supports, launch;  // the last call's
};

Observed& observed() {
  static Observed o;
  return o;
}

std::vector<Seen> copy_attrs(const gk_kernel_args* args) {
  std::vector<Seen> out;
  for (int32_t k = 0; k < args->num_attrs; ++k) {
    const gk_attr& a = args->attrs[k];
    Seen s{a.name, a.type};
    if (a.type == GK_ATTR_INT) s.i = a.value.i;
    if (a.type == GK_ATTR_FLOAT) s.f = a.value.f;
    if (a.type == GK_ATTR_STRING) s.s = a.value.s;
    if (a.type == GK_ATTR_INTS) s.ints.assign(a.value.ints, a.value.ints + a.count);
    out.push_back(s);
  }
  return out;
}

gk_status observe_supports(void*, const gk_kernel_args* args, char*, size_t) {
  std::lock_guard<std::mutex> lock(observed().mutex);
  observed().supports = copy_attrs(args);
  return GK_OK;
}

gk_status observe_launch(void*, const gk_kernel_args* args) {
  std::lock_guard<std::mutex> lock(observed().mutex);
  observed().launch = copy_attrs(args);
  return GK_OK;  // writes nothing: only what it was handed matters here
}

const gk_plugin_api kObserverApi = {.struct_size = sizeof(gk_plugin_api),
                                    .abi_version = GK_PLUGIN_ABI_VERSION,
                                    .name = "observer",
                                    .version = "1",
                                    .init = nullptr,
                                    .shutdown = nullptr,
                                    .supports = observe_supports,
                                    .launch = observe_launch,
                                    .model = nullptr};

// A runtime where a plugin that records its attributes serves `ops` (f32) before the cpu
// plugin, added as JIT kernels are (RuntimeRecords).
class AttrsNormalised : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = make_runtime(test_options());
    record_.name = "observer";
    record_.manifest.name = "observer";
    record_.manifest.device = GK_DEVICE_KIND_CPU;
    record_.manifest.priority = 1000;
    for (const char* op :
         {"softmax", "log_softmax", "sum", "argmax", "matmul", "layernorm", "gelu"}) {
      record_.manifest.ops.push_back(ManifestOp{op, {GK_DTYPE_F32}});
    }
    record_.manifest_ok = true;
    record_.loaded = true;
    record_.api = &kObserverApi;
    RuntimeRecords::add(rt_->impl->plugins(), &record_);
    rt_->impl->dispatch_cache().clear();
  }
  void TearDown() override {
    RuntimeRecords::remove(rt_->impl->plugins(), &record_);
    rt_->impl->dispatch_cache().clear();
  }

  // Calls `op` and returns what launch() saw; supports() must have seen the same.
  std::vector<Seen> call(const char* op, std::vector<gk_tensor*> inputs,
                         std::vector<gk_tensor*> outputs, std::vector<gk_attr> attrs) {
    {
      std::lock_guard<std::mutex> lock(observed().mutex);
      observed().supports.clear();
      observed().launch.clear();
    }
    EXPECT_EQ(op_call(rt_.get(), op, inputs, outputs, attrs), GK_OK) << gk_last_error();
    return observed().launch;
  }

  RuntimePtr rt_;
  PluginRecord record_;
};

const Seen* find(const std::vector<Seen>& attrs, const char* name) {
  for (const Seen& s : attrs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST_F(AttrsNormalised, softmax_plugins_receive_a_non_negative_axis_given_negative_or_absent) {
  TensorPtr x = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3, 4});
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3, 4});
  struct Case {
    std::vector<gk_attr> attrs;
    int64_t axis;
  };
  for (const Case& c : {Case{{int_attr("axis", -1)}, 2}, Case{{}, 2},
                        Case{{int_attr("axis", -3)}, 0}, Case{{int_attr("axis", 1)}, 1}}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      // The second call is a dispatch-cache hit: the cached normalised attributes.
      for (int round = 0; round < 2; ++round) {
        const std::vector<Seen> seen = call(op, {x.get()}, {out.get()}, c.attrs);
        ASSERT_EQ(seen.size(), 1u) << op;
        EXPECT_EQ(seen[0].name, "axis");
        EXPECT_EQ(seen[0].type, GK_ATTR_INT);
        EXPECT_EQ(seen[0].i, c.axis) << op << " round " << round;
        if (round == 0) {
          ASSERT_EQ(observed().supports.size(), 1u);
          EXPECT_EQ(observed().supports[0].i, c.axis);
        } else {
          EXPECT_TRUE(observed().supports.empty()) << "a cached call skips supports()";
        }
      }
    }
  }
}

TEST_F(AttrsNormalised, sum_plugins_receive_sorted_non_negative_axes_and_keepdims_present) {
  TensorPtr x = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3, 4});
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {3});
  const std::vector<int64_t> given = {-1, 0};
  std::vector<Seen> seen = call("sum", {x.get()}, {out.get()}, {ints_attr("axes", given)});
  ASSERT_NE(find(seen, "axes"), nullptr);
  EXPECT_EQ(find(seen, "axes")->type, GK_ATTR_INTS);
  EXPECT_EQ(find(seen, "axes")->ints, (std::vector<int64_t>{0, 2}));
  ASSERT_NE(find(seen, "keepdims"), nullptr);
  EXPECT_EQ(find(seen, "keepdims")->i, 0);

  // No axes: every axis, listed.
  TensorPtr scalar = make_tensor(rt_.get(), GK_DTYPE_F32, {});
  seen = call("sum", {x.get()}, {scalar.get()}, {});
  ASSERT_NE(find(seen, "axes"), nullptr);
  EXPECT_EQ(find(seen, "axes")->ints, (std::vector<int64_t>{0, 1, 2}));
  seen = call("sum", {x.get()}, {scalar.get()}, {});  // cached
  ASSERT_NE(find(seen, "axes"), nullptr);
  EXPECT_EQ(find(seen, "axes")->ints, (std::vector<int64_t>{0, 1, 2}));
}

TEST_F(AttrsNormalised, argmax_plugins_receive_a_non_negative_axis_and_no_axis_when_absent) {
  TensorPtr x = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3});
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_I64, {2});
  std::vector<Seen> seen = call("argmax", {x.get()}, {out.get()}, {int_attr("axis", -1)});
  ASSERT_NE(find(seen, "axis"), nullptr);
  EXPECT_EQ(find(seen, "axis")->i, 1);
  TensorPtr scalar = make_tensor(rt_.get(), GK_DTYPE_I64, {});
  seen = call("argmax", {x.get()}, {scalar.get()}, {});
  EXPECT_EQ(find(seen, "axis"), nullptr) << "absent axis: over every element";
  ASSERT_NE(find(seen, "keepdims"), nullptr);
  EXPECT_EQ(find(seen, "keepdims")->i, 0);
}

TEST_F(AttrsNormalised, matmul_plugins_receive_every_attribute_with_an_int_alpha_as_a_float) {
  TensorPtr a = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3});
  TensorPtr b = make_tensor(rt_.get(), GK_DTYPE_F32, {3, 4});
  TensorPtr c = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 4});
  const std::vector<Seen> seen =
      call("matmul", {a.get(), b.get()}, {c.get()}, {int_attr("alpha", 2)});
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(find(seen, "transpose_a")->i, 0);
  EXPECT_EQ(find(seen, "transpose_b")->i, 0);
  EXPECT_EQ(find(seen, "alpha")->type, GK_ATTR_FLOAT);
  EXPECT_EQ(find(seen, "alpha")->f, 2.0);
  EXPECT_EQ(find(seen, "beta")->f, 0.0);
  EXPECT_EQ(find(seen, "activation")->s, "none");
  EXPECT_EQ(find(seen, "precision")->s, "highest");
}

TEST_F(AttrsNormalised, layernorm_and_gelu_plugins_receive_their_defaults) {
  TensorPtr x = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3});
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3});
  std::vector<Seen> seen = call("layernorm", {x.get()}, {out.get()}, {});
  ASSERT_NE(find(seen, "eps"), nullptr);
  EXPECT_EQ(find(seen, "eps")->type, GK_ATTR_FLOAT);
  EXPECT_EQ(find(seen, "eps")->f, 1e-5);
  seen = call("gelu", {x.get()}, {out.get()}, {});
  ASSERT_NE(find(seen, "approximate"), nullptr);
  EXPECT_EQ(find(seen, "approximate")->s, "none");
}

TEST_F(AttrsNormalised, explain_asks_plugins_with_the_normalised_attributes) {
  const gk_tensor_desc x = desc(GK_DTYPE_F32, {2, 3, 4});
  const gk_attr axis = int_attr("axis", -2);
  char* json = nullptr;
  observed().supports.clear();
  ASSERT_EQ(gk_explain(rt_.get(), "softmax", 0, &x, 1, nullptr, 0, &axis, 1, &json), GK_OK)
      << gk_last_error();
  gk_string_free(json);
  ASSERT_EQ(observed().supports.size(), 1u);
  EXPECT_EQ(observed().supports[0].i, 1);
}

TEST_F(AttrsNormalised, bad_attributes_are_still_refused_by_the_rules_with_their_message) {
  TensorPtr x = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3});
  TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 3});
  gk_attr axis = int_attr("axis", 2);
  gk_op_args a{};
  a.struct_size = sizeof(a);
  gk_tensor* in[] = {x.get()};
  gk_tensor* o[] = {out.get()};
  a.inputs = in;
  a.num_inputs = 1;
  a.outputs = o;
  a.num_outputs = 1;
  a.attrs = &axis;
  a.num_attrs = 1;
  EXPECT_EQ(gk_op_call(rt_.get(), "softmax", &a), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error())
                .find("softmax: attribute 'axis' is 2, out of range for input 'x' [2, 3] "
                      "(valid: -2..1)"),
            std::string::npos)
      << gk_last_error();
}

// ---- white-box: NormalAttrs ----

TEST(NormalAttrs, a_copy_points_its_list_into_its_own_storage) {
  NormalAttrs original;
  const int64_t axes[] = {0, 2};
  original.set_int("keepdims", 1);
  original.set_ints("axes", axes, 2);
  NormalAttrs copy = original;
  original.set_ints("axes", axes + 1, 1);  // the original changes; the copy does not
  const gk_attr* list = copy.find("axes");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->count, 2);
  EXPECT_EQ(list->value.ints[0], 0);
  EXPECT_EQ(list->value.ints[1], 2);
  EXPECT_NE(list->value.ints, original.find("axes")->value.ints);
  EXPECT_EQ(copy.find("keepdims")->value.i, 1);
}

TEST(NormalAttrs, setting_an_attribute_again_replaces_it_in_place) {
  NormalAttrs attrs;
  attrs.set_int("axis", -1);
  attrs.set_float("eps", 1.0);
  attrs.set_int("axis", 3);
  ASSERT_EQ(attrs.size(), 2);
  EXPECT_STREQ(attrs.data()[0].name, "axis");
  EXPECT_EQ(attrs.data()[0].value.i, 3);
}

}  // namespace
}  // namespace gk::test
