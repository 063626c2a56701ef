// The Llama family: Llama 2/3/3.x, SmolLM2, Mistral, Qwen2 (q/k/v bias), Qwen3 (q/k norm).
// Pre-norm decoder: x += attn(rmsnorm(x)); x += mlp(rmsnorm(x)); logits = head(rmsnorm(x)).
// Activations are f32 whatever the weights' dtype; each matmul reads them cast to it.
// tests/llm/reference_forward.py (LlamaFamily) is the specification.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "runner.h"
#include "tensor_names.h"

namespace gk::llm {
namespace {

// Rope settings from either config style: transformers 5 writes "rope_parameters"
// {rope_type, rope_theta, …}; older configs "rope_theta" and an optional "rope_scaling"
// whose type key is "rope_type" or, older still, "type".
void read_rope(const nlohmann::json& config, Config& c) {
  nlohmann::json params = nlohmann::json::object();
  if (auto it = config.find("rope_parameters"); it != config.end() && it->is_object()) {
    params = *it;
  } else if (auto sc = config.find("rope_scaling"); sc != config.end() && sc->is_object()) {
    params = *sc;
  }
  c.rope_theta = config_float_or(params, "rope_theta", config_float_or(config, "rope_theta", 1e4));
  std::string type = "default";
  if (auto t = params.find("rope_type"); t != params.end() && t->is_string()) {
    type = t->get<std::string>();
  } else if (auto t2 = params.find("type"); t2 != params.end() && t2->is_string()) {
    type = t2->get<std::string>();
  }
  if (type == "default") {
    c.rope_scaling = "none";
  } else if (type == "llama3") {
    c.rope_scaling = "llama3";
    c.rope_factor = config_float_or(params, "factor", 8.0);
    c.rope_low = config_float_or(params, "low_freq_factor", 1.0);
    c.rope_high = config_float_or(params, "high_freq_factor", 4.0);
    c.rope_original_max = config_float_or(params, "original_max_position_embeddings", 8192.0);
  } else if (type == "linear") {
    c.rope_scaling = "linear";
    c.rope_factor = config_float_or(params, "factor", 1.0);
  } else {
    fail(GK_UNIMPLEMENTED, "config.json: rope type '" + type +
                               "' is not supported (supported: default, llama3, linear)");
  }
}

// The values of a GGUF's rope_freqs.weight, which the host adds to the metadata under this
// key (a plugin cannot read device memory).
constexpr const char* kRopeFreqsKey = "gpukit.rope_freqs";

// llama.cpp's converter stores Llama 3's rope scaling as the tensor rope_freqs.weight: for
// each frequency i, the divisor of inv_freq[i] (1 where HF keeps the frequency, `factor`
// where it divides it, 1 / ((1 - s) / factor + s) in the band between, s linear in
// 1 / wavelength). The rope op takes llama3 attributes, and those depend on
// original_max_position, low and high only through s = original_max / (high - low) /
// wavelength - low / (high - low): original_max = A, low = B, high = B + 1 give s = A / λ - B.
// So find the factor and a line s = A x - B (x = 1 / λ) that reproduce every divisor, and
// refuse divisors no such line gives.
void rope_from_factors(const nlohmann::json& values, Config& c) {
  const int64_t half = c.head_dim / 2;
  if (!values.is_array() || int64_t(values.size()) != half) {
    fail(GK_INVALID_ARGUMENT, "GGUF: rope_freqs.weight has " +
                                  std::to_string(values.is_array() ? values.size() : 0) +
                                  " values; expected head_dim / 2 = " + std::to_string(half));
  }
  std::vector<double> divisor(static_cast<size_t>(half)), x(static_cast<size_t>(half));
  double factor = 0;
  for (int64_t i = 0; i < half; ++i) {
    const double d = values[size_t(i)].is_number() ? values[size_t(i)].get<double>() : -1.0;
    if (!(d > 0) || !std::isfinite(d)) {
      fail(GK_INVALID_ARGUMENT, "GGUF: rope_freqs.weight[" + std::to_string(i) +
                                    "] is not a finite positive divisor");
    }
    divisor[size_t(i)] = d;
    factor = std::max(factor, d);
    const double inv_freq = std::pow(c.rope_theta, -2.0 * double(i) / double(c.head_dim));
    x[size_t(i)] = inv_freq / (2 * M_PI);
  }
  auto same = [](double a, double b) { return std::fabs(a - b) <= 1e-5 * std::max(a, b); };
  if (std::all_of(divisor.begin(), divisor.end(), [&](double d) { return same(d, 1.0); })) {
    return;  // no scaling
  }
  if (std::all_of(divisor.begin(), divisor.end(), [&](double d) { return same(d, factor); })) {
    c.rope_scaling = "linear";
    c.rope_factor = factor;
    return;
  }
  // x falls with i (longer wavelengths): kept frequencies come first, divided ones last.
  double kept_x = -1, divided_x = -1;  // the kept x nearest the band, the divided x nearest
  std::vector<std::pair<double, double>> band;  // (x, s)
  for (int64_t i = 0; i < half; ++i) {
    const double d = divisor[size_t(i)], xi = x[size_t(i)];
    if (same(d, 1.0)) {
      kept_x = kept_x < 0 ? xi : std::min(kept_x, xi);
    } else if (same(d, factor)) {
      divided_x = std::max(divided_x, xi);
    } else {
      band.emplace_back(xi, (1.0 / d - 1.0 / factor) / (1.0 - 1.0 / factor));
    }
  }
  double a = 0, b = 0;
  if (band.size() >= 2) {  // least squares through the band's points
    double sx = 0, ss = 0, sxx = 0, sxs = 0;
    for (auto [xi, si] : band) {
      sx += xi;
      ss += si;
      sxx += xi * xi;
      sxs += xi * si;
    }
    const double n = double(band.size());
    a = (n * sxs - sx * ss) / (n * sxx - sx * sx);
    b = (a * sx - ss) / n;
  } else if (band.size() == 1) {
    // One point: any slope steep enough that the kept x lies above s = 1, the divided x
    // below s = 0 and s = 0 at a positive x (low > 0) gives the same divisors.
    const auto [xm, sm] = band[0];
    double slope = sm > 0 ? sm / xm : 1.0 / xm;
    if (kept_x > 0) slope = std::max(slope, (1.0 - sm) / (kept_x - xm));
    if (divided_x > 0) slope = std::max(slope, sm / (xm - divided_x));
    a = 2 * slope;
    b = a * xm - sm;
  } else {
    // Kept and divided with no band between: s runs from 0 to 1 between the two.
    a = 2.0 / (kept_x - divided_x);
    b = a * divided_x + 0.5;
  }
  const bool usable = std::isfinite(a) && std::isfinite(b) && a > 0 && b > 0;
  for (int64_t i = 0; usable && i < half; ++i) {
    const double s = a * x[size_t(i)] - b;
    const double scale = s > 1 ? 1.0 : s < 0 ? 1.0 / factor : (1 - s) / factor + s;
    if (!same(1.0 / scale, divisor[size_t(i)])) {
      a = -1;
      break;
    }
  }
  if (!usable || a <= 0) {
    fail(GK_UNIMPLEMENTED,
         "GGUF: rope_freqs.weight does not follow Llama 3's frequency scaling (kept, "
         "smoothed, divided by one factor), the only one supported");
  }
  c.rope_scaling = "llama3";
  c.rope_factor = factor;
  c.rope_original_max = a;
  c.rope_low = b;
  c.rope_high = b + 1;
}

// GGUF metadata as written by llama.cpp's converter: "<arch>.block_count", ….
void read_gguf_config(const nlohmann::json& config, Config& c) {
  c.gguf = true;
  c.gguf_architecture = config["general.architecture"].get<std::string>();
  const std::string p = c.gguf_architecture + ".";
  auto key = [&](const char* k) { return p + k; };
  const std::string& a = c.architecture;
  c.family = Family::kLlama;
  c.hidden = config_int(config, key("embedding_length").c_str(), a);
  c.layers = config_int(config, key("block_count").c_str(), a);
  c.heads = config_int(config, key("attention.head_count").c_str(), a);
  c.kv_heads = config_int_or(config, key("attention.head_count_kv").c_str(), c.heads);
  c.head_dim = config_int_or(config, key("attention.key_length").c_str(), c.hidden / c.heads);
  c.ffn = config_int(config, key("feed_forward_length").c_str(), a);
  c.context = config_int(config, key("context_length").c_str(), a);
  c.eps = config_float_or(config, key("attention.layer_norm_rms_epsilon").c_str(), 1e-6);
  c.rope_theta = config_float_or(config, key("rope.freq_base").c_str(), 1e4);
  c.vocab = config_int_or(config, key("vocab_size").c_str(), 0);
  if (c.vocab <= 0) {
    auto tokens = config.find("tokenizer.ggml.tokens");
    if (tokens != config.end() && tokens->is_array()) c.vocab = int64_t(tokens->size());
  }
  if (c.vocab <= 0) {
    fail(GK_INVALID_ARGUMENT, "GGUF metadata: no '" + key("vocab_size") +
                                  "' and no tokenizer.ggml.tokens to take the vocabulary from");
  }
  if (auto t = config.find(key("rope.scaling.type"));
      t != config.end() && t->is_string() && t->get<std::string>() != "none") {
    const std::string type = t->get<std::string>();
    if (type != "linear") {
      fail(GK_UNIMPLEMENTED, "GGUF metadata: rope scaling '" + type +
                                 "' is not supported (supported: none, linear, and Llama 3's "
                                 "rope_freqs tensor)");
    }
    c.rope_scaling = "linear";
    c.rope_factor = config_float_or(config, key("rope.scaling.factor").c_str(), 1.0);
  }
  if (auto f = config.find(kRopeFreqsKey); f != config.end()) {
    if (c.rope_scaling != "none") {
      fail(GK_INVALID_ARGUMENT, "GGUF: both a rope_freqs tensor and " +
                                    key("rope.scaling.type") + " '" + c.rope_scaling + "'");
    }
    rope_from_factors(*f, c);
  }
  if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0) {
    fail(GK_INVALID_ARGUMENT, "GGUF metadata: head_count " + std::to_string(c.heads) +
                                  " is not a multiple of head_count_kv " +
                                  std::to_string(c.kv_heads));
  }
}

void read_config(const nlohmann::json& config, Config& c) {
  if (auto g = config.find("general.architecture"); g != config.end() && g->is_string()) {
    read_gguf_config(config, c);
    return;
  }
  const std::string& a = c.architecture;
  c.family = Family::kLlama;
  c.vocab = config_int(config, "vocab_size", a);
  c.hidden = config_int(config, "hidden_size", a);
  c.layers = config_int(config, "num_hidden_layers", a);
  c.heads = config_int(config, "num_attention_heads", a);
  c.kv_heads = config_int_or(config, "num_key_value_heads", c.heads);
  c.head_dim = config_int_or(config, "head_dim", c.hidden / c.heads);
  c.ffn = config_int(config, "intermediate_size", a);
  c.context = config_int(config, "max_position_embeddings", a);
  c.eps = config_float_or(config, "rms_norm_eps", 1e-6);
  // Attention is over every cached position: a sliding window in force caps the context
  // instead, so that no sequence grows past it (Mistral v0.1: 4096).
  const int64_t window = config_int_or(config, "sliding_window", 0);
  auto use = config.find("use_sliding_window");
  const bool windowed = !(use != config.end() && use->is_boolean() && !use->get<bool>());
  if (window > 0 && windowed && window < c.context) {
    c.context = window;
  }
  if (c.kv_heads <= 0 || c.heads % c.kv_heads != 0) {
    fail(GK_INVALID_ARGUMENT, "config.json: num_attention_heads " + std::to_string(c.heads) +
                                  " is not a multiple of num_key_value_heads " +
                                  std::to_string(c.kv_heads));
  }
  if (auto act = config.find("hidden_act");
      act != config.end() && act->is_string() && act->get<std::string>() != "silu") {
    fail(GK_UNIMPLEMENTED, "config.json: hidden_act '" + act->get<std::string>() + "' of " + a +
                               " is not supported (only silu)");
  }
  read_rope(config, c);
}

// llama.cpp's converter reorders the rows of each Llama head's q and k projection for its
// interleaved rope: HF row (h, j, i) (pair half j of Dh/2 rows) is stored at (h, i, j).
// Reading the stored rows with strides [Dh * in, in, 2 * in, 1] as [H, 2, Dh/2, in] and
// casting them into fresh memory restores HF's order for the "half" rope.
Tensor unpermute_rows(Model& m, Ops& ops, const Tensor& w, int64_t heads) {
  const int64_t dh = m.config.head_dim, in = w.shape[1];
  Tensor src = Tensor::contiguous(w.data, w.dtype, {heads, 2, dh / 2, in});
  src.strides[0] = dh * in;
  src.strides[1] = in;
  src.strides[2] = 2 * in;
  Tensor dst = Tensor::contiguous(nullptr, w.dtype, {heads, 2, dh / 2, in});
  dst.data = ops.keep(uint64_t(w.numel() * element_size(w.dtype)));
  m.owned.push_back(dst.data);
  ops.call("cast", {&src}, {&dst});
  return dst.reshaped({heads * dh, in});
}

// A packed (block-quantized) q or k projection cannot be cast into HF's row order: the model
// then keeps llama.cpp's order for q and k alike and rotates pairs with the interleaved rope,
// which is the same rotation of the same pairs (q·k is unchanged by one order for both).
void unpermute_qk(Model& m) {
  for (const Layer& l : m.layers) {
    if (is_packed(l.wq.dtype) || is_packed(l.wk.dtype)) {
      m.config.rope_interleaved = true;
      return;
    }
  }
  Ops ops(m.host, m.device, nullptr);
  for (Layer& l : m.layers) {
    l.wq = unpermute_rows(m, ops, l.wq, m.config.heads);
    l.wk = unpermute_rows(m, ops, l.wk, m.config.kv_heads);
  }
}

void load(Model& m, const WeightTable& w) {
  const Config& c = m.config;
  const int64_t q_dim = c.heads * c.head_dim, kv_dim = c.kv_heads * c.head_dim;
  const std::string dims = "hidden_size " + std::to_string(c.hidden) + ", heads " +
                           std::to_string(c.heads) + " / kv heads " + std::to_string(c.kv_heads) +
                           " x head_dim " + std::to_string(c.head_dim) + ", intermediate_size " +
                           std::to_string(c.ffn) + ", vocab_size " + std::to_string(c.vocab);
  const HfNames& n = c.gguf ? kGgufLlamaNames : kLlamaNames;
  m.tok_embd = w.get(n.tok_embd, {c.vocab, c.hidden}, dims);
  m.out_norm = w.get(n.out_norm, {c.hidden}, dims);
  // Tied embeddings: no head in the file, logits use the token embedding.
  m.lm_head = w.optional(n.lm_head, {c.vocab, c.hidden}, dims);
  if (!m.lm_head) m.lm_head = m.tok_embd;
  m.layers.resize(size_t(c.layers));
  for (int64_t i = 0; i < c.layers; ++i) {
    Layer& l = m.layers[size_t(i)];
    auto name = [&](const char* pattern) { return layer_name(pattern, i); };
    l.attn_norm = w.get(name(n.attn_norm), {c.hidden}, dims);
    l.wq = w.get(name(n.wq), {q_dim, c.hidden}, dims);
    l.wk = w.get(name(n.wk), {kv_dim, c.hidden}, dims);
    l.wv = w.get(name(n.wv), {kv_dim, c.hidden}, dims);
    // Qwen2's q/k/v bias has no config flag: the file decides.
    l.bq = w.optional(name(n.bq), {q_dim}, dims);
    l.bk = w.optional(name(n.bk), {kv_dim}, dims);
    l.bv = w.optional(name(n.bv), {kv_dim}, dims);
    l.q_norm = w.optional(name(n.q_norm), {c.head_dim}, dims);
    l.k_norm = w.optional(name(n.k_norm), {c.head_dim}, dims);
    if (bool(l.q_norm) != bool(l.k_norm)) {
      fail(GK_NOT_FOUND, "tensor '" + name(l.q_norm ? n.k_norm : n.q_norm) +
                             "' is missing from the weights (its q/k norm partner is there)");
    }
    l.wo = w.get(name(n.wo), {c.hidden, q_dim}, dims);
    l.bo = w.optional(name(n.bo), {c.hidden}, dims);
    l.ffn_norm = w.get(name(n.ffn_norm), {c.hidden}, dims);
    l.w_gate = w.get(name(n.w_gate), {c.ffn, c.hidden}, dims);
    l.w_up = w.get(name(n.w_up), {c.ffn, c.hidden}, dims);
    l.w_down = w.get(name(n.w_down), {c.hidden, c.ffn}, dims);
  }
  if (c.gguf && c.gguf_architecture == "llama") unpermute_qk(m);
}

void forward(Step& s, Ops& ops, const Tensor& tokens, const Tensor& positions,
             const Tensor& logits) {
  const Model& m = *s.model;
  const Config& c = m.config;
  const int64_t t = tokens.shape[0];
  Tensor embedded = ops.scratch({t, c.hidden}, m.dtype);
  ops.call("embedding", {&m.tok_embd, &tokens}, {&embedded});
  Residual x(ops.to(embedded, GK_DTYPE_F32));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    // Cast once for the projections that read it (each casts again only for another dtype).
    Tensor h = ops.to(x.norm(ops, l.attn_norm, Tensor{}, c.eps, true),
                      linear_input_dtype(l.wq.dtype, m.dtype));
    Tensor q = ops.linear(h, l.wq, l.bq, false).reshaped({1, t, c.heads, c.head_dim});
    Tensor k = ops.linear(h, l.wk, l.bk, false).reshaped({1, t, c.kv_heads, c.head_dim});
    Tensor v = ops.linear(h, l.wv, l.bv, false).reshaped({1, t, c.kv_heads, c.head_dim});
    if (l.q_norm) {  // Qwen3: RMSNorm over each head, before rotary
      q = ops.rmsnorm(q, l.q_norm, c.eps);
      k = ops.rmsnorm(k, l.k_norm, c.eps);
    }
    rotate(ops, c, q, positions);
    rotate(ops, c, k, positions);
    Tensor o = attend(s, ops, i, q, k, v);
    x.add(ops.linear(o, l.wo, l.bo, false));

    h = ops.to(x.norm(ops, l.ffn_norm, Tensor{}, c.eps, true),
               linear_input_dtype(l.w_gate.dtype, m.dtype));
    Tensor gate = ops.linear(h, l.w_gate, Tensor{}, false);
    Tensor up = ops.linear(h, l.w_up, Tensor{}, false);
    Tensor act = ops.scratch({t, c.ffn});
    ops.call("swiglu", {&gate, &up}, {&act});
    x.add(ops.linear(act, l.w_down, Tensor{}, false));
  }
  const int64_t rows = logits.shape[0];
  project_logits(ops, m, x.norm(ops, m.out_norm, Tensor{}, c.eps, true, t - rows, rows), logits);
}

}  // namespace

const Builder kLlamaBuilder{read_config, load, forward};

}  // namespace gk::llm
