// Decoding a fuzz input into C-ABI arguments. Every value is chosen by a selector byte that
// leans towards the edges the library must refuse cleanly (negative and huge dimensions,
// 2^31, 2^32, 2^62, INT64_MAX, out-of-range ndim, unknown dtypes and flags) while most
// inputs stay small enough to run an op on. Past the end of the input every read is 0, so
// any byte string decodes. tests/fuzz/make_corpus.py writes seeds in this format: keep the
// two in step.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>

#include "gpukit/gpukit.h"

namespace gk::fuzz {

// Values integer() picks with selector (index << 3) | 5.
inline constexpr int64_t kEdgeIntegers[] = {
    std::numeric_limits<int64_t>::max(),
    std::numeric_limits<int64_t>::min(),
    int64_t(1) << 31,
    (int64_t(1) << 31) - 1,
    int64_t(1) << 32,
    (int64_t(1) << 32) + 1,
    int64_t(1) << 61,
    int64_t(1) << 62,
    (int64_t(1) << 62) + 1,
    int64_t(3037000500),  // just above sqrt(2^63): the square of two of them overflows
    int64_t(1) << 40,
    -(int64_t(1) << 62),
    -(int64_t(1) << 32),
    int64_t(std::numeric_limits<uint32_t>::max()),
    std::numeric_limits<int64_t>::max() - 1,
    int64_t(1) << 21,
};

// ndim values past the 0..8 that ndim() mostly picks, for its selectors 0xF0..0xFF.
inline constexpr int32_t kEdgeNdims[] = {
    9,          10,
    16,         40,
    64,         255,
    1 << 16,    std::numeric_limits<int32_t>::max(),
    -1,         -2,
    -8,         -40,
    -(1 << 16), std::numeric_limits<int32_t>::min(),
    8,          0,
};

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }

  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }

  // sizeof(T) bytes, little-endian; zero-filled past the end.
  template <typename T>
  T raw() {
    unsigned char bytes[sizeof(T)] = {};
    for (size_t i = 0; i < sizeof(T); ++i) bytes[i] = byte();
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    return value;
  }

  // Selector s: s & 7 in 0..2: a dimension 0..8; 3: 1..32; 4: -1..-4; 5: an edge value;
  // 6: a 16-bit value that follows; 7: a raw 64-bit value that follows.
  int64_t integer() {
    uint8_t s = byte();
    int64_t v = s >> 3;
    switch (s & 7) {
      case 0:
      case 1:
      case 2:
        return v % 9;
      case 3:
        return v + 1;
      case 4:
        return -1 - (v & 3);
      case 5:
        return kEdgeIntegers[v % std::size(kEdgeIntegers)];
      case 6:
        return raw<uint16_t>();
      default:
        return raw<int64_t>();
    }
  }

  // An ndim: 0..8 for selectors below 0xF0, else kEdgeNdims.
  int32_t ndim() {
    uint8_t s = byte();
    return s < 0xF0 ? s % 9 : kEdgeNdims[s - 0xF0];
  }

  // A dtype: 0..11 (0 and 11 are unknown) for selectors below 0xFF, else a raw int32.
  int32_t dtype() {
    uint8_t s = byte();
    return s == 0xFF ? raw<int32_t>() : s % 12;
  }

  // Selector s: s & 3 in 0..1: 0.0 or 1.0 by bit 2; 2: an edge value; 3: raw bits.
  double real() {
    static constexpr double kEdges[] = {
        -1.0,
        0.5,
        1e308,
        -1e308,
        std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::quiet_NaN(),
        std::numeric_limits<double>::denorm_min(),
    };
    uint8_t s = byte();
    switch (s & 3) {
      case 0:
      case 1:
        return (s & 4) ? 1.0 : 0.0;
      case 2:
        return kEdges[(s >> 2) % std::size(kEdges)];
      default:
        return raw<double>();
    }
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A descriptor with room behind it, so that a struct_size larger than the caller's struct
// (as a newer header would pass) still points at memory the caller owns.
struct DescBox {
  gk_tensor_desc desc;
  unsigned char tail[64];
};

// struct_size, dtype, ndim, up to 8 dims of shape, has_strides, as many strides, flags.
// When ndim is outside 0..8 all 8 dims are filled, so a reader that trusts ndim sees data.
inline void decode_desc(Input& in, DescBox& box) {
  std::memset(&box, 0, sizeof(box));
  gk_tensor_desc& d = box.desc;
  uint8_t size_selector = in.byte();
  static constexpr size_t kSizes[] = {
      0,
      8,
      GK_TENSOR_DESC_SIZE - 4,
      GK_TENSOR_DESC_SIZE,
      sizeof(gk_tensor_desc) + 8,
      sizeof(DescBox),
  };
  d.struct_size =
      (size_selector & 3) != 3 ? sizeof(gk_tensor_desc) : kSizes[(size_selector >> 2) % 6];
  d.dtype = in.dtype();
  d.ndim = in.ndim();
  int32_t filled = d.ndim >= 0 && d.ndim <= GK_MAX_DIMS ? d.ndim : GK_MAX_DIMS;
  for (int32_t k = 0; k < filled; ++k) d.shape[k] = in.integer();
  uint8_t strides_selector = in.byte();
  d.has_strides = (strides_selector & 3) == 0   ? 0
                  : (strides_selector & 3) == 3 ? strides_selector
                                                : 1;
  // With has_strides 0 the strides are left zero, except when bit 2 asks for stray values.
  if (d.has_strides || (strides_selector & 4)) {
    for (int32_t k = 0; k < filled; ++k) d.strides[k] = in.integer();
  }
  uint8_t flags_selector = in.byte();
  switch (flags_selector & 3) {
    case 0:
    case 1:
      d.flags = 0;
      break;
    case 2:
      d.flags = GK_TENSOR_READ_ONLY;
      break;
    default:
      d.flags = flags_selector;
      break;
  }
}

// The element count of a well-formed descriptor (dtype known, ndim 0..8, no negative dim),
// or -1: malformed or more than `limit` elements. Used to decide whether running an op on a
// tensor the library accepted is cheap; the library's own checks are what is under test.
inline int64_t small_numel(const gk_tensor_desc& d, int64_t limit) {
  if (gk_dtype_size(d.dtype) == 0 || d.ndim < 0 || d.ndim > GK_MAX_DIMS) return -1;
  int64_t n = 1;
  for (int32_t k = 0; k < d.ndim; ++k) {
    if (d.shape[k] < 0) return -1;
    if (d.shape[k] == 0) return 0;
  }
  for (int32_t k = 0; k < d.ndim; ++k) {
    if (d.shape[k] > limit || n * d.shape[k] > limit) return -1;
    n *= d.shape[k];
  }
  return n;
}

// Attribute names the ops read, plus two no op reads.
inline constexpr const char* kAttrNames[] = {
    "axes",  "keepdims", "axis",       "transpose_a", "transpose_b",
    "alpha", "beta",     "activation", "precision",   "approximate",
    "dtype", "",         "bogus",
};

inline constexpr const char* kAttrStrings[] = {
    "none",
    "tanh",
    "relu",
    "gelu",
    "silu",
    "highest",
    "tf32",
    "bf16",
    "f32",
    "i64",
    "",
    "bogus",
    "\xff\xfe\x80 not utf-8",
    "f32\x01",
};

inline constexpr int kMaxAttrInts = 8;

// Attributes with their storage: name, type (mostly 1..4, sometimes unknown), count (-1..8
// for INTS; never more than the ints array holds, as the caller's contract requires) and
// the value for the type.
struct Attrs {
  gk_attr attrs[4];
  int64_t ints[4][kMaxAttrInts];
  int32_t count = 0;

  void decode(Input& in) {
    std::memset(attrs, 0, sizeof(attrs));
    std::memset(ints, 0, sizeof(ints));
    count = in.byte() % 5;
    for (int32_t i = 0; i < count; ++i) {
      gk_attr& a = attrs[i];
      a.name = kAttrNames[in.byte() % std::size(kAttrNames)];
      uint8_t type_selector = in.byte();
      a.type =
          (type_selector & 7) < 6 ? 1 + (type_selector & 7) % 4 : int32_t(type_selector >> 3) - 8;
      switch (a.type) {
        case GK_ATTR_INT:
          a.value.i = in.integer();
          break;
        case GK_ATTR_FLOAT:
          a.value.f = in.real();
          break;
        case GK_ATTR_STRING:
          a.value.s = kAttrStrings[in.byte() % std::size(kAttrStrings)];
          break;
        case GK_ATTR_INTS:
          a.count = int32_t(in.byte() % (kMaxAttrInts + 2)) - 1;
          for (int k = 0; k < kMaxAttrInts; ++k) ints[i][k] = in.integer();
          a.value.ints = ints[i];
          break;
        default:
          a.value.i = in.integer();
          break;
      }
    }
  }
};

}  // namespace gk::fuzz
