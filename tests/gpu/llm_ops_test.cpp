// The llm ops on a CUDA device (llm_cuda) against the cpu reference on the same inputs:
// embedding, rope, attention (GQA, causal offsets, kv_lengths, strided cache views, block
// pools), kv_cache_write and sample. Inputs are built on the cpu device, rounded to the
// dtype there and copied over, so both sides read the same values; GPU outputs are poisoned
// (NaN) first. Skips, saying why, without a CUDA device.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>

#include "gpu_runtime.h"

namespace gk::test {
namespace {

const std::vector<int32_t> kFloat = {GK_DTYPE_F32, GK_DTYPE_F16, GK_DTYPE_BF16};

struct A {  // one attribute
  std::string name;
  int32_t type;
  int64_t i = 0;
  double f = 0;
  std::string s;
};
A ia(const char* n, int64_t v) {
  return {n, GK_ATTR_INT, v, 0, ""};
}
A fa(const char* n, double v) {
  return {n, GK_ATTR_FLOAT, 0, v, ""};
}
A sa(const char* n, const char* v) {
  return {n, GK_ATTR_STRING, 0, 0, v};
}

class LlmGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = make_gpu_runtime();
    dev_ = first_cuda_device(rt_.get());
    if (dev_ < 0) GTEST_SKIP() << "no CUDA device: " << cuda_absent_reason(rt_.get());
    rng_.seed(seed_);
  }
  void TearDown() override {
    if (HasFailure()) std::printf("[ seed ] %u\n", seed_);
  }

  gk_status call(const std::string& op, const std::vector<gk_tensor*>& in,
                 const std::vector<gk_tensor*>& out, const std::vector<A>& attrs) {
    std::vector<gk_attr> g;
    for (const A& a : attrs) {
      gk_attr x{};
      x.name = a.name.c_str();
      x.type = a.type;
      if (a.type == GK_ATTR_INT) x.value.i = a.i;
      if (a.type == GK_ATTR_FLOAT) x.value.f = a.f;
      if (a.type == GK_ATTR_STRING) x.value.s = a.s.c_str();
      g.push_back(x);
    }
    gk_op_args args{};
    args.struct_size = sizeof(args);
    args.inputs = const_cast<gk_tensor**>(in.data());
    args.num_inputs = int32_t(in.size());
    args.outputs = const_cast<gk_tensor**>(out.data());
    args.num_outputs = int32_t(out.size());
    args.attrs = g.data();
    args.num_attrs = int32_t(g.size());
    return gk_op_call(rt_.get(), op.c_str(), &args);
  }
  void must(gk_status s, const std::string& what) {
    ASSERT_EQ(s, GK_OK) << what << ": " << gk_last_error();
  }
  void check_attention_cases();

