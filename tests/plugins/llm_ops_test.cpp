// The cpu plugin's llm ops (embedding, rope, attention, kv_cache_write, sample) against
// float64 references written here from the definitions in docs/ops.md, on fresh random
// inputs, with outputs poisoned (NaN) before each call so that an unwritten element fails.
// Paged attention is checked against attention over the same keys laid out per sequence.
//
// The seed is new each run and printed on failure; GPUKIT_TEST_SEED=<n> replays a run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>

#include "plugin_harness.h"

namespace gk::test {
namespace {

constexpr int32_t kF32 = GK_DTYPE_F32, kF64 = GK_DTYPE_F64, kF16 = GK_DTYPE_F16,
                  kBF16 = GK_DTYPE_BF16, kI32 = GK_DTYPE_I32, kI64 = GK_DTYPE_I64;
const std::vector<int32_t> kFloating = {kF32, kF64, kF16, kBF16};

uint64_t test_seed() {
  if (const char* env = std::getenv("GPUKIT_TEST_SEED")) return std::strtoull(env, nullptr, 10);
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

class LlmOps : public ::testing::Test {
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
  Tensor random(int32_t dtype, std::vector<int64_t> shape, double lo = -1.0, double hi = 1.0) {
    Tensor t = Tensor::contiguous(dtype, std::move(shape));
    t.fill_random(rng_, lo, hi);
    return t;
  }
  static Tensor ints(int32_t dtype, std::vector<int64_t> shape, const std::vector<double>& v) {
    Tensor t = Tensor::contiguous(dtype, std::move(shape));
    t.set_values(v);
    return t;
  }

  FakeHost host_;
  std::unique_ptr<PluginHandle> plugin_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// ---- embedding ----

TEST_F(LlmOps, embedding_gathers_table_rows_for_i32_and_i64_ids_of_any_shape) {
  for (int32_t dtype : kFloating) {
    for (int32_t id_dtype : {kI32, kI64}) {
      // A strided table: every other column of a wider one.
      const Tensor wide = random(dtype, {11, 18});
      const Tensor table = wide.slice(1, 0, 18, 2);
      const Tensor ids = ints(id_dtype, {2, 3}, {0, 10, 3, 3, 7, 1});
      Tensor out = Tensor::contiguous(dtype, {2, 3, 9});
      const CallResult r = plugin_->call("embedding", {table, ids}, {out});
      ASSERT_TRUE(r.ok()) << r.describe();
      std::vector<double> want;
      for (double id : ids.values()) {
        for (int64_t j = 0; j < 9; ++j) want.push_back(table.at({int64_t(id), j}));
      }
      EXPECT_EQ(compare(out, want, 0.0), "") << dtype_label(dtype);
    }
  }
}

TEST_F(LlmOps, embedding_refuses_an_id_outside_the_table_naming_it_and_writes_nothing) {
  const Tensor table = random(kF32, {5, 4});
  for (double bad : {5.0, -1.0}) {
    const Tensor ids = ints(kI64, {3}, {0, bad, 2});
    Tensor out = Tensor::contiguous(kF32, {3, 4});
    const CallResult r = plugin_->call("embedding", {table, ids}, {out});
    EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
    EXPECT_NE(r.error.find("holds " + std::to_string(int64_t(bad)) + " at [1]"), std::string::npos)
        << r.error;
    EXPECT_NE(r.error.find("0..4"), std::string::npos) << r.error;
    for (double v : out.values()) EXPECT_TRUE(std::isnan(v)) << "a refused call wrote into out";
  }
}

// ---- rope ----

struct RopeCase {
  std::string style = "half";
  std::string scaling = "none";
  int64_t rotary_dim = 0;  // 0: the whole head
  double theta = 10000.0, factor = 8.0, low = 1.0, high = 4.0, original = 8192.0;
  bool batched_positions = false;
};

// HF transformers' inverse frequencies, written out again from modeling_rope_utils (all in
// float32 there): the test's own copy, not the plugin's.
std::vector<float> hf_inv_freq(const RopeCase& c, int64_t rot) {
  std::vector<float> inv;
  for (int64_t i = 0; i < rot / 2; ++i) {
    const float e = float(2 * i) / float(rot);
    float f = 1.0f / float(std::pow(double(float(c.theta)), double(e)));
    if (c.scaling == "linear") f /= float(c.factor);
    if (c.scaling == "llama3") {
      const float low_wavelen = float(c.original) / float(c.low);
      const float high_wavelen = float(c.original) / float(c.high);
      const float wavelen = float(2.0 * M_PI) / f;
      float g = wavelen > low_wavelen ? f / float(c.factor) : f;
      const float smooth =
          (float(c.original) / wavelen - float(c.low)) / (float(c.high) - float(c.low));
      const float smoothed = (1.0f - smooth) * g / float(c.factor) + smooth * g;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) g = smoothed;
      f = g;
    }
    inv.push_back(f);
  }
  return inv;
}

Attrs rope_attrs(const RopeCase& c) {
  Attrs a;
  a.f("theta", c.theta).s("style", c.style).s("scaling", c.scaling);
  if (c.rotary_dim) a.i("rotary_dim", c.rotary_dim);
  if (c.scaling != "none") a.f("factor", c.factor);
  if (c.scaling == "llama3") {
    a.f("low_freq_factor", c.low)
        .f("high_freq_factor", c.high)
        .f("original_max_position", c.original);
  }
  return a;
}

std::vector<double> rope_reference(const Tensor& x, const Tensor& pos, const RopeCase& c) {
  const int64_t B = x.shape()[0], T = x.shape()[1], H = x.shape()[2], D = x.shape()[3];
  const int64_t rot = c.rotary_dim ? c.rotary_dim : D, half = rot / 2;
  const std::vector<float> inv = hf_inv_freq(c, rot);
  std::vector<double> want(size_t(x.numel()));
  for_each_index(x.shape(), [&](const std::vector<int64_t>& idx) {
    const int64_t b = idx[0], t = idx[1], h = idx[2], d = idx[3];
    const size_t flat = size_t(((b * T + t) * H + h) * D + d);
    if (d >= rot) {
      want[flat] = x.at(idx);
      return;
    }
    const double p = pos.shape().size() == 1 ? pos.at({t}) : pos.at({b, t});
    // The pair of d and its sign in the rotation [x0 c - x1 s, x1 c + x0 s].
    int64_t i, partner;
    bool first;
    if (c.style == "half") {
      first = d < half;
      i = first ? d : d - half;
      partner = first ? d + half : d - half;
    } else {
      first = d % 2 == 0;
      i = d / 2;
      partner = first ? d + 1 : d - 1;
    }
    const double angle = double(float(p) * inv[size_t(i)]);
    const double self = x.at(idx), other = x.at({b, t, h, partner});
    want[flat] = first ? self * std::cos(angle) - other * std::sin(angle)
                       : self * std::cos(angle) + other * std::sin(angle);
  });
  (void)B;
  return want;
}

TEST_F(LlmOps, rope_matches_the_hf_formula_for_each_style_scaling_and_partial_rotary) {
  std::vector<RopeCase> cases;
  for (const char* style : {"half", "interleaved"}) {
    RopeCase c;
    c.style = style;
    cases.push_back(c);
    c.rotary_dim = 8;  // GPT-NeoX style partial rotary: 8 of 24 dims turn
    cases.push_back(c);
    c.rotary_dim = 0;
    c.scaling = "llama3";
    c.theta = 500000.0;
    c.original = 64;  // small, so that 24-dim heads have frequencies in all three bands
    cases.push_back(c);
    c.scaling = "linear";
    c.factor = 4.0;
    c.batched_positions = true;
    cases.push_back(c);
  }
  for (const RopeCase& c : cases) {
    for (int32_t dtype : kFloating) {
      const Tensor x = random(dtype, {2, 5, 3, 24});
      const Tensor pos = c.batched_positions
                             ? ints(kI32, {2, 5}, {0, 1, 2, 3, 4, 7, 8, 9, 10, 4000})
                             : ints(kI32, {5}, {3, 17, 100, 1234, 65000});
      Tensor out = Tensor::contiguous(dtype, {2, 5, 3, 24});
      const CallResult r = plugin_->call("rope", {x, pos}, {out}, rope_attrs(c));
      ASSERT_TRUE(r.ok()) << r.describe();
      EXPECT_EQ(compare(out, rope_reference(x, pos, c), tolerance(dtype)), "")
          << c.style << " " << c.scaling << " rotary_dim " << c.rotary_dim << " "
          << dtype_label(dtype);
    }
  }
}

TEST_F(LlmOps, rope_llama3_scaling_divides_low_frequencies_and_keeps_high_ones) {
  // Llama 3.1's values (theta 500000, factor 8, bands 1 and 4 of 8192 positions), Dh 128.
  RopeCase c;
  c.scaling = "llama3";
  c.theta = 500000.0;
  const std::vector<float> scaled = hf_inv_freq(c, 128);
  c.scaling = "none";
  const std::vector<float> plain = hf_inv_freq(c, 128);
  EXPECT_EQ(scaled.front(), plain.front());             // wavelength 2π: kept
  EXPECT_FLOAT_EQ(scaled.back(), plain.back() / 8.0f);  // wavelength > 8192: divided
  // The plugin agrees, through one pair per frequency at position 1 of a [1,1,1,128] x
  // holding (1, 0) in every pair: out = (cos f, sin f).
  Tensor x = Tensor::contiguous(kF64, {1, 1, 1, 128});
  std::vector<double> v(128, 0.0);
  for (int i = 0; i < 64; ++i) v[size_t(i)] = 1.0;
  x.set_values(v);
  Tensor out = Tensor::contiguous(kF64, {1, 1, 1, 128});
  c.scaling = "llama3";
  ASSERT_TRUE(plugin_->call("rope", {x, ints(kI32, {1}, {1})}, {out}, rope_attrs(c)).ok());
  const std::vector<double> got = out.values();
  for (int i = 0; i < 64; ++i) {
    EXPECT_NEAR(std::atan2(got[size_t(i) + 64], got[size_t(i)]), double(scaled[size_t(i)]), 1e-12)
        << "pair " << i;
  }
}

TEST_F(LlmOps, rope_in_place_equals_out_of_place) {
  RopeCase c;
  c.rotary_dim = 16;
  const Tensor x = random(kF32, {1, 4, 2, 32});
  const Tensor pos = ints(kI32, {1, 4}, {5, 6, 7, 8});
  Tensor out = Tensor::contiguous(kF32, {1, 4, 2, 32});
  ASSERT_TRUE(plugin_->call("rope", {x, pos}, {out}, rope_attrs(c)).ok());
  Tensor inplace = x.clone();
  ASSERT_TRUE(plugin_->call("rope", {inplace, pos}, {inplace}, rope_attrs(c)).ok());
  EXPECT_EQ(compare(inplace, out.values(), 0.0), "");
}

// ---- attention ----

// softmax(q k^T · scale) v in float64, one query row at a time, with GQA, the causal offset
// and per-sequence cache lengths; a row with no key is 0.
std::vector<double> attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const std::vector<int64_t>& lengths, double scale,
                                        bool causal) {
  const int64_t B = q.shape()[0], Tq = q.shape()[1], Hq = q.shape()[2], D = q.shape()[3];
  const int64_t group = Hq / k.shape()[2];
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < Tq; ++i) {
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t L = lengths[size_t(b)];
        std::vector<double> s;
        for (int64_t j = 0; j < L; ++j) {
          if (causal && j > L - Tq + i) break;
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q.at({b, i, h, d}) * k.at({b, j, h / group, d});
          s.push_back(dot * scale);
        }
        double m = -INFINITY, sum = 0;
        for (double x : s) m = std::max(m, x);
        for (double& x : s) sum += (x = std::exp(x - m));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (size_t j = 0; j < s.size(); ++j) acc += s[j] * v.at({b, int64_t(j), h / group, d});
          out.push_back(s.empty() ? 0.0 : acc / sum);
        }
      }
    }
  }
  return out;
}

