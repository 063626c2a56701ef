// White-box tests of the llm ops' rules (core/src/dispatch/llm_ops.cpp): output descriptors,
// and errors that name the op, the argument, the expected and the given value.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "dispatch/op_schema.h"

namespace gk {
namespace {

gk_tensor_desc d(int32_t dtype, std::vector<int64_t> shape) {
  return make_desc(dtype, shape);
}

gk_attr int_attr(const char* name, int64_t v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_INT;
  a.value.i = v;
  return a;
}
gk_attr float_attr(const char* name, double v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_FLOAT;
  a.value.f = v;
  return a;
}
gk_attr string_attr(const char* name, const char* v) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_STRING;
  a.value.s = v;
  return a;
}

gk_tensor_desc infer1(const char* op, std::vector<gk_tensor_desc> inputs,
                      std::vector<gk_attr> attrs = {}) {
  const OpRegistry& r = OpRegistry::instance();
  auto out = r.infer(r.get(op), inputs, attrs.data(), int32_t(attrs.size()));
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

std::string error_of(const char* op, std::vector<gk_tensor_desc> inputs,
                     std::vector<gk_attr> attrs = {}) {
  try {
    infer1(op, std::move(inputs), std::move(attrs));
  } catch (const Error& e) {
    return e.message();
  }
  ADD_FAILURE() << op << " call was accepted";
  return "";
}

std::vector<int64_t> shape_of(const gk_tensor_desc& t) {
  return std::vector<int64_t>(t.shape, t.shape + t.ndim);
}

constexpr int32_t kF32 = GK_DTYPE_F32, kBF16 = GK_DTYPE_BF16, kI32 = GK_DTYPE_I32,
                  kI64 = GK_DTYPE_I64;

TEST(LlmOpRules, embedding_appends_the_table_width_to_the_id_shape) {
  const gk_tensor_desc out = infer1("embedding", {d(kBF16, {100, 64}), d(kI64, {2, 7})});
  EXPECT_EQ(out.dtype, kBF16);
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{2, 7, 64}));
  EXPECT_EQ(shape_of(infer1("embedding", {d(kF32, {5, 3}), d(kI32, {})})),
            (std::vector<int64_t>{3}));
  EXPECT_NE(
      error_of("embedding", {d(kF32, {5, 3}), d(kF32, {2})}).find("input 'ids' has dtype f32"),
      std::string::npos);
  EXPECT_NE(error_of("embedding", {d(kF32, {5, 3, 2}), d(kI32, {2})})
                .find("input 'table' has shape [5, 3, 2]; expected 2 dimensions"),
            std::string::npos);
}

TEST(LlmOpRules, rope_checks_positions_rotary_dim_and_scaling) {
  const gk_tensor_desc x = d(kF32, {2, 5, 4, 64});
  EXPECT_EQ(shape_of(infer1("rope", {x, d(kI32, {5})})), shape_of(x));
  EXPECT_EQ(shape_of(infer1("rope", {x, d(kI32, {2, 5})}, {int_attr("rotary_dim", 32)})),
            shape_of(x));
  EXPECT_NE(error_of("rope", {x, d(kI32, {3, 5})})
                .find("input 'positions' has shape [3, 5]; expected [5] or [2, 5]"),
            std::string::npos);
  EXPECT_NE(error_of("rope", {x, d(kI64, {5})}).find("input 'positions' has dtype i64"),
            std::string::npos);
  for (int64_t bad : {0, 7, 66}) {
    EXPECT_NE(error_of("rope", {x, d(kI32, {5})}, {int_attr("rotary_dim", bad)})
                  .find("attribute 'rotary_dim' is " + std::to_string(bad) +
                        "; expected an even value in 2..64"),
              std::string::npos);
  }
  EXPECT_NE(error_of("rope", {x, d(kI32, {5})}, {string_attr("scaling", "yarn")})
                .find("attribute 'scaling' is 'yarn'; expected one of 'none', 'llama3', 'linear'"),
            std::string::npos);
  EXPECT_NE(error_of("rope", {x, d(kI32, {5})},
                     {string_attr("scaling", "llama3"), float_attr("low_freq_factor", 4),
                      float_attr("high_freq_factor", 2)})
                .find("attribute 'high_freq_factor' is 2; expected a finite value > "
                      "low_freq_factor (4)"),
            std::string::npos);
  EXPECT_NE(error_of("rope", {x, d(kI32, {5})}, {float_attr("theta", 0.5)})
                .find("attribute 'theta' is 0.5"),
            std::string::npos);
  EXPECT_NE(error_of("rope", {x, d(kI32, {5})},
                     {string_attr("scaling", "linear"), float_attr("factor", 0)})
                .find("attribute 'factor' is 0"),
            std::string::npos);
}

TEST(LlmOpRules, attention_checks_gqa_shapes_lengths_and_attributes) {
  const gk_tensor_desc q = d(kBF16, {2, 3, 8, 64}), k = d(kBF16, {2, 10, 2, 64});
  EXPECT_EQ(shape_of(infer1("attention", {q, k, k})), shape_of(q));
  EXPECT_EQ(shape_of(infer1("attention", {q, k, k, d(kI32, {2})})), shape_of(q));
  EXPECT_NE(error_of("attention", {q, d(kBF16, {2, 10, 3, 64}), d(kBF16, {2, 10, 3, 64})})
                .find("input 'k' has 3 heads"),
            std::string::npos);
  EXPECT_NE(error_of("attention", {q, k, d(kBF16, {2, 9, 2, 64})})
                .find("input 'v' has shape [2, 9, 2, 64]; expected [2, 10, 2, 64]"),
            std::string::npos);
  EXPECT_NE(error_of("attention", {q, d(kBF16, {2, 10, 2, 32}), d(kBF16, {2, 10, 2, 32})})
                .find("head_dim 64"),
            std::string::npos);
  EXPECT_NE(error_of("attention", {q, k, k, d(kI32, {3})})
                .find("input 'kv_lengths' has shape [3]; expected [2]"),
            std::string::npos);
  EXPECT_NE(error_of("attention", {q, d(kF32, {2, 10, 2, 64}), k}).find("input 'k' has dtype f32"),
            std::string::npos);
  EXPECT_NE(error_of("attention", {q, k, k}, {int_attr("causal", 2)})
                .find("attribute 'causal' is 2; expected 0 or 1"),
            std::string::npos);
}

