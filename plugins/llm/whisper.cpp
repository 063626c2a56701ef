// Whisper (HF WhisperForConditionalGeneration): an encoder over log-mel features and a
// decoder that attends to its own tokens (KV cache) and to the encoder's output.
//   encoder: conv1 (k3, pad 1) + gelu, conv2 (k3, stride 2, pad 1) + gelu, + sinusoidal
//            positions (stored as embed_positions), pre-LayerNorm layers of bidirectional
//            self-attention and a gelu MLP, final LayerNorm.
//   decoder: token + learned positions, pre-LayerNorm layers of causal self-attention,
//            cross-attention and a gelu MLP, final LayerNorm, head tied to embed_tokens.
// A convolution is three matmuls, one per tap, accumulated (matmul's beta) into row views
// of the output, so the zero padding at the edges is never materialised. Cross-attention
// keys and values depend only on the audio: encode computes them once per window into the
// session; forward reads them at every step.
#include "runner.h"

namespace gk::llm {
namespace {

void read_config(const nlohmann::json& config, Config& c) {
  const std::string& a = c.architecture;
  if (config.value("model_type", std::string()) != "whisper") {
    fail(GK_INVALID_ARGUMENT, "config.json: model_type is not \"whisper\" (" + a + " needs it)");
  }
  c.family = Family::kWhisper;
  c.vocab = config_int(config, "vocab_size", a);
  c.hidden = config_int(config, "d_model", a);
  c.layers = config_int(config, "decoder_layers", a);
  c.heads = config_int(config, "decoder_attention_heads", a);
  c.kv_heads = c.heads;
  c.ffn = config_int(config, "decoder_ffn_dim", a);
  c.context = config_int(config, "max_target_positions", a);
  c.n_mels = config_int(config, "num_mel_bins", a);
  c.encoder_layers = config_int(config, "encoder_layers", a);
  c.encoder_heads = config_int(config, "encoder_attention_heads", a);
  c.encoder_ffn = config_int(config, "encoder_ffn_dim", a);
  c.encoder_positions = config_int(config, "max_source_positions", a);
  c.eps = 1e-5;  // nn.LayerNorm's default, which HF's Whisper uses
  for (int64_t heads : {c.heads, c.encoder_heads}) {
    if (c.hidden % heads != 0) {
      fail(GK_INVALID_ARGUMENT, "config.json: d_model " + std::to_string(c.hidden) +
                                    " is not a multiple of the attention heads " +
                                    std::to_string(heads));
    }
  }
  c.head_dim = c.hidden / c.heads;
  if (config.value("scale_embedding", false)) {
    fail(GK_UNIMPLEMENTED,
         "config.json: scale_embedding true is not supported (no Whisper "
         "checkpoint sets it)");
  }
  if (auto act = config.find("activation_function");
      act != config.end() && act->is_string() && act->get<std::string>() != "gelu") {
    fail(GK_UNIMPLEMENTED, "config.json: activation_function '" + act->get<std::string>() +
                               "' of " + a + " is not supported (only gelu)");
  }
}

// The attention and MLP tensors of one layer under `prefix` ("model.encoder.layers.3.").
void load_layer(const WeightTable& w, const std::string& prefix, int64_t d, int64_t ffn,
                const std::string& dims, Layer& l) {
  auto get = [&](const char* name, std::initializer_list<int64_t> shape) {
    return w.get(prefix + name, shape, dims);
  };
  l.attn_norm = get("self_attn_layer_norm.weight", {d});
  l.attn_norm_b = get("self_attn_layer_norm.bias", {d});
  l.wq = get("self_attn.q_proj.weight", {d, d});
  l.bq = get("self_attn.q_proj.bias", {d});
  l.wk = get("self_attn.k_proj.weight", {d, d});
  l.wv = get("self_attn.v_proj.weight", {d, d});
  l.bv = get("self_attn.v_proj.bias", {d});
  l.wo = get("self_attn.out_proj.weight", {d, d});
  l.bo = get("self_attn.out_proj.bias", {d});
  l.ffn_norm = get("final_layer_norm.weight", {d});
  l.ffn_norm_b = get("final_layer_norm.bias", {d});
  l.w_up = get("fc1.weight", {ffn, d});
  l.b_up = get("fc1.bias", {ffn});
  l.w_down = get("fc2.weight", {d, ffn});
  l.b_down = get("fc2.bias", {d});
}

// A convolution weight [out, in, 3] as three contiguous taps [out, in], owned by the model.
void split_taps(Model& m, Ops& ops, const Tensor& weight, Tensor (&taps)[3]) {
  const int64_t out = weight.shape[0], in = weight.shape[1];
  for (int k = 0; k < 3; ++k) {
    Tensor view = weight;
    view.ndim = 2;
    view.shape[0] = out;
    view.shape[1] = in;
    view.strides[0] = weight.strides[0];
    view.strides[1] = weight.strides[1];
    view.data = static_cast<char*>(weight.data) + k * weight.strides[2] * element_size(m.dtype);
    Tensor tap = Tensor::contiguous(nullptr, m.dtype, {out, in});
    tap.data = ops.keep(uint64_t(out * in * element_size(m.dtype)));
    m.owned.push_back(tap.data);
    ops.call("cast", {&view}, {&tap});
    taps[k] = tap;
  }
}

void load(Model& m, const WeightTable& w) {
  const Config& c = m.config;
  const int64_t d = c.hidden;
  const std::string dims = "d_model " + std::to_string(d) + ", num_mel_bins " +
                           std::to_string(c.n_mels) + ", vocab_size " + std::to_string(c.vocab) +
                           ", max_source_positions " + std::to_string(c.encoder_positions) +
                           ", max_target_positions " + std::to_string(c.context);
  // Checkpoints saved from WhisperModel have no "model." prefix.
  const std::string p = w.has("model.encoder.conv1.weight") ? "model." : "";
  Ops ops(m.host, m.device, nullptr);
  split_taps(m, ops, w.get(p + "encoder.conv1.weight", {d, c.n_mels, 3}, dims), m.conv1);
  m.conv1_b = w.get(p + "encoder.conv1.bias", {d}, dims);
  split_taps(m, ops, w.get(p + "encoder.conv2.weight", {d, d, 3}, dims), m.conv2);
  m.conv2_b = w.get(p + "encoder.conv2.bias", {d}, dims);
  m.enc_pos = w.get(p + "encoder.embed_positions.weight", {c.encoder_positions, d}, dims);
  m.enc_norm = w.get(p + "encoder.layer_norm.weight", {d}, dims);
  m.enc_norm_b = w.get(p + "encoder.layer_norm.bias", {d}, dims);
  m.encoder_layers.resize(size_t(c.encoder_layers));
  for (int64_t i = 0; i < c.encoder_layers; ++i) {
    load_layer(w, p + "encoder.layers." + std::to_string(i) + ".", d, c.encoder_ffn, dims,
               m.encoder_layers[size_t(i)]);
  }

  m.tok_embd = w.get(p + "decoder.embed_tokens.weight", {c.vocab, d}, dims);
  m.pos_embd = w.get(p + "decoder.embed_positions.weight", {c.context, d}, dims);
  m.out_norm = w.get(p + "decoder.layer_norm.weight", {d}, dims);
  m.out_norm_b = w.get(p + "decoder.layer_norm.bias", {d}, dims);
  m.lm_head = w.optional("proj_out.weight", {c.vocab, d}, dims);
  if (!m.lm_head) m.lm_head = m.tok_embd;  // tie_word_embeddings
  m.layers.resize(size_t(c.layers));
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string prefix = p + "decoder.layers." + std::to_string(i) + ".";
    Layer& l = m.layers[size_t(i)];
    load_layer(w, prefix, d, c.ffn, dims, l);
    auto get = [&](const char* name, std::initializer_list<int64_t> shape) {
      return w.get(prefix + name, shape, dims);
    };
    l.cross_norm = get("encoder_attn_layer_norm.weight", {d});
    l.cross_norm_b = get("encoder_attn_layer_norm.bias", {d});
    l.cwq = get("encoder_attn.q_proj.weight", {d, d});
    l.cbq = get("encoder_attn.q_proj.bias", {d});
    l.cwk = get("encoder_attn.k_proj.weight", {d, d});
    l.cwv = get("encoder_attn.v_proj.weight", {d, d});
    l.cbv = get("encoder_attn.v_proj.bias", {d});
    l.cwo = get("encoder_attn.out_proj.weight", {d, d});
    l.cbo = get("encoder_attn.out_proj.bias", {d});
  }
}

// Rows first, first + step, … (`count` of them) of a [T, C] tensor.
Tensor every_row(const Tensor& x, int64_t first, int64_t step, int64_t count) {
  Tensor t = x;
  t.data = static_cast<char*>(x.data) + first * x.strides[0] * element_size(x.dtype);
  t.shape[0] = count;
  t.strides[0] = x.strides[0] * step;
  return t;
}

// out[t] = bias + sum_k taps[k] · x[stride * t + k - 1] over the x rows that exist (zero
// padding of one row on each side), then gelu: [T_out, out] f32.
Tensor conv_gelu(Ops& ops, const Tensor& x, const Tensor (&taps)[3], const Tensor& bias,
                 int64_t stride) {
  const int64_t t_in = x.shape[0];
  const int64_t t_out = (t_in - 1) / stride + 1;
  Tensor out = ops.scratch({t_out, taps[0].shape[0]});
  gk_attr transpose = attr_int("transpose_b", 1);
  gk_attr accumulate = attr_float("beta", 1.0);
  // The centre tap covers every output row.
  Tensor centre = every_row(x, 0, stride, t_out);
  ops.call("matmul", {&centre, &taps[1], &bias}, {&out}, {transpose});
  // Tap 0 reads row stride * t - 1: t >= 1.
  if (t_out > 1) {
    Tensor in = every_row(x, stride - 1, stride, t_out - 1);
    Tensor o = out.rows(1, t_out - 1);
    ops.call("matmul", {&in, &taps[0]}, {&o}, {transpose, accumulate});
  }
  // Tap 2 reads row stride * t + 1 < t_in.
  const int64_t right = (t_in - 2) / stride + 1;
  if (t_in >= 2 && right > 0) {
    Tensor in = every_row(x, 1, stride, right);
    Tensor o = out.rows(0, right);
    ops.call("matmul", {&in, &taps[2]}, {&o}, {transpose, accumulate});
  }
  Tensor act = ops.scratch({t_out, taps[0].shape[0]});
  ops.call("gelu", {&out}, {&act});
  return act;
}

// [T, H * Dh] as [1, T, H, Dh] (contiguous).
Tensor heads(const Tensor& x, int64_t h) {
  return x.reshaped({1, x.shape[0], h, x.shape[1] / h});
}

// Layer `l`'s MLP with its pre-norm, added to the residual stream x.
Tensor mlp(Ops& ops, const Config& c, const Layer& l, const Tensor& x, int64_t ffn) {
  Tensor h = ops.layernorm(x, l.ffn_norm, l.ffn_norm_b, c.eps);
  Tensor up = ops.linear(h, l.w_up, l.b_up, false);
  Tensor act = ops.scratch({x.shape[0], ffn});
  ops.call("gelu", {&up}, {&act});
  return ops.add(x, ops.linear(act, l.w_down, l.b_down, false));
}

void encode(Session& s, Ops& ops, const Tensor& features, const Tensor& output) {
  const Model& m = *s.model;
  const Config& c = m.config;
  const int64_t d = c.hidden;
  const int64_t frames = features.shape[1];
  // [n_mels, frames] read as [frames, n_mels], made contiguous in the weights' dtype.
  Tensor by_time = features;
  std::swap(by_time.shape[0], by_time.shape[1]);
  std::swap(by_time.strides[0], by_time.strides[1]);
  Tensor x_in = ops.scratch({frames, c.n_mels}, m.dtype);
  ops.call("cast", {&by_time}, {&x_in});
  Tensor h1 = ops.to(conv_gelu(ops, x_in, m.conv1, m.conv1_b, 1), m.dtype);
  Tensor h2 = conv_gelu(ops, h1, m.conv2, m.conv2_b, 2);
  const int64_t t = h2.shape[0];
  Tensor x = ops.add(h2, ops.to(m.enc_pos.rows(0, t), GK_DTYPE_F32));
  const int64_t eh = c.encoder_heads;
  for (const Layer& l : m.encoder_layers) {
    Tensor h = ops.layernorm(x, l.attn_norm, l.attn_norm_b, c.eps);
    Tensor q = ops.to(ops.linear(h, l.wq, l.bq, false), m.dtype);
    Tensor k = ops.to(ops.linear(h, l.wk, Tensor{}, false), m.dtype);
    Tensor v = ops.to(ops.linear(h, l.wv, l.bv, false), m.dtype);
    Tensor o = ops.scratch({1, t, eh, d / eh}, m.dtype);
    Tensor qh = heads(q, eh), kh = heads(k, eh), vh = heads(v, eh);
    ops.call("attention", {&qh, &kh, &vh}, {&o}, {attr_int("causal", 0)});
    x = ops.add(x, ops.linear(o.reshaped({t, d}), l.wo, l.bo, false));
    x = mlp(ops, c, l, x, c.encoder_ffn);
  }
  Tensor enc = ops.layernorm(x, m.enc_norm, m.enc_norm_b, c.eps);
  if (output) ops.call("cast", {&enc}, {&output});

  // Every decoder layer's cross-attention keys and values, kept for the window's steps (a
  // new window gets new ones: sessions copied from this one may still read the old).
  auto cross = std::make_shared<CrossCache>(m);
  const uint64_t bytes = uint64_t(t * d * element_size(m.dtype));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    cross->k[i] = ops.keep(bytes);
    cross->v[i] = ops.keep(bytes);
    Tensor kc = Tensor::contiguous(cross->k[i], m.dtype, {t, d});
    Tensor vc = Tensor::contiguous(cross->v[i], m.dtype, {t, d});
    Tensor k = ops.linear(enc, l.cwk, Tensor{}, false);
    Tensor v = ops.linear(enc, l.cwv, l.cbv, false);
    ops.call("cast", {&k}, {&kc});
    ops.call("cast", {&v}, {&vc});
  }
  cross->length = t;
  s.cross = std::move(cross);
  s.length = 0;
}

