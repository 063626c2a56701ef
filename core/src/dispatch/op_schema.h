// The rules of each op in docs/ops.md: argument counts, dtypes, shapes and attributes,
// checked by the core before any plugin sees a call, and the output descriptors they
// imply. Errors name the op, the argument, the expected and the given value.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/limits.h"
#include "gpukit/gpukit.h"

namespace gk {

// A call's attributes in the one form the op's rules hand them to plugins (docs/plugins.md,
// "Attributes arrive normalised"): every attribute the op defines with a default present,
// axes non-negative and sorted, an int given for a float attribute made a float, strings
// the rules' own spellings. Fixed capacity and self-contained: names and strings point to
// static storage, a list of ints into the object itself, never into the caller's memory,
// so a copy (into a dispatch-cache entry and back) stays valid. No heap: it lives on the
// stack of the call that uses it, for that call.
class NormalAttrs {
 public:
  static constexpr int32_t kCapacity = 8;  // the most attributes an op defines (rope)

  NormalAttrs() = default;
  NormalAttrs(const NormalAttrs& other) { *this = other; }
  NormalAttrs& operator=(const NormalAttrs& other);

  const gk_attr* data() const { return attrs_; }
  int32_t size() const { return size_; }
  const gk_attr* find(const char* name) const;

  // Each sets attribute `name` (a static string), replacing its value if it is there.
  void set_int(const char* name, int64_t value);
  void set_float(const char* name, double value);
  void set_string(const char* name, const char* static_value);
  // At most GK_MAX_DIMS values, over all lists.
  void set_ints(const char* name, const int64_t* values, int32_t count);
  void clear() { size_ = 0, ints_used_ = 0; }

 private:
  gk_attr& slot(const char* name, int32_t type);

  gk_attr attrs_[kCapacity];
  int64_t ints_[GK_MAX_DIMS];
  int32_t size_ = 0;
  int32_t ints_used_ = 0;
};

// One call's inputs and attributes, with helpers that fail with the op's name. Views the
// caller's name and descriptors (no copies: it lives for one infer() or validate()). The
// rules write the call's normalised attributes into `normal` (NormalAttrs).
class OpCall {
 public:
  OpCall(const std::string& op, std::span<const gk_tensor_desc> inputs, const gk_attr* attrs,
         int32_t num_attrs, const std::vector<std::string>* input_names,
         NormalAttrs* normal = nullptr)
      : op_(op), inputs_(inputs), attrs_(attrs), num_attrs_(num_attrs),
        input_names_(input_names), normal_(normal) {}

  const std::string& op() const { return op_; }
  size_t num_inputs() const { return inputs_.size(); }
  const gk_tensor_desc& input(size_t i) const { return inputs_[i]; }
  std::string input_name(size_t i) const;

  const gk_attr* attr(const char* name) const;
  int64_t attr_int(const char* name, int64_t fallback) const;
  double attr_float(const char* name, double fallback) const;
  std::string attr_string(const char* name, const std::string& fallback) const;
  // Integer attribute `name` that is a switch (`fallback` when absent): fails unless it is
  // 0 or 1, and plugins receive that value.
  bool flag(const char* name, bool fallback) const;
  // The attributes as plugins will receive them; the rules complete them (infer()).
  NormalAttrs& normal() const { return *normal_; }
  // Fails unless string attribute `attr` (its AttrSpec::text_fallback when absent) is one of
  // `allowed` (static strings); plugins then receive that allowed spelling.
  void require_string_in(const char* attr, std::initializer_list<const char*> allowed) const;

  [[noreturn]] void fail_input(size_t i, const std::string& problem) const;
  [[noreturn]] void fail_attr(const char* name, const std::string& problem) const;

  // Fails unless input i has one of `dtypes`.
  void require_dtype_in(size_t i, const std::vector<int32_t>& dtypes) const;
  // Fails unless input i has input j's dtype.
  void require_same_dtype(size_t i, size_t j) const;
  // Fails unless input i has input j's shape.
  void require_same_shape(size_t i, size_t j) const;

