// The rule table: the schema of every core op (elementwise, reductions, norms, matmul, cast)
// as docs/ops.md states it, and the registry's construction from it and the LLM and ASR
// tables (llm_ops.cpp, asr_ops.cpp). The engine that applies the rules is op_schema.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/dtype.h"
#include "common/error.h"
#include "dispatch/asr_ops.h"
#include "dispatch/llm_ops.h"
#include "dispatch/op_schema.h"

namespace gk {
namespace {

const std::vector<int32_t> kFloating = {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16};
const std::vector<int32_t> kArithmetic = {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16,
                                          GK_DTYPE_BF16, GK_DTYPE_I8,  GK_DTYPE_I16,
                                          GK_DTYPE_I32, GK_DTYPE_I64, GK_DTYPE_U8};
const std::vector<int32_t> kSigned = {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16,
                                      GK_DTYPE_I8,  GK_DTYPE_I16, GK_DTYPE_I32, GK_DTYPE_I64};
const std::vector<int32_t> kReducible = {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16,
                                         GK_DTYPE_BF16, GK_DTYPE_I32, GK_DTYPE_I64};

std::vector<int64_t> dims(const gk_tensor_desc& d) {
  return std::vector<int64_t>(d.shape, d.shape + d.ndim);
}

// NumPy broadcasting of two shapes.
std::vector<int64_t> broadcast(const OpCall& call, size_t i, size_t j) {
  const gk_tensor_desc& a = call.input(i);
  const gk_tensor_desc& b = call.input(j);
  int32_t n = std::max(a.ndim, b.ndim);
  std::vector<int64_t> out(size_t(n), 1);
  for (int32_t k = 0; k < n; ++k) {
    int64_t da = k < n - a.ndim ? 1 : a.shape[k - (n - a.ndim)];
    int64_t db = k < n - b.ndim ? 1 : b.shape[k - (n - b.ndim)];
    if (da != db && da != 1 && db != 1) {
      call.fail_input(j, "has shape " + shape_text(b) + ", which does not broadcast with " +
                             call.input_name(i) + " " + shape_text(a) + " (dimension " +
                             std::to_string(k - n) + ": " + std::to_string(db) + " vs " +
                             std::to_string(da) + ")");
    }
    out[size_t(k)] = da == 1 ? db : da;
  }
  return out;
}

// The reduced axes from attr `axes` (all when absent), checked; plugins receive them
// non-negative and in increasing order.
std::vector<bool> reduced_axes(const OpCall& call) {
  int32_t ndim = call.input(0).ndim;
  std::vector<bool> reduce(size_t(ndim), false);
  const gk_attr* axes = call.attr("axes");
  if (!axes) std::fill(reduce.begin(), reduce.end(), true);
  for (int32_t k = 0; axes && k < axes->count; ++k) {
    int64_t axis = axes->value.ints[k];
    int64_t normal = axis < 0 ? axis + ndim : axis;
    if (normal < 0 || normal >= ndim) {
      call.fail_attr("axes", "holds axis " + std::to_string(axis) + ", out of range for input 'x' " +
                                 shape_text(call.input(0)) + " (valid: " +
                                 std::to_string(-ndim) + ".." + std::to_string(ndim - 1) + ")");
    }
    if (reduce[size_t(normal)]) {
      call.fail_attr("axes", "names axis " + std::to_string(axis) + " twice");
    }
    reduce[size_t(normal)] = true;
  }
  int64_t normal[GK_MAX_DIMS];
  int32_t count = 0;
  for (int32_t k = 0; k < ndim; ++k) {
    if (reduce[size_t(k)]) normal[count++] = k;
  }
  call.normal().set_ints("axes", normal, count);
  return reduce;
}

int64_t normalise_axis(const OpCall& call, const char* attr, int64_t axis) {
  int32_t ndim = call.input(0).ndim;
  int64_t normal = axis < 0 ? axis + ndim : axis;
  if (normal < 0 || normal >= std::max(ndim, 1)) {
    call.fail_attr(attr, "is " + std::to_string(axis) + ", out of range for input 'x' " +
                             shape_text(call.input(0)) + " (valid: " + std::to_string(-ndim) +
                             ".." + std::to_string(ndim - 1) + ")");
  }
  return normal;
}

OpSchema binary(const char* name, const std::vector<int32_t>& dtypes) {
  OpSchema s{name, {"a", "b"}, 2, {"out"}, {}, nullptr, nullptr};
  s.in_place = true;
  s.infer = [dtypes](const OpCall& call) {
    call.require_dtype_in(0, dtypes);
    call.require_same_dtype(1, 0);
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, broadcast(call, 0, 1))};
  };
  return s;
}