struct AttentionCase {
  int64_t B, Tq, Tk, capacity, Hq, Hkv, D;
  std::vector<int64_t> lengths;  // empty: no kv_lengths input
  bool causal = true;
  double scale = 0.0;  // 0: default
};

TEST_F(LlmOps, attention_matches_float64_softmax_with_gqa_causal_offsets_and_cache_views) {
  const std::vector<AttentionCase> cases = {
      {1, 6, 6, 6, 4, 4, 16, {}, true, 0.0},       // prefill, MHA
      {2, 3, 7, 10, 4, 2, 16, {7, 4}, true, 0.0},  // chunked prefill over a cache view
      {2, 1, 9, 12, 8, 2, 32, {9, 1}, true, 0.0},  // decode, GQA 4:1
      {2, 4, 5, 8, 6, 3, 8, {5, 2}, true, 0.0},    // L < Tq: early rows see no key
      {1, 3, 5, 5, 2, 1, 8, {0}, true, 0.0},       // an empty cache
      {2, 3, 5, 5, 4, 1, 8, {5, 3}, false, 0.3},   // not causal, explicit scale
  };
  for (const AttentionCase& c : cases) {
    for (int32_t dtype : kFloating) {
      const Tensor q = random(dtype, {c.B, c.Tq, c.Hq, c.D});
      // k and v: the first Tk positions of caches of `capacity` positions.
      const Tensor k = random(dtype, {c.B, c.capacity, c.Hkv, c.D}).slice(1, 0, c.Tk, 1);
      const Tensor v = random(dtype, {c.B, c.capacity, c.Hkv, c.D}).slice(1, 0, c.Tk, 1);
      std::vector<Tensor> inputs = {q, k, v};
      std::vector<int64_t> lengths(size_t(c.B), c.Tk);
      if (!c.lengths.empty()) {
        lengths = c.lengths;
        inputs.push_back(ints(kI32, {c.B}, std::vector<double>(lengths.begin(), lengths.end())));
      }
      Attrs attrs;
      attrs.i("causal", c.causal);
      if (c.scale) attrs.f("scale", c.scale);
      Tensor out = Tensor::contiguous(dtype, {c.B, c.Tq, c.Hq, c.D});
      const CallResult r = plugin_->call("attention", inputs, {out}, attrs);
      ASSERT_TRUE(r.ok()) << r.describe();
      const double scale = c.scale ? c.scale : 1.0 / std::sqrt(double(c.D));
      EXPECT_EQ(
          compare(out, attention_reference(q, k, v, lengths, scale, c.causal), tolerance(dtype)),
          "")
          << "B " << c.B << " Tq " << c.Tq << " Tk " << c.Tk << " Hq " << c.Hq << " Hkv " << c.Hkv
          << " " << dtype_label(dtype);
    }
  }
}

