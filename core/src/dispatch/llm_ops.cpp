// The rules of the llm ops. Attribute values are read through kernels/llm/llm_params.h,
// the same readers (and defaults) the plugins use, and refused here when out of range, so a
// plugin can take what it reads at face value. Values held in tensors (ids, positions,
// kv_lengths, block ids, slots) are the plugins' to check: a rule sees only descriptors.
#include "dispatch/llm_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "common/dtype.h"
#include "llm/llm_params.h"

namespace gk {
namespace {

const std::vector<int32_t> kFloating = {GK_DTYPE_F32, GK_DTYPE_F64, GK_DTYPE_F16, GK_DTYPE_BF16};

std::vector<int64_t> dims(const gk_tensor_desc& d) {
  return std::vector<int64_t>(d.shape, d.shape + d.ndim);
}

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

void require_ndim(const OpCall& call, size_t i, int32_t ndim, const char* layout) {
  if (call.input(i).ndim == ndim) return;
  call.fail_input(i, "has shape " + shape_text(call.input(i)) + "; expected " +
                         std::to_string(ndim) + " dimensions " + layout);
}

void require_finite(const OpCall& call, const char* attr, double v, const char* range, bool ok) {
  if (std::isfinite(v) && ok) return;
  call.fail_attr(attr, "is " + num(v) + "; expected " + range);
}

OpSchema embedding() {
  OpSchema s{"embedding", {"table", "ids"}, 2, {"out"}, {}, nullptr, nullptr};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    require_ndim(call, 0, 2, "[vocab, dim]");
    call.require_dtype_in(1, {GK_DTYPE_I32, GK_DTYPE_I64});
    const gk_tensor_desc& ids = call.input(1);
    if (ids.ndim + 1 > GK_MAX_DIMS) {
      call.fail_input(1, "has " + std::to_string(ids.ndim) + " dimensions; at most " +
                             std::to_string(GK_MAX_DIMS - 1) + " (the output adds one)");
    }
    std::vector<int64_t> out = dims(ids);
    out.push_back(call.input(0).shape[1]);
    return std::vector<gk_tensor_desc>{make_desc(call.input(0).dtype, out)};
  };
  return s;
}

OpSchema rope() {
  OpSchema s{"rope",
             {"x", "positions"},
             2,
             {"out"},
             {{"theta", GK_ATTR_FLOAT},
              {"rotary_dim", GK_ATTR_INT},
              {"style", GK_ATTR_STRING, {}, "half"},
              {"scaling", GK_ATTR_STRING, {}, "none"},
              {"factor", GK_ATTR_FLOAT},
              {"low_freq_factor", GK_ATTR_FLOAT},
              {"high_freq_factor", GK_ATTR_FLOAT},
              {"original_max_position", GK_ATTR_FLOAT}},
             nullptr,
             nullptr};
  // Each thread (or loop step) reads both elements of a rotary pair before writing either.
  s.in_place = true;
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    require_ndim(call, 0, 4, "[batch, tokens, heads, head_dim]");
    call.require_dtype_in(1, {GK_DTYPE_I32});
    const gk_tensor_desc& x = call.input(0);
    const gk_tensor_desc& pos = call.input(1);
    const int64_t b = x.shape[0], t = x.shape[1], dh = x.shape[3];
    const bool pos_ok = (pos.ndim == 1 && pos.shape[0] == t) ||
                        (pos.ndim == 2 && pos.shape[0] == b && pos.shape[1] == t);
    if (!pos_ok) {
      call.fail_input(1, "has shape " + shape_text(pos) + "; expected [" + std::to_string(t) +
                             "] or [" + std::to_string(b) + ", " + std::to_string(t) +
                             "] (tokens, or batch and tokens, of input 'x' " + shape_text(x) + ")");
    }
    call.require_string_in("style", {"half", "interleaved"});
    call.require_string_in("scaling", {"none", "llama3", "linear"});
    NormalAttrs& normal = call.normal();
    const llm::RopeParams p = llm::read_rope(normal.data(), normal.size(), dh);
    require_finite(call, "theta", p.theta, "a finite value > 1", p.theta > 1.0);
    if (p.rotary_dim < 2 || p.rotary_dim > dh || p.rotary_dim % 2 != 0 ||
        p.rotary_dim > llm::kMaxRotaryDim) {
      call.fail_attr("rotary_dim", "is " + std::to_string(p.rotary_dim) +
                                       "; expected an even value in 2.." +
                                       std::to_string(std::min<int64_t>(dh, llm::kMaxRotaryDim)) +
                                       " (head_dim of input 'x' " + shape_text(x) + " is " +
                                       std::to_string(dh) + ")");
    }
    if (p.scaling != llm::RopeScaling::kNone) {
      require_finite(call, "factor", p.factor, "a finite value > 0", p.factor > 0.0);
    }
    if (p.scaling == llm::RopeScaling::kLlama3) {
      require_finite(call, "low_freq_factor", p.low_freq_factor, "a finite value > 0",
                     p.low_freq_factor > 0.0);
      const std::string above_low =
          "a finite value > low_freq_factor (" + num(p.low_freq_factor) + ")";
      require_finite(call, "high_freq_factor", p.high_freq_factor, above_low.c_str(),
                     p.high_freq_factor > p.low_freq_factor);
      require_finite(call, "original_max_position", p.original_max_position, "a finite value > 0",
                     p.original_max_position > 0.0);
    }
    normal.set_float("theta", p.theta);
    normal.set_int("rotary_dim", p.rotary_dim);
    normal.set_float("factor", p.factor);
    normal.set_float("low_freq_factor", p.low_freq_factor);
    normal.set_float("high_freq_factor", p.high_freq_factor);
    normal.set_float("original_max_position", p.original_max_position);
    return std::vector<gk_tensor_desc>{make_desc(x.dtype, dims(x))};
  };
  return s;
}

