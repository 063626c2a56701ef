// The engine that applies the op rules (op_rules.cpp holds the table): OpCall's checks, the
// registry's lookup, output inference and validation, and the tensor-descriptor checks.
#include "dispatch/op_schema.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/dtype.h"
#include "common/edit_distance.h"
#include "common/error.h"

namespace gk {

std::string dtype_list(const std::vector<int32_t>& dtypes) {
  std::string out;
  for (int32_t d : dtypes) out += (out.empty() ? "" : ", ") + std::string(dtype_name(d));
  return out;
}

// ---- NormalAttrs ----

NormalAttrs& NormalAttrs::operator=(const NormalAttrs& other) {
  if (this == &other) return *this;
  size_ = other.size_;
  ints_used_ = other.ints_used_;
  std::copy_n(other.attrs_, size_, attrs_);
  std::copy_n(other.ints_, ints_used_, ints_);
  for (int32_t i = 0; i < size_; ++i) {  // lists point into this object's storage
    if (attrs_[i].type == GK_ATTR_INTS) {
      attrs_[i].value.ints = ints_ + (other.attrs_[i].value.ints - other.ints_);
    }
  }
  return *this;
}

const gk_attr* NormalAttrs::find(const char* name) const {
  for (int32_t i = 0; i < size_; ++i) {
    if (std::strcmp(attrs_[i].name, name) == 0) return &attrs_[i];
  }
  return nullptr;
}

gk_attr& NormalAttrs::slot(const char* name, int32_t type) {
  gk_attr* a = const_cast<gk_attr*>(find(name));
  if (!a) {
    if (size_ == kCapacity) {
      fail(GK_INTERNAL, std::string("op rules: more than ") + std::to_string(kCapacity) +
                            " attributes (NormalAttrs::kCapacity) at '" + name + "'");
    }
    a = &attrs_[size_++];
  }
  *a = gk_attr{};
  a->name = name;
  a->type = type;
  return *a;
}

void NormalAttrs::set_int(const char* name, int64_t value) {
  slot(name, GK_ATTR_INT).value.i = value;
}

void NormalAttrs::set_float(const char* name, double value) {
  slot(name, GK_ATTR_FLOAT).value.f = value;
}

void NormalAttrs::set_string(const char* name, const char* static_value) {
  slot(name, GK_ATTR_STRING).value.s = static_value;
}

void NormalAttrs::set_ints(const char* name, const int64_t* values, int32_t count) {
  if (count < 0 || count > GK_MAX_DIMS - ints_used_) {
    fail(GK_INTERNAL, std::string("op rules: list attribute '") + name + "' of " +
                          std::to_string(count) + " values exceeds NormalAttrs' storage");
  }
  gk_attr& a = slot(name, GK_ATTR_INTS);
  a.value.ints = ints_ + ints_used_;
  a.count = count;
  std::copy_n(values, count, ints_ + ints_used_);
  ints_used_ += count;
}

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

bool OpCall::flag(const char* name, bool fallback) const {
  const int64_t v = attr_int(name, fallback ? 1 : 0);
  if (v != 0 && v != 1) fail_attr(name, "is " + std::to_string(v) + "; expected 0 or 1");
  if (normal_) normal_->set_int(name, v);
  return v == 1;
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

void OpCall::require_string_in(const char* attr, std::initializer_list<const char*> allowed) const {
  const gk_attr* given = this->attr(attr);
  const gk_attr* fallback = given ? given : normal().find(attr);  // infer() set the fallback
  if (!fallback) fail(GK_INTERNAL, op_ + ": attribute '" + attr + "' has no text_fallback");
  const char* v = fallback->value.s;
  for (const char* a : allowed) {
    if (std::strcmp(v, a) == 0) return normal().set_string(attr, a);
  }
  std::string list;
  for (const char* a : allowed) list += (list.empty() ? "'" : ", '") + std::string(a) + "'";
  fail_attr(attr, "is '" + std::string(v) + "'; expected one of " + list);
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
                                              const gk_attr* attrs, int32_t num_attrs,
                                              NormalAttrs* normal) const {
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
      const bool packed = dtype_is_packed(inputs[i].dtype);
      if (packed && std::find(schema.packed_inputs.begin(), schema.packed_inputs.end(), i) !=
                        schema.packed_inputs.end()) {
        continue;
      }
      if (packed) {
        fail(GK_INVALID_ARGUMENT, schema.name + ": input '" + schema.input_names[i] + "' is " +
                                      dtype_name(inputs[i].dtype) + ", a block-quantized dtype " +
                                      schema.name + " does not read; dequantize it first " +
                                      "(gk_weights_get with dtype f32, f16 or bf16)");
      }
      fail(GK_INVALID_ARGUMENT, schema.name + ": input '" + schema.input_names[i] +
                                    "' has unknown dtype " + std::to_string(inputs[i].dtype));
    }
  }
  // The attributes as given, with the defaults and int-as-float conversions of the schema;
  // the op's rule completes them (axes, strings, defaults that depend on the inputs).
  NormalAttrs scratch;
  if (!normal) normal = &scratch;
  normal->clear();
  OpCall call(schema.name, inputs, attrs, num_attrs, &schema.input_names, normal);
  for (const AttrSpec& spec : schema.attrs) {
    const gk_attr* given = call.attr(spec.name);
    if (spec.type == GK_ATTR_INT && (given || spec.fallback)) {
      normal->set_int(spec.name, given ? given->value.i : int64_t(*spec.fallback));
    } else if (spec.type == GK_ATTR_FLOAT && (given || spec.fallback)) {
      normal->set_float(spec.name, given ? call.attr_float(spec.name, 0.0) : *spec.fallback);
    } else if (spec.type == GK_ATTR_STRING && !given && spec.text_fallback) {
      normal->set_string(spec.name, spec.text_fallback);
    }
  }
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
                          int32_t num_attrs, NormalAttrs* normal) const {
  std::vector<gk_tensor_desc> expected = infer(schema, inputs, attrs, num_attrs, normal);
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