TEST_F(LlmOps, attention_refuses_a_kv_length_beyond_the_cache_naming_it) {
  const Tensor q = random(kF32, {2, 1, 2, 8});
  const Tensor k = random(kF32, {2, 4, 1, 8});
  Tensor out = Tensor::contiguous(kF32, {2, 1, 2, 8});
  const CallResult r = plugin_->call("attention", {q, k, k, ints(kI32, {2}, {4, 5})}, {out});
  EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("holds 5 for sequence 1; expected 0..4"), std::string::npos) << r.error;
}

// ---- paged attention and kv_cache_write ----

// A block pool [num_blocks, block_size, H, D] holding the first blocks_per_seq * block_size
// positions of each sequence of `cache` [B, capacity, H, D] at the blocks `table` names
// (row-major [B, blocks_per_seq]); every other element is NaN, so a read outside the
// sequence's blocks shows.
Tensor pool_of(const Tensor& cache, int64_t num_blocks, int64_t block_size,
               const std::vector<int32_t>& table, int64_t blocks_per_seq) {
  const int64_t B = cache.shape()[0], cap = cache.shape()[1], H = cache.shape()[2],
                D = cache.shape()[3];
  Tensor pool = Tensor::contiguous(cache.dtype(), {num_blocks, block_size, H, D});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < blocks_per_seq * block_size && j < cap; ++j) {
      const int64_t block = table[size_t(b * blocks_per_seq + j / block_size)];
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t d = 0; d < D; ++d) {
          pool.set_flat(((block * block_size + j % block_size) * H + h) * D + d,
                        cache.at({b, j, h, d}));
        }
      }
    }
  }
  return pool;
}