 private:
  const std::string& op_;
  std::span<const gk_tensor_desc> inputs_;
  const gk_attr* attrs_;
  int32_t num_attrs_;
  const std::vector<std::string>* input_names_;
  NormalAttrs* normal_;
};

struct AttrSpec {
  const char* name;
  int32_t type;  // gk_attr_type; GK_ATTR_FLOAT also accepts GK_ATTR_INT
  // What plugins receive when the caller gives none (`text_fallback` for a string). Without
  // one the op's rule fills the attribute in (a default that depends on the inputs, a list),
  // or it stays absent where absence has its own meaning (argmax's `axis`, cast's `dtype`).
  std::optional<double> fallback = std::nullopt;
  const char* text_fallback = nullptr;
};

struct OpSchema {
  std::string name;
  std::vector<std::string> input_names;   // in order; the optional ones last
  size_t min_inputs = 0;
  std::vector<std::string> output_names;
  std::vector<AttrSpec> attrs;
  // Validates the call and returns the outputs' descriptors (contiguous).
  std::function<std::vector<gk_tensor_desc>(const OpCall&)> infer;
  // Whether output `index` may have `dtype` when `inferred` was expected; default: equal.
  std::function<bool(const OpCall&, size_t index, int32_t dtype, int32_t inferred)>
      accepts_output_dtype;
  // Whether an output may be an input exactly (same memory, dtype, shape and strides): true
  // for elementwise ops, where each element is read before the same element is written. Any
  // other overlap of an output with an input is refused for every op.
  bool in_place = false;
  // The input that output 0 must be exactly, or -1: an op that changes part of a tensor and
  // leaves the rest as it is (kv_cache_write into a block pool) writes into it in place.
  int32_t updates_input = -1;
  // Inputs that may have a block-quantized (packed) dtype; the op's rule checks which and
  // how. Any other packed input is refused before the rule runs.
  std::vector<size_t> packed_inputs = {};
};

class OpRegistry {
 public:
  static const OpRegistry& instance();

  const OpSchema* find(std::string_view name) const;
  // Throws NOT_FOUND naming the op, with the closest known name.
  const OpSchema& get(std::string_view name) const;
  const std::vector<OpSchema>& all() const { return schemas_; }

  // Checks argument counts and attributes, then runs the op's rules: the outputs'
  // descriptors for these inputs. With `normal`, also the attributes as plugins receive
  // them (NormalAttrs).
  std::vector<gk_tensor_desc> infer(const OpSchema& schema,
                                    std::span<const gk_tensor_desc> inputs,
                                    const gk_attr* attrs, int32_t num_attrs,
                                    NormalAttrs* normal = nullptr) const;
  // infer() and then checks that each given output matches what the op produces.
  void validate(const OpSchema& schema, std::span<const gk_tensor_desc> inputs,
                std::span<const gk_tensor_desc> outputs, const gk_attr* attrs,
                int32_t num_attrs, NormalAttrs* normal = nullptr) const;
  // The same for vectors (and braced lists of descriptors, which a span cannot take).
  std::vector<gk_tensor_desc> infer(const OpSchema& schema,
                                    const std::vector<gk_tensor_desc>& inputs,
                                    const gk_attr* attrs, int32_t num_attrs,
                                    NormalAttrs* normal = nullptr) const {
    return infer(schema, std::span<const gk_tensor_desc>(inputs), attrs, num_attrs, normal);
  }
  void validate(const OpSchema& schema, const std::vector<gk_tensor_desc>& inputs,
                const std::vector<gk_tensor_desc>& outputs, const gk_attr* attrs,
                int32_t num_attrs, NormalAttrs* normal = nullptr) const {
    validate(schema, std::span<const gk_tensor_desc>(inputs),
             std::span<const gk_tensor_desc>(outputs), attrs, num_attrs, normal);
  }

 private:
  OpRegistry();
  std::vector<OpSchema> schemas_;
};

// "[2, 3, 4]".
std::string shape_text(const gk_tensor_desc& desc);
// "f32, f64": dtype names for a message.
std::string dtype_list(const std::vector<int32_t>& dtypes);
// The element count of a descriptor that check_desc accepted (it cannot overflow then).
int64_t numel(const gk_tensor_desc& desc);

// Fails with INVALID_ARGUMENT, the message starting with `context`, unless `desc` describes
// a tensor the runtime can hold: a known dtype, ndim in 0..GK_MAX_DIMS, no negative
// dimension, at most kMaxTensorBytes of elements and, when it has strides, a farthest
// element within kMaxTensorBytes of the first. A block-quantized dtype is packed: contiguous,
// its innermost dimension a multiple of the block, its bytes (counted in blocks) within
// kMaxTensorBytes. Every entry point that takes a caller's descriptor checks it with this
// before anything multiplies its dimensions.
void check_desc(const gk_tensor_desc& desc, std::string_view context);
// Whether check_layout would accept these, without building a message (hot paths).
bool layout_fits(int32_t dtype, int32_t ndim, const int64_t* shape, const int64_t* strides);
// The same check of a shape and optional strides that are not in a descriptor (DLPack).
void check_layout(int32_t dtype, int32_t ndim, const int64_t* shape, const int64_t* strides,
                  std::string_view context);
// Whether two descriptors have the same ndim and shape.
bool same_shape(const gk_tensor_desc& a, const gk_tensor_desc& b);
// A contiguous descriptor.
gk_tensor_desc make_desc(int32_t dtype, const std::vector<int64_t>& shape);
// Fills desc->strides with the contiguous strides and sets has_strides.
void fill_contiguous_strides(gk_tensor_desc* desc);
// The contiguous strides (in elements) of `shape[0..ndim)`; a 0 dimension counts as 1.
void contiguous_strides(int32_t ndim, const int64_t* shape, int64_t* strides);

}  // namespace gk