  // A cpu tensor of `dtype` holding `values` (rounded to the dtype by the cpu cast).
  TensorPtr cpu(int32_t dtype, const std::vector<int64_t>& shape,
                const std::vector<double>& values) {
    TensorPtr f64 = make_tensor(rt_.get(), GK_DTYPE_F64, shape, 0);
    EXPECT_EQ(gk_copy_from_host(f64.get(), values.data(), values.size() * 8, nullptr), GK_OK);
    if (dtype == GK_DTYPE_F64) return f64;
    TensorPtr out = make_tensor(rt_.get(), dtype, shape, 0);
    EXPECT_EQ(call("cast", {f64.get()}, {out.get()}, {}), GK_OK) << gk_last_error();
    return out;
  }
  TensorPtr random_cpu(int32_t dtype, const std::vector<int64_t>& shape, double lo = -1,
                       double hi = 1) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<double> v(static_cast<size_t>(n));
    std::uniform_real_distribution<double> u(lo, hi);
    for (double& x : v) x = u(rng_);
    return cpu(dtype, shape, v);
  }
  TensorPtr gpu_copy(gk_tensor* src) {
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    gk_tensor_get_desc(src, &d);
    TensorPtr t =
        make_tensor(rt_.get(), d.dtype, std::vector<int64_t>(d.shape, d.shape + d.ndim), dev_);
    EXPECT_EQ(gk_copy(t.get(), src, nullptr), GK_OK) << gk_last_error();
    return t;
  }
  // A poisoned (0xFF bytes) GPU tensor.
  TensorPtr gpu_poisoned(int32_t dtype, const std::vector<int64_t>& shape) {
    TensorPtr t = make_tensor(rt_.get(), dtype, shape, dev_);
    size_t n = gk_dtype_size(dtype);
    for (int64_t d : shape) n *= size_t(d);
    std::vector<uint8_t> poison(n, 0xff);
    EXPECT_EQ(gk_copy_from_host(t.get(), poison.data(), n, nullptr), GK_OK);
    return t;
  }
  // The first `len` positions of axis 1 of `base` (a view: same strides).
  TensorPtr prefix_view(gk_tensor* base, int64_t len) {
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    gk_tensor_get_desc(base, &d);
    d.shape[1] = len;
    gk_tensor* t = nullptr;
    EXPECT_EQ(gk_tensor_from_external(rt_.get(), gk_tensor_device(base), gk_tensor_data(base), &d,
                                      nullptr, nullptr, &t),
              GK_OK)
        << gk_last_error();
    return TensorPtr(t);
  }
  std::vector<double> values(gk_tensor* t) {
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    gk_tensor_get_desc(t, &d);
    std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
    TensorPtr host = make_tensor(rt_.get(), d.dtype, shape, 0);
    EXPECT_EQ(gk_copy(host.get(), t, nullptr), GK_OK) << gk_last_error();
    TensorPtr f64 = make_tensor(rt_.get(), GK_DTYPE_F64, shape, 0);
    EXPECT_EQ(call("cast", {host.get()}, {f64.get()}, {}), GK_OK) << gk_last_error();
    size_t n = 1;
    for (int64_t x : shape) n *= size_t(x);
    std::vector<double> v(n);
    EXPECT_EQ(gk_copy_to_host(f64.get(), v.data(), n * 8, nullptr), GK_OK);
    return v;
  }
  // Relative Frobenius error; infinity when NaN-ness differs (an unwritten element).
  static double rel_error(const std::vector<double>& ref, const std::vector<double>& got) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (std::isnan(ref[i]) != std::isnan(got[i])) return INFINITY;
      num += (got[i] - ref[i]) * (got[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  }
  static double tol(int32_t dtype) { return dtype == GK_DTYPE_F32 ? 1e-5 : 1e-2; }

  RuntimePtr rt_;
  int32_t dev_ = -1;
  unsigned seed_ = std::random_device{}();
  std::mt19937 rng_;
};

TEST_F(LlmGpu, embedding_matches_the_cpu_and_writes_zeros_for_an_id_out_of_range) {
  for (int32_t dtype : kFloat) {
    for (int32_t id_dtype : {GK_DTYPE_I32, GK_DTYPE_I64}) {
      TensorPtr table = random_cpu(dtype, {1000, 96});
      TensorPtr ids = cpu(id_dtype, {2, 5}, {0, 999, 5, 5, 123, 7, 0, 500, 42, 998});
      TensorPtr ref = make_tensor(rt_.get(), dtype, {2, 5, 96}, 0);
      must(call("embedding", {table.get(), ids.get()}, {ref.get()}, {}), "cpu");
      TensorPtr g_table = gpu_copy(table.get()), g_ids = gpu_copy(ids.get());
      TensorPtr out = gpu_poisoned(dtype, {2, 5, 96});
      must(call("embedding", {g_table.get(), g_ids.get()}, {out.get()}, {}), "gpu");
      EXPECT_EQ(values(out.get()), values(ref.get())) << gk_dtype_name(dtype);
    }
  }
  TensorPtr table = gpu_copy(random_cpu(GK_DTYPE_F32, {10, 8}).get());
  TensorPtr ids = gpu_copy(cpu(GK_DTYPE_I32, {3}, {1, 10, -3}).get());
  TensorPtr out = gpu_poisoned(GK_DTYPE_F32, {3, 8});
  must(call("embedding", {table.get(), ids.get()}, {out.get()}, {}), "gpu, ids out of range");
  const std::vector<double> v = values(out.get());
  for (size_t i = 8; i < 24; ++i) EXPECT_EQ(v[i], 0.0) << "element " << i;
  EXPECT_FALSE(std::isnan(v[0]));
}

