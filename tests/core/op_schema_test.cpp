// White-box tests of the op rules: shapes, dtypes and attributes per docs/ops.md.
#include <gtest/gtest.h>

#include "common/error.h"
#include "dispatch/op_schema.h"

namespace gk {
namespace {

gk_attr int_attr(const char* name, int64_t v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_INT;
  a.value.i = v;
  return a;
}

gk_attr ints_attr(const char* name, const std::vector<int64_t>& v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_INTS;
  a.count = int32_t(v.size());
  a.value.ints = v.data();
  return a;
}

gk_attr string_attr(const char* name, const char* v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_STRING;
  a.value.s = v;
  return a;
}

std::vector<int64_t> shape_of(const gk_tensor_desc& d) {
  return std::vector<int64_t>(d.shape, d.shape + d.ndim);
}

std::vector<gk_tensor_desc> infer(const char* op, std::vector<gk_tensor_desc> inputs,
                                  std::vector<gk_attr> attrs = {}) {
  const OpRegistry& r = OpRegistry::instance();
  return r.infer(r.get(op), inputs, attrs.data(), int32_t(attrs.size()));
}

std::string error_of(const char* op, std::vector<gk_tensor_desc> inputs,
                     std::vector<gk_attr> attrs = {}) {
  try {
    infer(op, std::move(inputs), std::move(attrs));
  } catch (const Error& e) {
    return e.message();
  }
  ADD_FAILURE() << op << " call was accepted";
  return "";
}

TEST(OpSchema, binary_ops_broadcast_like_numpy) {
  auto out = infer("mul", {make_desc(GK_DTYPE_F32, {8, 1, 6, 1}), make_desc(GK_DTYPE_F32, {7, 1, 5})});
  EXPECT_EQ(shape_of(out[0]), (std::vector<int64_t>{8, 7, 6, 5}));
  out = infer("add", {make_desc(GK_DTYPE_I32, {}), make_desc(GK_DTYPE_I32, {3})});
  EXPECT_EQ(shape_of(out[0]), (std::vector<int64_t>{3}));
}

TEST(OpSchema, binary_ops_refuse_mixed_dtypes) {
  std::string e = error_of("add", {make_desc(GK_DTYPE_F32, {2}), make_desc(GK_DTYPE_F16, {2})});
  EXPECT_NE(e.find("add: input 'b' has dtype f16; expected f32, the dtype of input 'a'"),
            std::string::npos) << e;
}

TEST(OpSchema, comparisons_broadcast_to_a_bool_output) {
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
    auto out = infer(op, {make_desc(GK_DTYPE_I16, {4, 1, 3}), make_desc(GK_DTYPE_I16, {5, 1})});
    EXPECT_EQ(out[0].dtype, GK_DTYPE_BOOL) << op;
    EXPECT_EQ(shape_of(out[0]), (std::vector<int64_t>{4, 5, 3})) << op;
    std::string e = error_of(op, {make_desc(GK_DTYPE_F32, {2}), make_desc(GK_DTYPE_F64, {2})});
    EXPECT_NE(e.find("input 'b' has dtype f64; expected f32"), std::string::npos) << e;
  }
  EXPECT_EQ(infer("eq", {make_desc(GK_DTYPE_BOOL, {2}), make_desc(GK_DTYPE_BOOL, {2})})[0].dtype,
            GK_DTYPE_BOOL);
  std::string e = error_of("lt", {make_desc(GK_DTYPE_BOOL, {2}), make_desc(GK_DTYPE_BOOL, {2})});
  EXPECT_NE(e.find("lt: input 'a' has dtype bool; expected one of"), std::string::npos) << e;
}

TEST(OpSchema, div_is_floating_only) {
  std::string e = error_of("div", {make_desc(GK_DTYPE_I32, {2}), make_desc(GK_DTYPE_I32, {2})});
  EXPECT_NE(e.find("has dtype i32; expected one of f32, f64, f16, bf16"), std::string::npos) << e;
}

TEST(OpSchema, matmul_shapes_transposes_and_batch_broadcast) {
  auto out = infer("matmul", {make_desc(GK_DTYPE_F16, {3, 5}), make_desc(GK_DTYPE_F16, {7, 5})},
                   {int_attr("transpose_b", 1)});
  EXPECT_EQ(shape_of(out[0]), (std::vector<int64_t>{3, 7}));
  out = infer("matmul", {make_desc(GK_DTYPE_F32, {2, 1, 4, 3}), make_desc(GK_DTYPE_F32, {5, 3, 6})});
  EXPECT_EQ(shape_of(out[0]), (std::vector<int64_t>{2, 5, 4, 6}));
  std::string e = error_of("matmul", {make_desc(GK_DTYPE_F32, {3, 5}), make_desc(GK_DTYPE_F32, {4, 6})});
  EXPECT_NE(e.find("its K is 4 but input 'a' [3, 5] has K = 5"), std::string::npos) << e;
  e = error_of("matmul", {make_desc(GK_DTYPE_F32, {3, 5}), make_desc(GK_DTYPE_F32, {5, 6}),
                          make_desc(GK_DTYPE_F32, {5})});
  EXPECT_NE(e.find("input 'bias' has shape [5]; expected [6]"), std::string::npos) << e;
  e = error_of("matmul", {make_desc(GK_DTYPE_F32, {5}), make_desc(GK_DTYPE_F32, {5, 6})});
  EXPECT_NE(e.find("at least 2 dimensions"), std::string::npos) << e;
}

TEST(OpSchema, matmul_attribute_values_are_checked) {
  std::string e = error_of("matmul", {make_desc(GK_DTYPE_F32, {2, 2}), make_desc(GK_DTYPE_F32, {2, 2})},
                           {string_attr("activation", "swish")});
  EXPECT_NE(e.find("attribute 'activation' is 'swish'; expected one of 'none', 'relu'"),
            std::string::npos) << e;
  e = error_of("matmul", {make_desc(GK_DTYPE_F32, {2, 2}), make_desc(GK_DTYPE_F32, {2, 2})},
               {int_attr("precision", 1)});
  EXPECT_NE(e.find("attribute 'precision' has type int; expected string"), std::string::npos) << e;
  // Switches are 0 or 1: a 2 is refused here, not declined by every plugin later.
  e = error_of("matmul", {make_desc(GK_DTYPE_F32, {2, 2}), make_desc(GK_DTYPE_F32, {2, 2})},
               {int_attr("transpose_b", 2)});
  EXPECT_NE(e.find("matmul: attribute 'transpose_b' is 2; expected 0 or 1"), std::string::npos)
      << e;
  e = error_of("matmul", {make_desc(GK_DTYPE_F32, {2, 2}), make_desc(GK_DTYPE_F32, {2, 2})},
               {int_attr("transpose_a", -1)});
  EXPECT_NE(e.find("attribute 'transpose_a' is -1; expected 0 or 1"), std::string::npos) << e;
}

TEST(OpSchema, matmul_output_may_be_f32_for_half_inputs) {
  const OpRegistry& r = OpRegistry::instance();
  std::vector<gk_tensor_desc> in = {make_desc(GK_DTYPE_BF16, {2, 3}), make_desc(GK_DTYPE_BF16, {3, 4})};
  EXPECT_NO_THROW(r.validate(r.get("matmul"), in, {make_desc(GK_DTYPE_F32, {2, 4})}, nullptr, 0));
  EXPECT_THROW(r.validate(r.get("matmul"), in, {make_desc(GK_DTYPE_F16, {2, 4})}, nullptr, 0), Error);
}

TEST(OpSchema, reductions_over_axes_with_and_without_keepdims) {
  std::vector<int64_t> axes = {0, -1};
  auto out = infer("sum", {make_desc(GK_DTYPE_F32, {2, 3, 4})}, {ints_attr("axes", axes)});
  EXPECT_EQ(shape_of(out[0]), (std::vector<int64_t>{3}));
  out = infer("sum", {make_desc(GK_DTYPE_F32, {2, 3, 4})},
              {ints_attr("axes", axes), int_attr("keepdims", 1)});
  EXPECT_EQ(shape_of(out[0]), (std::vector<int64_t>{1, 3, 1}));
  out = infer("mean", {make_desc(GK_DTYPE_F32, {2, 3})});
  EXPECT_EQ(out[0].ndim, 0);
  std::vector<int64_t> bad = {3};
  std::string e = error_of("sum", {make_desc(GK_DTYPE_F32, {2, 3, 4})}, {ints_attr("axes", bad)});
  EXPECT_NE(e.find("holds axis 3, out of range"), std::string::npos) << e;
  std::vector<int64_t> twice = {1, -2};
  e = error_of("sum", {make_desc(GK_DTYPE_F32, {2, 3, 4})}, {ints_attr("axes", twice)});
  EXPECT_NE(e.find("twice"), std::string::npos) << e;
  e = error_of("sum", {make_desc(GK_DTYPE_F32, {2, 3})}, {int_attr("keepdims", 5)});
  EXPECT_NE(e.find("sum: attribute 'keepdims' is 5; expected 0 or 1"), std::string::npos) << e;
  e = error_of("argmax", {make_desc(GK_DTYPE_F32, {2, 3})}, {int_attr("keepdims", 2)});
  EXPECT_NE(e.find("argmax: attribute 'keepdims' is 2; expected 0 or 1"), std::string::npos) << e;
}

TEST(OpSchema, max_of_nothing_is_refused_but_sum_of_nothing_is_zero) {
  EXPECT_NO_THROW(infer("sum", {make_desc(GK_DTYPE_F32, {0, 3})}));
  std::string e = error_of("max", {make_desc(GK_DTYPE_F32, {0, 3})});
  EXPECT_NE(e.find("zero elements"), std::string::npos) << e;
}

TEST(OpSchema, output_with_zero_stride_is_refused) {
  const OpRegistry& r = OpRegistry::instance();
  std::vector<gk_tensor_desc> in = {make_desc(GK_DTYPE_F32, {4}), make_desc(GK_DTYPE_F32, {4})};
  gk_tensor_desc out = make_desc(GK_DTYPE_F32, {4});
  out.strides[0] = 0;
  try {
    r.validate(r.get("add"), in, {out}, nullptr, 0);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("stride 0 on dimension 0"), std::string::npos) << e.message();
  }
}

