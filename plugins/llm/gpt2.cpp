// GPT-2: pre-LayerNorm decoder with learned absolute positions and no rotary. Projections
// are Conv1D ([in, out] weights, used untransposed) with biases; c_attn yields q, k, v side
// by side, read as strided views; the MLP is c_fc -> gelu (tanh form) -> c_proj; the head
// is tied to wte. GGUF files (llama.cpp's "gpt2") hold the same model under llama.cpp's
// tensor names, projections transposed to [out, in]. tests/llm/reference_forward.py (GPT2)
// is the specification.
#include "runner.h"
#include "tensor_names.h"

namespace gk::llm {
namespace {

// GGUF metadata as llama.cpp's converter writes it for GPT-2: "gpt2.block_count", ….
void read_gguf_config(const nlohmann::json& config, Config& c) {
  c.gguf = true;
  c.gguf_architecture = config["general.architecture"].get<std::string>();
  const std::string p = c.gguf_architecture + ".";
  auto key = [&](const char* k) { return p + k; };
  const std::string& a = c.architecture;
  c.family = Family::kGpt2;
  c.hidden = config_int(config, key("embedding_length").c_str(), a);
  c.layers = config_int(config, key("block_count").c_str(), a);
  c.heads = config_int(config, key("attention.head_count").c_str(), a);
  c.kv_heads = c.heads;
  c.ffn = config_int(config, key("feed_forward_length").c_str(), a);
  c.context = config_int(config, key("context_length").c_str(), a);
  c.eps = config_float_or(config, key("attention.layer_norm_epsilon").c_str(), 1e-5);
  c.vocab = config_int_or(config, key("vocab_size").c_str(), 0);
  if (c.vocab <= 0) {
    auto tokens = config.find("tokenizer.ggml.tokens");
    if (tokens != config.end() && tokens->is_array()) c.vocab = int64_t(tokens->size());
  }
  if (c.vocab <= 0) {
    fail(GK_INVALID_ARGUMENT, "GGUF metadata: no '" + key("vocab_size") +
                                  "' and no tokenizer.ggml.tokens to take the vocabulary from");
  }
  if (c.heads <= 0 || c.hidden % c.heads != 0) {
    fail(GK_INVALID_ARGUMENT, "GGUF metadata: " + key("embedding_length") + " " +
                                  std::to_string(c.hidden) + " is not a multiple of " +
                                  key("attention.head_count") + " " + std::to_string(c.heads));
  }
  c.head_dim = c.hidden / c.heads;
}

void read_config(const nlohmann::json& config, Config& c) {
  if (auto g = config.find("general.architecture"); g != config.end() && g->is_string()) {
    read_gguf_config(config, c);
    return;
  }
  const std::string& a = c.architecture;
  c.family = Family::kGpt2;
  c.vocab = config_int(config, "vocab_size", a);
  c.hidden = config_int(config, "n_embd", a);
  c.layers = config_int(config, "n_layer", a);
  c.heads = config_int(config, "n_head", a);
  c.kv_heads = c.heads;
  c.head_dim = c.hidden / c.heads;
  c.ffn = config_int_or(config, "n_inner", 4 * c.hidden);
  if (c.ffn <= 0) c.ffn = 4 * c.hidden;  // "n_inner": null means 4 x n_embd
  c.context = config_int(config, "n_positions", a);
  c.eps = config_float_or(config, "layer_norm_epsilon", 1e-5);
  if (c.hidden % c.heads != 0) {
    fail(GK_INVALID_ARGUMENT, "config.json: n_embd " + std::to_string(c.hidden) +
                                  " is not a multiple of n_head " + std::to_string(c.heads));
  }
  if (auto act = config.find("activation_function");
      act != config.end() && act->is_string() && act->get<std::string>() != "gelu_new") {
    fail(GK_UNIMPLEMENTED, "config.json: activation_function '" + act->get<std::string>() +
                               "' of " + a + " is not supported (only gelu_new)");
  }
  // Both flags change the attention scale; no GPT-2 checkpoint sets them.
  if (!config.value("scale_attn_weights", true) ||
      config.value("scale_attn_by_inverse_layer_idx", false)) {
    fail(GK_UNIMPLEMENTED, "config.json: GPT-2 attention scaling flags are not supported");
  }
}

void load(Model& m, const WeightTable& w) {
  const Config& c = m.config;
  const std::string dims = "n_embd " + std::to_string(c.hidden) + ", n_head " +
                           std::to_string(c.heads) + ", n_inner " + std::to_string(c.ffn) +
                           ", vocab_size " + std::to_string(c.vocab) + ", n_positions " +
                           std::to_string(c.context);
  // Checkpoints saved from GPT2Model have no "transformer." prefix; GGUF has llama.cpp's
  // names and [out, in] projections.
  const HfNames& n = c.gguf                       ? kGgufGpt2Names
                     : w.has(kGpt2Names.tok_embd) ? kGpt2Names
                                                  : kGpt2BareNames;
  // A projection from `in` to `out` features, in the shape the file stores it.
  auto proj = [&](const std::string& tensor, int64_t in, int64_t out) {
    return c.gguf ? w.get(tensor, {out, in}, dims) : w.get(tensor, {in, out}, dims);
  };
  m.tok_embd = w.get(n.tok_embd, {c.vocab, c.hidden}, dims);
  m.pos_embd = w.get(n.pos_embd, {c.context, c.hidden}, dims);
  m.out_norm = w.get(n.out_norm, {c.hidden}, dims);
  m.out_norm_b = w.get(n.out_norm_b, {c.hidden}, dims);
  m.lm_head = n.lm_head ? w.optional(n.lm_head, {c.vocab, c.hidden}, dims) : Tensor{};
  if (!m.lm_head) m.lm_head = m.tok_embd;
  m.layers.resize(size_t(c.layers));
  for (int64_t i = 0; i < c.layers; ++i) {
    Layer& l = m.layers[size_t(i)];
    auto name = [&](const char* pattern) { return layer_name(pattern, i); };
    l.attn_norm = w.get(name(n.attn_norm), {c.hidden}, dims);
    l.attn_norm_b = w.get(name(n.attn_norm_b), {c.hidden}, dims);
    l.wqkv = proj(name(n.wqkv), c.hidden, 3 * c.hidden);
    l.bqkv = w.get(name(n.bqkv), {3 * c.hidden}, dims);
    l.wo = proj(name(n.wo), c.hidden, c.hidden);
    l.bo = w.get(name(n.bo), {c.hidden}, dims);
    l.ffn_norm = w.get(name(n.ffn_norm), {c.hidden}, dims);
    l.ffn_norm_b = w.get(name(n.ffn_norm_b), {c.hidden}, dims);
    l.w_up = proj(name(n.w_up), c.hidden, c.ffn);
    l.b_up = w.get(name(n.b_up), {c.ffn}, dims);
    l.w_down = proj(name(n.w_down), c.ffn, c.hidden);
    l.b_down = w.get(name(n.b_down), {c.hidden}, dims);
  }
}

// Head `part` (0 = q, 1 = k, 2 = v) of the fused projection [T, 3D] as [1, T, H, Dh].
Tensor qkv_part(const Tensor& qkv, const Config& c, int part) {
  const int64_t t = qkv.shape[0];
  Tensor v = Tensor::contiguous(qkv.data, qkv.dtype, {1, t, c.heads, c.head_dim});
  v.strides[0] = t * 3 * c.hidden;
  v.strides[1] = 3 * c.hidden;
  v.data = static_cast<char*>(qkv.data) + part * c.hidden * element_size(qkv.dtype);
  return v;
}

void forward(Step& s, Ops& ops, const Tensor& tokens, const Tensor& positions,
             const Tensor& logits) {
  const Model& m = *s.model;
  const Config& c = m.config;
  const int64_t t = tokens.shape[0];
  const bool in_out = !c.gguf;  // HF's Conv1D [in, out]; GGUF's are [out, in]
  Tensor tok = ops.scratch({t, c.hidden}, m.dtype);
  Tensor pos = ops.scratch({t, c.hidden}, m.dtype);
  ops.call("embedding", {&m.tok_embd, &tokens}, {&tok});
  ops.call("embedding", {&m.pos_embd, &positions}, {&pos});
  Residual x(ops.add(ops.to(tok, GK_DTYPE_F32), ops.to(pos, GK_DTYPE_F32)));
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    Tensor h = x.norm(ops, l.attn_norm, l.attn_norm_b, c.eps, false);
    Tensor qkv = ops.linear(h, l.wqkv, l.bqkv, in_out);
    Tensor o = attend(s, ops, i, qkv_part(qkv, c, 0), qkv_part(qkv, c, 1), qkv_part(qkv, c, 2));
    x.add(ops.linear(o, l.wo, l.bo, in_out));

    h = x.norm(ops, l.ffn_norm, l.ffn_norm_b, c.eps, false);
    Tensor up = ops.linear(h, l.w_up, l.b_up, in_out);
    Tensor act = ops.scratch({t, c.ffn});
    ops.call("gelu", {&up}, {&act}, {attr_string("approximate", "tanh")});
    x.add(ops.linear(act, l.w_down, l.b_down, in_out));
  }
  const int64_t rows = logits.shape[0];
  project_logits(ops, m, x.norm(ops, m.out_norm, m.out_norm_b, c.eps, false, t - rows, rows),
                 logits);
}

}  // namespace

const Builder kGpt2Builder{read_config, load, forward};

}  // namespace gk::llm
