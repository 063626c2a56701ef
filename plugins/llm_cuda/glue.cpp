// The llm ops' launch glue: each op's arguments checked (the core's rules ran already; these
// checks keep a plugin called directly from reading out of bounds) and turned into kernel
// views (call_args.h), its attributes read with kernels/llm/llm_params.h.
#include "glue.h"

#include "call_args.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "llm/attention.cuh"
#include "llm/embedding.cuh"
#include "llm/kv_cache_write.cuh"
#include "llm/llm_params.h"
#include "llm/rope.cuh"
#include "llm/sample.cuh"

namespace gk::plugins::llm_cuda {
namespace {

// ---- embedding ----

struct EmbeddingCall {
  kl::View table, ids, out;
};

bool resolve(const gk_kernel_args* args, EmbeddingCall* c, std::string* why) {
  if (!counts(args, 2, 2, why)) return false;
  if (!to_view(args, args->inputs[0], "input 'table'", 2, &c->table, why) ||
      !to_view(args, args->inputs[1], "input 'ids'", -1, &c->ids, why) ||
      !to_view(args, args->outputs[0], "output 'out'", c->ids.ndim + 1, &c->out, why)) {
    return false;
  }
  if (!floating(c->table.dtype) || c->out.dtype != c->table.dtype) {
    return fail(why, args, "input 'table' and output 'out' need one dtype of f32, f16, bf16");
  }
  if (c->ids.dtype != kl::DType::i32 && c->ids.dtype != kl::DType::i64) {
    return fail(why, args, "input 'ids' must be i32 or i64");
  }
  for (int d = 0; d < c->ids.ndim; ++d) {
    if (c->out.shape[d] != c->ids.shape[d]) {
      return fail(
          why, args,
          "output 'out' " + shape_text(c->out) + " does not match ids " + shape_text(c->ids));
    }
  }
  if (c->out.shape[c->ids.ndim] != c->table.shape[1]) {
    return fail(why, args,
                "output 'out' " + shape_text(c->out) + " does not end in the table's " +
                    std::to_string(c->table.shape[1]) + " columns");
  }
  return true;
}

// ---- rope ----

struct RopeCall {
  kl::View x, pos, out;
  gk::llm::RopeParams p;
};

bool resolve(const gk_kernel_args* args, RopeCall* c, std::string* why) {
  if (!counts(args, 2, 2, why)) return false;
  if (!to_view(args, args->inputs[0], "input 'x'", 4, &c->x, why) ||
      !to_view(args, args->inputs[1], "input 'positions'", -1, &c->pos, why) ||
      !to_view(args, args->outputs[0], "output 'out'", 4, &c->out, why)) {
    return false;
  }
  if (!floating(c->x.dtype) || c->out.dtype != c->x.dtype || !same_dims(c->x, c->out)) {
    return fail(why, args,
                "output 'out' must have the dtype and shape of input 'x' " + shape_text(c->x));
  }
  const bool pos_ok =
      c->pos.dtype == kl::DType::i32 &&
      ((c->pos.ndim == 1 && c->pos.shape[0] == c->x.shape[1]) ||
       (c->pos.ndim == 2 && c->pos.shape[0] == c->x.shape[0] && c->pos.shape[1] == c->x.shape[1]));
  if (!pos_ok) {
    return fail(why, args,
                "input 'positions' " + shape_text(c->pos) +
                    " must be i32 [T] or [B, T] of input 'x' " + shape_text(c->x));
  }
  c->p = gk::llm::read_rope(args->attrs, args->num_attrs, c->x.shape[3]);
  if (c->p.rotary_dim < 2 || c->p.rotary_dim % 2 != 0 || c->p.rotary_dim > c->x.shape[3] ||
      c->p.rotary_dim > gk::llm::kMaxRotaryDim) {
    return fail(why, args,
                "attribute 'rotary_dim' is " + std::to_string(c->p.rotary_dim) +
                    "; llm_cuda serves even values in 2.." +
                    std::to_string(gk::llm::kMaxRotaryDim) + " up to head_dim");
  }
  return true;
}

// ---- attention ----

// The shared argument checks (call_args.h), then the shapes this plugin's kernels take.
bool resolve(const gk_kernel_args* args, AttentionCall* c, std::string* why) {
  if (!resolve_attention(args, c, why)) return false;
  const std::string refusal = kl::attention_refusal(c->q);
  if (!refusal.empty()) return fail(why, args, refusal);
  return true;
}

// ---- kv_cache_write ----

struct KvCacheWriteCall {
  kl::View cache, src, slots;
};

bool resolve(const gk_kernel_args* args, KvCacheWriteCall* c, std::string* why) {
  if (!counts(args, 3, 3, why)) return false;
  kl::View out;
  if (!to_view(args, args->inputs[0], "input 'cache'", 4, &c->cache, why) ||
      !to_view(args, args->inputs[1], "input 'src'", -1, &c->src, why) ||
      !to_view(args, args->inputs[2], "input 'slots'", 1, &c->slots, why) ||
      !to_view(args, args->outputs[0], "output 'out'", 4, &out, why)) {
    return false;
  }
  if (!floating(c->cache.dtype) || !floating(c->src.dtype)) {
    return fail(why, args, "input 'cache' and input 'src' need dtypes of f32, f16, bf16");
  }
  bool same = out.data == c->cache.data && out.dtype == c->cache.dtype;
  for (int d = 0; same && d < 4; ++d) {
    same = out.shape[d] == c->cache.shape[d] && out.strides[d] == c->cache.strides[d];
  }
  if (!same) {
    return fail(why, args,
                "output 'out' must be input 'cache' itself (the op changes it in place)");
  }
  // src as [N, H, Dh]: a leading dimension of 1 is dropped.
  if (c->src.ndim == 4 && c->src.shape[0] == 1) {
    for (int d = 0; d < 3; ++d) {
      c->src.shape[d] = c->src.shape[d + 1];
      c->src.strides[d] = c->src.strides[d + 1];
    }
    c->src.ndim = 3;
  }
  if (c->src.ndim != 3 || c->src.shape[1] != c->cache.shape[2] ||
      c->src.shape[2] != c->cache.shape[3]) {
    return fail(why, args,
                "input 'src' " + shape_text(c->src) + " must be [rows, " +
                    std::to_string(c->cache.shape[2]) + ", " + std::to_string(c->cache.shape[3]) +
                    "] or [1, rows, ...] for input 'cache' " + shape_text(c->cache));
  }
  if (c->slots.dtype != kl::DType::i32 || c->slots.shape[0] != c->src.shape[0]) {
    return fail(why, args, "input 'slots' must be i32 [" + std::to_string(c->src.shape[0]) + "]");
  }
  return true;
}

// ---- sample ----

struct SampleCall {
  kl::View logits, ids;
  gk::llm::SampleParams p;
};

bool resolve(const gk_kernel_args* args, SampleCall* c, std::string* why) {
  if (!counts(args, 1, 1, why)) return false;
  if (!to_view(args, args->inputs[0], "input 'logits'", 2, &c->logits, why) ||
      !to_view(args, args->outputs[0], "output 'ids'", 1, &c->ids, why)) {
    return false;
  }
  if (!floating(c->logits.dtype) || c->ids.dtype != kl::DType::i32 ||
      c->ids.shape[0] != c->logits.shape[0] || c->logits.shape[1] == 0) {
    return fail(why, args,
                "logits " + shape_text(c->logits) +
                    " (f32, f16, bf16, non-empty rows) and ids i32 [" +
                    std::to_string(c->logits.shape[0]) + "] expected");
  }
  c->p = gk::llm::read_sample(args->attrs, args->num_attrs);
  return true;
}

}  // namespace

bool llm_serves(const char* op) {
  for (const char* name : {"embedding", "rope", "attention", "kv_cache_write", "sample"}) {
    if (std::strcmp(op, name) == 0) return true;
  }
  return false;
}

bool llm_supports(const gk_kernel_args* args, std::string* why) {
  if (std::strcmp(args->op, "embedding") == 0) {
    EmbeddingCall c;
    return resolve(args, &c, why);
  }
  if (std::strcmp(args->op, "rope") == 0) {
    RopeCall c;
    return resolve(args, &c, why);
  }
  if (std::strcmp(args->op, "attention") == 0) {
    AttentionCall c;
    return resolve(args, &c, why);
  }
  if (std::strcmp(args->op, "kv_cache_write") == 0) {
    KvCacheWriteCall c;
    return resolve(args, &c, why);
  }
  SampleCall c;
  return resolve(args, &c, why);
}

gk_status llm_launch(const gk_kernel_args* args, LaunchContext& ctx) {
  std::string why;
  auto refuse = [&] {
    const std::string msg = "argument check (" + why + ")";
    return ctx.cuda_error(msg.c_str(), cudaErrorInvalidValue);
  };
  if (std::strcmp(args->op, "embedding") == 0) {
    EmbeddingCall c;
    if (!resolve(args, &c, &why)) return refuse();
    return ctx.check(kl::launch_embedding(c.table, c.ids, c.out, ctx.stream()),
                     "embedding kernel launch");
  }
  if (std::strcmp(args->op, "rope") == 0) {
    RopeCall c;
    if (!resolve(args, &c, &why)) return refuse();
    std::vector<float> inv(static_cast<size_t>(c.p.rotary_dim / 2));
    for (size_t i = 0; i < inv.size(); ++i) inv[i] = gk::llm::rope_inv_freq(c.p, int64_t(i));
    return ctx.check(kl::launch_rope(c.x, c.pos, c.out, inv.data(), c.p.rotary_dim,
                                     c.p.style == gk::llm::RopeStyle::kInterleaved, ctx.stream()),
                     "rope kernel launch");
  }
  if (std::strcmp(args->op, "attention") == 0) {
    AttentionCall c;
    if (!resolve(args, &c, &why)) return refuse();
    void* ws = nullptr;
    const gk_status st = ctx.workspace(kl::attention_workspace_bytes(c.q, c.k, c.v, c.table), &ws);
    if (st != GK_OK) return st;
    return ctx.check(kl::launch_attention(c.q, c.k, c.v, c.lengths, c.table, c.out,
                                          float(c.p.scale), c.p.causal, ws, ctx.stream()),
                     "attention kernel launch");
  }
  if (std::strcmp(args->op, "kv_cache_write") == 0) {
    KvCacheWriteCall c;
    if (!resolve(args, &c, &why)) return refuse();
    return ctx.check(kl::launch_kv_cache_write(c.cache, c.src, c.slots, ctx.stream()),
                     "kv_cache_write kernel launch");
  }
  SampleCall c;
  if (!resolve(args, &c, &why)) return refuse();
  return ctx.check(kl::launch_sample(c.logits, c.ids, c.p, ctx.stream()), "sample kernel launch");
}

}  // namespace gk::plugins::llm_cuda
