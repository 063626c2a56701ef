// The cpu plugin, called directly through gk_plugin_entry with a fake host, compared op by
// op with plain float64 reference loops on fresh random inputs. Every output is poisoned
// before the call (0xFF bytes: NaN for floating dtypes), so an element left unwritten fails.
//
// The seed is new each run and printed on failure; GPUKIT_TEST_SEED=<n> replays a run.
#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <limits>
#include <map>

#include "plugin_harness.h"

namespace gk::test {
namespace {

constexpr int32_t kF32 = GK_DTYPE_F32, kF64 = GK_DTYPE_F64, kF16 = GK_DTYPE_F16,
                  kBF16 = GK_DTYPE_BF16, kI8 = GK_DTYPE_I8, kI16 = GK_DTYPE_I16,
                  kI32 = GK_DTYPE_I32, kI64 = GK_DTYPE_I64, kU8 = GK_DTYPE_U8;
const std::vector<int32_t> kFloating = {kF32, kF64, kF16, kBF16};
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

uint64_t test_seed() {
  if (const char* env = std::getenv("GPUKIT_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

class CpuPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test_seed();
    rng_.seed(seed_);
    plugin_ = std::make_unique<PluginHandle>(GPUKIT_CPU_PLUGIN_PATH, host_);
    ASSERT_EQ(plugin_->open(), GK_OK) << host_.last_error();
  }
  void TearDown() override {
    if (HasFailure()) {
      std::printf("[ seed ] GPUKIT_TEST_SEED=%llu reproduces this run\n",
                  static_cast<unsigned long long>(seed_));
    }
  }

  Tensor random(int32_t dtype, std::vector<int64_t> shape, double lo = -2.0, double hi = 2.0) {
    Tensor t = Tensor::contiguous(dtype, std::move(shape));
    t.fill_random(rng_, lo, hi);
    return t;
  }
  static Tensor poisoned(int32_t dtype, std::vector<int64_t> shape) {
    return Tensor::contiguous(dtype, std::move(shape), 0xff);
  }
  // Runs op, expecting success and `out` within its dtype's tolerance of `want`.
  void expect_op(const std::string& op, const std::vector<Tensor>& inputs, const Tensor& out,
                 const std::vector<double>& want, const Attrs& attrs = Attrs(),
                 const std::vector<double>* scale = nullptr, double rtol = -1.0) {
    const CallResult r = plugin_->call(op, inputs, {out}, attrs);
    ASSERT_TRUE(r.ok()) << op << ": " << r.describe();
    const std::string diff = compare(out, want, rtol >= 0 ? rtol : tolerance(out.dtype()), scale);
    EXPECT_EQ(diff, "") << op << " " << dtype_label(inputs[0].dtype()) << " input "
                        << inputs[0].describe();
  }

  FakeHost host_;
  std::unique_ptr<PluginHandle> plugin_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// Index of `t`'s element that broadcasting maps output index `out` to.
std::vector<int64_t> broadcast_index(const std::vector<int64_t>& out, const Tensor& t) {
  std::vector<int64_t> index(t.ndim());
  const size_t offset = out.size() - t.ndim();
  for (int32_t d = 0; d < t.ndim(); ++d) index[d] = t.shape()[d] == 1 ? 0 : out[offset + d];
  return index;
}

// NumPy's broadcast of two shapes (assumed compatible).
std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t d = 0; d < n; ++d) {
    const int64_t da = d >= n - a.size() ? a[d - (n - a.size())] : 1;
    const int64_t db = d >= n - b.size() ? b[d - (n - b.size())] : 1;
    out[d] = da == 1 ? db : da;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Entry point and supports().

TEST_F(CpuPlugin, entry_accepts_host_range_containing_plugin_abi_and_returns_cpu_table) {
  const gk_plugin_api* api = plugin_->api();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->abi_version, GK_PLUGIN_ABI_VERSION);
  EXPECT_GE(api->struct_size, GK_PLUGIN_API_SIZE);
  EXPECT_STREQ(api->name, "cpu");
  EXPECT_NE(api->supports, nullptr);
  EXPECT_NE(api->launch, nullptr);
  EXPECT_TRUE(host_.errors().empty());
}

TEST_F(CpuPlugin, entry_declines_host_abi_range_outside_plugin_version_with_message) {
  for (auto [lo, hi] : {std::pair{GK_MAKE_VERSION(2, 0), GK_MAKE_VERSION(3, 1)},
                        std::pair{GK_MAKE_VERSION(0, 1), GK_MAKE_VERSION(0, 9)}}) {
    FakeHost host(lo, hi);
    const gk_plugin_api* api = nullptr;
    EXPECT_EQ(plugin_->entry()(host.services(), &api), GK_FAILED_PRECONDITION);
    EXPECT_EQ(api, nullptr);
    ASSERT_EQ(host.errors().size(), 1u);
    const std::string message = host.last_error();
    const std::string lo_text =
        std::to_string(GK_VERSION_MAJOR(lo)) + "." + std::to_string(GK_VERSION_MINOR(lo));
    const std::string hi_text =
        std::to_string(GK_VERSION_MAJOR(hi)) + "." + std::to_string(GK_VERSION_MINOR(hi));
    const std::string own = std::to_string(GK_PLUGIN_ABI_VERSION_MAJOR) + "." +
                            std::to_string(GK_PLUGIN_ABI_VERSION_MINOR);
    EXPECT_NE(message.find(own), std::string::npos) << message;
    EXPECT_NE(message.find(lo_text), std::string::npos) << message;
    EXPECT_NE(message.find(hi_text), std::string::npos) << message;
  }
}

TEST_F(CpuPlugin, supports_declines_unsupported_dtypes_naming_op_argument_and_dtype) {
  struct Case {
    std::string op;
    std::vector<Tensor> inputs;
    Tensor out;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"div", {random(kI32, {2}), random(kI32, {2})}, poisoned(kI32, {2}), {"div", "'a'", "i32"}},
      {"exp", {random(kI64, {2})}, poisoned(kI64, {2}), {"exp", "'x'", "i64"}},
      {"add",
       {random(GK_DTYPE_BOOL, {2}, 0, 1), random(GK_DTYPE_BOOL, {2}, 0, 1)},
       poisoned(GK_DTYPE_BOOL, {2}),
       {"add", "bool"}},
      {"matmul",
       {random(kI32, {2, 2}), random(kI32, {2, 2})},
       poisoned(kI32, {2, 2}),
       {"matmul", "'a'", "i32"}},
      {"cast", {random(kF32, {2})}, poisoned(kU8, {2}), {"cast", "'out'", "u8"}},
      {"argmax", {random(kF32, {2})}, poisoned(kF32, {}), {"argmax", "'out'", "f32"}},
      {"mean", {random(kI32, {2})}, poisoned(kI32, {}), {"mean", "i32"}},
      {"matmul",
       {random(kF32, {2, 2}), random(kF32, {2, 2})},
       poisoned(kF16, {2, 2}),
       {"matmul", "'out'", "f16"}},
  };
  for (const Case& c : cases) {
    const CallResult r = plugin_->call(c.op, c.inputs, {c.out});
    EXPECT_EQ(r.supports, GK_UNIMPLEMENTED) << c.op;
    for (const std::string& word : c.words) {
      EXPECT_NE(r.reason.find(word), std::string::npos) << c.op << ": " << r.reason;
    }
  }
}

TEST_F(CpuPlugin, supports_declines_unknown_op_attribute_values_and_non_cpu_device) {
  CallResult r = plugin_->call("conv2d", {random(kF32, {2})}, {poisoned(kF32, {2})});
  EXPECT_EQ(r.supports, GK_UNIMPLEMENTED);
  EXPECT_NE(r.reason.find("conv2d"), std::string::npos) << r.reason;

  // Attribute values outside the op's rules never reach a plugin: the core refuses them
  // (tests/core/op_schema_test.cpp). Flags other than 0 and 1, which the rules take, the cpu
  // plugin declines.
  r = plugin_->call("sum", {random(kF32, {2, 3})}, {poisoned(kF32, {2, 3})},
                    Attrs().ints("axes", {}).i("keepdims", 2));
  EXPECT_EQ(r.supports, GK_UNIMPLEMENTED);
  EXPECT_NE(r.reason.find("'keepdims' must be the int 0 or 1"), std::string::npos) << r.reason;

  r = plugin_->call("add", {random(kF32, {2}), random(kF32, {2})}, {poisoned(kF32, {2})}, Attrs(),
                    /*device=*/1);
  EXPECT_EQ(r.supports, GK_UNIMPLEMENTED);
  EXPECT_NE(r.reason.find("device 1"), std::string::npos) << r.reason;
}

TEST_F(CpuPlugin, launch_reports_bad_shapes_to_host_with_op_argument_and_value) {
  // The core validates shapes first; the plugin still refuses to read out of bounds.
  const Tensor a = random(kF32, {2, 3}), b = random(kF32, {4}), out = poisoned(kF32, {2, 3});
  std::vector<gk_plugin_tensor> in = {a.plugin_view(), b.plugin_view()};
  std::vector<gk_plugin_tensor> outs = {out.plugin_view()};
  gk_kernel_args args{};
  args.struct_size = sizeof(args);
  args.op = "add";
  args.inputs = in.data();
  args.num_inputs = 2;
  args.outputs = outs.data();
  args.num_outputs = 1;
  CallResult r = plugin_->launch_only(args);
  EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
  for (const char* word : {"add", "[2, 3]", "[4]"}) {
    EXPECT_NE(r.error.find(word), std::string::npos) << r.error;
  }

  const Tensor ma = random(kF32, {2, 3}), mb = random(kF32, {4, 5}), mout = poisoned(kF32, {2, 5});
  r = plugin_->call("matmul", {ma, mb}, {mout});
  EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("K = 3"), std::string::npos) << r.error;