TEST(OpSchema, argmax_gives_i64) {
  auto out = infer("argmax", {make_desc(GK_DTYPE_F16, {4, 5})}, {int_attr("axis", 1)});
  EXPECT_EQ(out[0].dtype, GK_DTYPE_I64);
  EXPECT_EQ(shape_of(out[0]), (std::vector<int64_t>{4}));
}

TEST(OpSchema, norms_check_weight_shapes_and_residual) {
  auto out = infer("add_rmsnorm", {make_desc(GK_DTYPE_BF16, {4, 8}), make_desc(GK_DTYPE_BF16, {4, 8}),
                                   make_desc(GK_DTYPE_BF16, {8})});
  ASSERT_EQ(out.size(), 2u);
  std::string e = error_of("layernorm", {make_desc(GK_DTYPE_F32, {4, 8}), make_desc(GK_DTYPE_F32, {4})});
  EXPECT_NE(e.find("input 'weight' has shape [4]; expected [8]"), std::string::npos) << e;
  e = error_of("add_layernorm", {make_desc(GK_DTYPE_F32, {4, 8}), make_desc(GK_DTYPE_F32, {4, 7}),
                                 make_desc(GK_DTYPE_F32, {8})});
  EXPECT_NE(e.find("input 'residual' has shape [4, 7]; expected [4, 8]"), std::string::npos) << e;
}

TEST(OpSchema, argument_count_is_checked_with_names) {
  std::string e = error_of("add", {make_desc(GK_DTYPE_F32, {2})});
  EXPECT_NE(e.find("add: got 1 inputs; expected 2 (a, b)"), std::string::npos) << e;
  e = error_of("layernorm", {});
  EXPECT_NE(e.find("expected 1 to 3 (x, weight, bias)"), std::string::npos) << e;
}

TEST(OpSchema, cast_target_from_attribute) {
  auto out = infer("cast", {make_desc(GK_DTYPE_F32, {3})}, {string_attr("dtype", "bf16")});
  EXPECT_EQ(out[0].dtype, GK_DTYPE_BF16);
  std::string e = error_of("cast", {make_desc(GK_DTYPE_F32, {3})}, {string_attr("dtype", "u8")});
  EXPECT_NE(e.find("attribute 'dtype' is 'u8'"), std::string::npos) << e;
}

}  // namespace
}  // namespace gk