// Distinct block ids for B sequences of `per_seq` blocks in a pool of `num_blocks`, shuffled.
std::vector<int32_t> shuffled_blocks(std::mt19937_64& rng, int64_t num_blocks, int64_t count) {
  std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(static_cast<size_t>(count));
  return ids;
}

TEST_F(LlmOps, paged_attention_equals_attention_over_the_same_keys_for_any_block_size) {
  struct Case {
    int64_t B, Tq, Hq, Hkv, D;
    std::vector<int64_t> lengths;
    bool causal;
  };
  const std::vector<Case> cases = {
      {3, 1, 8, 2, 16, {9, 1, 17}, true},  // decode, GQA 4:1, lengths across block edges
      {1, 6, 4, 4, 8, {6}, true},          // prefill
      {2, 3, 4, 1, 8, {7, 3}, true},       // chunked prefill, L = Tq for one sequence
      {2, 4, 6, 3, 8, {5, 2}, true},       // L < Tq: early rows see no key
      {2, 2, 2, 2, 8, {0, 4}, false},      // an empty sequence; not causal
  };
  for (const Case& c : cases) {
    for (int64_t block_size : {1, 3, 16}) {
      for (int32_t dtype : kFloating) {
        const int64_t max_len = *std::max_element(c.lengths.begin(), c.lengths.end());
        const int64_t per_seq = std::max<int64_t>(1, (max_len + block_size - 1) / block_size);
        const int64_t capacity = per_seq * block_size;
        const int64_t num_blocks = c.B * per_seq + 3;  // three blocks no sequence holds
        const Tensor q = random(dtype, {c.B, c.Tq, c.Hq, c.D});
        const Tensor k = random(dtype, {c.B, capacity, c.Hkv, c.D});
        const Tensor v = random(dtype, {c.B, capacity, c.Hkv, c.D});
        const std::vector<int32_t> ids = shuffled_blocks(rng_, num_blocks, c.B * per_seq);
        const Tensor k_pool = pool_of(k, num_blocks, block_size, ids, per_seq);
        const Tensor v_pool = pool_of(v, num_blocks, block_size, ids, per_seq);
        const Tensor lengths =
            ints(kI32, {c.B}, std::vector<double>(c.lengths.begin(), c.lengths.end()));
        const Tensor table =
            ints(kI32, {c.B, per_seq}, std::vector<double>(ids.begin(), ids.end()));
        Attrs attrs;
        attrs.i("causal", c.causal);
        Tensor want = Tensor::contiguous(dtype, {c.B, c.Tq, c.Hq, c.D});
        ASSERT_TRUE(plugin_->call("attention", {q, k, v, lengths}, {want}, attrs).ok());
        Tensor got = Tensor::contiguous(dtype, {c.B, c.Tq, c.Hq, c.D});
        const CallResult r =
            plugin_->call("attention", {q, k_pool, v_pool, lengths, table}, {got}, attrs);
        ASSERT_TRUE(r.ok()) << r.describe();
        EXPECT_EQ(got.element_bytes(), want.element_bytes())
            << "B " << c.B << " Tq " << c.Tq << " block_size " << block_size << " "
            << dtype_label(dtype);
      }
    }
  }
}

