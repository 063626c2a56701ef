// What `gpukit explain` reads from its command line: shapes, dtypes and attributes, turned
// into the gk_tensor_desc and gk_attr arrays gk_explain takes. The op rules themselves stay
// in the runtime.
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

// Parses "64x64" (or "64,64"; "" or "scalar" is a 0-d shape). Throws std::invalid_argument.
Shape parse_shape(const std::string& text);

// "f32", "bf16", … → gk_dtype; 0 when unknown.
int32_t parse_dtype(const std::string& name);
// The dtype names parse_dtype knows, comma-separated, for error messages.
std::string dtype_names();

// The input descriptors gk_explain takes, one per `--shape` spec: "64x64" (of `dtype`) or
// "i32:64x64" (its own dtype). The outputs are left to the runtime, which infers them by
// the op's own rules (gk_explain with no outputs). Throws std::invalid_argument.
std::vector<gk_tensor_desc> input_descs(int32_t dtype, const std::vector<std::string>& specs);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_OP_SIGNATURES_H_
