#include "dispatch/op_schema.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/dtype.h"
#include "common/edit_distance.h"
#include "common/error.h"
#include "dispatch/asr_ops.h"
#include "dispatch/llm_ops.h"

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

std::string dtype_list(const std::vector<int32_t>& dtypes) {
  std::string out;
  for (int32_t d : dtypes) out += (out.empty() ? "" : ", ") + std::string(dtype_name(d));
  return out;
}

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

// The reduced axes from attr `axes` (all when absent), normalised and checked.
std::vector<bool> reduced_axes(const OpCall& call) {
  int32_t ndim = call.input(0).ndim;
  std::vector<bool> reduce(size_t(ndim), false);
  const gk_attr* axes = call.attr("axes");
  if (!axes) {
    std::fill(reduce.begin(), reduce.end(), true);
    return reduce;
  }
  for (int32_t k = 0; k < axes->count; ++k) {
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

void require_string_in(const OpCall& call, const char* attr, const std::string& fallback,
                       const std::vector<std::string>& allowed) {
  std::string v = call.attr_string(attr, fallback);
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "'" : ", '") + a + "'";
  call.fail_attr(attr, "is '" + v + "'; expected one of " + list);
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
    if (is_gelu) require_string_in(call, "approximate", "none", {"none", "tanh"});
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, dims(call.input(0)))};
  };
  return s;
}

OpSchema gated(const char* name) {
  OpSchema s{name, {"gate", "up"}, 2, {"out"}, {{"approximate", GK_ATTR_STRING}}, nullptr, nullptr};
  s.in_place = true;
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    call.require_same_dtype(1, 0);
    call.require_same_shape(1, 0);
    require_string_in(call, "approximate", "none", {"none", "tanh"});
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, dims(call.input(0)))};
  };
  return s;
}

OpSchema reduction(const char* name, const std::vector<int32_t>& dtypes, bool empty_allowed) {
  OpSchema s{name, {"x"}, 1, {"out"}, {{"axes", GK_ATTR_INTS}, {"keepdims", GK_ATTR_INT}},
             nullptr, nullptr};
  s.infer = [dtypes, empty_allowed](const OpCall& call) {
    call.require_dtype_in(0, dtypes);
    std::vector<bool> reduce = reduced_axes(call);
    bool keep = call.attr_int("keepdims", 0) != 0;
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
  OpSchema s{name, {"x"}, 1, {"out"}, {{"axis", GK_ATTR_INT}, {"keepdims", GK_ATTR_INT}},
             nullptr, nullptr};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kReducible);
    bool keep = call.attr_int("keepdims", 0) != 0;
    const gk_tensor_desc& x = call.input(0);
    std::vector<int64_t> out;
    if (!call.attr("axis")) {
      if (numel(x) == 0) call.fail_input(0, "is empty: " + call.op() + " needs an element");
      if (keep) out.assign(size_t(x.ndim), 1);
    } else {
      int64_t axis = normalise_axis(call, "axis", call.attr_int("axis", 0));
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
    normalise_axis(call, "axis", call.attr_int("axis", -1));
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, dims(call.input(0)))};
  };
  return s;
}