TEST_F(LlmOps, paged_attention_refuses_a_block_id_outside_the_pool_naming_its_position) {
  const Tensor q = random(kF32, {2, 1, 2, 8});
  const Tensor pool = random(kF32, {4, 2, 1, 8});
  const Tensor lengths = ints(kI32, {2}, {3, 1});
  for (double bad : {4.0, -1.0}) {
    // Sequence 0 reads blocks 0 and 1 of its row; block [0, 1] is out of the pool.
    const Tensor table = ints(kI32, {2, 2}, {2, bad, 0, 7});
    Tensor out = Tensor::contiguous(kF32, {2, 1, 2, 8});
    const CallResult r = plugin_->call("attention", {q, pool, pool, lengths, table}, {out});
    EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
    EXPECT_NE(r.error.find("holds " + std::to_string(int64_t(bad)) + " at [0, 1]"),
              std::string::npos)
        << r.error;
    EXPECT_NE(r.error.find("valid ids: 0..3"), std::string::npos) << r.error;
  }
  // An entry past a sequence's length is not read: 7 above never was.
  const Tensor table = ints(kI32, {2, 2}, {2, 3, 0, 7});
  Tensor out = Tensor::contiguous(kF32, {2, 1, 2, 8});
  EXPECT_TRUE(plugin_->call("attention", {q, pool, pool, lengths, table}, {out}).ok());
  // A length beyond the row's blocks names both numbers.
  const CallResult r =
      plugin_->call("attention", {q, pool, pool, ints(kI32, {2}, {5, 1}), table}, {out});
  EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("holds 5 for sequence 0; expected 0..4"), std::string::npos) << r.error;
}