// eq ne lt le gt ge: a and b of one dtype, broadcast; the output is bool.
OpSchema comparison(const char* name, const std::vector<int32_t>& dtypes) {
  OpSchema s{name, {"a", "b"}, 2, {"out"}, {}, nullptr, nullptr};
  s.in_place = true;
  s.infer = [dtypes](const OpCall& call) {
    call.require_dtype_in(0, dtypes);
    call.require_same_dtype(1, 0);
    return std::vector<gk_tensor_desc>{make_desc(GK_DTYPE_BOOL, broadcast(call, 0, 1))};
  };
  return s;
}

OpSchema unary(const char* name, const std::vector<int32_t>& dtypes,
               std::vector<AttrSpec> attrs = {}) {
  OpSchema s{name, {"x"}, 1, {"out"}, std::move(attrs), nullptr, nullptr};
  bool is_gelu = std::strcmp(name, "gelu") == 0;
  s.in_place = true;
  s.infer = [dtypes, is_gelu](const OpCall& call) {
    call.require_dtype_in(0, dtypes);
    if (is_gelu) call.require_string_in("approximate", {"none", "tanh"});
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, dims(call.input(0)))};
  };
  return s;
}

OpSchema gated(const char* name) {
  OpSchema s{name, {"gate", "up"}, 2, {"out"}, {{"approximate", GK_ATTR_STRING, {}, "none"}},
             nullptr, nullptr};
  s.in_place = true;
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    call.require_same_dtype(1, 0);
    call.require_same_shape(1, 0);
    call.require_string_in("approximate", {"none", "tanh"});
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, dims(call.input(0)))};
  };
  return s;
}

OpSchema reduction(const char* name, const std::vector<int32_t>& dtypes, bool empty_allowed) {
  OpSchema s{name, {"x"}, 1, {"out"}, {{"axes", GK_ATTR_INTS}, {"keepdims", GK_ATTR_INT, 0}},
             nullptr, nullptr};
  s.infer = [dtypes, empty_allowed](const OpCall& call) {
    call.require_dtype_in(0, dtypes);
    std::vector<bool> reduce = reduced_axes(call);
    const bool keep = call.flag("keepdims", false);
    std::vector<int64_t> out;
    int64_t reduced_count = 1;
    for (int32_t k = 0; k < call.input(0).ndim; ++k) {
      if (reduce[size_t(k)]) {
        reduced_count *= call.input(0).shape[k];
        if (keep) out.push_back(1);
      } else {
        out.push_back(call.input(0).shape[k]);
      }
    }
    if (!empty_allowed && reduced_count == 0) {
      call.fail_input(0, "has shape " + shape_text(call.input(0)) +
                             ": reducing over zero elements has no identity for " + call.op());
    }
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, out)};
  };
  return s;
}

OpSchema arg_reduction(const char* name) {
  OpSchema s{name, {"x"}, 1, {"out"}, {{"axis", GK_ATTR_INT}, {"keepdims", GK_ATTR_INT, 0}},
             nullptr, nullptr};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kReducible);
    const bool keep = call.flag("keepdims", false);
    const gk_tensor_desc& x = call.input(0);
    std::vector<int64_t> out;
    if (!call.attr("axis")) {
      if (numel(x) == 0) call.fail_input(0, "is empty: " + call.op() + " needs an element");
      if (keep) out.assign(size_t(x.ndim), 1);
    } else {
      int64_t axis = normalise_axis(call, "axis", call.attr_int("axis", 0));
      call.normal().set_int("axis", axis);
      if (x.ndim > 0 && x.shape[axis] == 0) {
        call.fail_input(0, "has shape " + shape_text(x) + ": axis " + std::to_string(axis) +
                               " is empty, so " + call.op() + " has no answer");
      }
      for (int32_t k = 0; k < x.ndim; ++k) {
        if (k != axis) out.push_back(x.shape[k]);
        else if (keep) out.push_back(1);
      }
    }
    return std::vector<gk_tensor_desc>{make_desc(GK_DTYPE_I64, out)};
  };
  return s;
}

OpSchema softmax_like(const char* name) {
  OpSchema s{name, {"x"}, 1, {"out"}, {{"axis", GK_ATTR_INT}}, nullptr, nullptr};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    if (call.input(0).ndim == 0) call.fail_input(0, "is a scalar; " + call.op() + " needs an axis");
    call.normal().set_int("axis", normalise_axis(call, "axis", call.attr_int("axis", -1)));
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, dims(call.input(0)))};
  };
  return s;
}