TEST_F(LlmGpu, rope_matches_the_cpu_for_each_style_scaling_partial_rotary_and_in_place) {
  struct Case {
    std::vector<A> attrs;
    bool batched;
  };
  const std::vector<Case> cases = {
      {{}, false},
      {{sa("style", "interleaved")}, false},
      {{ia("rotary_dim", 32)}, true},
      {{sa("style", "interleaved"), ia("rotary_dim", 32)}, false},
      {{fa("theta", 500000), sa("scaling", "llama3"), fa("factor", 8), fa("low_freq_factor", 1),
        fa("high_freq_factor", 4), fa("original_max_position", 8192)},
       true},
      {{sa("scaling", "linear"), fa("factor", 4)}, false},
  };
  for (const Case& c : cases) {
    for (int32_t dtype : kFloat) {
      // x is the q part of a fused [B, T, 3H, Dh] projection: a strided view.
      const int64_t B = 2, T = 37, H = 4, D = 128;
      TensorPtr fused = random_cpu(dtype, {B, T, 3 * H, D});
      gk_tensor_desc xd{};
      xd.struct_size = sizeof(xd);
      gk_tensor_get_desc(fused.get(), &xd);
      xd.shape[2] = H;
      std::vector<double> pos;
      for (int64_t i = 0; i < (c.batched ? B * T : T); ++i)
        pos.push_back(double((i * 977) % 30000));
      TensorPtr positions =
          c.batched ? cpu(GK_DTYPE_I32, {B, T}, pos) : cpu(GK_DTYPE_I32, {T}, pos);
      gk_tensor* x_cpu = nullptr;
      must(gk_tensor_from_external(rt_.get(), 0, gk_tensor_data(fused.get()), &xd, nullptr, nullptr,
                                   &x_cpu),
           "view");
      TensorPtr x_cpu_ptr(x_cpu);
      TensorPtr ref = make_tensor(rt_.get(), dtype, {B, T, H, D}, 0);
      must(call("rope", {x_cpu, positions.get()}, {ref.get()}, c.attrs), "cpu");
      TensorPtr g_fused = gpu_copy(fused.get()), g_pos = gpu_copy(positions.get());
      gk_tensor* x_gpu = nullptr;
      must(gk_tensor_from_external(rt_.get(), dev_, gk_tensor_data(g_fused.get()), &xd, nullptr,
                                   nullptr, &x_gpu),
           "view");
      TensorPtr x_gpu_ptr(x_gpu);
      TensorPtr out = gpu_poisoned(dtype, {B, T, H, D});
      must(call("rope", {x_gpu, g_pos.get()}, {out.get()}, c.attrs), "gpu");
      const std::vector<double> want = values(ref.get());
      EXPECT_LE(rel_error(want, values(out.get())), tol(dtype)) << gk_dtype_name(dtype);
      // In place on the strided view, on both devices: the whole fused buffers agree (the
      // k and v parts untouched). A strided view cannot be copied, so the buffers are read.
      must(call("rope", {x_cpu, positions.get()}, {x_cpu}, c.attrs), "cpu in place");
      must(call("rope", {x_gpu, g_pos.get()}, {x_gpu}, c.attrs), "gpu in place");
      EXPECT_LE(rel_error(values(fused.get()), values(g_fused.get())), tol(dtype))
          << gk_dtype_name(dtype) << " in place";
    }
  }
}

struct AttnCase {
  int64_t B, Tq, Tk, cap, Hq, Hkv, D;
  std::vector<double> lengths;
  bool causal;
};