// layernorm / rmsnorm and their residual-add forms. `first_param` is the index of weight.
OpSchema norm(const char* name, std::vector<std::string> inputs, size_t min_inputs,
              size_t first_param, bool has_residual) {
  std::vector<std::string> outputs = {"out"};
  if (has_residual) outputs.push_back("sum");
  OpSchema s{name, std::move(inputs), min_inputs, outputs, {{"eps", GK_ATTR_FLOAT}}, nullptr,
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
    double eps = call.attr_float("eps", 1e-5);
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
             {{"transpose_a", GK_ATTR_INT},
              {"transpose_b", GK_ATTR_INT},
              {"alpha", GK_ATTR_FLOAT},
              {"beta", GK_ATTR_FLOAT},
              {"activation", GK_ATTR_STRING},
              {"precision", GK_ATTR_STRING}},
             nullptr,
             nullptr};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    call.require_same_dtype(1, 0);
    const gk_tensor_desc& a = call.input(0);
    const gk_tensor_desc& b = call.input(1);
    if (a.ndim < 2) call.fail_input(0, "has shape " + shape_text(a) + "; expected at least 2 dimensions");
    if (b.ndim < 2) call.fail_input(1, "has shape " + shape_text(b) + "; expected at least 2 dimensions");
    bool ta = call.attr_int("transpose_a", 0) != 0;
    bool tb = call.attr_int("transpose_b", 0) != 0;
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
    require_string_in(call, "activation", "none", {"none", "relu", "gelu", "silu"});
    require_string_in(call, "precision", "highest", {"highest", "tf32"});
    return std::vector<gk_tensor_desc>{make_desc(a.dtype, out)};
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

// ---- OpCall ----

std::string OpCall::input_name(size_t i) const {
  if (input_names_ && i < input_names_->size()) return "input '" + (*input_names_)[i] + "'";
  return "input " + std::to_string(i);
}

const gk_attr* OpCall::attr(const char* name) const {
  for (int32_t i = 0; i < num_attrs_; ++i) {
    if (attrs_[i].name && std::strcmp(attrs_[i].name, name) == 0) return &attrs_[i];
  }
  return nullptr;
}

int64_t OpCall::attr_int(const char* name, int64_t fallback) const {
  const gk_attr* a = attr(name);
  return a ? a->value.i : fallback;
}

double OpCall::attr_float(const char* name, double fallback) const {
  const gk_attr* a = attr(name);
  if (!a) return fallback;
  return a->type == GK_ATTR_INT ? double(a->value.i) : a->value.f;
}

std::string OpCall::attr_string(const char* name, const std::string& fallback) const {
  const gk_attr* a = attr(name);
  return a && a->value.s ? std::string(a->value.s) : fallback;
}

void OpCall::fail_input(size_t i, const std::string& problem) const {
  fail(GK_INVALID_ARGUMENT, op_ + ": " + input_name(i) + " " + problem);
}

void OpCall::fail_attr(const char* name, const std::string& problem) const {
  fail(GK_INVALID_ARGUMENT, op_ + ": attribute '" + name + "' " + problem);
}

void OpCall::require_dtype_in(size_t i, const std::vector<int32_t>& dtypes) const {
  int32_t d = input(i).dtype;
  if (std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end()) return;
  fail_input(i, "has dtype " + std::string(dtype_name(d)) + "; expected one of " +
                    dtype_list(dtypes));
}

void OpCall::require_same_dtype(size_t i, size_t j) const {
  if (input(i).dtype == input(j).dtype) return;
  fail_input(i, "has dtype " + std::string(dtype_name(input(i).dtype)) + "; expected " +
                    dtype_name(input(j).dtype) + ", the dtype of " + input_name(j));
}

void OpCall::require_same_shape(size_t i, size_t j) const {
  if (same_shape(input(i), input(j))) return;
  fail_input(i, "has shape " + shape_text(input(i)) + "; expected " + shape_text(input(j)) +
                    ", the shape of " + input_name(j));
}

// ---- registry ----

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
  schemas_.push_back(unary("gelu", kFloating, {{"approximate", GK_ATTR_STRING}}));
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

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry registry;
  return registry;
}