  r = plugin_->call("max", {random(kF32, {0, 3})}, {poisoned(kF32, {3})},
                    Attrs().ints("axes", {0}));
  EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("empty"), std::string::npos) << r.error;
}

// ---------------------------------------------------------------------------------------
// Elementwise.

double binary_ref(const std::string& op, double a, double b, int32_t dtype) {
  double r = 0;
  if (op == "add") r = a + b;
  if (op == "sub") r = a - b;
  if (op == "mul") r = a * b;
  if (op == "div") r = a / b;
  if (op == "pow") r = std::pow(a, b);
  if (op == "maximum") r = std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b);
  if (op == "minimum") r = std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b);
  return is_floating(dtype) ? r : round_to_dtype(r, dtype);
}

std::vector<double> binary_want(const std::string& op, const Tensor& a, const Tensor& b,
                                const std::vector<int64_t>& out_shape) {
  std::vector<double> want;
  for_each_index(out_shape, [&](const std::vector<int64_t>& i) {
    want.push_back(
        binary_ref(op, a.at(broadcast_index(i, a)), b.at(broadcast_index(i, b)), a.dtype()));
  });
  return want;
}

std::vector<int32_t> binary_dtypes(const std::string& op) {
  if (op == "div" || op == "pow") return kFloating;
  return {kF32, kF64, kF16, kBF16, kI8, kI16, kI32, kI64, kU8};
}

std::pair<double, double> binary_range(const std::string& op, int32_t dtype, bool second) {
  if (!is_floating(dtype)) return dtype == kU8 ? std::pair{0.0, 200.0} : std::pair{-100.0, 100.0};
  if (op == "pow") return second ? std::pair{-2.0, 2.0} : std::pair{0.25, 2.0};
  if (op == "div" && second) return {0.5, 2.0};
  return {-2.0, 2.0};
}

TEST_F(CpuPlugin, binary_ops_match_reference_for_every_dtype_with_numpy_broadcasting) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 1, 5}, {4, 1}}, {{}, {2, 3}},  {{1}, {7}},
      {{2, 3}, {2, 3}},    {{1, 1}, {1}}, {{0, 3}, {3}}};
  for (std::string op : {"add", "sub", "mul", "div", "maximum", "minimum", "pow"}) {
    for (int32_t dtype : binary_dtypes(op)) {
      for (const auto& [sa, sb] : shapes) {
        auto [alo, ahi] = binary_range(op, dtype, false);
        auto [blo, bhi] = binary_range(op, dtype, true);
        const Tensor a = random(dtype, sa, alo, ahi), b = random(dtype, sb, blo, bhi);
        const std::vector<int64_t> out_shape = broadcast_shape(sa, sb);
        const Tensor out = poisoned(dtype, out_shape);
        expect_op(op, {a, b}, out, binary_want(op, a, b, out_shape));
      }
    }
  }
}

TEST_F(CpuPlugin, binary_ops_read_transposed_sliced_flipped_zero_stride_and_write_strided_view) {
  for (int32_t dtype : {kF32, kBF16, kI16, kF64}) {
    for (std::string op : {"add", "mul", "maximum", "sub"}) {
      const Tensor a = random(dtype, {6, 5}).transpose(0, 1);              // [5, 6]
      const Tensor b = random(dtype, {5, 12}).slice(1, 1, 12, 2).flip(0);  // [5, 6]
      const Tensor row = random(dtype, {1, 6}).expand({5, 6});             // stride 0
      Tensor base = poisoned(dtype, {5, 14});
      const Tensor out = base.slice(1, 1, 13, 2).flip(1);  // [5, 6]
      expect_op(op, {a, b}, out, binary_want(op, a, b, {5, 6}));
      EXPECT_TRUE(out.untouched_outside_view(0xff)) << op << " wrote outside its output view";
      base.poison();
      expect_op(op, {row, a}, out, binary_want(op, row, a, {5, 6}));
      EXPECT_TRUE(out.untouched_outside_view(0xff));
    }
  }
}

TEST_F(CpuPlugin, binary_ops_propagate_nan_and_inf_like_numpy) {
  const std::vector<double> av = {kNaN, 1.0, kInf, -kInf, kNaN, 0.0, kInf, 2.0};
  const std::vector<double> bv = {1.0, kNaN, -kInf, -kInf, kNaN, -0.0, kInf, 0.0};
  for (int32_t dtype : kFloating) {
    Tensor a = Tensor::contiguous(dtype, {8}), b = Tensor::contiguous(dtype, {8});
    a.set_values(av);
    b.set_values(bv);
    for (std::string op : {"add", "sub", "mul", "div", "maximum", "minimum"}) {
      const Tensor out = poisoned(dtype, {8});
      expect_op(op, {a, b}, out, binary_want(op, a, b, {8}));
    }
  }
}

TEST_F(CpuPlugin, integer_binary_and_unary_ops_wrap_around_like_numpy) {
  struct Case {
    std::string op;
    int32_t dtype;
    double a, b, want;
  };
  const std::vector<Case> cases = {
      {"add", kI8, 127, 1, -128},
      {"mul", kI8, 100, 3, 44},
      {"sub", kU8, 0, 1, 255},
      {"mul", kI16, 300, 300, 24464},
      {"add", kI32, INT32_MAX, 1, INT32_MIN},
      {"mul", kI64, 4611686018427387904.0, 2, -9223372036854775808.0},
      {"maximum", kI32, -5, -7, -5},
      {"minimum", kU8, 200, 3, 3},
  };
  for (const Case& c : cases) {
    Tensor a = Tensor::contiguous(c.dtype, {1}), b = Tensor::contiguous(c.dtype, {1});
    a.set_flat(0, c.a);
    b.set_flat(0, c.b);
    const Tensor out = poisoned(c.dtype, {1});
    expect_op(c.op, {a, b}, out, {round_to_dtype(c.want, c.dtype)});
  }
  for (int32_t dtype : {kI8, kI16, kI32}) {
    const double lowest = dtype == kI8 ? -128 : dtype == kI16 ? -32768 : INT32_MIN;
    Tensor x = Tensor::contiguous(dtype, {3});
    x.set_values({lowest, -3, 4});
    expect_op("neg", {x}, poisoned(dtype, {3}), {lowest, 3, -4});
    expect_op("abs", {x}, poisoned(dtype, {3}), {lowest, 3, 4});
    expect_op("relu", {x}, poisoned(dtype, {3}), {0, 0, 4});
  }
}