// Every case on the plugins dispatch picks, then with attention_sm90 left out, so that on
// Hopper llm_cuda's mma.sync kernel is held to the cpu as well.
void LlmGpu::check_attention_cases() {
  const std::vector<AttnCase> cases = {
      {1, 64, 64, 64, 8, 2, 64, {}, true},                // prefill
      {2, 1, 1000, 1024, 32, 8, 128, {1000, 517}, true},  // decode over a cache view
      // f16 and bf16 decode with Dh 64 or 128 and a group of at most 8 takes the per-kv-head
      // kernel: Qwen2.5-0.5B's group of 7, Whisper's 1, a length mid-tile and 0; a group of
      // 16 stays on the per-q-head kernel.
      {3, 1, 700, 768, 14, 2, 64, {700, 33, 0}, true},
      {2, 1, 1500, 1500, 6, 6, 64, {}, false},
      {1, 1, 129, 256, 32, 2, 128, {129}, true},
      {2, 5, 300, 512, 6, 3, 80, {300, 3}, true},  // chunked prefill; L < Tq
      {2, 4, 50, 64, 4, 1, 256, {0, 50}, false},   // an empty cache; not causal
      {1, 3, 7, 7, 2, 2, 32, {}, false},
      // f16 and bf16 with Tq >= 16 and Dh 64 or 128 take a tensor-core kernel (on SM 90 with
      // Tq >= 64, attention_sm90's wgmma kernel; its key tiles are 128 and its stages 3, so
      // the longer cases wrap around the stages).
      {1, 128, 128, 128, 8, 2, 64, {}, true},           // two query tiles, GQA
      {2, 100, 300, 512, 8, 8, 128, {300, 150}, true},  // chunked prefill after a prefix
      {1, 77, 77, 77, 6, 6, 64, {}, false},             // Whisper-like, a partial tile
      {2, 64, 64, 64, 4, 1, 128, {0, 64}, false},       // an empty sequence
      {1, 20, 32, 32, 4, 2, 64, {10}, true},            // L < Tq: early queries see no key
      {1, 300, 700, 768, 8, 2, 128, {700}, true},       // prefill after a 400-token prefix
      {2, 520, 520, 520, 4, 4, 64, {}, false},          // 5 key tiles, 5 query tiles
      {1, 64, 900, 1024, 2, 1, 128, {650}, false},      // one warpgroup tile, L mid-tile
  };
  for (const AttnCase& c : cases) {
    for (int32_t dtype : kFloat) {
      TensorPtr q = random_cpu(dtype, {c.B, c.Tq, c.Hq, c.D});
      TensorPtr kc = random_cpu(dtype, {c.B, c.cap, c.Hkv, c.D});
      TensorPtr vc = random_cpu(dtype, {c.B, c.cap, c.Hkv, c.D});
      TensorPtr k = prefix_view(kc.get(), c.Tk), v = prefix_view(vc.get(), c.Tk);
      TensorPtr lengths = c.lengths.empty() ? nullptr : cpu(GK_DTYPE_I32, {c.B}, c.lengths);
      std::vector<gk_tensor*> in = {q.get(), k.get(), v.get()};
      if (lengths) in.push_back(lengths.get());
      const std::vector<A> attrs = {ia("causal", c.causal)};
      TensorPtr ref = make_tensor(rt_.get(), dtype, {c.B, c.Tq, c.Hq, c.D}, 0);
      must(call("attention", in, {ref.get()}, attrs), "cpu");
      TensorPtr gq = gpu_copy(q.get()), gkc = gpu_copy(kc.get()), gvc = gpu_copy(vc.get());
      TensorPtr gk = prefix_view(gkc.get(), c.Tk), gv = prefix_view(gvc.get(), c.Tk);
      TensorPtr glen = lengths ? gpu_copy(lengths.get()) : nullptr;
      std::vector<gk_tensor*> gin = {gq.get(), gk.get(), gv.get()};
      if (glen) gin.push_back(glen.get());
      TensorPtr out = gpu_poisoned(dtype, {c.B, c.Tq, c.Hq, c.D});
      must(call("attention", gin, {out.get()}, attrs), "gpu");
      EXPECT_LE(rel_error(values(ref.get()), values(out.get())), tol(dtype))
          << gk_dtype_name(dtype) << " B " << c.B << " Tq " << c.Tq << " Tk " << c.Tk << " D "
          << c.D;
    }
  }
}

TEST_F(LlmGpu, attention_matches_the_cpu_with_gqa_causal_offsets_lengths_and_cache_views) {
  check_attention_cases();
}

TEST_F(LlmGpu, attention_without_attention_sm90_matches_the_cpu) {
  rt_ = make_gpu_runtime("attention_sm90");
  dev_ = first_cuda_device(rt_.get());
  check_attention_cases();
}