OpSchema attention() {
  OpSchema s{"attention",
             {"q", "k", "v", "kv_lengths", "block_table"},
             3,
             {"out"},
             {{"scale", GK_ATTR_FLOAT}, {"causal", GK_ATTR_INT}},
             nullptr,
             nullptr};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    require_ndim(call, 0, 4, "[batch, q_tokens, q_heads, head_dim]");
    call.require_same_dtype(1, 0);
    call.require_same_dtype(2, 0);
    // With a block table, k and v are block pools that every sequence of the batch reads
    // through its own row of the table.
    const bool paged = call.num_inputs() == 5;
    require_ndim(call, 1, 4,
                 paged ? "[num_blocks, block_size, kv_heads, head_dim] (a block pool)"
                       : "[batch, kv_tokens, kv_heads, head_dim]");
    call.require_same_shape(2, 1);
    const gk_tensor_desc& q = call.input(0);
    const gk_tensor_desc& k = call.input(1);
    const int64_t b = q.shape[0], hq = q.shape[2], dh = q.shape[3];
    if ((!paged && k.shape[0] != b) || k.shape[3] != dh) {
      call.fail_input(1, "has shape " + shape_text(k) + "; expected " +
                             (paged ? "" : "batch " + std::to_string(b) + " and ") + "head_dim " +
                             std::to_string(dh) + " as input 'q' " + shape_text(q));
    }
    if (paged && k.shape[1] == 0) {
      call.fail_input(1, "has shape " + shape_text(k) +
                             "; a block pool needs a block_size (dimension 1) of at least 1");
    }
    const int64_t hkv = k.shape[2];
    if (hkv == 0 || hq % hkv != 0) {
      call.fail_input(1, "has " + std::to_string(hkv) + " heads (shape " + shape_text(k) +
                             "); the " + std::to_string(hq) + " heads of input 'q' " +
                             shape_text(q) + " must be a multiple of it (grouped-query " +
                             "attention)");
    }
    if (call.num_inputs() >= 4) {
      call.require_dtype_in(3, {GK_DTYPE_I32});
      const gk_tensor_desc& len = call.input(3);
      if (len.ndim != 1 || len.shape[0] != b) {
        call.fail_input(3, "has shape " + shape_text(len) + "; expected [" + std::to_string(b) +
                               "] (one cache length per sequence of input 'q' " + shape_text(q) +
                               (paged ? "; a block_table needs the lengths" : "") + ")");
      }
    }
    if (paged) {
      call.require_dtype_in(4, {GK_DTYPE_I32});
      const gk_tensor_desc& table = call.input(4);
      if (table.ndim != 2 || table.shape[0] != b) {
        call.fail_input(4, "has shape " + shape_text(table) + "; expected [" + std::to_string(b) +
                               ", max_blocks] (one row of block ids per sequence of input 'q' " +
                               shape_text(q) + ")");
      }
    }
    NormalAttrs& normal = call.normal();
    const llm::AttentionParams p = llm::read_attention(normal.data(), normal.size(), dh);
    require_finite(call, "scale", p.scale, "a finite value", true);
    call.flag("causal", true);
    normal.set_float("scale", p.scale);
    return std::vector<gk_tensor_desc>{make_desc(q.dtype, dims(q))};
  };
  return s;
}