// layernorm / rmsnorm and their residual-add forms. `first_param` is the index of weight.
OpSchema norm(const char* name, std::vector<std::string> inputs, size_t min_inputs,
              size_t first_param, bool has_residual) {
  std::vector<std::string> outputs = {"out"};
  if (has_residual) outputs.push_back("sum");
  OpSchema s{name, std::move(inputs), min_inputs, outputs, {{"eps", GK_ATTR_FLOAT, 1e-5}}, nullptr,
             nullptr};
  size_t num_outputs = outputs.size();
  s.infer = [first_param, has_residual, num_outputs](const OpCall& call) {
    const gk_tensor_desc& x = call.input(0);
    call.require_dtype_in(0, kFloating);
    if (x.ndim == 0) call.fail_input(0, "is a scalar; " + call.op() + " normalises the last axis");
    if (has_residual) {
      call.require_same_dtype(1, 0);
      call.require_same_shape(1, 0);
    }
    int64_t hidden = x.shape[x.ndim - 1];
    for (size_t p = first_param; p < call.num_inputs(); ++p) {
      call.require_same_dtype(p, 0);
      const gk_tensor_desc& w = call.input(p);
      if (w.ndim != 1 || w.shape[0] != hidden) {
        call.fail_input(p, "has shape " + shape_text(w) + "; expected [" + std::to_string(hidden) +
                               "], the last dimension of input 'x' " + shape_text(x));
      }
    }
    const double eps = call.normal().find("eps")->value.f;  // given or the default
    if (!(eps >= 0.0) || std::isinf(eps)) call.fail_attr("eps", "is " + std::to_string(eps) + "; expected a finite value >= 0");
    return std::vector<gk_tensor_desc>(num_outputs, make_desc(x.dtype, dims(x)));
  };
  return s;
}

OpSchema matmul() {
  OpSchema s{"matmul",
             {"a", "b", "bias"},
             2,
             {"out"},
             {{"transpose_a", GK_ATTR_INT, 0},
              {"transpose_b", GK_ATTR_INT, 0},
              {"alpha", GK_ATTR_FLOAT, 1.0},
              {"beta", GK_ATTR_FLOAT, 0.0},
              {"activation", GK_ATTR_STRING, {}, "none"},
              {"precision", GK_ATTR_STRING, {}, "highest"}},
             nullptr,
             nullptr};
  // b may be a block-quantized weight (docs/ops.md, "matmul with a packed weight"): [N, K]
  // packed along K, read with transpose_b = 1, out f32.
  s.packed_inputs = {1};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    const gk_tensor_desc& a = call.input(0);
    const gk_tensor_desc& b = call.input(1);
    const bool packed_b = dtype_is_packed(b.dtype);
    if (!packed_b) call.require_same_dtype(1, 0);
    if (a.ndim < 2) call.fail_input(0, "has shape " + shape_text(a) + "; expected at least 2 dimensions");
    if (b.ndim < 2) call.fail_input(1, "has shape " + shape_text(b) + "; expected at least 2 dimensions");
    const bool ta = call.flag("transpose_a", false);
    const bool tb = call.flag("transpose_b", false);
    if (packed_b) {
      const std::string head = "is " + std::string(dtype_name(b.dtype)) + " " + shape_text(b) +
                               ", a block-quantized weight; ";
      if (b.ndim != 2) call.fail_input(1, head + "expected 2 dimensions [N, K] (no batch dims)");
      if (!tb) {
        call.fail_input(1, head + "a packed weight is [N, K], blocks along K: expected "
                                  "transpose_b = 1");
      }
      const uint32_t block = dtype_block(b.dtype);
      if (b.shape[1] % block != 0) {
        call.fail_input(1, head + "K = " + std::to_string(b.shape[1]) +
                               " is not a multiple of the block (" + std::to_string(block) + ")");
      }
    }
    int64_t m = ta ? a.shape[a.ndim - 1] : a.shape[a.ndim - 2];
    int64_t k = ta ? a.shape[a.ndim - 2] : a.shape[a.ndim - 1];
    int64_t kb = tb ? b.shape[b.ndim - 1] : b.shape[b.ndim - 2];
    int64_t n = tb ? b.shape[b.ndim - 2] : b.shape[b.ndim - 1];
    if (k != kb) {
      call.fail_input(1, "has shape " + shape_text(b) + (tb ? " (transposed)" : "") +
                             ": its K is " + std::to_string(kb) + " but input 'a' " +
                             shape_text(a) + (ta ? " (transposed)" : "") + " has K = " +
                             std::to_string(k));
    }
    // Batch dims broadcast like NumPy's.
    int32_t batch_a = a.ndim - 2, batch_b = b.ndim - 2;
    int32_t batch = std::max(batch_a, batch_b);
    std::vector<int64_t> out;
    for (int32_t d = 0; d < batch; ++d) {
      int64_t da = d < batch - batch_a ? 1 : a.shape[d - (batch - batch_a)];
      int64_t db = d < batch - batch_b ? 1 : b.shape[d - (batch - batch_b)];
      if (da != db && da != 1 && db != 1) {
        call.fail_input(1, "has batch shape that does not broadcast with input 'a': " +
                               shape_text(b) + " vs " + shape_text(a));
      }
      out.push_back(da == 1 ? db : da);
    }
    out.push_back(m);
    out.push_back(n);
    if (call.num_inputs() == 3) {
      call.require_same_dtype(2, 0);
      const gk_tensor_desc& bias = call.input(2);
      if (bias.ndim != 1 || bias.shape[0] != n) {
        call.fail_input(2, "has shape " + shape_text(bias) + "; expected [" + std::to_string(n) +
                               "] (N of the product)");
      }
    }
    call.require_string_in("activation", {"none", "relu", "gelu", "silu"});
    call.require_string_in("precision", {"highest", "tf32"});
    // A packed weight's product is accumulated and written in f32.
    return std::vector<gk_tensor_desc>{make_desc(packed_b ? GK_DTYPE_F32 : a.dtype, out)};
  };
  s.accepts_output_dtype = [](const OpCall&, size_t, int32_t dtype, int32_t inferred) {
    return dtype == inferred ||
           (dtype == GK_DTYPE_F32 && (inferred == GK_DTYPE_F16 || inferred == GK_DTYPE_BF16));
  };
  return s;
}