// On SM 90 a long enough f16/bf16 prefill goes to attention_sm90 (priority 70); decode, a
// short prefill and f32 stay on llm_cuda, which attention_sm90 declines to with a reason.
TEST_F(LlmGpu, prefill_attention_on_sm90_is_served_by_attention_sm90) {
  gk_device_props props{};
  props.struct_size = sizeof(props);
  must(gk_device_get_props(rt_.get(), dev_, &props), "props");
  if (props.sm_version != 90) GTEST_SKIP() << "SM " << props.sm_version << ", not 90";
  auto chosen = [&](int32_t dtype, int64_t tq, int64_t dh) {
    gk_tensor_desc in[3] = {}, out[1] = {};
    const int64_t q_shape[4] = {1, tq, 8, dh}, kv_shape[4] = {1, 256, 2, dh};
    for (int i = 0; i < 3; ++i) {
      in[i].struct_size = sizeof(gk_tensor_desc);
      in[i].dtype = dtype;
      in[i].ndim = 4;
      for (int d = 0; d < 4; ++d) in[i].shape[d] = i == 0 ? q_shape[d] : kv_shape[d];
    }
    out[0] = in[0];
    char* json = nullptr;
    EXPECT_EQ(gk_explain(rt_.get(), "attention", dev_, in, 3, out, 1, nullptr, 0, &json), GK_OK)
        << gk_last_error();
    if (!json) return std::string("(no explanation)");
    const nlohmann::json j = nlohmann::json::parse(json);
    gk_string_free(json);
    return j["chosen"].is_string() ? j["chosen"].get<std::string>() : "none: " + j.dump();
  };
  EXPECT_EQ(chosen(GK_DTYPE_BF16, 256, 128), "attention_sm90");
  EXPECT_EQ(chosen(GK_DTYPE_F16, 64, 64), "attention_sm90");
  EXPECT_EQ(chosen(GK_DTYPE_BF16, 1, 128), "llm_cuda");
  EXPECT_EQ(chosen(GK_DTYPE_BF16, 32, 64), "llm_cuda");
  EXPECT_EQ(chosen(GK_DTYPE_F32, 256, 64), "llm_cuda");
}

