// Plugin conformance harness: loads a plugin library through its C entry point with a
// fake host, builds strided test tensors, and calls ops with tensors and attributes.
//
// Nothing here shares code with any plugin: dtype conversions use the compiler's
// _Float16 and plain bit arithmetic, so the harness can judge the plugins' own ones.
#ifndef GPUKIT_TESTS_PLUGINS_PLUGIN_HARNESS_H_
#define GPUKIT_TESTS_PLUGINS_PLUGIN_HARNESS_H_

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpukit/gpukit_plugin.h"

namespace gk::test {

// ---------------------------------------------------------------------------------------
// Dtypes, seen from the test side.

inline size_t dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F64:
    case GK_DTYPE_I64:
      return 8;
    case GK_DTYPE_F32:
    case GK_DTYPE_I32:
      return 4;
    case GK_DTYPE_F16:
    case GK_DTYPE_BF16:
    case GK_DTYPE_I16:
      return 2;
    default:
      return 1;
  }
}

inline const char* dtype_label(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F32:
      return "f32";
    case GK_DTYPE_F64:
      return "f64";
    case GK_DTYPE_F16:
      return "f16";
    case GK_DTYPE_BF16:
      return "bf16";
    case GK_DTYPE_I8:
      return "i8";
    case GK_DTYPE_I16:
      return "i16";
    case GK_DTYPE_I32:
      return "i32";
    case GK_DTYPE_I64:
      return "i64";
    case GK_DTYPE_U8:
      return "u8";
    case GK_DTYPE_BOOL:
      return "bool";
    default:
      return "?";
  }
}

inline bool is_floating(int32_t dtype) {
  return dtype == GK_DTYPE_F32 || dtype == GK_DTYPE_F64 || dtype == GK_DTYPE_F16 ||
         dtype == GK_DTYPE_BF16;
}

inline double f16_bits_to_double(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<double>(h);
}