const OpSchema* OpRegistry::find(std::string_view name) const {
  for (const OpSchema& s : schemas_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const OpSchema& OpRegistry::get(std::string_view name) const {
  if (const OpSchema* s = find(name)) return *s;
  const OpSchema* closest = nullptr;
  size_t best = 3;  // suggest only near misses
  for (const OpSchema& s : schemas_) {
    size_t d = edit_distance(name, s.name);
    if (d < best) best = d, closest = &s;
  }
  std::string message = "unknown op '" + std::string(name) + "'";
  if (closest) message += " (did you mean '" + closest->name + "'?)";
  message += "; docs/ops.md lists the ops";
  fail(GK_NOT_FOUND, message);
}

std::vector<gk_tensor_desc> OpRegistry::infer(const OpSchema& schema,
                                              std::span<const gk_tensor_desc> inputs,
                                              const gk_attr* attrs, int32_t num_attrs) const {
  size_t max_inputs = schema.input_names.size();
  if (inputs.size() < schema.min_inputs || inputs.size() > max_inputs) {
    std::string expected = schema.min_inputs == max_inputs
                               ? std::to_string(max_inputs)
                               : std::to_string(schema.min_inputs) + " to " +
                                     std::to_string(max_inputs);
    std::string names;
    for (const auto& n : schema.input_names) names += (names.empty() ? "" : ", ") + n;
    fail(GK_INVALID_ARGUMENT, schema.name + ": got " + std::to_string(inputs.size()) +
                                  " inputs; expected " + expected + " (" + names + ")");
  }
  for (int32_t i = 0; i < num_attrs; ++i) {
    const gk_attr& a = attrs[i];
    if (!a.name) fail(GK_INVALID_ARGUMENT, schema.name + ": attribute " + std::to_string(i) + " has a NULL name");
    auto spec = std::find_if(schema.attrs.begin(), schema.attrs.end(),
                             [&](const AttrSpec& s) { return std::strcmp(s.name, a.name) == 0; });
    if (spec == schema.attrs.end()) {
      std::string known;
      for (const auto& s : schema.attrs) known += (known.empty() ? "'" : ", '") + std::string(s.name) + "'";
      fail(GK_INVALID_ARGUMENT, schema.name + ": unknown attribute '" + a.name + "' (" +
                                    (known.empty() ? "it takes none" : "known: " + known) + ")");
    }
    bool type_ok = a.type == spec->type || (spec->type == GK_ATTR_FLOAT && a.type == GK_ATTR_INT);
    if (!type_ok) {
      static const char* const kTypeNames[] = {"?", "int", "float", "string", "ints"};
      auto type_name = [](int32_t t) { return t >= 1 && t <= 4 ? kTypeNames[t] : "unknown"; };
      fail(GK_INVALID_ARGUMENT, schema.name + ": attribute '" + a.name + "' has type " +
                                    type_name(a.type) + "; expected " + type_name(spec->type));
    }
    if (a.type == GK_ATTR_STRING && !a.value.s) {
      fail(GK_INVALID_ARGUMENT, schema.name + ": attribute '" + a.name + "' is a NULL string");
    }
    if (a.type == GK_ATTR_INTS && (a.count < 0 || (a.count > 0 && !a.value.ints))) {
      fail(GK_INVALID_ARGUMENT, schema.name + ": attribute '" + a.name + "' has count " +
                                    std::to_string(a.count) + " and no values");
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!dtype_size(inputs[i].dtype)) {
      if (dtype_is_packed(inputs[i].dtype)) {
        fail(GK_INVALID_ARGUMENT, schema.name + ": input '" + schema.input_names[i] + "' is " +
                                      dtype_name(inputs[i].dtype) + ", a block-quantized dtype " +
                                      schema.name + " does not read; dequantize it first " +
                                      "(gk_weights_get with dtype f32, f16 or bf16)");
      }
      fail(GK_INVALID_ARGUMENT, schema.name + ": input '" + schema.input_names[i] +
                                    "' has unknown dtype " + std::to_string(inputs[i].dtype));
    }
  }
  OpCall call(schema.name, inputs, attrs, num_attrs, &schema.input_names);
  std::vector<gk_tensor_desc> outputs = schema.infer(call);
  // Inputs that fit can still make an output that does not (matmul of [n, 1] by [1, n]).
  for (size_t i = 0; i < outputs.size(); ++i) {
    const gk_tensor_desc& d = outputs[i];
    if (!layout_fits(d.dtype, d.ndim, d.shape, nullptr)) {
      check_desc(d, schema.name + ": output '" + schema.output_names[i] + "'");
    }
  }
  return outputs;
}

void OpRegistry::validate(const OpSchema& schema, std::span<const gk_tensor_desc> inputs,
                          std::span<const gk_tensor_desc> outputs, const gk_attr* attrs,
                          int32_t num_attrs) const {
  std::vector<gk_tensor_desc> expected = infer(schema, inputs, attrs, num_attrs);
  if (outputs.size() != expected.size()) {
    fail(GK_INVALID_ARGUMENT, schema.name + ": got " + std::to_string(outputs.size()) +
                                  " outputs; expected " + std::to_string(expected.size()));
  }
  OpCall call(schema.name, inputs, attrs, num_attrs, &schema.input_names);
  for (size_t i = 0; i < outputs.size(); ++i) {
    // Built only for a message: a call that passes allocates no strings.
    auto name_of = [&] { return "output '" + schema.output_names[i] + "'"; };
    if (!same_shape(outputs[i], expected[i])) {
      fail(GK_INVALID_ARGUMENT, schema.name + ": " + name_of() + " has shape " +
                                    shape_text(outputs[i]) + "; expected " +
                                    shape_text(expected[i]));
    }
    bool dtype_ok = schema.accepts_output_dtype
                        ? schema.accepts_output_dtype(call, i, outputs[i].dtype, expected[i].dtype)
                        : outputs[i].dtype == expected[i].dtype;
    if (!dtype_ok) {
      fail(GK_INVALID_ARGUMENT, schema.name + ": " + name_of() + " has dtype " +
                                    dtype_name(outputs[i].dtype) + "; expected " +
                                    dtype_name(expected[i].dtype));
    }
    if (outputs[i].flags & GK_TENSOR_READ_ONLY) {
      fail(GK_INVALID_ARGUMENT, schema.name + ": " + name_of() + " is read-only");
    }
    for (int32_t k = 0; k < outputs[i].ndim; ++k) {
      if (outputs[i].has_strides && outputs[i].strides[k] == 0 && outputs[i].shape[k] > 1) {
        fail(GK_INVALID_ARGUMENT, schema.name + ": " + name_of() + " has stride 0 on dimension " +
                                      std::to_string(k) + " of size " +
                                      std::to_string(outputs[i].shape[k]) +
                                      ", so its elements would overlap");
      }
    }
  }
}

// ---- descriptors ----

std::string shape_text(const gk_tensor_desc& desc) {
  std::string out = "[";
  for (int32_t k = 0; k < desc.ndim; ++k) out += (k ? ", " : "") + std::to_string(desc.shape[k]);
  return out + "]";
}

bool same_shape(const gk_tensor_desc& a, const gk_tensor_desc& b) {
  return a.ndim == b.ndim && std::equal(a.shape, a.shape + a.ndim, b.shape);
}

namespace {

// Each |stride| * size within kMaxTensorBytes (kernels multiply strides by the element size,
// whatever the dimension), and, unless the view is empty, |stride| * (dim - 1) * size summed
// over the dims too. Unsigned 64 bits; false on overflow.
bool reach_fits(int32_t ndim, const int64_t* shape, const int64_t* strides, uint64_t size) {
  const uint64_t limit = uint64_t(kMaxTensorBytes);
  bool empty = false;
  for (int32_t k = 0; k < ndim; ++k) empty |= shape[k] == 0;
  uint64_t reach = 0;
  for (int32_t k = 0; k < ndim; ++k) {
    const uint64_t magnitude = strides[k] < 0 ? 0 - uint64_t(strides[k]) : uint64_t(strides[k]);
    uint64_t step, r;
    if (__builtin_mul_overflow(magnitude, size, &step) || step > limit) return false;
    if (empty) continue;
    if (__builtin_mul_overflow(step, uint64_t(shape[k] - 1), &r) ||
        __builtin_add_overflow(reach, r, &reach) || reach > limit) {
      return false;
    }
  }
  return true;
}

// The product of the dims with a 0-size dim counted as 1, times `unit`, within `limit`: it
// bounds the element count and every contiguous stride, also of an empty tensor.
bool span_fits(int32_t ndim, const int64_t* shape, uint64_t unit, uint64_t limit) {
  uint64_t span = unit;
  for (int32_t k = 0; k < ndim; ++k) {
    if (__builtin_mul_overflow(span, uint64_t(std::max<int64_t>(shape[k], 1)), &span) ||
        span > limit) {
      return false;
    }
  }
  return true;
}

// The packed rule (block-quantized dtypes): contiguous only (a dimension of 1 may have any
// stride), the innermost dimension a multiple of the block, the bytes counted in blocks.
// Returns the problem, or nullptr when the layout fits.
const char* packed_problem(int32_t dtype, int32_t ndim, const int64_t* shape,
                           const int64_t* strides) {
  uint32_t block_bytes = 0;
  const uint32_t block = dtype_block(dtype, &block_bytes);
  if (ndim == 0 || shape[ndim - 1] % block != 0) return "innermost";
  // Whole blocks of the span, so that the strides below cannot overflow either.
  if (!span_fits(ndim, shape, 1, uint64_t(kMaxTensorBytes) / block_bytes * block)) {
    return "bytes";
  }
  if (strides) {
    int64_t expected = 1;
    for (int32_t k = ndim - 1; k >= 0; --k) {
      if (shape[k] != 1 && strides[k] != expected) return "strides";
      expected *= std::max<int64_t>(shape[k], 1);
    }
  }
  return nullptr;
}

}  // namespace

bool layout_fits(int32_t dtype, int32_t ndim, const int64_t* shape, const int64_t* strides) {
  const uint64_t size = dtype_size(dtype);
  if (!size) {
    if (!dtype_is_packed(dtype) || ndim < 0 || ndim > GK_MAX_DIMS) return false;
    for (int32_t k = 0; k < ndim; ++k) {
      if (shape[k] < 0) return false;
    }
    return packed_problem(dtype, ndim, shape, strides) == nullptr;
  }
  if (ndim < 0 || ndim > GK_MAX_DIMS) return false;
  for (int32_t k = 0; k < ndim; ++k) {
    if (shape[k] < 0) return false;
  }
  if (!span_fits(ndim, shape, size, uint64_t(kMaxTensorBytes))) return false;
  return !strides || reach_fits(ndim, shape, strides, size);
}

void check_layout(int32_t dtype, int32_t ndim, const int64_t* shape, const int64_t* strides,
                  std::string_view context) {
  if (layout_fits(dtype, ndim, shape, strides)) return;
  if (!dtype_is_known(dtype)) {
    fail(GK_INVALID_ARGUMENT, std::string(context) + ": dtype " + std::to_string(dtype) +
                                  " is not a gk_dtype (known: " + all_dtype_names() + ")");
  }
  if (ndim < 0 || ndim > GK_MAX_DIMS) {
    fail(GK_INVALID_ARGUMENT, std::string(context) + ": ndim " + std::to_string(ndim) + " is outside 0.." +
                                  std::to_string(GK_MAX_DIMS) + " (GK_MAX_DIMS)");
  }
  gk_tensor_desc shown{};
  shown.ndim = ndim;
  std::copy(shape, shape + ndim, shown.shape);
  for (int32_t k = 0; k < ndim; ++k) {
    if (shape[k] < 0) {
      fail(GK_INVALID_ARGUMENT, std::string(context) + ": shape " + shape_text(shown) +
                                    " has a negative dimension (" + std::to_string(shape[k]) +
                                    " at axis " + std::to_string(k) + ")");
    }
  }
  if (dtype_is_packed(dtype)) {
    uint32_t block_bytes = 0;
    const uint32_t block = dtype_block(dtype, &block_bytes);
    const std::string problem = packed_problem(dtype, ndim, shape, strides);
    const std::string head = std::string(context) + ": " + dtype_name(dtype) +
                             " is block-quantized (blocks of " + std::to_string(block) +
                             " elements, " + std::to_string(block_bytes) + " bytes)";
    if (problem == "innermost") {
      fail(GK_INVALID_ARGUMENT,
           head + "; shape " + shape_text(shown) + " needs an innermost dimension that is a " +
               "multiple of " + std::to_string(block));
    }
    if (problem == "strides") {
      fail(GK_INVALID_ARGUMENT, head + "; a packed tensor is contiguous, but its strides are not");
    }
    fail(GK_INVALID_ARGUMENT, head + "; shape " + shape_text(shown) +
                                  " holds more than 2^62 bytes (kMaxTensorBytes, the largest " +
                                  "tensor)");
  }
  if (layout_fits(dtype, ndim, shape, nullptr)) {
    std::string text = "[";
    for (int32_t k = 0; k < ndim; ++k) text += (k ? ", " : "") + std::to_string(strides[k]);
    fail(GK_INVALID_ARGUMENT, std::string(context) + ": strides " + text + "] over shape " +
                                  shape_text(shown) + " step or reach more than 2^62 bytes " +
                                  "(kMaxTensorBytes, the largest tensor)");
  }
  fail(GK_INVALID_ARGUMENT, std::string(context) + ": shape " + shape_text(shown) + " of " +
                                dtype_name(dtype) + " holds more than 2^62 bytes " +
                                "(kMaxTensorBytes, the largest tensor; a 0-size dimension " +
                                "counts as 1, since it still sets the strides)");
}

void check_desc(const gk_tensor_desc& desc, std::string_view context) {
  check_layout(desc.dtype, desc.ndim, desc.shape, desc.has_strides ? desc.strides : nullptr,
               context);
}

int64_t numel(const gk_tensor_desc& desc) {
  int64_t n = 1;
  for (int32_t k = 0; k < desc.ndim; ++k) n *= desc.shape[k];
  return n;
}

gk_tensor_desc make_desc(int32_t dtype, const std::vector<int64_t>& shape) {
  gk_tensor_desc d{};
  d.struct_size = sizeof(gk_tensor_desc);
  d.dtype = dtype;
  d.ndim = int32_t(shape.size());
  std::copy(shape.begin(), shape.end(), d.shape);
  fill_contiguous_strides(&d);
  return d;
}

void fill_contiguous_strides(gk_tensor_desc* desc) {
  contiguous_strides(desc->ndim, desc->shape, desc->strides);
  desc->has_strides = 1;
}

void contiguous_strides(int32_t ndim, const int64_t* shape, int64_t* strides) {
  // Saturated at INT64_MAX: the op rules fill the strides of an inferred output before
  // check_layout refuses one too large, and that must not overflow first.
  int64_t stride = 1;
  for (int32_t k = ndim - 1; k >= 0; --k) {
    strides[k] = stride;
    if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[k], 1), &stride)) {
      stride = INT64_MAX;
    }
  }
}

}  // namespace gk