// Paged attention: k and v as block pools read through a shuffled block table, against the
// cpu reference on the same pool; decode (the batched step of the model runner) and
// prefill (f16/bf16 with Dh 64 or 128 and Tq >= 16 on the tensor-core kernel). A block id
// outside the pool holds no keys on the device, on either kernel (the cpu refuses it).
TEST_F(LlmGpu, paged_attention_matches_the_cpu_and_reads_blocks_outside_the_pool_as_no_keys) {
  struct Case {
    int64_t B, Tq, Hq, Hkv, D, block_size;
    std::vector<double> lengths;
    bool causal;
  };
  const std::vector<Case> cases = {
      {32, 1, 32, 8, 64, 16, {}, true},            // batched decode, Llama-3.2-1B heads
      {3, 1, 8, 2, 128, 16, {1000, 17, 1}, true},  // long and short sequences; split keys
      {2, 20, 8, 2, 64, 16, {40, 20}, true},       // prefill after a prefix
      {2, 5, 4, 4, 80, 3, {7, 0}, false},          // odd block size, an empty sequence
      {1, 150, 8, 2, 128, 16, {400}, true},        // tensor cores: prefill after a prefix
      {2, 70, 4, 4, 64, 32, {300, 70}, false},     // tensor cores: two tile sizes of keys
  };
  std::uniform_int_distribution<int> length_of(1, 300);
  for (const Case& c : cases) {
    for (int32_t dtype : kFloat) {
      std::vector<double> lengths = c.lengths;
      for (int64_t b = int64_t(lengths.size()); b < c.B; ++b) lengths.push_back(length_of(rng_));
      int64_t max_len = 1;
      for (double l : lengths) max_len = std::max(max_len, int64_t(l));
      const int64_t per_seq = (max_len + c.block_size - 1) / c.block_size;
      const int64_t num_blocks = c.B * per_seq + 5;
      std::vector<double> ids(static_cast<size_t>(num_blocks));
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = double(i);
      std::shuffle(ids.begin(), ids.end(), rng_);
      ids.resize(size_t(c.B * per_seq));
      TensorPtr q = random_cpu(dtype, {c.B, c.Tq, c.Hq, c.D});
      TensorPtr kp = random_cpu(dtype, {num_blocks, c.block_size, c.Hkv, c.D});
      TensorPtr vp = random_cpu(dtype, {num_blocks, c.block_size, c.Hkv, c.D});
      TensorPtr len = cpu(GK_DTYPE_I32, {c.B}, lengths);
      TensorPtr table = cpu(GK_DTYPE_I32, {c.B, per_seq}, ids);
      const std::vector<A> attrs = {ia("causal", c.causal)};
      TensorPtr ref = make_tensor(rt_.get(), dtype, {c.B, c.Tq, c.Hq, c.D}, 0);
      must(call("attention", {q.get(), kp.get(), vp.get(), len.get(), table.get()}, {ref.get()},
                attrs),
           "cpu");
      TensorPtr gq = gpu_copy(q.get()), gkp = gpu_copy(kp.get()), gvp = gpu_copy(vp.get());
      TensorPtr glen = gpu_copy(len.get()), gtable = gpu_copy(table.get());
      TensorPtr out = gpu_poisoned(dtype, {c.B, c.Tq, c.Hq, c.D});
      must(call("attention", {gq.get(), gkp.get(), gvp.get(), glen.get(), gtable.get()},
                {out.get()}, attrs),
           "gpu");
      EXPECT_LE(rel_error(values(ref.get()), values(out.get())), tol(dtype))
          << gk_dtype_name(dtype) << " B " << c.B << " Tq " << c.Tq << " block_size "
          << c.block_size;
    }
  }
  // Sequence 0's second block and all of sequence 1's are outside the pool: sequence 0
  // sees its first 16 keys only (the cpu, on a table of those alone, is the reference) and
  // sequence 1 no key at all. Decode (in f32 the per-q-head kernel, in bf16 the per-kv-head
  // one) and a 16-query prefill (tensor cores).
  const std::pair<int64_t, int32_t> runs[] = {
      {1, GK_DTYPE_F32}, {1, GK_DTYPE_BF16}, {16, GK_DTYPE_BF16}};
  for (const auto& [tq, dtype] : runs) {
    TensorPtr q = random_cpu(dtype, {2, tq, 2, 64});
    TensorPtr pool = random_cpu(dtype, {4, 16, 1, 64});
    TensorPtr ref = make_tensor(rt_.get(), dtype, {1, tq, 2, 64}, 0);
    TensorPtr gq = gpu_copy(q.get()), gpool = gpu_copy(pool.get());
    TensorPtr len = gpu_copy(cpu(GK_DTYPE_I32, {2}, {20, 5}).get());
    TensorPtr table = gpu_copy(cpu(GK_DTYPE_I32, {2, 2}, {2, -7, 4, 9}).get());
    TensorPtr out = gpu_poisoned(dtype, {2, tq, 2, 64});
    must(call("attention", {gq.get(), gpool.get(), gpool.get(), len.get(), table.get()},
              {out.get()}, {ia("causal", 0)}),
         "gpu, block ids outside the pool");
    const std::vector<double> v = values(out.get());
    const size_t per_seq = size_t(tq * 2 * 64);
    for (size_t i = per_seq; i < 2 * per_seq; ++i) {
      EXPECT_EQ(v[i], 0.0) << "Tq " << tq << ", sequence 1 element " << i - per_seq;
    }
    // Sequence 0 against the cpu over block 2's 16 keys.
    std::vector<double> qv = values(q.get());
    qv.resize(per_seq);
    TensorPtr q_seq0 = cpu(dtype, {1, tq, 2, 64}, qv);
    TensorPtr one_len = cpu(GK_DTYPE_I32, {1}, {16});
    TensorPtr one_table = cpu(GK_DTYPE_I32, {1, 1}, {2});
    must(call("attention", {q_seq0.get(), pool.get(), pool.get(), one_len.get(), one_table.get()},
              {ref.get()}, {ia("causal", 0)}),
         "cpu, the valid block alone");
    std::vector<double> got(v.begin(), v.begin() + long(per_seq));
    EXPECT_LE(rel_error(values(ref.get()), got), tol(dtype)) << "Tq " << tq;
  }
}