inline uint16_t double_to_f16_bits(double v) {
  const _Float16 h = static_cast<_Float16>(v);  // the compiler's correctly rounded conversion
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

inline double bf16_bits_to_double(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even at bit 16 of the f32 pattern; NaN stays a quiet NaN.
inline uint16_t double_to_bf16_bits(double v) {
  const float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  const uint32_t low = u & 0xffffu;
  uint32_t high = u >> 16;
  if (low > 0x8000u || (low == 0x8000u && (high & 1u))) ++high;
  return static_cast<uint16_t>(high);
}

// The value `v` rounded to `dtype` (integers truncate and wrap like a C++20 cast).
inline double round_to_dtype(double v, int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F32:
      return static_cast<float>(v);
    case GK_DTYPE_F64:
      return v;
    case GK_DTYPE_F16:
      return f16_bits_to_double(double_to_f16_bits(v));
    case GK_DTYPE_BF16:
      return bf16_bits_to_double(double_to_bf16_bits(v));
    case GK_DTYPE_I8:
      return static_cast<int8_t>(static_cast<int64_t>(v));
    case GK_DTYPE_I16:
      return static_cast<int16_t>(static_cast<int64_t>(v));
    case GK_DTYPE_I32:
      return static_cast<int32_t>(static_cast<int64_t>(v));
    case GK_DTYPE_I64:
      return static_cast<double>(static_cast<int64_t>(v));
    case GK_DTYPE_U8:
      return static_cast<uint8_t>(static_cast<int64_t>(v));
    default:
      return v != 0.0;
  }
}

// ---------------------------------------------------------------------------------------
// A strided tensor over shared host storage. Views (transpose, slice, flip, expand) share
// the storage, so a test can poison a base and check what a call wrote through a view.

class Tensor {
 public:
  Tensor() = default;

  // A contiguous tensor; every byte of its storage is `fill_byte`.
  static Tensor contiguous(int32_t dtype, std::vector<int64_t> shape, uint8_t fill_byte = 0xff) {
    Tensor t;
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.strides_.assign(t.shape_.size(), 0);
    int64_t step = 1;
    for (size_t d = t.shape_.size(); d-- > 0;) {
      t.strides_[d] = step;
      step *= t.shape_[d];
    }
    t.storage_ = std::make_shared<std::vector<uint8_t>>(
        static_cast<size_t>(step) * dtype_bytes(dtype) + 1, fill_byte);
    return t;
  }

  int32_t dtype() const { return dtype_; }
  int32_t ndim() const { return static_cast<int32_t>(shape_.size()); }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t numel() const {
    return std::accumulate(shape_.begin(), shape_.end(), int64_t{1}, std::multiplies<>());
  }

  Tensor transpose(int d0, int d1) const {
    Tensor t = *this;
    std::swap(t.shape_[d0], t.shape_[d1]);
    std::swap(t.strides_[d0], t.strides_[d1]);
    return t;
  }

  // Elements start, start+step, … below stop along `dim` (step > 0).
  Tensor slice(int dim, int64_t start, int64_t stop, int64_t step) const {
    Tensor t = *this;
    t.offset_ += start * strides_[dim];
    t.shape_[dim] = stop > start ? (stop - start + step - 1) / step : 0;
    t.strides_[dim] *= step;
    return t;
  }

  // The same elements in reverse order along `dim` (a negative stride).
  Tensor flip(int dim) const {
    Tensor t = *this;
    if (shape_[dim] > 0) t.offset_ += (shape_[dim] - 1) * strides_[dim];
    t.strides_[dim] = -strides_[dim];
    return t;
  }

  // Size-1 dims repeated to `shape` with stride 0 (same ndim).
  Tensor expand(const std::vector<int64_t>& shape) const {
    Tensor t = *this;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape_[d] != shape[d]) {
        t.shape_[d] = shape[d];
        t.strides_[d] = 0;
      }
    }
    return t;
  }

  // A fresh contiguous copy of this view (same dtype).
  Tensor clone() const {
    Tensor t = contiguous(dtype_, shape_);
    t.set_values(values());
    return t;
  }

  double get_flat(int64_t linear) const { return load(element_offset(linear)); }
  void set_flat(int64_t linear, double v) { store(element_offset(linear), v); }

  double at(const std::vector<int64_t>& index) const {
    int64_t off = offset_;
    for (size_t d = 0; d < index.size(); ++d) off += index[d] * strides_[d];
    return load(off);
  }

  // Logical row-major values.
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) v[i] = get_flat(i);
    return v;
  }
  void set_values(const std::vector<double>& v) {
    for (int64_t i = 0; i < numel(); ++i) set_flat(i, v[i]);
  }

  // Fills with uniform values in [lo, hi] (integers for integer dtypes), rounded to dtype.
  void fill_random(std::mt19937_64& rng, double lo, double hi) {
    for (int64_t i = 0; i < numel(); ++i) {
      if (is_floating(dtype_)) {
        set_flat(i, std::uniform_real_distribution<double>(lo, hi)(rng));
      } else {
        set_flat(i, static_cast<double>(std::uniform_int_distribution<int64_t>(
                        static_cast<int64_t>(lo), static_cast<int64_t>(hi))(rng)));
      }
    }
  }

  void poison(uint8_t byte = 0xff) { std::fill(storage_->begin(), storage_->end(), byte); }

  // True when every storage byte outside this view's elements still equals `byte`.
  bool untouched_outside_view(uint8_t byte) const {
    std::vector<bool> covered(storage_->size(), false);
    const size_t size = dtype_bytes(dtype_);
    for (int64_t i = 0; i < numel(); ++i) {
      const size_t start = static_cast<size_t>(element_offset(i)) * size;
      for (size_t b = 0; b < size; ++b) covered[start + b] = true;
    }
    for (size_t i = 0; i < covered.size(); ++i) {
      if (!covered[i] && (*storage_)[i] != byte) return false;
    }
    return true;
  }

  // The raw bytes of the view's elements in logical order (for bit-exact comparisons).
  std::vector<uint8_t> element_bytes() const {
    std::vector<uint8_t> out;
    const size_t size = dtype_bytes(dtype_);
    for (int64_t i = 0; i < numel(); ++i) {
      const uint8_t* p = storage_->data() + element_offset(i) * size;
      out.insert(out.end(), p, p + size);
    }
    return out;
  }

  // The descriptor a plugin sees; valid while this Tensor lives and is not modified.
  gk_plugin_tensor plugin_view() const {
    gk_plugin_tensor t{};
    t.data = storage_->data() + offset_ * static_cast<int64_t>(dtype_bytes(dtype_));
    t.dtype = dtype_;
    t.ndim = ndim();
    t.shape = shape_.data();
    t.strides = strides_.data();
    t.flags = 0;
    return t;
  }

  std::string describe() const {
    std::ostringstream s;
    s << dtype_label(dtype_) << "[";
    for (size_t d = 0; d < shape_.size(); ++d) s << (d ? "," : "") << shape_[d];
    s << "] strides [";
    for (size_t d = 0; d < strides_.size(); ++d) s << (d ? "," : "") << strides_[d];
    s << "]";
    return s.str();
  }

 private:
  int64_t element_offset(int64_t linear) const {
    int64_t off = offset_;
    for (size_t d = shape_.size(); d-- > 0;) {
      off += (linear % shape_[d]) * strides_[d];
      linear /= shape_[d];
    }
    return off;
  }

  double load(int64_t element) const {
    const uint8_t* p = storage_->data() + element * static_cast<int64_t>(dtype_bytes(dtype_));
    auto read = [p](auto v) {
      std::memcpy(&v, p, sizeof(v));
      return v;
    };
    switch (dtype_) {
      case GK_DTYPE_F32:
        return read(float{});
      case GK_DTYPE_F64:
        return read(double{});
      case GK_DTYPE_F16:
        return f16_bits_to_double(read(uint16_t{}));
      case GK_DTYPE_BF16:
        return bf16_bits_to_double(read(uint16_t{}));
      case GK_DTYPE_I8:
        return read(int8_t{});
      case GK_DTYPE_I16:
        return read(int16_t{});
      case GK_DTYPE_I32:
        return read(int32_t{});
      case GK_DTYPE_I64:
        return static_cast<double>(read(int64_t{}));
      case GK_DTYPE_U8:
        return read(uint8_t{});
      default:
        return read(uint8_t{});
    }
  }

  void store(int64_t element, double v) {
    uint8_t* p = storage_->data() + element * static_cast<int64_t>(dtype_bytes(dtype_));
    auto write = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
    switch (dtype_) {
      case GK_DTYPE_F32:
        write(static_cast<float>(v));
        break;
      case GK_DTYPE_F64:
        write(v);
        break;
      case GK_DTYPE_F16:
        write(double_to_f16_bits(v));
        break;
      case GK_DTYPE_BF16:
        write(double_to_bf16_bits(v));
        break;
      case GK_DTYPE_I8:
        write(static_cast<int8_t>(v));
        break;
      case GK_DTYPE_I16:
        write(static_cast<int16_t>(v));
        break;
      case GK_DTYPE_I32:
        write(static_cast<int32_t>(v));
        break;
      case GK_DTYPE_I64:
        write(static_cast<int64_t>(v));
        break;
      case GK_DTYPE_U8:
        write(static_cast<uint8_t>(v));
        break;
      default:
        write(static_cast<uint8_t>(v != 0.0));
        break;
    }
  }

  std::shared_ptr<std::vector<uint8_t>> storage_;
  int64_t offset_ = 0;  // in elements
  int32_t dtype_ = GK_DTYPE_F32;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
};

