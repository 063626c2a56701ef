// Tensor names by role, per naming scheme (llama.cpp's table shape): a builder asks for a
// role and the table says what the file calls it. Layer tensors carry "%d" for the layer.
#pragma once

#include <cstdint>
#include <string>

namespace gk::llm {

struct HfNames {
  const char* tok_embd;
  const char* pos_embd;
  const char* out_norm;
  const char* out_norm_b;
  const char* lm_head;
  const char* attn_norm;
  const char* attn_norm_b;
  const char* wq;
  const char* wk;
  const char* wv;
  const char* bq;
  const char* bk;
  const char* bv;
  const char* wqkv;
  const char* bqkv;
  const char* q_norm;
  const char* k_norm;
  const char* wo;
  const char* bo;
  const char* ffn_norm;
  const char* ffn_norm_b;
  const char* w_gate;
  const char* w_up;
  const char* b_up;
  const char* w_down;
  const char* b_down;
};

// HF Llama, Mistral, Qwen2, Qwen3 (SafeTensors).
inline constexpr HfNames kLlamaNames{
    "model.embed_tokens.weight",
    nullptr,
    "model.norm.weight",
    nullptr,
    "lm_head.weight",
    "model.layers.%d.input_layernorm.weight",
    nullptr,
    "model.layers.%d.self_attn.q_proj.weight",
    "model.layers.%d.self_attn.k_proj.weight",
    "model.layers.%d.self_attn.v_proj.weight",
    "model.layers.%d.self_attn.q_proj.bias",
    "model.layers.%d.self_attn.k_proj.bias",
    "model.layers.%d.self_attn.v_proj.bias",
    nullptr,
    nullptr,
    "model.layers.%d.self_attn.q_norm.weight",
    "model.layers.%d.self_attn.k_norm.weight",
    "model.layers.%d.self_attn.o_proj.weight",
    "model.layers.%d.self_attn.o_proj.bias",
    "model.layers.%d.post_attention_layernorm.weight",
    nullptr,
    "model.layers.%d.mlp.gate_proj.weight",
    "model.layers.%d.mlp.up_proj.weight",
    nullptr,
    "model.layers.%d.mlp.down_proj.weight",
    nullptr,
};

// HF GPT2LMHeadModel (SafeTensors); Conv1D weights are [in, out].
inline constexpr HfNames kGpt2Names{
    "transformer.wte.weight",
    "transformer.wpe.weight",
    "transformer.ln_f.weight",
    "transformer.ln_f.bias",
    nullptr,
    "transformer.h.%d.ln_1.weight",
    "transformer.h.%d.ln_1.bias",
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    "transformer.h.%d.attn.c_attn.weight",
    "transformer.h.%d.attn.c_attn.bias",
    nullptr,
    nullptr,
    "transformer.h.%d.attn.c_proj.weight",
    "transformer.h.%d.attn.c_proj.bias",
    "transformer.h.%d.ln_2.weight",
    "transformer.h.%d.ln_2.bias",
    nullptr,
    "transformer.h.%d.mlp.c_fc.weight",
    "transformer.h.%d.mlp.c_fc.bias",
    "transformer.h.%d.mlp.c_proj.weight",
    "transformer.h.%d.mlp.c_proj.bias",
};

// GPT-2 saved from GPT2Model: the same names without "transformer.".
inline constexpr HfNames kGpt2BareNames{
    "wte.weight",
    "wpe.weight",
    "ln_f.weight",
    "ln_f.bias",
    nullptr,
    "h.%d.ln_1.weight",
    "h.%d.ln_1.bias",
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    "h.%d.attn.c_attn.weight",
    "h.%d.attn.c_attn.bias",
    nullptr,
    nullptr,
    "h.%d.attn.c_proj.weight",
    "h.%d.attn.c_proj.bias",
    "h.%d.ln_2.weight",
    "h.%d.ln_2.bias",
    nullptr,
    "h.%d.mlp.c_fc.weight",
    "h.%d.mlp.c_fc.bias",
    "h.%d.mlp.c_proj.weight",
    "h.%d.mlp.c_proj.bias",
};

// GGUF (llama.cpp's names) for the Llama family: llama, qwen2, qwen3.
inline constexpr HfNames kGgufLlamaNames{
    "token_embd.weight",
    nullptr,
    "output_norm.weight",
    nullptr,
    "output.weight",
    "blk.%d.attn_norm.weight",
    nullptr,
    "blk.%d.attn_q.weight",
    "blk.%d.attn_k.weight",
    "blk.%d.attn_v.weight",
    "blk.%d.attn_q.bias",
    "blk.%d.attn_k.bias",
    "blk.%d.attn_v.bias",
    nullptr,
    nullptr,
    "blk.%d.attn_q_norm.weight",
    "blk.%d.attn_k_norm.weight",
    "blk.%d.attn_output.weight",
    "blk.%d.attn_output.bias",
    "blk.%d.ffn_norm.weight",
    nullptr,
    "blk.%d.ffn_gate.weight",
    "blk.%d.ffn_up.weight",
    nullptr,
    "blk.%d.ffn_down.weight",
    nullptr,
};

// GGUF (llama.cpp's names) for GPT-2. llama.cpp's converter transposes the Conv1D weights,
// so the file holds them as nn.Linear's [out, in]; q, k, v stay fused in attn_qkv.
// output.weight is the converter's copy of token_embd (GPT-2's head is tied).
inline constexpr HfNames kGgufGpt2Names{
    "token_embd.weight",
    "position_embd.weight",
    "output_norm.weight",
    "output_norm.bias",
    "output.weight",
    "blk.%d.attn_norm.weight",
    "blk.%d.attn_norm.bias",
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    "blk.%d.attn_qkv.weight",
    "blk.%d.attn_qkv.bias",
    nullptr,
    nullptr,
    "blk.%d.attn_output.weight",
    "blk.%d.attn_output.bias",
    "blk.%d.ffn_norm.weight",
    "blk.%d.ffn_norm.bias",
    nullptr,
    "blk.%d.ffn_up.weight",
    "blk.%d.ffn_up.bias",
    "blk.%d.ffn_down.weight",
    "blk.%d.ffn_down.bias",
};

// `pattern` with its "%d" replaced by `layer`.
inline std::string layer_name(const char* pattern, int64_t layer) {
  std::string s = pattern;
  if (size_t at = s.find("%d"); at != std::string::npos) s.replace(at, 2, std::to_string(layer));
  return s;
}

}  // namespace gk::llm