// A decode graph's block table is wider than its sessions need: the decode kernel splits
// the keys by the batch alone, so the wider table gives the same bits.
TEST_F(LlmGpu, decode_attention_over_a_wider_block_table_gives_the_same_bits) {
  const int64_t B = 3, Hq = 8, Hkv = 2, D = 64, blocks = 40;
  const std::vector<double> lengths = {600, 129, 17};
  std::vector<double> narrow, wide;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < 64; ++j) {
      const double id = double((b * 13 + j) % blocks);
      if (j < 40) narrow.push_back(id);
      wide.push_back(j < 40 ? id : -1.0);
    }
  }
  for (int32_t dtype : {GK_DTYPE_F16, GK_DTYPE_BF16}) {
    TensorPtr q = gpu_copy(random_cpu(dtype, {B, 1, Hq, D}).get());
    TensorPtr kp = gpu_copy(random_cpu(dtype, {blocks, 16, Hkv, D}).get());
    TensorPtr vp = gpu_copy(random_cpu(dtype, {blocks, 16, Hkv, D}).get());
    TensorPtr len = gpu_copy(cpu(GK_DTYPE_I32, {B}, lengths).get());
    std::vector<std::vector<double>> outs;
    for (const auto* ids : {&narrow, &wide}) {
      const int64_t width = int64_t(ids->size()) / B;
      TensorPtr table = gpu_copy(cpu(GK_DTYPE_I32, {B, width}, *ids).get());
      TensorPtr out = gpu_poisoned(dtype, {B, 1, Hq, D});
      must(call("attention", {q.get(), kp.get(), vp.get(), len.get(), table.get()}, {out.get()},
                {ia("causal", 1)}),
           "gpu, table width " + std::to_string(width));
      outs.push_back(values(out.get()));
    }
    EXPECT_EQ(outs[0], outs[1]) << gk_dtype_name(dtype);
  }
}

// The cache append: rows cast into their slots of a pool, the same bits as the cpu's; a
// slot outside the pool is skipped on the device (the cpu refuses it).
TEST_F(LlmGpu, kv_cache_write_matches_the_cpu_and_skips_slots_outside_the_pool) {
  for (int32_t pool_dtype : kFloat) {
    for (int32_t src_dtype : kFloat) {
      TensorPtr pool = random_cpu(pool_dtype, {6, 16, 2, 64});
      TensorPtr src = random_cpu(src_dtype, {1, 5, 2, 64});
      TensorPtr slots = cpu(GK_DTYPE_I32, {5}, {0, 95, 17, 16, 40});
      TensorPtr gpool = gpu_copy(pool.get()), gsrc = gpu_copy(src.get());
      TensorPtr gslots = gpu_copy(slots.get());
      must(call("kv_cache_write", {pool.get(), src.get(), slots.get()}, {pool.get()}, {}), "cpu");
      must(call("kv_cache_write", {gpool.get(), gsrc.get(), gslots.get()}, {gpool.get()}, {}),
           "gpu");
      EXPECT_EQ(values(gpool.get()), values(pool.get()))
          << gk_dtype_name(src_dtype) << " into " << gk_dtype_name(pool_dtype);
    }
  }
  TensorPtr pool = random_cpu(GK_DTYPE_BF16, {2, 4, 1, 8});
  TensorPtr gpool = gpu_copy(pool.get());
  TensorPtr src = gpu_copy(random_cpu(GK_DTYPE_F32, {3, 1, 8}).get());
  TensorPtr slots = gpu_copy(cpu(GK_DTYPE_I32, {3}, {-1, 8, 100}).get());
  must(call("kv_cache_write", {gpool.get(), src.get(), slots.get()}, {gpool.get()}, {}),
       "gpu, slots outside the pool");
  EXPECT_EQ(values(gpool.get()), values(pool.get()));
}

TEST_F(LlmGpu, sample_greedy_equals_the_cpu_and_seeded_draws_agree_and_replay) {
  for (int32_t dtype : kFloat) {
    TensorPtr logits = random_cpu(dtype, {8, 32000}, -10, 10);
    TensorPtr ref = make_tensor(rt_.get(), GK_DTYPE_I32, {8}, 0);
    must(call("sample", {logits.get()}, {ref.get()}, {fa("temperature", 0)}), "cpu");
    TensorPtr g = gpu_copy(logits.get());
    TensorPtr ids = gpu_poisoned(GK_DTYPE_I32, {8});
    must(call("sample", {g.get()}, {ids.get()}, {fa("temperature", 0)}), "gpu");
    EXPECT_EQ(values(ids.get()), values(ref.get())) << gk_dtype_name(dtype);
  }
  // Seeded draws with every filter: the same ids as the cpu (f32 weights against f64 may
  // differ only for a draw within rounding of a boundary) and the same ids on a replay.
  const std::vector<std::vector<A>> settings = {
      {fa("temperature", 1.0), ia("seed", 11), ia("offset", 0)},
      {fa("temperature", 0.7), ia("top_k", 40), ia("seed", 12), ia("offset", 5)},
      {fa("temperature", 0.9), fa("top_p", 0.9), ia("seed", 13), ia("offset", 1)},
      {fa("temperature", 1.2), ia("top_k", 100), fa("top_p", 0.8), fa("min_p", 0.05),
       ia("seed", 14), ia("offset", 2)},
  };
  TensorPtr logits = random_cpu(GK_DTYPE_F32, {64, 32000}, -4, 4);
  TensorPtr g = gpu_copy(logits.get());
  for (const auto& attrs : settings) {
    TensorPtr ref = make_tensor(rt_.get(), GK_DTYPE_I32, {64}, 0);
    must(call("sample", {logits.get()}, {ref.get()}, attrs), "cpu");
    TensorPtr a = gpu_poisoned(GK_DTYPE_I32, {64}), b = gpu_poisoned(GK_DTYPE_I32, {64});
    must(call("sample", {g.get()}, {a.get()}, attrs), "gpu");
    must(call("sample", {g.get()}, {b.get()}, attrs), "gpu replay");
    const std::vector<double> want = values(ref.get()), got = values(a.get());
    EXPECT_EQ(got, values(b.get())) << "a replay drew other ids";
    int differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += want[i] != got[i];
    EXPECT_LE(differ, 1) << attrs[0].f << " " << attrs.size() << " attrs: " << differ
                         << " of 64 rows differ from the cpu";
  }
}