// Rows of keys or values written into a block pool at flat slots (block * block_size + row):
// the cache append of a paged KV cache, one call for every sequence of a step.
OpSchema kv_cache_write() {
  OpSchema s{"kv_cache_write", {"cache", "src", "slots"}, 3, {"out"}, {}, nullptr, nullptr};
  // `out` is `cache` itself: only the rows at `slots` change.
  s.in_place = true;
  s.updates_input = 0;
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    require_ndim(call, 0, 4, "[num_blocks, block_size, kv_heads, head_dim] (a block pool)");
    call.require_dtype_in(1, kFloating);
    call.require_dtype_in(2, {GK_DTYPE_I32});
    const gk_tensor_desc& cache = call.input(0);
    const gk_tensor_desc& src = call.input(1);
    const gk_tensor_desc& slots = call.input(2);
    // src is [N, H, Dh] or [1, N, H, Dh] (a step's k or v as the projections lay it out).
    const bool rows3 = src.ndim == 3;
    const bool rows4 = src.ndim == 4 && src.shape[0] == 1;
    const int64_t n = rows3 ? src.shape[0] : (rows4 ? src.shape[1] : -1);
    const int64_t h = rows3 ? src.shape[1] : (rows4 ? src.shape[2] : -1);
    const int64_t dh = rows3 ? src.shape[2] : (rows4 ? src.shape[3] : -1);
    if (n < 0 || h != cache.shape[2] || dh != cache.shape[3]) {
      call.fail_input(1, "has shape " + shape_text(src) + "; expected [rows, " +
                             std::to_string(cache.shape[2]) + ", " +
                             std::to_string(cache.shape[3]) + "] or [1, rows, " +
                             std::to_string(cache.shape[2]) + ", " +
                             std::to_string(cache.shape[3]) + "] (the heads and head_dim of " +
                             "input 'cache' " + shape_text(cache) + ")");
    }
    if (slots.ndim != 1 || slots.shape[0] != n) {
      call.fail_input(2, "has shape " + shape_text(slots) + "; expected [" + std::to_string(n) +
                             "] (one slot per row of input 'src' " + shape_text(src) + ")");
    }
    return std::vector<gk_tensor_desc>{make_desc(cache.dtype, dims(cache))};
  };
  return s;
}

OpSchema sample() {
  OpSchema s{"sample",
             {"logits"},
             1,
             {"ids"},
             {{"temperature", GK_ATTR_FLOAT},
              {"top_k", GK_ATTR_INT},
              {"top_p", GK_ATTR_FLOAT},
              {"min_p", GK_ATTR_FLOAT},
              {"seed", GK_ATTR_INT},
              {"offset", GK_ATTR_INT}},
             nullptr,
             nullptr};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, kFloating);
    require_ndim(call, 0, 2, "[batch, vocab]");
    const gk_tensor_desc& logits = call.input(0);
    if (logits.shape[1] == 0) call.fail_input(0, "has an empty vocabulary: nothing to sample");
    if (logits.shape[1] > INT32_MAX) {
      call.fail_input(0, "has a vocabulary of " + std::to_string(logits.shape[1]) +
                             "; ids are i32, so at most 2^31 - 1");
    }
    NormalAttrs& normal = call.normal();
    const llm::SampleParams p = llm::read_sample(normal.data(), normal.size());
    require_finite(call, "temperature", p.temperature, "a finite value >= 0 (0 = greedy)",
                   p.temperature >= 0.0);
    if (p.top_k < 0) {
      call.fail_attr("top_k", "is " + std::to_string(p.top_k) + "; expected >= 0 (0 = off)");
    }
    require_finite(call, "top_p", p.top_p, "a value in (0, 1] (1 = off)",
                   p.top_p > 0.0 && p.top_p <= 1.0);
    require_finite(call, "min_p", p.min_p, "a value in [0, 1] (0 = off)",
                   p.min_p >= 0.0 && p.min_p <= 1.0);
    normal.set_float("temperature", p.temperature);
    normal.set_int("top_k", p.top_k);
    normal.set_float("top_p", p.top_p);
    normal.set_float("min_p", p.min_p);
    normal.set_int("seed", int64_t(p.seed));
    normal.set_int("offset", int64_t(p.offset));
    return std::vector<gk_tensor_desc>{make_desc(GK_DTYPE_I32, {logits.shape[0]})};
  };
  return s;
}

}  // namespace

void add_llm_op_schemas(std::vector<OpSchema>& schemas) {
  schemas.push_back(embedding());
  schemas.push_back(rope());
  schemas.push_back(attention());
  schemas.push_back(kv_cache_write());
  schemas.push_back(sample());
}

}  // namespace gk
