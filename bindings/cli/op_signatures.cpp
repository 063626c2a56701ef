#include "op_signatures.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace gk::cli {

namespace {

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

std::vector<gk_tensor_desc> input_descs(int32_t dtype, const std::vector<std::string>& specs) {
  std::vector<gk_tensor_desc> inputs;
  for (const std::string& spec : specs) {
    // "i32:4x8" gives this input its own dtype; "4x8" takes `dtype`.
    const size_t colon = spec.find(':');
    int32_t input_dtype = dtype;
    if (colon != std::string::npos) {
      const std::string name = spec.substr(0, colon);
      input_dtype = parse_dtype(name);
      if (!input_dtype) {
        throw std::invalid_argument("--shape " + spec + ": unknown dtype '" + name +
                                    "' (known: " + dtype_names() + ")");
      }
    }
    inputs.push_back(make_desc(input_dtype, parse_shape(colon == std::string::npos
                                                            ? spec
                                                            : spec.substr(colon + 1))));
  }
  return inputs;
}

}  // namespace gk::cli