TEST_F(LlmOps, kv_cache_write_casts_rows_into_their_slots_and_leaves_the_rest) {
  for (int32_t pool_dtype : kFloating) {
    for (int32_t src_dtype : {kF32, kBF16}) {
      // src as a [1, N, H, D] view of every other token of a wider projection.
      const Tensor wide = random(src_dtype, {1, 10, 2, 4});
      const Tensor src = wide.slice(1, 0, 10, 2);
      const Tensor slots = ints(kI32, {5}, {0, 11, 5, 6, 2});
      Tensor pool = random(pool_dtype, {3, 4, 2, 4});
      const std::vector<double> before = pool.values();
      const CallResult r = plugin_->call("kv_cache_write", {pool, src, slots}, {pool});
      ASSERT_TRUE(r.ok()) << r.describe();
      std::vector<double> want = before;
      // The source value rounded to the pool's dtype, as a cast would.
      Tensor rounded = Tensor::contiguous(pool_dtype, {5, 2, 4});
      rounded.set_values(src.values());
      const std::vector<double> rows = rounded.values();
      for (int64_t n = 0; n < 5; ++n) {
        const int64_t slot = int64_t(slots.at({n}));
        for (int64_t e = 0; e < 8; ++e) want[size_t(slot * 8 + e)] = rows[size_t(n * 8 + e)];
      }
      EXPECT_EQ(compare(pool, want, 0.0), "")
          << dtype_label(src_dtype) << " into " << dtype_label(pool_dtype);
    }
  }
  // [N, H, D] rows are taken as they are.
  const Tensor src = random(kF32, {2, 2, 4});
  Tensor pool = random(kF32, {2, 2, 2, 4});
  ASSERT_TRUE(plugin_->call("kv_cache_write", {pool, src, ints(kI32, {2}, {3, 0})}, {pool}).ok());
  for (int64_t e = 0; e < 8; ++e) {
    EXPECT_EQ(pool.get_flat(3 * 8 + e), src.get_flat(e));
    EXPECT_EQ(pool.get_flat(e), src.get_flat(8 + e));
  }
}