OpSchema cast() {
  OpSchema s{"cast", {"x"}, 1, {"out"}, {{"dtype", GK_ATTR_STRING}}, nullptr, nullptr};
  static const std::vector<int32_t> kCastable = {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16,
                                                 GK_DTYPE_BF16, GK_DTYPE_I32, GK_DTYPE_I64};
  s.in_place = true;
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kCastable);
    int32_t target = call.input(0).dtype;
    if (call.attr("dtype")) {
      std::string name = call.attr_string("dtype", "");
      auto d = dtype_from_name(name);
      if (!d || std::find(kCastable.begin(), kCastable.end(), *d) == kCastable.end()) {
        call.fail_attr("dtype", "is '" + name + "'; expected one of " + dtype_list(kCastable));
      }
      target = *d;
      call.normal().set_string("dtype", dtype_name(target));
    }
    return std::vector<gk_tensor_desc>{make_desc(target, dims(call.input(0)))};
  };
  s.accepts_output_dtype = [](const OpCall& call, size_t, int32_t dtype, int32_t inferred) {
    if (call.attr("dtype")) return dtype == inferred;
    return std::find(kCastable.begin(), kCastable.end(), dtype) != kCastable.end();
  };
  return s;
}

}  // namespace

OpRegistry::OpRegistry() {
  for (const char* op : {"add", "sub", "mul", "maximum", "minimum"}) {
    schemas_.push_back(binary(op, kArithmetic));
  }
  schemas_.push_back(binary("div", kFloating));
  schemas_.push_back(binary("pow", kFloating));
  std::vector<int32_t> arithmetic_and_bool = kArithmetic;
  arithmetic_and_bool.push_back(GK_DTYPE_BOOL);
  for (const char* op : {"eq", "ne"}) schemas_.push_back(comparison(op, arithmetic_and_bool));
  for (const char* op : {"lt", "le", "gt", "ge"}) schemas_.push_back(comparison(op, kArithmetic));
  for (const char* op : {"neg", "abs", "relu"}) schemas_.push_back(unary(op, kSigned));
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu"}) {
    schemas_.push_back(unary(op, kFloating));
  }
  schemas_.push_back(unary("gelu", kFloating, {{"approximate", GK_ATTR_STRING, {}, "none"}}));
  schemas_.push_back(gated("swiglu"));
  schemas_.push_back(gated("geglu"));
  schemas_.push_back(cast());
  schemas_.push_back(reduction("sum", kReducible, true));
  schemas_.push_back(reduction("mean", kFloating, true));
  schemas_.push_back(reduction("prod", kReducible, true));
  schemas_.push_back(reduction("max", kReducible, false));
  schemas_.push_back(reduction("min", kReducible, false));
  schemas_.push_back(arg_reduction("argmax"));
  schemas_.push_back(arg_reduction("argmin"));
  schemas_.push_back(softmax_like("softmax"));
  schemas_.push_back(softmax_like("log_softmax"));
  schemas_.push_back(norm("layernorm", {"x", "weight", "bias"}, 1, 1, false));
  schemas_.push_back(norm("rmsnorm", {"x", "weight"}, 1, 1, false));
  schemas_.push_back(norm("add_layernorm", {"x", "residual", "weight", "bias"}, 3, 2, true));
  schemas_.push_back(norm("add_rmsnorm", {"x", "residual", "weight"}, 3, 2, true));
  schemas_.push_back(matmul());
  add_llm_op_schemas(schemas_);
  add_asr_op_schemas(schemas_);
}

}  // namespace gk
