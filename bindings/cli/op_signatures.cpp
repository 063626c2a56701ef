#include "op_signatures.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <stdexcept>

namespace gk::cli {

namespace {

const std::set<std::string> kBinary = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};
const std::set<std::string> kUnary = {"neg",   "abs",     "exp",        "log",  "sqrt",
                                      "rsqrt", "tanh",    "sigmoid",    "relu", "gelu",
                                      "silu",  "softmax", "log_softmax"};
const std::set<std::string> kGated = {"swiglu", "geglu"};
const std::set<std::string> kReduce = {"sum", "mean", "prod", "max", "min"};
const std::set<std::string> kArg = {"argmax", "argmin"};

gk_tensor_desc make_desc(int32_t dtype, const Shape& shape) {
  if (shape.size() > GK_MAX_DIMS) {
    throw std::invalid_argument("shape has " + std::to_string(shape.size()) +
                                " dimensions, the limit is " + std::to_string(GK_MAX_DIMS));
  }
  gk_tensor_desc d{};
  d.struct_size = sizeof(gk_tensor_desc);
  d.dtype = dtype;
  d.ndim = static_cast<int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), d.shape);
  return d;
}

Shape broadcast(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    // Not broadcastable: keep a's extent and let the runtime explain the mismatch.
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t attr_int(const AttrList& attrs, const char* name, int64_t fallback) {
  const gk_attr* a = attrs.find(name);
  return a && a->type == GK_ATTR_INT ? a->value.i : fallback;
}

Shape reduced_shape(const Shape& x, const std::vector<int64_t>& axes, bool all, bool keepdims) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<bool> reduce(x.size(), all);
  for (int64_t axis : axes) {
    int64_t a = axis < 0 ? axis + n : axis;
    if (a >= 0 && a < n) reduce[a] = true;
  }
  Shape out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!reduce[i]) {
      out.push_back(x[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

}  // namespace

void AttrList::add(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw std::invalid_argument("attribute '" + spec + "' is not of the form name=value");
  }
  strings_.push_back(spec.substr(0, eq));
  const std::string& name = strings_.back();
  std::string value = spec.substr(eq + 1);
  // "[1]" / "[0,1]" is always a list of ints; `axes` is a list even when written "0".
  bool list_form = name == "axes";
  if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
    value = value.substr(1, value.size() - 2);
    list_form = true;
  }

  gk_attr attr{};
  attr.name = name.c_str();
  auto parse_int = [](const std::string& s, int64_t* out) {
    if (s.empty()) return false;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (*end != '\0') return false;
    *out = v;
    return true;
  };
  int64_t i = 0;
  char* end = nullptr;
  if (list_form || value.find(',') != std::string::npos) {
    std::vector<int64_t> list;
    size_t start = 0;
    while (!value.empty() && start <= value.size()) {
      size_t comma = value.find(',', start);
      if (comma == std::string::npos) comma = value.size();
      int64_t v = 0;
      if (!parse_int(value.substr(start, comma - start), &v)) {
        throw std::invalid_argument("attribute '" + name + "': '" + value +
                                    "' is not a list of integers");
      }
      list.push_back(v);
      start = comma + 1;
    }
    ints_.push_back(std::move(list));
    attr.type = GK_ATTR_INTS;
    attr.count = static_cast<int32_t>(ints_.back().size());
    attr.value.ints = ints_.back().data();
  } else if (parse_int(value, &i)) {
    attr.type = GK_ATTR_INT;
    attr.value.i = i;
  } else if (double f = std::strtod(value.c_str(), &end); !value.empty() && *end == '\0') {
    attr.type = GK_ATTR_FLOAT;
    attr.value.f = f;
  } else {
    strings_.push_back(value);
    attr.type = GK_ATTR_STRING;
    attr.value.s = strings_.back().c_str();
  }
  attrs_.push_back(attr);
}

const gk_attr* AttrList::find(const std::string& name) const {
  for (const gk_attr& a : attrs_) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

Shape parse_shape(const std::string& text) {
  Shape shape;
  if (text.empty() || text == "scalar") return shape;
  size_t start = 0;
  while (start <= text.size()) {
    size_t sep = text.find_first_of("x,", start);
    if (sep == std::string::npos) sep = text.size();
    const std::string part = text.substr(start, sep - start);
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0) {
      throw std::invalid_argument("shape '" + text + "': '" + part +
                                  "' is not a non-negative integer");
    }
    shape.push_back(v);
    start = sep + 1;
  }
  return shape;
}