void forward(Step& s, Ops& ops, const Tensor& tokens, const Tensor& positions,
             const Tensor& logits) {
  const Model& m = *s.model;
  const Config& c = m.config;
  const int64_t t = tokens.shape[0];
  const int64_t d = c.hidden;
  for (Session* session : s.sessions) {
    if (!session->cross) {
      fail(GK_FAILED_PRECONDITION,
           "whisper: the session has no encoded audio (call session_encode before a step)");
    }
  }
  Tensor tok = ops.scratch({t, d}, m.dtype);
  Tensor pos = ops.scratch({t, d}, m.dtype);
  ops.call("embedding", {&m.tok_embd, &tokens}, {&tok});
  ops.call("embedding", {&m.pos_embd, &positions}, {&pos});
  Tensor x = ops.add(ops.to(tok, GK_DTYPE_F32), ops.to(pos, GK_DTYPE_F32));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    Tensor h = ops.layernorm(x, l.attn_norm, l.attn_norm_b, c.eps);
    Tensor q = ops.linear(h, l.wq, l.bq, false);
    Tensor k = ops.linear(h, l.wk, Tensor{}, false);
    Tensor v = ops.linear(h, l.wv, l.bv, false);
    Tensor o = attend(s, ops, i, heads(q, c.heads), heads(k, c.heads), heads(v, c.heads));
    x = ops.add(x, ops.linear(o, l.wo, l.bo, false));

    // Cross-attention: each session's rows attend to all of its window's encoder states;
    // neighbouring sessions of one window (beams) share one call.
    h = ops.layernorm(x, l.cross_norm, l.cross_norm_b, c.eps);
    Tensor cq = ops.to(ops.linear(h, l.cwq, l.cbq, false), m.dtype);
    Tensor co = ops.scratch({1, t, c.heads, c.head_dim}, m.dtype);
    int64_t first = 0;
    for (size_t j = 0; j < s.sessions.size();) {
      const CrossCache& window = *s.sessions[j]->cross;
      int64_t rows = 0;
      for (; j < s.sessions.size() && s.sessions[j]->cross.get() == &window; ++j) {
        rows += s.rows[j];
      }
      const int64_t len = window.length;
      Tensor qr = heads(cq.rows(first, rows), c.heads);
      Tensor orows = heads(co.reshaped({t, d}).rows(first, rows), c.heads);
      Tensor kc = Tensor::contiguous(window.k[i], m.dtype, {1, len, c.heads, c.head_dim});
      Tensor vc = Tensor::contiguous(window.v[i], m.dtype, {1, len, c.heads, c.head_dim});
      ops.call("attention", {&qr, &kc, &vc}, {&orows}, {attr_int("causal", 0)});
      first += rows;
    }
    x = ops.add(x, ops.linear(co.reshaped({t, d}), l.cwo, l.cbo, false));
    x = mlp(ops, c, l, x, c.ffn);
  }
  Tensor last = x.rows(t - logits.shape[0], logits.shape[0]);
  project_logits(ops, m, ops.layernorm(last, m.out_norm, m.out_norm_b, c.eps), logits);
}

}  // namespace

const Builder kWhisperBuilder{read_config, load, forward, encode};

}  // namespace gk::llm