// ---------------------------------------------------------------------------------------
// Attributes, owning their strings and int lists.

// Axes as the core's op rules hand them to plugins (gpukit_plugin.h, "attributes arrive
// normalised"): non-negative, in increasing order. Plugins are called with those only.
inline std::vector<int64_t> normal_axes(std::vector<int64_t> axes, int32_t ndim) {
  for (int64_t& a : axes) a = a < 0 ? a + ndim : a;
  std::sort(axes.begin(), axes.end());
  return axes;
}

class Attrs {
 public:
  Attrs& i(const char* name, int64_t v) {
    return add(name, GK_ATTR_INT, [&](gk_attr& a) { a.value.i = v; });
  }
  Attrs& f(const char* name, double v) {
    return add(name, GK_ATTR_FLOAT, [&](gk_attr& a) { a.value.f = v; });
  }
  Attrs& s(const char* name, std::string v) {
    strings_.push_back(std::make_shared<std::string>(std::move(v)));
    const char* p = strings_.back()->c_str();
    return add(name, GK_ATTR_STRING, [&](gk_attr& a) { a.value.s = p; });
  }
  Attrs& ints(const char* name, std::vector<int64_t> v) {
    lists_.push_back(std::make_shared<std::vector<int64_t>>(std::move(v)));
    const auto& list = *lists_.back();
    return add(name, GK_ATTR_INTS, [&](gk_attr& a) {
      a.value.ints = list.data();
      a.count = static_cast<int32_t>(list.size());
    });
  }
  const gk_attr* data() const { return attrs_.data(); }
  int32_t size() const { return static_cast<int32_t>(attrs_.size()); }

 private:
  template <class F>
  Attrs& add(const char* name, int32_t type, F&& fill) {
    names_.push_back(std::make_shared<std::string>(name));
    gk_attr a{};
    a.name = names_.back()->c_str();
    a.type = type;
    fill(a);
    attrs_.push_back(a);
    return *this;
  }
  std::vector<std::shared_ptr<std::string>> names_, strings_;  // shared: copies stay valid
  std::vector<std::shared_ptr<std::vector<int64_t>>> lists_;
  std::vector<gk_attr> attrs_;
};