TEST_F(LlmOps, kv_cache_write_refuses_a_slot_outside_the_cache_and_other_shapes_and_outputs) {
  const Tensor src = random(kF32, {3, 2, 4});
  for (double bad : {12.0, -1.0}) {
    Tensor pool = random(kF32, {3, 4, 2, 4});
    const std::vector<double> before = pool.values();
    const CallResult r =
        plugin_->call("kv_cache_write", {pool, src, ints(kI32, {3}, {0, 1, bad})}, {pool});
    EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
    EXPECT_NE(r.error.find("holds " + std::to_string(int64_t(bad)) + " at [2]"), std::string::npos)
        << r.error;
    EXPECT_NE(r.error.find("valid slots: 0..11"), std::string::npos) << r.error;
    EXPECT_EQ(pool.values(), before) << "a refused call wrote into the cache";
  }
  Tensor pool = random(kF32, {3, 4, 2, 4});
  const Tensor slots = ints(kI32, {3}, {0, 1, 2});
  CallResult r = plugin_->call("kv_cache_write", {pool, random(kF32, {3, 1, 4}), slots}, {pool});
  EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("input 'src' has shape [3, 1, 4]; expected [rows, 2, 4]"),
            std::string::npos)
      << r.error;
  r = plugin_->call("kv_cache_write", {pool, src, ints(kI32, {2}, {0, 1})}, {pool});
  EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("input 'slots' has shape [2]; expected [3]"), std::string::npos)
      << r.error;
  Tensor other = random(kF32, {3, 4, 2, 4});
  r = plugin_->call("kv_cache_write", {pool, src, slots}, {other});
  EXPECT_EQ(r.launch, GK_INVALID_ARGUMENT);
  EXPECT_NE(r.error.find("must be input 'cache' itself"), std::string::npos) << r.error;
}

// ---- sample ----

std::vector<int64_t> sample(PluginHandle& plugin, const Tensor& logits, const Attrs& attrs) {
  Tensor ids = Tensor::contiguous(kI32, {logits.shape()[0]});
  const CallResult r = plugin.call("sample", {logits}, {ids}, attrs);
  EXPECT_TRUE(r.ok()) << r.describe();
  std::vector<int64_t> out;
  for (double v : ids.values()) out.push_back(int64_t(v));
  return out;
}

TEST_F(LlmOps, sample_at_temperature_zero_is_the_first_argmax) {
  for (int32_t dtype : kFloating) {
    Tensor logits = random(dtype, {6, 1000}, -5, 5);
    std::vector<double> v = logits.values();
    v[size_t(2 * 1000 + 17)] = 9.0;  // a tie: the first index wins
    v[size_t(2 * 1000 + 400)] = 9.0;
    logits.set_values(v);
    const std::vector<int64_t> ids = sample(*plugin_, logits, Attrs().f("temperature", 0.0));
    for (int64_t b = 0; b < 6; ++b) {
      int64_t best = 0;
      for (int64_t j = 1; j < 1000; ++j) {
        if (v[size_t(b * 1000 + j)] > v[size_t(b * 1000 + best)]) best = j;
      }
      EXPECT_EQ(ids[size_t(b)], best) << "row " << b << " " << dtype_label(dtype);
    }
  }
}

TEST_F(LlmOps, sample_with_a_seed_replays_each_step_and_differs_between_steps) {
  const Tensor logits = random(kF32, {64, 500}, -2, 2);
  auto at = [&](int64_t seed, int64_t offset) {
    return sample(*plugin_, logits,
                  Attrs().f("temperature", 1.0).i("seed", seed).i("offset", offset));
  };
  EXPECT_EQ(at(42, 3), at(42, 3));
  EXPECT_NE(at(42, 3), at(42, 4));
  EXPECT_NE(at(42, 3), at(43, 3));
}

