// Input and output descriptors for `gpukit explain`: given an op name, the shapes the user
// typed and the attributes, builds the gk_tensor_desc arrays gk_explain takes, following
// the arity and shape rules of docs/ops.md.
#ifndef GPUKIT_BINDINGS_CLI_OP_SIGNATURES_H_
#define GPUKIT_BINDINGS_CLI_OP_SIGNATURES_H_

#include <gpukit/gpukit.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace gk::cli {

using Shape = std::vector<int64_t>;

// Attributes parsed from `name=value` strings; owns the storage the gk_attr point into.
class AttrList {
 public:
  AttrList() = default;
  AttrList(const AttrList&) = delete;  // the gk_attr point into this object's storage
  AttrList& operator=(const AttrList&) = delete;

  // "k=1" int, "k=0.5" float, "k=1,2,-1" or "k=[1]" ints (and "axes" always ints),
  // anything else a string. Throws
  // std::invalid_argument on a missing '='.
  void add(const std::string& spec);
  const gk_attr* data() const { return attrs_.empty() ? nullptr : attrs_.data(); }
  int32_t size() const { return static_cast<int32_t>(attrs_.size()); }
  const gk_attr* find(const std::string& name) const;

 private:
  std::deque<std::string> strings_;
  std::deque<std::vector<int64_t>> ints_;
  std::vector<gk_attr> attrs_;
};

struct OpDescs {
  std::vector<gk_tensor_desc> inputs;
  std::vector<gk_tensor_desc> outputs;
};

// Parses "64x64" (or "64,64"; "" or "scalar" is a 0-d shape). Throws std::invalid_argument.
Shape parse_shape(const std::string& text);

// "f32", "bf16", … → gk_dtype; 0 when unknown.
int32_t parse_dtype(const std::string& name);
// The dtype names parse_dtype knows, comma-separated, for error messages.
std::string dtype_names();

// "f32[64,64]".
std::string describe(const gk_tensor_desc& desc);

// Descriptors for op `op`: shapes[i] is input i; inputs without a shape take a default
// derived from the first (see the .cpp). `out_dtype` (0 = by the op's rule) sets the
// output dtype of `cast`. Throws std::invalid_argument on what cannot be built; an op
// the CLI does not know gets one input and one output of the same shape, so that the
// runtime itself reports it.
OpDescs build_descs(const std::string& op, int32_t dtype, const std::vector<Shape>& shapes,
                    const AttrList& attrs, int32_t out_dtype);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_OP_SIGNATURES_H_