// ---------------------------------------------------------------------------------------
// The fake host: logs and errors are captured, memory is malloc, there is no CUDA driver,
// and device 0 is the cpu device (any other id is unknown).

class FakeHost {
 public:
  explicit FakeHost(uint32_t abi_min = GK_PLUGIN_ABI_VERSION,
                    uint32_t abi_max = GK_PLUGIN_ABI_VERSION) {
    services_.struct_size = sizeof(gk_host_services);
    services_.abi_min = abi_min;
    services_.abi_max = abi_max;
    services_.host_context = this;
    services_.plugin_name = "cpu";
    services_.log = &FakeHost::log;
    services_.report_error = &FakeHost::report_error;
    services_.alloc = &FakeHost::alloc;
    services_.free = &FakeHost::free;
    services_.cuda_driver_symbol = &FakeHost::cuda_driver_symbol;
    services_.device_info = &FakeHost::device_info;
  }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  const gk_host_services* services() const { return &services_; }

  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_;
  }
  std::string last_error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_.empty() ? std::string() : errors_.back();
  }
  size_t error_count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_.size();
  }
  std::vector<std::string> logs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return logs_;
  }
  int64_t live_allocations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_allocations_;
  }

 private:
  static FakeHost& self(void* context) { return *static_cast<FakeHost*>(context); }

  static void log(void* context, int32_t level, const char* message) {
    FakeHost& host = self(context);
    std::lock_guard<std::mutex> lock(host.mutex_);
    host.logs_.push_back(std::to_string(level) + ": " + message);
  }
  static void report_error(void* context, const char* message) {
    FakeHost& host = self(context);
    std::lock_guard<std::mutex> lock(host.mutex_);
    host.errors_.emplace_back(message);
  }
  static gk_status alloc(void* context, int32_t, uint64_t bytes, void*, void** out) {
    *out = std::malloc(bytes > 0 ? bytes : 1);
    if (*out == nullptr) return GK_RESOURCE_EXHAUSTED;
    FakeHost& host = self(context);
    std::lock_guard<std::mutex> lock(host.mutex_);
    ++host.live_allocations_;
    return GK_OK;
  }
  static gk_status free(void* context, int32_t, void* ptr, void*) {
    std::free(ptr);
    FakeHost& host = self(context);
    std::lock_guard<std::mutex> lock(host.mutex_);
    --host.live_allocations_;
    return GK_OK;
  }
  static gk_status cuda_driver_symbol(void*, const char*, void** out) {
    *out = nullptr;
    return GK_UNAVAILABLE;
  }
  static gk_status device_info(void*, int32_t device, gk_plugin_device* out) {
    if (device != 0) return GK_OUT_OF_RANGE;
    gk_plugin_device d{};
    d.struct_size = sizeof(d);
    d.id = 0;
    d.kind = GK_DEVICE_KIND_CPU;
    d.sm_count = 2;
    d.total_memory = uint64_t{1} << 32;
    std::memcpy(out, &d, out->struct_size < sizeof(d) ? out->struct_size : sizeof(d));
    return GK_OK;
  }

  gk_host_services services_{};
  mutable std::mutex mutex_;
  std::vector<std::string> errors_, logs_;
  int64_t live_allocations_ = 0;
};

// ---------------------------------------------------------------------------------------
// A loaded plugin: dlopen, entry, init; shutdown and dlclose on destruction.

struct CallResult {
  gk_status supports = GK_OK;  // supports() status
  std::string reason;          // supports() reason when declined
  gk_status launch = GK_OK;    // launch() status (not run when supports declined)
  std::string error;           // what launch reported to the host, if anything

  bool ok() const { return supports == GK_OK && launch == GK_OK; }
  std::string describe() const {
    return "supports=" + std::to_string(supports) + " (" + reason +
           ") launch=" + std::to_string(launch) + " (" + error + ")";
  }
};

class PluginHandle {
 public:
  PluginHandle(const std::string& path, FakeHost& host) : host_(host) {
    library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    entry_ = reinterpret_cast<gk_plugin_entry_fn>(dlsym(library_, GK_PLUGIN_ENTRY_SYMBOL));
    if (entry_ == nullptr) throw std::runtime_error("no gk_plugin_entry in " + path);
  }
  ~PluginHandle() {
    if (api_ != nullptr && api_->shutdown != nullptr && initialized_) api_->shutdown(state_);
    if (library_ != nullptr) dlclose(library_);
  }
  PluginHandle(const PluginHandle&) = delete;
  PluginHandle& operator=(const PluginHandle&) = delete;