// Frequencies of each id over 20000 rows of the same logits (each row draws its own number)
// against the filtered, renormalised softmax: within 5 standard deviations.
void expect_distribution(PluginHandle& plugin, const std::vector<double>& logits,
                         const Attrs& attrs, const std::vector<double>& want,
                         const std::string& label) {
  const int64_t rows = 20000, V = int64_t(logits.size());
  Tensor t = Tensor::contiguous(kF64, {rows, V});
  std::vector<double> all;
  for (int64_t r = 0; r < rows; ++r) all.insert(all.end(), logits.begin(), logits.end());
  t.set_values(all);
  std::vector<double> count(size_t(V), 0.0);
  for (int64_t id : sample(plugin, t, attrs)) {
    ASSERT_TRUE(id >= 0 && id < V) << label;
    count[size_t(id)] += 1.0;
  }
  for (int64_t j = 0; j < V; ++j) {
    const double p = want[size_t(j)], sd = std::sqrt(rows * p * (1 - p));
    if (p == 0.0) {
      EXPECT_EQ(count[size_t(j)], 0.0) << label << ": id " << j << " was filtered out";
    } else {
      EXPECT_NEAR(count[size_t(j)], rows * p, 5 * sd + 1) << label << ": id " << j;
    }
  }
}

TEST_F(LlmOps, sample_draws_from_the_filtered_softmax_for_temperature_top_k_top_p_min_p) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1.
  const std::vector<double> logits = {std::log(0.5), std::log(0.3), std::log(0.15), std::log(0.05)};
  expect_distribution(*plugin_, logits, Attrs().i("seed", 1), {0.5, 0.3, 0.15, 0.05}, "plain");
  // Temperature 2: probabilities ∝ sqrt(p).
  std::vector<double> sq = {std::sqrt(0.5), std::sqrt(0.3), std::sqrt(0.15), std::sqrt(0.05)};
  double total = sq[0] + sq[1] + sq[2] + sq[3];
  for (double& x : sq) x /= total;
  expect_distribution(*plugin_, logits, Attrs().i("seed", 2).f("temperature", 2.0), sq, "t=2");
  expect_distribution(*plugin_, logits, Attrs().i("seed", 3).i("top_k", 2),
                      {0.5 / 0.8, 0.3 / 0.8, 0, 0}, "top_k=2");
  // top_p 0.75: 0.5 alone is short of it, 0.5 + 0.3 reaches it.
  expect_distribution(*plugin_, logits, Attrs().i("seed", 4).f("top_p", 0.75),
                      {0.5 / 0.8, 0.3 / 0.8, 0, 0}, "top_p=0.75");
  expect_distribution(*plugin_, logits, Attrs().i("seed", 5).f("top_p", 0.9),
                      {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, "top_p=0.9");
  // After top_k=3 the renormalised 0.526, 0.316, 0.158: top_p 0.6 keeps the first two.
  expect_distribution(*plugin_, logits, Attrs().i("seed", 6).i("top_k", 3).f("top_p", 0.6),
                      {0.5 / 0.8, 0.3 / 0.8, 0, 0}, "top_k=3 top_p=0.6");
  // min_p 0.25: tokens of at least a quarter of the top probability (0.125).
  expect_distribution(*plugin_, logits, Attrs().i("seed", 7).f("min_p", 0.25),
                      {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, "min_p=0.25");
  expect_distribution(*plugin_, logits, Attrs().i("seed", 8).i("top_k", 1), {1, 0, 0, 0},
                      "top_k=1");
}

TEST_F(LlmOps, sample_never_picks_nan_and_reads_strided_logits) {
  Tensor wide = Tensor::contiguous(kF32, {2, 8});
  wide.set_values({NAN, 1, NAN, 5, NAN, 2, NAN, 0, NAN, 7, NAN, 3, NAN, 9, NAN, 1});
  const Tensor logits = wide.slice(1, 0, 8, 2);  // all NaN
  const Tensor odd = wide.slice(1, 1, 8, 2);
  EXPECT_EQ(sample(*plugin_, logits, Attrs().f("temperature", 0.0)), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(sample(*plugin_, odd, Attrs().f("temperature", 0.0)), (std::vector<int64_t>{1, 2}));
  Tensor mixed = Tensor::contiguous(kF32, {1, 3});
  mixed.set_values({NAN, 0.0, 0.0});
  for (int64_t seed = 0; seed < 50; ++seed) {
    EXPECT_NE(sample(*plugin_, mixed, Attrs().i("seed", seed))[0], 0);
  }
}

}  // namespace
}  // namespace gk::test