// Comparisons: eq ne lt le gt ge write bool (0 or 1) for every input dtype.

const std::vector<std::string> kCompareOps = {"eq", "ne", "lt", "le", "gt", "ge"};

double compare_ref(const std::string& op, double a, double b) {
  // NaN compares false except for ne, as the C++ operators (and NumPy) do.
  if (op == "eq") return a == b;
  if (op == "ne") return a != b;
  if (op == "lt") return a < b;
  if (op == "le") return a <= b;
  if (op == "gt") return a > b;
  return a >= b;
}

std::vector<double> compare_want(const std::string& op, const Tensor& a, const Tensor& b,
                                 const std::vector<int64_t>& out_shape) {
  std::vector<double> want;
  for_each_index(out_shape, [&](const std::vector<int64_t>& i) {
    want.push_back(compare_ref(op, a.at(broadcast_index(i, a)), b.at(broadcast_index(i, b))));
  });
  return want;
}

TEST_F(CpuPlugin, comparisons_write_bool_for_every_dtype_with_numpy_broadcasting) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 1, 5}, {4, 1}}, {{}, {2, 3}}, {{1}, {7}}, {{2, 3}, {2, 3}}, {{0, 3}, {3}}};
  for (const std::string& op : kCompareOps) {
    for (int32_t dtype : {kF32, kF64, kF16, kBF16, kI8, kI16, kI32, kI64, kU8}) {
      for (const auto& [sa, sb] : shapes) {
        // Values in [0, 3]: many ties, so eq/le/ge differ from lt/gt on most elements.
        Tensor a = random(dtype, sa, 0, 3), b = random(dtype, sb, 0, 3);
        for (Tensor* t : {&a, &b}) {  // whole numbers, so that floats tie too
          for (int64_t i = 0; i < t->numel(); ++i) t->set_flat(i, std::floor(t->get_flat(i)));
        }
        const std::vector<int64_t> out_shape = broadcast_shape(sa, sb);
        const Tensor out = poisoned(GK_DTYPE_BOOL, out_shape);
        expect_op(op, {a, b}, out, compare_want(op, a, b, out_shape));
        for (uint8_t byte : out.element_bytes()) {
          ASSERT_LE(byte, 1) << op << " " << dtype_label(dtype) << ": bool holds 0 or 1";
        }
      }
    }
  }
}

TEST_F(CpuPlugin, comparisons_follow_nan_and_signed_zero_like_numpy_and_read_strided_views) {
  const std::vector<double> av = {kNaN, 1.0, kInf, -kInf, kNaN, 0.0, kInf, 2.0};
  const std::vector<double> bv = {1.0, kNaN, -kInf, -kInf, kNaN, -0.0, kInf, 0.0};
  for (int32_t dtype : kFloating) {
    Tensor a = Tensor::contiguous(dtype, {8}), b = Tensor::contiguous(dtype, {8});
    a.set_values(av);
    b.set_values(bv);
    for (const std::string& op : kCompareOps) {
      expect_op(op, {a, b}, poisoned(GK_DTYPE_BOOL, {8}), compare_want(op, a, b, {8}));
    }
  }
  for (int32_t dtype : {kF32, kBF16, kI16, kI64}) {
    for (const std::string& op : kCompareOps) {
      const Tensor a = random(dtype, {6, 5}, 0, 2).transpose(0, 1);              // [5, 6]
      const Tensor b = random(dtype, {5, 12}, 0, 2).slice(1, 1, 12, 2).flip(0);  // [5, 6]
      const Tensor row = random(dtype, {1, 6}, 0, 2).expand({5, 6});             // stride 0
      Tensor base = poisoned(GK_DTYPE_BOOL, {5, 14});
      const Tensor out = base.slice(1, 1, 13, 2).flip(1);  // [5, 6]
      expect_op(op, {a, b}, out, compare_want(op, a, b, {5, 6}));
      EXPECT_TRUE(out.untouched_outside_view(0xff)) << op << " wrote outside its output view";
      base.poison();
      expect_op(op, {row, a}, out, compare_want(op, row, a, {5, 6}));
      EXPECT_TRUE(out.untouched_outside_view(0xff));
    }
  }
}

TEST_F(CpuPlugin, eq_and_ne_take_bool_as_truth_values_and_ordering_declines_bool) {
  Tensor a = Tensor::contiguous(GK_DTYPE_BOOL, {4}), b = Tensor::contiguous(GK_DTYPE_BOOL, {4});
  a.set_values({1, 0, 1, 0});
  b.set_values({1, 1, 1, 0});
  static_cast<uint8_t*>(a.plugin_view().data)[2] = 2;  // any nonzero byte is true
  expect_op("eq", {a, b}, poisoned(GK_DTYPE_BOOL, {4}), {1, 0, 1, 1});
  expect_op("ne", {a, b}, poisoned(GK_DTYPE_BOOL, {4}), {0, 1, 0, 0});
  for (const char* op : {"lt", "le", "gt", "ge"}) {
    const CallResult r = plugin_->call(op, {a, b}, {poisoned(GK_DTYPE_BOOL, {4})});
    EXPECT_EQ(r.supports, GK_UNIMPLEMENTED) << op;
    EXPECT_NE(r.reason.find("bool"), std::string::npos) << r.reason;
  }
  // The output must be bool; inputs must share a dtype.
  CallResult r = plugin_->call("eq", {random(kF32, {2}), random(kF32, {2})}, {poisoned(kF32, {2})});
  EXPECT_EQ(r.supports, GK_UNIMPLEMENTED);
  EXPECT_NE(r.reason.find("'out'"), std::string::npos) << r.reason;
  r = plugin_->call("lt", {random(kF32, {2}), random(kF64, {2})}, {poisoned(GK_DTYPE_BOOL, {2})});
  EXPECT_EQ(r.supports, GK_UNIMPLEMENTED);
  EXPECT_NE(r.reason.find("'b'"), std::string::npos) << r.reason;
}

TEST_F(CpuPlugin, integer_comparisons_are_exact_at_the_ends_of_each_range) {
  struct Case {
    int32_t dtype;
    double a, b;
  };
  const std::vector<Case> cases = {{kI8, -128, 127},
                                   {kU8, 0, 255},
                                   {kI16, -32768, 32767},
                                   {kI32, INT32_MIN, INT32_MAX},
                                   {kI32, INT32_MAX - 1, INT32_MAX}};
  for (const Case& c : cases) {
    Tensor a = Tensor::contiguous(c.dtype, {1}), b = Tensor::contiguous(c.dtype, {1});
    a.set_flat(0, c.a);
    b.set_flat(0, c.b);
    for (const std::string& op : kCompareOps) {
      expect_op(op, {a, b}, poisoned(GK_DTYPE_BOOL, {1}), {compare_ref(op, c.a, c.b)});
      expect_op(op, {b, a}, poisoned(GK_DTYPE_BOOL, {1}), {compare_ref(op, c.b, c.a)});
    }
  }
}