  gk_plugin_entry_fn entry() const { return entry_; }
  const gk_plugin_api* api() const { return api_; }

  // Calls the entry and init; the status of whichever failed first.
  gk_status open() {
    gk_status s = entry_(host_.services(), &api_);
    if (s != GK_OK) return s;
    s = api_->init(host_.services(), &state_);
    initialized_ = s == GK_OK;
    return s;
  }

  CallResult call(const std::string& op, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& outputs, const Attrs& attrs = Attrs(),
                  int32_t device = 0) {
    std::vector<gk_plugin_tensor> in, out;
    for (const Tensor& t : inputs) in.push_back(t.plugin_view());
    for (const Tensor& t : outputs) out.push_back(t.plugin_view());
    gk_kernel_args args{};
    args.struct_size = sizeof(args);
    args.op = op.c_str();
    args.device = device;
    args.stream = nullptr;
    args.inputs = in.data();
    args.num_inputs = static_cast<int32_t>(in.size());
    args.outputs = out.data();
    args.num_outputs = static_cast<int32_t>(out.size());
    args.attrs = attrs.data();
    args.num_attrs = attrs.size();
    return call_args(args);
  }

  // supports() then, if accepted, launch() on hand-made args.
  CallResult call_args(const gk_kernel_args& args) {
    CallResult r;
    char reason[512] = "";
    r.supports = api_->supports(state_, &args, reason, sizeof(reason));
    r.reason = reason;
    if (r.supports != GK_OK) return r;
    const size_t before = host_.error_count();
    r.launch = api_->launch(state_, &args);
    if (host_.error_count() > before) r.error = host_.last_error();
    return r;
  }

  // launch() alone, as a host that skipped supports() would call it.
  CallResult launch_only(const gk_kernel_args& args) {
    CallResult r;
    const size_t before = host_.error_count();
    r.launch = api_->launch(state_, &args);
    if (host_.error_count() > before) r.error = host_.last_error();
    return r;
  }

 private:
  FakeHost& host_;
  void* library_ = nullptr;
  gk_plugin_entry_fn entry_ = nullptr;
  const gk_plugin_api* api_ = nullptr;
  void* state_ = nullptr;
  bool initialized_ = false;
};

// ---------------------------------------------------------------------------------------
// Comparison.

// Relative tolerance a plugin is held to per output dtype; 0 means exact.
inline double tolerance(int32_t dtype) {
  switch (dtype) {
    case GK_DTYPE_F32:
      return 1e-5;
    case GK_DTYPE_F64:
      return 1e-12;
    case GK_DTYPE_F16:
    case GK_DTYPE_BF16:
      return 1e-2;
    default:
      return 0.0;
  }
}

// Every element of `got` is within rtol · (|want| + scale) of `want`, where scale is the
// element's magnitude (e.g. Σ|a·b| for a dot product, 1 when not given). NaN must meet NaN
// and an infinity the same infinity. Returns "" or a description of the first mismatches.
inline std::string compare(const Tensor& got, const std::vector<double>& want, double rtol,
                           const std::vector<double>* scale = nullptr) {
  std::ostringstream s;
  int mismatches = 0;
  const std::vector<double> values = got.values();
  if (values.size() != want.size()) return "size mismatch";
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = values[i], w = want[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      const double mag = scale ? (*scale)[i] : 1.0;
      ok = std::fabs(g - w) <= rtol * (std::fabs(w) + mag);
    }
    if (!ok && mismatches++ < 5) s << " [" << i << "] got " << g << " want " << w << ";";
  }
  if (mismatches == 0) return "";
  return std::to_string(mismatches) + " of " + std::to_string(want.size()) + " elements differ (" +
         got.describe() + ", rtol " + std::to_string(rtol) + "):" + s.str();
}

// Calls fn(index) for every index of `shape` in row-major order.
inline void for_each_index(const std::vector<int64_t>& shape,
                           const std::function<void(const std::vector<int64_t>&)>& fn) {
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  std::vector<int64_t> index(shape.size(), 0);
  while (true) {
    fn(index);
    int d = static_cast<int>(shape.size()) - 1;
    for (; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace gk::test

#endif  // GPUKIT_TESTS_PLUGINS_PLUGIN_HARNESS_H_