TEST(LlmOpRules, paged_attention_takes_a_block_pool_and_a_block_table_and_names_bad_ones) {
  // 3 sequences over a pool of 40 blocks of 16 positions: k's first dimension is the pool's.
  const gk_tensor_desc q = d(kBF16, {3, 1, 8, 64}), pool = d(kBF16, {40, 16, 2, 64});
  const gk_tensor_desc lengths = d(kI32, {3}), table = d(kI32, {3, 5});
  EXPECT_EQ(shape_of(infer1("attention", {q, pool, pool, lengths, table})), shape_of(q));
  EXPECT_NE(error_of("attention", {q, pool, pool, lengths, d(kI64, {3, 5})})
                .find("input 'block_table' has dtype i64"),
            std::string::npos);
  EXPECT_NE(error_of("attention", {q, pool, pool, lengths, d(kI32, {2, 5})})
                .find("input 'block_table' has shape [2, 5]; expected [3, max_blocks]"),
            std::string::npos);
  EXPECT_NE(error_of("attention", {q, pool, pool, lengths, d(kI32, {15})})
                .find("input 'block_table' has shape [15]"),
            std::string::npos);
  EXPECT_NE(error_of("attention", {q, pool, pool, d(kI32, {1}), table})
                .find("a block_table needs the lengths"),
            std::string::npos);
  EXPECT_NE(error_of("attention",
                     {q, d(kBF16, {40, 16, 2, 32}), d(kBF16, {40, 16, 2, 32}), lengths, table})
                .find("expected head_dim 64"),
            std::string::npos);
  EXPECT_NE(
      error_of("attention", {q, d(kBF16, {40, 0, 2, 64}), d(kBF16, {40, 0, 2, 64}), lengths, table})
          .find("block_size (dimension 1) of at least 1"),
      std::string::npos);
  EXPECT_NE(error_of("attention", {q, d(kBF16, {40, 16, 2}), d(kBF16, {40, 16, 2}), lengths, table})
                .find("[num_blocks, block_size, kv_heads, head_dim]"),
            std::string::npos);
}

TEST(LlmOpRules, kv_cache_write_updates_the_pool_and_names_bad_rows_and_slots) {
  const gk_tensor_desc pool = d(kBF16, {40, 16, 2, 64});
  EXPECT_EQ(shape_of(infer1("kv_cache_write", {pool, d(kF32, {5, 2, 64}), d(kI32, {5})})),
            shape_of(pool));
  const gk_tensor_desc out = infer1("kv_cache_write", {pool, d(kF32, {1, 5, 2, 64}), d(kI32, {5})});
  EXPECT_EQ(out.dtype, kBF16);
  EXPECT_NE(
      error_of("kv_cache_write", {pool, d(kF32, {5, 3, 64}), d(kI32, {5})})
          .find("input 'src' has shape [5, 3, 64]; expected [rows, 2, 64] or [1, rows, 2, 64]"),
      std::string::npos);
  EXPECT_NE(error_of("kv_cache_write", {pool, d(kF32, {2, 5, 2, 64}), d(kI32, {5})})
                .find("input 'src' has shape [2, 5, 2, 64]"),
            std::string::npos);
  EXPECT_NE(error_of("kv_cache_write", {pool, d(kF32, {5, 2, 64}), d(kI32, {4})})
                .find("input 'slots' has shape [4]; expected [5]"),
            std::string::npos);
  EXPECT_NE(error_of("kv_cache_write", {pool, d(kF32, {5, 2, 64}), d(kI64, {5})})
                .find("input 'slots' has dtype i64"),
            std::string::npos);
  EXPECT_NE(error_of("kv_cache_write", {d(kBF16, {16, 2, 64}), d(kF32, {5, 2, 64}), d(kI32, {5})})
                .find("input 'cache' has shape [16, 2, 64]"),
            std::string::npos);
  EXPECT_EQ(OpRegistry::instance().get("kv_cache_write").updates_input, 0);
}

TEST(LlmOpRules, sample_gives_i32_ids_and_checks_its_parameters) {
  const gk_tensor_desc out = infer1("sample", {d(kF32, {4, 1000})});
  EXPECT_EQ(out.dtype, kI32);
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{4}));
  EXPECT_NE(error_of("sample", {d(kF32, {4, 0})}).find("empty vocabulary"), std::string::npos);
  EXPECT_NE(error_of("sample", {d(kF32, {4, 10})}, {float_attr("top_p", 1.5)})
                .find("attribute 'top_p' is 1.5; expected a value in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of("sample", {d(kF32, {4, 10})}, {float_attr("min_p", -0.1)})
                .find("attribute 'min_p' is -0.1"),
            std::string::npos);
  EXPECT_NE(error_of("sample", {d(kF32, {4, 10})}, {int_attr("top_k", -1)})
                .find("attribute 'top_k' is -1"),
            std::string::npos);
  EXPECT_NE(error_of("sample", {d(kF32, {4, 10})}, {float_attr("temperature", INFINITY)})
                .find("attribute 'temperature' is inf"),
            std::string::npos);
}

}  // namespace
}  // namespace gk