int32_t parse_dtype(const std::string& name) {
  for (int32_t d = GK_DTYPE_F32; d <= GK_DTYPE_BOOL; ++d) {
    if (name == gk_dtype_name(d)) return d;
  }
  return 0;
}

std::string dtype_names() {
  std::string names;
  for (int32_t d = GK_DTYPE_F32; d <= GK_DTYPE_BOOL; ++d) {
    names += (names.empty() ? "" : ", ") + std::string(gk_dtype_name(d));
  }
  return names;
}

std::string describe(const gk_tensor_desc& desc) {
  std::string s = gk_dtype_name(desc.dtype);
  s += '[';
  for (int32_t i = 0; i < desc.ndim; ++i) {
    if (i) s += ',';
    s += std::to_string(desc.shape[i]);
  }
  return s + ']';
}

OpDescs build_descs(const std::string& op, int32_t dtype, const std::vector<Shape>& shapes,
                    const AttrList& attrs, int32_t out_dtype) {
  const Shape first = shapes.empty() ? Shape{64, 64} : shapes[0];
  // Input i: the shape the user gave, else `fallback`.
  auto shape_or = [&](size_t i, const Shape& fallback) {
    return i < shapes.size() ? shapes[i] : fallback;
  };
  const Shape hidden = first.empty() ? Shape{1} : Shape{first.back()};
  OpDescs d;
  auto in = [&](const Shape& s) { d.inputs.push_back(make_desc(dtype, s)); };
  auto out = [&](int32_t dt, const Shape& s) { d.outputs.push_back(make_desc(dt, s)); };

  if (kBinary.count(op)) {
    const Shape b = shape_or(1, first);
    in(first);
    in(b);
    out(dtype, broadcast(first, b));
  } else if (kUnary.count(op)) {
    in(first);
    out(dtype, first);
  } else if (kGated.count(op)) {
    in(first);
    in(shape_or(1, first));
    out(dtype, first);
  } else if (op == "cast") {
    in(first);
    out(out_dtype ? out_dtype : (dtype == GK_DTYPE_F32 ? GK_DTYPE_F16 : GK_DTYPE_F32), first);
  } else if (kReduce.count(op) || kArg.count(op)) {
    in(first);
    const bool keepdims = attr_int(attrs, "keepdims", 0) != 0;
    std::vector<int64_t> axes;
    bool all = true;
    const char* axes_name = kArg.count(op) ? "axis" : "axes";
    if (const gk_attr* a = attrs.find(axes_name)) {
      all = false;
      if (a->type == GK_ATTR_INT) axes.push_back(a->value.i);
      if (a->type == GK_ATTR_INTS) axes.assign(a->value.ints, a->value.ints + a->count);
    }
    out(kArg.count(op) ? GK_DTYPE_I64 : dtype, reduced_shape(first, axes, all, keepdims));
  } else if (op == "layernorm" || op == "rmsnorm") {
    in(first);
    in(shape_or(1, hidden));
    if (op == "layernorm") in(shape_or(2, hidden));
    out(dtype, first);
  } else if (op == "add_layernorm" || op == "add_rmsnorm") {
    in(first);
    in(shape_or(1, first));
    in(shape_or(2, hidden));
    if (op == "add_layernorm") in(shape_or(3, hidden));
    out(dtype, first);
    out(dtype, first);
  } else if (op == "matmul") {
    if (first.size() < 2) throw std::invalid_argument("matmul: a needs at least 2 dimensions");
    const bool ta = attr_int(attrs, "transpose_a", 0) != 0;
    const bool tb = attr_int(attrs, "transpose_b", 0) != 0;
    const int64_t m = ta ? first[first.size() - 1] : first[first.size() - 2];
    const int64_t k = ta ? first[first.size() - 2] : first[first.size() - 1];
    // Default b: [K, M] (read as [M, K] with transpose_b), so a square problem by default.
    const Shape b = shape_or(1, tb ? Shape{m, k} : Shape{k, m});
    if (b.size() < 2) throw std::invalid_argument("matmul: b needs at least 2 dimensions");
    in(first);
    in(b);
    if (shapes.size() > 2) in(shapes[2]);  // bias
    const int64_t n = tb ? b[b.size() - 2] : b[b.size() - 1];
    Shape batch = broadcast(Shape(first.begin(), first.end() - 2), Shape(b.begin(), b.end() - 2));
    batch.push_back(m);
    batch.push_back(n);
    out(dtype, batch);
  } else {
    in(first);
    out(dtype, first);
  }
  return d;
}

}  // namespace gk::cli