double gelu_ref(double x, bool tanh_form) {
  if (tanh_form) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

double unary_ref(const std::string& op, double x, bool tanh_form = false) {
  if (op == "neg") return -x;
  if (op == "abs") return std::fabs(x);
  if (op == "exp") return std::exp(x);
  if (op == "log") return std::log(x);
  if (op == "sqrt") return std::sqrt(x);
  if (op == "rsqrt") return 1.0 / std::sqrt(x);
  if (op == "tanh") return std::tanh(x);
  if (op == "sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (op == "relu") return std::isnan(x) ? x : (x > 0 ? x : 0.0);
  if (op == "gelu") return gelu_ref(x, tanh_form);
  if (op == "silu") return x / (1.0 + std::exp(-x));
  return kNaN;
}

const std::vector<std::string> kUnaryOps = {"neg",  "abs",     "exp",  "log",  "sqrt", "rsqrt",
                                            "tanh", "sigmoid", "relu", "gelu", "silu"};

TEST_F(CpuPlugin, unary_ops_match_reference_for_every_dtype_on_strided_views) {
  for (const std::string& op : kUnaryOps) {
    const bool positive = op == "log" || op == "sqrt" || op == "rsqrt";
    std::vector<int32_t> dtypes = kFloating;
    if (op == "neg" || op == "abs" || op == "relu")
      dtypes.insert(dtypes.end(), {kI8, kI16, kI32, kI64});
    for (int32_t dtype : dtypes) {
      for (bool tanh_form : {false, true}) {
        if (tanh_form && op != "gelu") continue;
        const double lo = positive ? 0.05 : (is_floating(dtype) ? -4.0 : -100.0);
        const double hi = is_floating(dtype) ? 4.0 : 100.0;
        const Tensor x = random(dtype, {9, 4}, lo, hi).transpose(0, 1);  // [4, 9]
        Attrs attrs;
        if (tanh_form) attrs.s("approximate", "tanh");
        std::vector<double> want;
        for (double v : x.values()) want.push_back(unary_ref(op, v, tanh_form));
        expect_op(op, {x}, poisoned(dtype, {4, 9}), want, attrs);
        // Tiny and empty shapes, and a strided output.
        const Tensor one = random(dtype, {1}, lo, hi);
        expect_op(op, {one}, poisoned(dtype, {1}), {unary_ref(op, one.get_flat(0), tanh_form)},
                  attrs);
        expect_op(op, {random(dtype, {0, 4})}, poisoned(dtype, {0, 4}), {}, attrs);
        Tensor base = poisoned(dtype, {4, 27});
        const Tensor out = base.slice(1, 2, 27, 3);
        expect_op(op, {x}, out, want, attrs);
        EXPECT_TRUE(out.untouched_outside_view(0xff)) << op;
      }
    }
  }
}

TEST_F(CpuPlugin, unary_ops_propagate_nan_and_inf) {
  const std::vector<double> values = {kNaN, kInf, -kInf, 0.0, -0.0, 1.0, -1.0};
  for (const std::string& op : kUnaryOps) {
    for (int32_t dtype : kFloating) {
      Tensor x = Tensor::contiguous(dtype, {7});
      x.set_values(values);
      std::vector<double> want;
      for (double v : values) want.push_back(round_to_dtype(unary_ref(op, v), dtype));
      expect_op(op, {x}, poisoned(dtype, {7}), want);
    }
  }
}

TEST_F(CpuPlugin, gated_swiglu_and_geglu_match_reference_on_strided_views) {
  for (int32_t dtype : kFloating) {
    for (std::string op : {"swiglu", "geglu"}) {
      for (bool tanh_form : {false, true}) {
        if (tanh_form && op == "swiglu") continue;
        const Tensor gate = random(dtype, {3, 10}, -3, 3).slice(1, 0, 10, 2);  // [3, 5]
        const Tensor up = random(dtype, {5, 3}, -3, 3).transpose(0, 1).flip(0);
        Attrs attrs;
        if (tanh_form) attrs.s("approximate", "tanh");
        std::vector<double> want;
        const std::vector<double> g = gate.values(), u = up.values();
        for (size_t i = 0; i < g.size(); ++i) {
          const double act = op == "swiglu" ? unary_ref("silu", g[i]) : gelu_ref(g[i], tanh_form);
          want.push_back(act * u[i]);
        }
        std::vector<double> scale(want.size(), 3.0);
        expect_op(op, {gate, up}, poisoned(dtype, {3, 5}), want, attrs, &scale);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// cast and the f16/bf16 conversions.

double cast_ref(double v, int32_t to) {
  if (is_floating(to)) return round_to_dtype(v, to);
  if (std::isnan(v)) return 0.0;
  return round_to_dtype(std::trunc(v), to);
}

TEST_F(CpuPlugin, cast_between_every_dtype_pair_matches_reference) {
  const std::vector<int32_t> dtypes = {kF32, kF64, kF16, kBF16, kI32, kI64};
  for (int32_t from : dtypes) {
    for (int32_t to : dtypes) {
      Tensor x = random(from, {5, 7}, -300.0, 300.0).flip(1);
      if (is_floating(from)) {
        x.set_flat(0, kNaN);
        x.set_flat(1, -2.75);
        x.set_flat(2, 2.75);
      }
      std::vector<double> want;
      for (double v : x.values()) want.push_back(cast_ref(v, to));
      Tensor base = poisoned(to, {10, 7});
      const Tensor out = base.slice(0, 0, 10, 2);
      expect_op("cast", {x}, out, want, Attrs(), nullptr, 0.0);
      EXPECT_TRUE(out.untouched_outside_view(0xff));
    }
  }
}

TEST_F(CpuPlugin, cast_from_f16_and_bf16_is_exact_for_every_bit_pattern) {
  for (int32_t from : {kF16, kBF16}) {
    Tensor x = Tensor::contiguous(from, {65536});
    uint16_t* bits = static_cast<uint16_t*>(x.plugin_view().data);
    for (uint32_t i = 0; i < 65536; ++i) bits[i] = static_cast<uint16_t>(i);
    std::vector<double> want = x.values();  // decoded by the harness, not the plugin
    for (int32_t to : {kF32, kF64}) {
      expect_op("cast", {x}, poisoned(to, {65536}), want, Attrs(), nullptr, 0.0);
    }
  }
}

TEST_F(CpuPlugin, cast_to_f16_and_bf16_rounds_to_nearest_even_and_keeps_nan) {
  std::vector<double> values = {1.0 + std::ldexp(1.0, -11),
                                1.0 + 3 * std::ldexp(1.0, -11),  // f16 ties
                                1.0 + std::ldexp(1.0, -8),
                                1.0 + 3 * std::ldexp(1.0, -8),  // bf16 ties
                                65504.0,
                                65519.99,
                                65520.0,
                                -65520.0,
                                1e-8,
                                3e-8,
                                std::ldexp(1.0, -25),
                                std::ldexp(3.0, -26),
                                6.1e-5,
                                -0.0,
                                kInf,
                                -kInf,
                                3.4e38,
                                1e-40,
                                kNaN,
                                -kNaN};
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int i = 0; i < 20000; ++i) {
    uint32_t u = any_bits(rng_);
    float f;
    std::memcpy(&f, &u, 4);
    values.push_back(f);
  }
  const int64_t n = static_cast<int64_t>(values.size());
  for (int32_t from : {kF32, kF64}) {
    Tensor x = Tensor::contiguous(from, {n});
    x.set_values(values);
    for (int32_t to : {kF16, kBF16}) {
      const Tensor out = poisoned(to, {n});
      const CallResult r = plugin_->call("cast", {x}, {out});
      ASSERT_TRUE(r.ok()) << r.describe();
      const uint16_t* got = static_cast<const uint16_t*>(out.plugin_view().data);
      int mismatches = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double v = static_cast<float>(values[i]);  // exactly what the f32 input holds
        if (std::isnan(v)) {
          const bool is_nan = to == kF16 ? (got[i] & 0x7c00) == 0x7c00 && (got[i] & 0x3ff)
                                         : (got[i] & 0x7f80) == 0x7f80 && (got[i] & 0x7f);
          if (!is_nan && mismatches++ < 5) ADD_FAILURE() << "NaN became " << got[i];
          continue;
        }
        const uint16_t want = to == kF16 ? double_to_f16_bits(v) : double_to_bf16_bits(v);
        if (got[i] != want && mismatches++ < 5) {
          ADD_FAILURE() << dtype_label(from) << "->" << dtype_label(to) << " " << v << ": got 0x"
                        << std::hex << got[i] << " want 0x" << want << std::dec;
        }
      }
      EXPECT_EQ(mismatches, 0);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Reductions.

struct ReduceWant {
  std::vector<double> value, scale;
  std::vector<int64_t> shape;
};

ReduceWant reduce_ref(const std::string& op, const Tensor& x, std::vector<int64_t> axes,
                      bool all_axes, bool keepdims) {
  const int32_t nd = x.ndim();
  std::vector<bool> reduced(nd, all_axes);
  for (int64_t a : axes) reduced[a < 0 ? a + nd : a] = true;
  ReduceWant w;
  std::vector<int64_t> kept_shape;
  for (int32_t d = 0; d < nd; ++d) {
    if (!reduced[d]) kept_shape.push_back(x.shape()[d]);
    if (!reduced[d] || keepdims) w.shape.push_back(reduced[d] ? 1 : x.shape()[d]);
  }
  int64_t outputs = 1, count = 1;
  for (int32_t d = 0; d < nd; ++d) (reduced[d] ? count : outputs) *= x.shape()[d];
  const bool integer = !is_floating(x.dtype());
  double init = 0.0;
  if (op == "prod") init = 1.0;
  if (op == "max") init = -kInf;
  if (op == "min") init = kInf;
  w.value.assign(outputs, init);
  w.scale.assign(outputs, 0.0);
  std::vector<int64_t> wrapped(outputs, op == "prod" ? 1 : 0);
  for_each_index(x.shape(), [&](const std::vector<int64_t>& i) {
    int64_t o = 0;
    for (int32_t d = 0; d < nd; ++d) {
      if (!reduced[d]) o = o * x.shape()[d] + i[d];
    }
    const double v = x.at(i);
    double& acc = w.value[o];
    if (op == "sum" || op == "mean") acc += v;
    if (op == "prod") acc *= v;
    if (op == "max") acc = std::isnan(acc) || std::isnan(v) ? kNaN : std::max(acc, v);
    if (op == "min") acc = std::isnan(acc) || std::isnan(v) ? kNaN : std::min(acc, v);
    if (integer && op == "sum") wrapped[o] = int64_t(uint64_t(wrapped[o]) + uint64_t(v));
    if (integer && op == "prod") wrapped[o] = int64_t(uint64_t(wrapped[o]) * uint64_t(int64_t(v)));
    w.scale[o] += op == "prod" ? 0.0 : std::fabs(v);
  });
  for (int64_t o = 0; o < outputs; ++o) {
    if (op == "mean") {
      w.value[o] /= static_cast<double>(count);
      w.scale[o] /= static_cast<double>(count);
    }
    if (integer && (op == "sum" || op == "prod")) {
      w.value[o] = round_to_dtype(static_cast<double>(wrapped[o]), x.dtype());
    }
    if (op == "prod" || op == "max" || op == "min") w.scale[o] = 1.0;
  }
  return w;
}

TEST_F(CpuPlugin, reductions_match_reference_over_axes_and_keepdims_for_every_dtype) {
  struct AxesCase {
    std::vector<int64_t> axes;
    bool all;
  };
  const std::vector<AxesCase> axes_cases = {{{}, true},        {{0}, false}, {{-1}, false},
                                            {{0, 2}, false},   {{1}, false}, {{}, false},
                                            {{2, 0, 1}, false}};
  for (std::string op : {"sum", "mean", "prod", "max", "min"}) {
    std::vector<int32_t> dtypes = kFloating;
    if (op != "mean") dtypes.insert(dtypes.end(), {kI32, kI64});
    for (int32_t dtype : dtypes) {
      for (int layout = 0; layout < 3; ++layout) {
        const bool prod = op == "prod";
        const double lo = is_floating(dtype) ? (prod ? 0.6 : -2.0) : (prod ? -3.0 : -50.0);
        const double hi = is_floating(dtype) ? (prod ? 1.4 : 2.0) : (prod ? 3.0 : 50.0);
        // Contiguous, transposed and flipped-with-step views of a [3, 4, 5] input.
        Tensor x = layout == 0   ? random(dtype, {3, 4, 5}, lo, hi)
                   : layout == 1 ? random(dtype, {5, 4, 3}, lo, hi).transpose(0, 2)
                                 : random(dtype, {3, 8, 5}, lo, hi).slice(1, 0, 8, 2).flip(2);
        for (const AxesCase& c : axes_cases) {
          for (bool keepdims : {false, true}) {
            Attrs attrs;
            if (!c.all) attrs.ints("axes", normal_axes(c.axes, 3));
            if (keepdims) attrs.i("keepdims", 1);
            const ReduceWant w = reduce_ref(op, x, c.axes, c.all, keepdims);
            expect_op(op, {x}, poisoned(dtype, w.shape), w.value, attrs, &w.scale);
          }
        }
      }
    }
  }
}

TEST_F(CpuPlugin, reductions_of_scalars_single_rows_and_strided_outputs_match_reference) {
  for (int32_t dtype : {kF32, kBF16, kI64}) {
    const Tensor scalar = random(dtype, {});
    expect_op("sum", {scalar}, poisoned(dtype, {}), {scalar.get_flat(0)});
    const Tensor row = random(dtype, {1, 17});
    ReduceWant w = reduce_ref("max", row, {1}, false, false);
    expect_op("max", {row}, poisoned(dtype, {1}), w.value, Attrs().ints("axes", {1}));
    const Tensor x = random(dtype, {6, 7});
    w = reduce_ref("sum", x, {1}, false, false);
    Tensor base = poisoned(dtype, {18});
    const Tensor out = base.slice(0, 1, 18, 3).flip(0);
    expect_op("sum", {x}, out, w.value, Attrs().ints("axes", {1}), &w.scale);
    EXPECT_TRUE(out.untouched_outside_view(0xff));
  }
}

TEST_F(CpuPlugin, empty_reductions_give_identity_or_nan_and_max_min_refuse) {
  for (int32_t dtype : kFloating) {
    const Tensor x = random(dtype, {0, 3});
    expect_op("sum", {x}, poisoned(dtype, {3}), {0, 0, 0}, Attrs().ints("axes", {0}));
    expect_op("prod", {x}, poisoned(dtype, {3}), {1, 1, 1}, Attrs().ints("axes", {0}));
    expect_op("mean", {x}, poisoned(dtype, {3}), {kNaN, kNaN, kNaN}, Attrs().ints("axes", {0}));
    expect_op("sum", {x}, poisoned(dtype, {0}), {}, Attrs().ints("axes", {1}));
    for (std::string op : {"max", "min", "argmax"}) {
      const Tensor out = poisoned(op == "argmax" ? kI64 : dtype, {3});
      const CallResult r = plugin_->call(
          op, {x}, {out}, op == "argmax" ? Attrs().i("axis", 0) : Attrs().ints("axes", {0}));
      EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT) << op;
      EXPECT_NE(r.error.find(op), std::string::npos) << r.error;
    }
  }
}

TEST_F(CpuPlugin, reductions_propagate_nan_and_reach_infinities) {
  for (int32_t dtype : kFloating) {
    Tensor x = random(dtype, {4, 6});
    x.set_values(
        {kNaN, 1, 2, 3, 4, 5, 1, kInf, -2, 0, 1, 1, -kInf, 1, 2, kNaN, 0, 0, 1, 2, 3, 4, 5, 6});
    for (std::string op : {"sum", "mean", "prod", "max", "min"}) {
      const ReduceWant w = reduce_ref(op, x, {1}, false, false);
      expect_op(op, {x}, poisoned(dtype, {4}), w.value, Attrs().ints("axes", {1}), &w.scale);
    }
  }
}

TEST_F(CpuPlugin, reductions_are_bitwise_deterministic_across_calls_and_memory_layouts) {
  for (int32_t dtype : {kF32, kF16, kF64}) {
    const Tensor x = random(dtype, {257, 33}, -1e3, 1e3);
    // The same logical values stored transposed: same fixed order, so the same bits.
    const Tensor xt = Tensor::contiguous(dtype, {33, 257}).transpose(0, 1);
    Tensor writable = xt;
    writable.set_values(x.values());
    for (std::string op : {"sum", "mean", "prod"}) {
      for (int64_t axis : {0, 1}) {
        const int64_t n = axis == 0 ? 33 : 257;
        const Tensor first = poisoned(dtype, {n}), second = poisoned(dtype, {n}),
                     third = poisoned(dtype, {n});
        const Attrs attrs = Attrs().ints("axes", {axis});
        ASSERT_TRUE(plugin_->call(op, {x}, {first}, attrs).ok());
        ASSERT_TRUE(plugin_->call(op, {x}, {second}, attrs).ok());
        ASSERT_TRUE(plugin_->call(op, {xt}, {third}, attrs).ok());
        EXPECT_EQ(first.element_bytes(), second.element_bytes()) << op;
        EXPECT_EQ(first.element_bytes(), third.element_bytes()) << op << " axis " << axis;
      }
    }
  }
}

std::vector<double> arg_ref(bool max, const Tensor& x, int64_t axis, bool has_axis) {
  std::vector<double> want;
  const std::vector<double> v = x.values();
  auto better = [&](double cand, double best) {
    if (std::isnan(best)) return false;
    if (std::isnan(cand)) return true;
    return max ? cand > best : cand < best;
  };
  if (!has_axis) {
    int64_t best = 0;
    for (int64_t i = 1; i < static_cast<int64_t>(v.size()); ++i) {
      if (better(v[i], v[best])) best = i;
    }
    return {static_cast<double>(best)};
  }
  std::vector<int64_t> out_shape = x.shape();
  out_shape[axis] = 1;
  for_each_index(out_shape, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> j = i;
    int64_t best = 0;
    for (int64_t k = 1; k < x.shape()[axis]; ++k) {
      j[axis] = k;
      std::vector<int64_t> b = i;
      b[axis] = best;
      if (better(x.at(j), x.at(b))) best = k;
    }
    want.push_back(static_cast<double>(best));
  });
  return want;
}

TEST_F(CpuPlugin, argmax_argmin_return_first_extreme_index_on_axis_and_flattened) {
  for (int32_t dtype : {kF32, kF64, kF16, kBF16, kI32, kI64}) {
    for (bool max : {true, false}) {
      const std::string op = max ? "argmax" : "argmin";
      // Few distinct values, so ties are common and the first index must win.
      Tensor x = random(dtype, {4, 3, 5}, -3, 3);
      if (is_floating(dtype)) {
        for (int64_t i = 0; i < x.numel(); ++i) x.set_flat(i, std::round(x.get_flat(i)));
      }
      const Tensor view = x.flip(1);
      for (int64_t axis : {0, 1, 2, -1}) {
        for (bool keepdims : {false, true}) {
          const int64_t a = axis < 0 ? axis + 3 : axis;
          std::vector<int64_t> shape;
          for (int64_t d = 0; d < 3; ++d) {
            if (d != a)
              shape.push_back(view.shape()[d]);
            else if (keepdims)
              shape.push_back(1);
          }
          Attrs attrs = Attrs().i("axis", a);
          if (keepdims) attrs.i("keepdims", 1);
          expect_op(op, {view}, poisoned(kI64, shape), arg_ref(max, view, a, true), attrs);
        }
      }
      expect_op(op, {view}, poisoned(kI64, {}), arg_ref(max, view, 0, false));
      expect_op(op, {view}, poisoned(kI64, {1, 1, 1}), arg_ref(max, view, 0, false),
                Attrs().i("keepdims", 1));
    }
  }
}

TEST_F(CpuPlugin, argmax_argmin_take_the_first_nan_as_extreme) {
  for (int32_t dtype : kFloating) {
    Tensor x = Tensor::contiguous(dtype, {3, 4});
    x.set_values({1, kNaN, 5, kNaN, kInf, 2, -kInf, 0, -1, -1, kNaN, 7});
    for (bool max : {true, false}) {
      const std::string op = max ? "argmax" : "argmin";
      expect_op(op, {x}, poisoned(kI64, {3}), arg_ref(max, x, 1, true), Attrs().i("axis", 1));
      expect_op(op, {x}, poisoned(kI64, {4}), arg_ref(max, x, 0, true), Attrs().i("axis", 0));
      expect_op(op, {x}, poisoned(kI64, {}), {1});
    }
  }
}

// ---------------------------------------------------------------------------------------
// softmax.

std::vector<double> softmax_ref(const Tensor& x, int64_t axis, bool log) {
  std::vector<double> want(static_cast<size_t>(x.numel()));
  std::vector<int64_t> outer = x.shape();
  outer[axis] = 1;
  std::vector<int64_t> strides(x.ndim(), 1);
  for (int32_t d = x.ndim() - 2; d >= 0; --d) strides[d] = strides[d + 1] * x.shape()[d + 1];
  for_each_index(outer, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> j = i;
    double max = -kInf;
    for (int64_t k = 0; k < x.shape()[axis]; ++k) {
      j[axis] = k;
      const double v = x.at(j);
      max = std::isnan(max) || std::isnan(v) ? kNaN : std::max(max, v);
    }
    double sum = 0;
    for (int64_t k = 0; k < x.shape()[axis]; ++k) {
      j[axis] = k;
      sum += std::exp(x.at(j) - max);
    }
    for (int64_t k = 0; k < x.shape()[axis]; ++k) {
      j[axis] = k;
      int64_t flat = 0;
      for (int32_t d = 0; d < x.ndim(); ++d) flat += j[d] * strides[d];
      const double s = x.at(j) - max;
      want[flat] = log ? s - std::log(sum) : std::exp(s) / sum;
    }
  });
  return want;
}

TEST_F(CpuPlugin, softmax_and_log_softmax_match_reference_on_any_axis_and_strided_views) {
  for (int32_t dtype : kFloating) {
    for (bool log : {false, true}) {
      const std::string op = log ? "log_softmax" : "softmax";
      const Tensor x = random(dtype, {4, 10, 6}, -5, 5).slice(1, 0, 10, 2).flip(2);  // [4,5,6]
      for (int64_t axis : {0, 1, 2, -1, -3}) {
        const int64_t a = axis < 0 ? axis + 3 : axis;
        Tensor base = poisoned(dtype, {6, 5, 8});
        const Tensor out = base.slice(2, 1, 5, 1).transpose(0, 2);  // [4, 5, 6], strided
        Attrs attrs;
        if (axis != -1) attrs.i("axis", a);  // absent: the plugin takes the last axis
        expect_op(op, {x}, out, softmax_ref(x, a, log), attrs);
        EXPECT_TRUE(out.untouched_outside_view(0xff));
      }
      const Tensor single = random(dtype, {3, 1});
      expect_op(op, {single}, poisoned(dtype, {3, 1}), softmax_ref(single, 1, log));
    }
  }
}

TEST_F(CpuPlugin, softmax_rows_with_nan_become_nan_and_minus_inf_gets_zero_weight) {
  for (int32_t dtype : kFloating) {
    Tensor x = Tensor::contiguous(dtype, {3, 4});
    x.set_values({1, kNaN, 2, 3, -kInf, 0, 1, -kInf, 0.5, 0.25, -1, 2});
    for (bool log : {false, true}) {
      expect_op(log ? "log_softmax" : "softmax", {x}, poisoned(dtype, {3, 4}),
                softmax_ref(x, 1, log));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Normalisation.

std::vector<double> norm_ref(const std::vector<double>& x, int64_t h, bool rms,
                             const Tensor* weight, const Tensor* bias, double eps) {
  std::vector<double> out(x.size());
  for (size_t row = 0; row < x.size() / h; ++row) {
    const double* v = x.data() + row * h;
    double mean = 0, second = 0;
    if (!rms) {
      for (int64_t j = 0; j < h; ++j) mean += v[j] / h;
    }
    for (int64_t j = 0; j < h; ++j) second += (v[j] - mean) * (v[j] - mean) / h;
    const double rstd = 1.0 / std::sqrt(second + eps);
    for (int64_t j = 0; j < h; ++j) {
      double r = (v[j] - mean) * rstd;
      if (weight) r *= weight->get_flat(j);
      if (bias) r += bias->get_flat(j);
      out[row * h + j] = r;
    }
  }
  return out;
}

TEST_F(CpuPlugin, layernorm_and_rmsnorm_match_reference_with_and_without_weight_and_bias) {
  for (int32_t dtype : kFloating) {
    for (int64_t h : {1, 7, 64}) {
      const Tensor x = random(dtype, {3, 2, 2 * h}, -3, 3).slice(2, 1, 2 * h, 2).flip(0);
      const Tensor weight = random(dtype, {h}, 0.5, 1.5).flip(0);
      const Tensor bias = random(dtype, {2 * h}, -1, 1).slice(0, 0, 2 * h, 2);
      for (int params = 0; params < 3; ++params) {
        std::vector<Tensor> ln_inputs = {x}, rms_inputs = {x};
        if (params >= 1) ln_inputs.push_back(weight), rms_inputs.push_back(weight);
        if (params >= 2) ln_inputs.push_back(bias);
        const Attrs attrs = Attrs().f("eps", 1e-3);
        expect_op("layernorm", ln_inputs, poisoned(dtype, {3, 2, h}),
                  norm_ref(x.values(), h, false, params >= 1 ? &weight : nullptr,
                           params >= 2 ? &bias : nullptr, 1e-3),
                  attrs);
        if (params < 2) {
          // Default eps (1e-5); a strided output.
          Tensor base = poisoned(dtype, {3, 2, 3 * h});
          const Tensor out = base.slice(2, 0, 3 * h, 3);
          expect_op("rmsnorm", rms_inputs, out,
                    norm_ref(x.values(), h, true, params >= 1 ? &weight : nullptr, nullptr, 1e-5));
          EXPECT_TRUE(out.untouched_outside_view(0xff));
        }
      }
    }
  }
}

TEST_F(CpuPlugin, add_layernorm_and_add_rmsnorm_write_sum_and_norm_of_that_sum) {
  for (int32_t dtype : kFloating) {
    for (bool rms : {false, true}) {
      const std::string op = rms ? "add_rmsnorm" : "add_layernorm";
      const int64_t h = 24;
      const Tensor x = random(dtype, {5, h}, -2, 2);
      const Tensor residual = random(dtype, {h, 5}, -2, 2).transpose(0, 1);
      const Tensor weight = random(dtype, {h}, 0.5, 1.5);
      const Tensor bias = random(dtype, {h}, -1, 1);
      std::vector<Tensor> inputs = {x, residual, weight};
      if (!rms) inputs.push_back(bias);
      const Tensor out = poisoned(dtype, {5, h});
      Tensor sum_base = poisoned(dtype, {5, 2 * h});
      const Tensor sum = sum_base.slice(1, 0, 2 * h, 2);
      const CallResult r = plugin_->call(op, inputs, {out, sum}, Attrs().f("eps", 1e-4));
      ASSERT_TRUE(r.ok()) << r.describe();
      std::vector<double> want_sum;
      const std::vector<double> xv = x.values(), rv = residual.values();
      for (size_t i = 0; i < xv.size(); ++i)
        want_sum.push_back(round_to_dtype(xv[i] + rv[i], dtype));
      EXPECT_EQ(compare(sum, want_sum, tolerance(dtype)), "") << op;
      EXPECT_TRUE(sum.untouched_outside_view(0xff));
      EXPECT_EQ(compare(out, norm_ref(want_sum, h, rms, &weight, rms ? nullptr : &bias, 1e-4),
                        tolerance(dtype)),
                "")
          << op << " " << dtype_label(dtype);
    }
  }
}

// ---------------------------------------------------------------------------------------
// matmul.

struct MatmulSpec {
  bool transpose_a = false, transpose_b = false;
  double alpha = 1.0, beta = 0.0;
  bool bias = false;
  std::string activation = "none";
};

struct MatmulWant {
  std::vector<double> value, scale;
};

double activation_ref(const std::string& act, double v) {
  if (act == "relu") return v > 0 ? v : 0.0;
  if (act == "gelu") return gelu_ref(v, false);
  if (act == "silu") return v / (1.0 + std::exp(-v));
  return v;
}

// out_before holds out's values before the call (read when beta != 0).
MatmulWant matmul_ref(const Tensor& a, const Tensor& b, const Tensor* bias,
                      const std::vector<double>& out_before, const std::vector<int64_t>& out_shape,
                      const MatmulSpec& s) {
  MatmulWant w;
  const size_t nd = out_shape.size();
  const int64_t k_dim = s.transpose_a ? a.shape()[a.ndim() - 2] : a.shape()[a.ndim() - 1];
  size_t flat = 0;
  for_each_index(out_shape, [&](const std::vector<int64_t>& o) {
    const int64_t i = o[nd - 2], j = o[nd - 1];
    std::vector<int64_t> ai(a.ndim()), bi(b.ndim());
    for (int32_t d = 0; d < a.ndim() - 2; ++d) {
      const int64_t od = o[nd - 2 - (a.ndim() - 2) + d];
      ai[d] = a.shape()[d] == 1 ? 0 : od;
    }
    for (int32_t d = 0; d < b.ndim() - 2; ++d) {
      const int64_t od = o[nd - 2 - (b.ndim() - 2) + d];
      bi[d] = b.shape()[d] == 1 ? 0 : od;
    }
    double acc = 0, mag = 0;
    for (int64_t k = 0; k < k_dim; ++k) {
      ai[a.ndim() - 2] = s.transpose_a ? k : i;
      ai[a.ndim() - 1] = s.transpose_a ? i : k;
      bi[b.ndim() - 2] = s.transpose_b ? j : k;
      bi[b.ndim() - 1] = s.transpose_b ? k : j;
      const double p = a.at(ai) * b.at(bi);
      acc += p;
      mag += std::fabs(p);
    }
    double v = s.alpha * acc;
    mag = std::fabs(s.alpha) * mag;
    if (s.beta != 0.0) {
      v += s.beta * out_before[flat];
      mag += std::fabs(s.beta * out_before[flat]);
    }
    if (bias) {
      v += bias->get_flat(j);
      mag += std::fabs(bias->get_flat(j));
    }
    w.value.push_back(activation_ref(s.activation, v));
    w.scale.push_back(mag);
    ++flat;
  });
  return w;
}

// Builds a [batch..., M, K]-style operand (transposed storage when asked), runs matmul and
// compares. out_dtype 0 means the input dtype.
void run_matmul_case(PluginHandle& plugin, std::mt19937_64& rng, int32_t dtype, int32_t out_dtype,
                     std::vector<int64_t> a_batch, std::vector<int64_t> b_batch, int64_t m,
                     int64_t n, int64_t k, const MatmulSpec& s) {
  auto make = [&](std::vector<int64_t> batch, int64_t rows, int64_t cols, bool transposed) {
    std::vector<int64_t> shape = batch;
    shape.push_back(transposed ? cols : rows);
    shape.push_back(transposed ? rows : cols);
    Tensor t = Tensor::contiguous(dtype, shape);
    t.fill_random(rng, -1.0, 1.0);
    return t;
  };
  const Tensor a = make(a_batch, m, k, s.transpose_a);
  const Tensor b = make(b_batch, k, n, s.transpose_b);
  std::vector<int64_t> out_shape = broadcast_shape(a_batch, b_batch);
  out_shape.push_back(m);
  out_shape.push_back(n);
  const int32_t od = out_dtype ? out_dtype : dtype;
  Tensor out = Tensor::contiguous(od, out_shape, 0xff);
  if (s.beta != 0.0) out.fill_random(rng, -1.0, 1.0);
  const std::vector<double> before = s.beta != 0.0 ? out.values() : std::vector<double>();
  Tensor bias;
  std::vector<Tensor> inputs = {a, b};
  if (s.bias) {
    bias = Tensor::contiguous(dtype, {n});
    bias.fill_random(rng, -1.0, 1.0);
    inputs.push_back(bias);
  }
  Attrs attrs;
  if (s.transpose_a) attrs.i("transpose_a", 1);
  if (s.transpose_b) attrs.i("transpose_b", 1);
  if (s.alpha != 1.0) attrs.f("alpha", s.alpha);
  if (s.beta != 0.0) attrs.f("beta", s.beta);
  if (s.activation != "none") attrs.s("activation", s.activation);
  const CallResult r = plugin.call("matmul", inputs, {out}, attrs);
  ASSERT_TRUE(r.ok()) << r.describe();
  const MatmulWant w = matmul_ref(a, b, s.bias ? &bias : nullptr, before, out_shape, s);
  // f16/bf16 inputs accumulate in f32: hold an f32 output to f32 accuracy over the terms.
  EXPECT_EQ(compare(out, w.value, tolerance(od), &w.scale), "")
      << dtype_label(dtype) << "->" << dtype_label(od) << " M=" << m << " N=" << n << " K=" << k
      << " ta=" << s.transpose_a << " tb=" << s.transpose_b << " alpha=" << s.alpha
      << " beta=" << s.beta << " bias=" << s.bias << " act=" << s.activation;
}

TEST_F(CpuPlugin, matmul_2d_odd_and_tiny_shapes_match_reference_for_every_dtype) {
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1}, {1, 7, 3}, {5, 1, 4}, {7, 9, 13}, {16, 3, 1}, {3, 4, 0}, {0, 4, 3}, {33, 17, 40}};
  for (int32_t dtype : kFloating) {
    for (auto [m, n, k] : shapes) {
      for (int t = 0; t < 4; ++t) {
        MatmulSpec s;
        s.transpose_a = t & 1;
        s.transpose_b = t & 2;
        run_matmul_case(*plugin_, rng_, dtype, 0, {}, {}, m, n, k, s);
      }
    }
  }
}

// One row of `a` (a decode step) takes BLAS's gemv, reading b in place: every transpose,
// alpha, beta into the old output, bias and activation, a batch, and f32 out of 16-bit inputs.
TEST_F(CpuPlugin, matmul_one_row_products_match_reference) {
  for (int32_t dtype : kFloating) {
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{300, 257}, {1, 5}, {64, 1}}) {
      for (int t = 0; t < 4; ++t) {
        MatmulSpec s;
        s.transpose_a = t & 1;
        s.transpose_b = t & 2;
        s.alpha = t == 3 ? -0.5 : 1.25;
        s.beta = t >= 2 ? 0.75 : 0.0;
        s.bias = t != 1;
        s.activation = t == 2 ? "silu" : "none";
        run_matmul_case(*plugin_, rng_, dtype, 0, {}, {}, 1, n, k, s);
        run_matmul_case(*plugin_, rng_, dtype, 0, {3}, {}, 1, n, k, s);
        if (dtype == kF16 || dtype == kBF16) {
          run_matmul_case(*plugin_, rng_, dtype, kF32, {}, {}, 1, n, k, s);
        }
      }
    }
  }
}

TEST_F(CpuPlugin, matmul_bf16_batched_transposed_matches_reference) {
  MatmulSpec s;
  s.transpose_a = true;
  s.transpose_b = true;
  run_matmul_case(*plugin_, rng_, kBF16, 0, {2, 1}, {3}, 5, 6, 7, s);
  run_matmul_case(*plugin_, rng_, kBF16, kF32, {2, 1}, {3}, 5, 6, 7, s);
}

TEST_F(CpuPlugin, matmul_batched_broadcast_alpha_beta_bias_activation_match_reference) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> batches = {
      {{3}, {3}}, {{2, 1}, {4}}, {{}, {2, 3}}, {{1}, {}}};
  std::vector<MatmulSpec> specs;
  for (const char* act : {"none", "relu", "gelu", "silu"}) {
    MatmulSpec s;
    s.activation = act;
    s.transpose_a = std::string(act) == "relu";
    s.transpose_b = std::string(act) == "gelu" || std::string(act) == "none";
    s.alpha = std::string(act) == "silu" ? -0.5 : 1.5;
    s.beta = std::string(act) == "none" ? 0.0 : 0.75;
    s.bias = std::string(act) != "relu";
    specs.push_back(s);
  }
  for (int32_t dtype : kFloating) {
    for (const auto& [ab, bb] : batches) {
      for (const MatmulSpec& s : specs) {
        run_matmul_case(*plugin_, rng_, dtype, 0, ab, bb, 5, 6, 7, s);
      }
    }
  }
}

TEST_F(CpuPlugin, matmul_f16_and_bf16_inputs_write_f32_output_with_f32_accuracy) {
  for (int32_t dtype : {kF16, kBF16}) {
    MatmulSpec s;
    s.bias = true;
    s.beta = -1.0;
    s.activation = "gelu";
    run_matmul_case(*plugin_, rng_, dtype, kF32, {2}, {2}, 9, 10, 31, s);
    run_matmul_case(*plugin_, rng_, dtype, kF32, {}, {}, 1, 1, 64, MatmulSpec{});
  }
}

TEST_F(CpuPlugin, matmul_reads_sliced_flipped_zero_stride_operands_and_writes_strided_output) {
  for (int32_t dtype : kFloating) {
    const int64_t m = 6, n = 5, k = 4;
    const Tensor a = random(dtype, {m, 2 * k}, -1, 1).slice(1, 0, 2 * k, 2).flip(0);  // [m, k]
    const Tensor b = random(dtype, {1, n}, -1, 1).expand({k, n});  // every row the same
    const Tensor b3 = random(dtype, {n, k}, -1, 1).transpose(0, 1).flip(1);
    const Tensor ab = random(dtype, {1, m, k}, -1, 1).expand({3, m, k});  // batch stride 0
    for (const Tensor& rhs : {b, b3}) {
      // Column stride 2 (packed path) and a transposed (column-major) output.
      Tensor base = poisoned(dtype, {m, 2 * n});
      const Tensor out = base.slice(1, 1, 2 * n, 2);
      ASSERT_TRUE(plugin_->call("matmul", {a, rhs}, {out}).ok());
      MatmulWant w = matmul_ref(a, rhs, nullptr, {}, {m, n}, MatmulSpec{});
      EXPECT_EQ(compare(out, w.value, tolerance(dtype), &w.scale), "") << dtype_label(dtype);
      EXPECT_TRUE(out.untouched_outside_view(0xff));
      const Tensor out_t = poisoned(dtype, {n, m}).transpose(0, 1);
      ASSERT_TRUE(plugin_->call("matmul", {a, rhs}, {out_t}).ok());
      EXPECT_EQ(compare(out_t, w.value, tolerance(dtype), &w.scale), "") << dtype_label(dtype);
    }
    Tensor base3 = poisoned(dtype, {3, m, n + 3});
    const Tensor out3 = base3.slice(2, 2, n + 2, 1);  // row stride n + 3
    ASSERT_TRUE(plugin_->call("matmul", {ab, b3}, {out3}).ok());
    MatmulWant w3 = matmul_ref(ab, b3, nullptr, {}, {3, m, n}, MatmulSpec{});
    EXPECT_EQ(compare(out3, w3.value, tolerance(dtype), &w3.scale), "") << dtype_label(dtype);
    EXPECT_TRUE(out3.untouched_outside_view(0xff));
  }
}

TEST_F(CpuPlugin, matmul_with_empty_k_gives_beta_times_out_plus_bias) {
  for (int32_t dtype : {kF32, kBF16}) {
    for (double beta : {0.0, 2.0}) {
      MatmulSpec s;
      s.beta = beta;
      s.bias = true;
      run_matmul_case(*plugin_, rng_, dtype, 0, {2}, {}, 3, 4, 0, s);
    }
  }
}

}  // namespace
}  // namespace gk::test