// Microseconds per call of n back-to-back calls, the device synchronised before and after.
template <class F, class S>
double time_us(F&& run, S&& sync, int n) {
  run();
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) run();
  sync();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         n;
}

TEST_F(LlmGpu, decode_attention_and_sample_times_are_printed) {
  // Llama-3-8B-like shapes: decode over a 4096-token cache and a 512-token causal prefill
  // (Hq 32, Hkv 8, Dh 128, bf16); sample over Qwen2's 151936 ids.
  TensorPtr q = gpu_copy(random_cpu(GK_DTYPE_BF16, {1, 1, 32, 128}).get());
  TensorPtr kc = gpu_copy(random_cpu(GK_DTYPE_BF16, {1, 4096, 8, 128}).get());
  TensorPtr vc = gpu_copy(random_cpu(GK_DTYPE_BF16, {1, 4096, 8, 128}).get());
  TensorPtr out = gpu_poisoned(GK_DTYPE_BF16, {1, 1, 32, 128});
  TensorPtr logits = gpu_copy(random_cpu(GK_DTYPE_F32, {1, 151936}, -10, 10).get());
  TensorPtr ids = gpu_poisoned(GK_DTYPE_I32, {1});
  // A copy to the host waits for the default stream, where the calls run.
  std::vector<double> sink;
  auto sync = [&] { sink = values(out.get()); };
  const double attention = time_us(
      [&] {
        ASSERT_EQ(call("attention", {q.get(), kc.get(), vc.get()}, {out.get()}, {}), GK_OK);
      },
      sync, 50);
  TensorPtr pq = gpu_copy(random_cpu(GK_DTYPE_BF16, {1, 512, 32, 128}).get());
  TensorPtr pk = gpu_copy(random_cpu(GK_DTYPE_BF16, {1, 512, 8, 128}).get());
  TensorPtr pout = gpu_poisoned(GK_DTYPE_BF16, {1, 512, 32, 128});
  const double prefill = time_us(
      [&] {
        ASSERT_EQ(call("attention", {pq.get(), pk.get(), pk.get()}, {pout.get()}, {}), GK_OK);
      },
      sync, 10);
  const double greedy = time_us(
      [&] {
        ASSERT_EQ(call("sample", {logits.get()}, {ids.get()}, {fa("temperature", 0)}), GK_OK);
      },
      sync, 50);
  const double filtered = time_us(
      [&] {
        ASSERT_EQ(call("sample", {logits.get()}, {ids.get()},
                       {ia("top_k", 50), fa("top_p", 0.9), ia("seed", 1)}),
                  GK_OK);
      },
      sync, 20);
  std::printf(
      "decode attention (Hq 32, Hkv 8, Dh 128, 4096 keys, bf16): %.1f us/call\n"
      "prefill attention (512 tokens, Hq 32, Hkv 8, Dh 128, causal, bf16): %.1f us/call\n"
      "sample V=151936 greedy: %.1f us/call; top_k+top_p: %.1f us/call\n",
      attention, prefill, greedy, filtered);
  EXPECT_GT(attention, 0.0);
}

}  // namespace
}  // namespace gk::test
