// The attributes of the llm ops (embedding, rope, attention, sample) read into plain structs,
// with the defaults docs/ops.md states, and the pieces of math that every implementation of
// them must share bit for bit: rope's inverse frequencies and sample's random number.
//
// Plain C++17 over the plugin ABI's gk_attr: the core's op rules, the cpu plugin and the
// llm_cuda plugin all read attributes through these functions, so a default lives in one
// place. The readers do not validate: the core's op rules (core/src/dispatch/llm_ops.cpp)
// refuse bad values before any plugin sees a call; check_* below says what they refuse.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "gpukit/gpukit.h"

#if defined(__CUDACC__)
#define GK_LLM_HD __host__ __device__
#else
#define GK_LLM_HD
#endif

namespace gk::llm {

// The largest rotary_dim the plugins' inverse-frequency tables hold (Dh up to 512).
inline constexpr int kMaxRotaryDim = 512;

inline const gk_attr* find_attr(const gk_attr* attrs, int32_t n, const char* name) {
  for (int32_t i = 0; i < n; ++i) {
    if (attrs[i].name && std::strcmp(attrs[i].name, name) == 0) return &attrs[i];
  }
  return nullptr;
}
inline int64_t attr_int(const gk_attr* attrs, int32_t n, const char* name, int64_t fallback) {
  const gk_attr* a = find_attr(attrs, n, name);
  return a && a->type == GK_ATTR_INT ? a->value.i : fallback;
}
inline double attr_float(const gk_attr* attrs, int32_t n, const char* name, double fallback) {
  const gk_attr* a = find_attr(attrs, n, name);
  if (!a) return fallback;
  if (a->type == GK_ATTR_INT) return double(a->value.i);
  return a->type == GK_ATTR_FLOAT ? a->value.f : fallback;
}
inline std::string attr_string(const gk_attr* attrs, int32_t n, const char* name,
                               const char* fallback) {
  const gk_attr* a = find_attr(attrs, n, name);
  return a && a->type == GK_ATTR_STRING && a->value.s ? a->value.s : fallback;
}

// ---- rope ----

enum class RopeStyle { kHalf, kInterleaved };
enum class RopeScaling { kNone, kLlama3, kLinear };

struct RopeParams {
  double theta = 10000.0;
  int64_t rotary_dim = 0;  // 0 = head_dim
  RopeStyle style = RopeStyle::kHalf;
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 8.0;  // llama3's default; linear scaling needs it given
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position = 8192.0;
};

// `head_dim` fills the rotary_dim default. Unknown strings read as the default: the op
// rule has refused them already.
inline RopeParams read_rope(const gk_attr* attrs, int32_t n, int64_t head_dim) {
  RopeParams p;
  p.theta = attr_float(attrs, n, "theta", p.theta);
  p.rotary_dim = attr_int(attrs, n, "rotary_dim", head_dim);
  p.style = attr_string(attrs, n, "style", "half") == "interleaved" ? RopeStyle::kInterleaved
                                                                    : RopeStyle::kHalf;
  const std::string scaling = attr_string(attrs, n, "scaling", "none");
  p.scaling = scaling == "llama3"   ? RopeScaling::kLlama3
              : scaling == "linear" ? RopeScaling::kLinear
                                    : RopeScaling::kNone;
  p.factor = attr_float(attrs, n, "factor", p.scaling == RopeScaling::kLinear ? 1.0 : p.factor);
  p.low_freq_factor = attr_float(attrs, n, "low_freq_factor", p.low_freq_factor);
  p.high_freq_factor = attr_float(attrs, n, "high_freq_factor", p.high_freq_factor);
  p.original_max_position = attr_float(attrs, n, "original_max_position", p.original_max_position);
  return p;
}

// The inverse frequency of rotary pair i (0 <= i < rotary_dim / 2), in float32 as HF
// transformers computes it (modeling_rope_utils: _compute_default_rope_parameters, then
// _compute_linear_scaling_rope_parameters or _compute_llama3_parameters): the exponent
// 2i / rotary_dim in float32, base ** exponent, its reciprocal, and llama3's wavelength
// bands and smoothing in float32. Implementations then take angle = float(position) *
// inv_freq in float32, as HF's float32 product of positions and frequencies does.
inline float rope_inv_freq(const RopeParams& p, int64_t i) {
  const float exponent = float(2 * i) / float(p.rotary_dim);
  const float base = float(p.theta);
  float inv = 1.0f / float(std::pow(double(base), double(exponent)));
  if (p.scaling == RopeScaling::kLinear) return inv / float(p.factor);
  if (p.scaling != RopeScaling::kLlama3) return inv;
  const float factor = float(p.factor);
  const float low = float(p.low_freq_factor), high = float(p.high_freq_factor);
  const float old_len = float(p.original_max_position);
  const float low_freq_wavelen = old_len / low;
  const float high_freq_wavelen = old_len / high;
  const float wavelen = float(2.0 * 3.141592653589793) / inv;
  // Long wavelengths (low frequencies) are divided by factor, short ones kept, and the band
  // between blends the two linearly in old_len / wavelen.
  const float scaled = wavelen > low_freq_wavelen ? inv / factor : inv;
  const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
  if (!medium) return scaled;
  const float smooth = (old_len / wavelen - low) / (high - low);
  return (1.0f - smooth) * scaled / factor + smooth * scaled;
}

// ---- attention ----

struct AttentionParams {
  double scale = 0.0;  // 0 before read: 1 / sqrt(head_dim)
  bool causal = true;
};

inline AttentionParams read_attention(const gk_attr* attrs, int32_t n, int64_t head_dim) {
  AttentionParams p;
  p.scale = attr_float(attrs, n, "scale", 1.0 / std::sqrt(double(head_dim > 0 ? head_dim : 1)));
  p.causal = attr_int(attrs, n, "causal", 1) != 0;
  return p;
}

// ---- sample ----

struct SampleParams {
  double temperature = 1.0;  // 0 = greedy (argmax)
  int64_t top_k = 0;         // 0 = off
  double top_p = 1.0;        // 1 = off
  double min_p = 0.0;        // 0 = off
  uint64_t seed = 0;
  uint64_t offset = 0;  // the step: one seed gives a new draw per offset
};

inline SampleParams read_sample(const gk_attr* attrs, int32_t n) {
  SampleParams p;
  p.temperature = attr_float(attrs, n, "temperature", p.temperature);
  p.top_k = attr_int(attrs, n, "top_k", p.top_k);
  p.top_p = attr_float(attrs, n, "top_p", p.top_p);
  p.min_p = attr_float(attrs, n, "min_p", p.min_p);
  p.seed = uint64_t(attr_int(attrs, n, "seed", 0));
  p.offset = uint64_t(attr_int(attrs, n, "offset", 0));
  return p;
}

GK_LLM_HD inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The uniform draw in [0, 1) of batch row `row` for (seed, offset): a counter-based hash, so
// every device and every plugin draws the same number without carrying generator state,
// and step `offset` of a seeded sequence can be replayed alone.
GK_LLM_HD inline double sample_uniform(uint64_t seed, uint64_t offset, uint64_t row) {
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ offset) ^ row);
  return double(h >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace gk::llm
