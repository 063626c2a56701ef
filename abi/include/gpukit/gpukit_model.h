/*
 * gpukit_model.h — decoder-only models, sessions and batches
 *
 * Part of the GPUkit C ABI; a client includes gpukit.h, which includes every part (each
 * part also compiles on its own). Rules for every part: gpukit.h's opening comment.
 */
#ifndef GPUKIT_GPUKIT_MODEL_H_
#define GPUKIT_GPUKIT_MODEL_H_

#include "gpukit_tokenizer.h"
#include "gpukit_scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------
 * Models (ABI 1.6): decoder-only transformers run from a weight set plus its HF
 * config.json. A model plugin (its manifest lists the architectures it builds) holds the
 * model and composes every step of ops, each served by the best kernel plugin of the
 * device. A session is one sequence with its KV cache in the device's pool.
 * ------------------------------------------------------------------------------- */

typedef struct gk_model gk_model;
typedef struct gk_session gk_session;

typedef struct gk_model_options {
  size_t struct_size;  /* sizeof(gk_model_options) */
  int32_t device;      /* runtime device id the model runs on */
  int32_t dtype;       /* weights and activations: GK_DTYPE_F32 (0 means f32), _BF16, _F16 */
} gk_model_options;

#define GK_MODEL_OPTIONS_SIZE GK_STRUCT_SIZE(gk_model_options, dtype)

/* Loads the model at `path`: a folder holding config.json and its SafeTensors weights (as
 * HF save_pretrained writes them), or a .gguf file (llama, qwen2, qwen3; quantized weights
 * are dequantized, Llama q/k rows un-permuted from llama.cpp's rope layout). The
 * architecture is config.json's architectures[0] (GGUF: general.architecture); NOT_FOUND
 * lists the known ones when no model plugin builds it. The weights are converted
 * to options->dtype and uploaded to options->device once (options NULL: device 0, f32).
 * A config that disagrees with a tensor's shape is INVALID_ARGUMENT naming the tensor and
 * both shapes; a missing tensor is NOT_FOUND naming it. *out holds the runtime alive;
 * release it with gk_model_release. Any thread. */
GK_API gk_status gk_model_load(gk_runtime* runtime, const char* path,
                               const gk_model_options* options, gk_model** out);

/* Drops the caller's reference; sessions keep the model alive until they are released.
 * NULL is a no-op. */
GK_API void gk_model_release(gk_model* model);

typedef struct gk_model_info {
  size_t struct_size;         /* sizeof(gk_model_info), set by the caller */
  const char* architecture;   /* e.g. "LlamaForCausalLM"; valid while the model lives */
  const char* plugin;         /* the model plugin's name; valid while the model lives */
  int64_t vocab_size;
  int64_t context_length;     /* the longest sequence a session may hold */
  int32_t num_layers;
  int32_t hidden_size;
  int32_t device;
  int32_t dtype;
} gk_model_info;

#define GK_MODEL_INFO_SIZE GK_STRUCT_SIZE(gk_model_info, dtype)

/* Describes the model. Any thread. */
GK_API gk_status gk_model_get_info(const gk_model* model, gk_model_info* out);

typedef struct gk_session_options {
  size_t struct_size;   /* sizeof(gk_session_options) */
  int64_t max_context;  /* positions the KV cache holds; 0: the model's context length */
  /* (ABI 1.7) The scheduler task charged for the session's memory: its KV cache (allocated
   * by gk_session_create) and the model plugin's scratch memory of every step. It must be
   * admitted and not finished; a KV cache beyond the task's memory quota is
   * RESOURCE_EXHAUSTED with the quota, the bytes asked and what is in use. The session's
   * device work (uploads, steps, encodes, copies, sampling, the copies back) runs on a
   * stream of the task that gk_session_create makes (gk_task_stream_create) and
   * gk_session_release destroys: it has the task's stream priority and, where green contexts
   * exist, its SM partition, and its ops count in the task's ops_launched and are paced as
   * the task's (a BestEffort session's steps yield to a busy Guaranteed task). That stream
   * first waits for the work queued on the device's default stream; each call still
   * returns when its results are complete. Once the task has finished (completed, failed,
   * cancelled) the session's steps are FAILED_PRECONDITION naming its state. The task must
   * outlive the session. NULL: charged to no task; the work runs on the device's default
   * stream. Read when struct_size covers it. */
  gk_task* task;
} gk_session_options;

#define GK_SESSION_OPTIONS_SIZE GK_STRUCT_SIZE(gk_session_options, max_context)
#define GK_SESSION_OPTIONS_SIZE_1_7 GK_STRUCT_SIZE(gk_session_options, task)

/* Opens a session (one sequence, empty) on `model`, which it keeps alive; its KV cache is
 * allocated now, in the model device's pool (RESOURCE_EXHAUSTED when it does not fit).
 * `options` may be NULL. Release it with gk_session_release. Any thread; sessions of one
 * model may run concurrently, each from one thread at a time. */
GK_API gk_status gk_session_create(gk_model* model, const gk_session_options* options,
                                   gk_session** out);

/* Frees the session and its KV cache. NULL is a no-op. */
GK_API void gk_session_release(gk_session* session);

/* Positions the session holds (tokens stepped so far). */
GK_API int64_t gk_session_length(const gk_session* session);

/* (ABI 1.12) Makes `dst` a copy of `src`'s sequence: its length, the KV cache of every
 * position and, for an encoder-decoder model, the encoded window (gk_session_encode), which
 * the two then share without a copy. Beam search forks its hypotheses this way. Both are
 * sessions of one model; `dst`'s capacity (max_context) must hold src's length (OUT_OF_RANGE
 * otherwise); copying a session to itself does nothing. dst's previous sequence is gone.
 * UNIMPLEMENTED when the model's plugin cannot copy sessions. Neither session may be stepped
 * from another thread meanwhile. */
GK_API gk_status gk_session_copy(gk_session* dst, const gk_session* src);

/* Flags of gk_session_step. */
enum {
  /* logits_out receives every position's logits, [count][vocab], not only the last's. */
  GK_STEP_ALL_LOGITS = 1u
};

/* Appends `count` (>= 1) token ids to the sequence (prefill: many; decode: one) and
 * computes their logits; logits_out (may be NULL) receives the last token's [vocab] f32
 * logits, or every token's with GK_STEP_ALL_LOGITS. INVALID_ARGUMENT names a token id out
 * of [0, vocab); OUT_OF_RANGE when the tokens do not fit the session's context (the
 * session is unchanged by either). Returns when the logits are complete. */
GK_API gk_status gk_session_step(gk_session* session, const int32_t* tokens, int32_t count,
                                 uint32_t flags, float* logits_out);

/* Called with each generated token; a non-zero return stops the generation. */
typedef int32_t (*gk_token_callback)(void* user_data, int32_t token);

typedef struct gk_generate_options {
  size_t struct_size;          /* sizeof(gk_generate_options) */
  int32_t max_tokens;          /* the most tokens to generate (>= 0) */
  int32_t top_k;               /* 0: off */
  double temperature;          /* 0: greedy; else > 0 */
  double top_p;                /* in (0, 1]; 1: off */
  double min_p;                /* in [0, 1]; 0: off */
  double repetition_penalty;   /* > 0; 1: off. HF's: a seen token's logit is divided by it
                                  when positive, multiplied when negative */
  uint64_t seed;               /* the same seed gives the same tokens */
  const int32_t* stop_tokens;  /* generation ends after one of these (it is returned) */
  int32_t num_stop_tokens;
  gk_token_callback on_token;  /* NULL for none */
  void* user_data;
} gk_generate_options;

#define GK_GENERATE_OPTIONS_SIZE GK_STRUCT_SIZE(gk_generate_options, user_data)

/* Steps `prompt` (count >= 1 ids), then generates up to options->max_tokens tokens with the
 * sample op (greedy at temperature 0), writing them to out_tokens (capacity >= max_tokens)
 * and *out_count, calling on_token for each. It stops early at a stop token, when on_token
 * returns non-zero, or when the session is full. Each generated token but the last is
 * stepped into the session; pass the last as the next call's prompt to go on. Invalid
 * sampling parameters are INVALID_ARGUMENT naming the parameter and its range. */
GK_API gk_status gk_session_generate(gk_session* session, const int32_t* prompt, int32_t count,
                                     const gk_generate_options* options, int32_t* out_tokens,
                                     int32_t capacity, int32_t* out_count);

/* ---- Batching (ABI 1.7): several sequences per forward pass, continuous batching. ---- */

/* One decode step of `count` (>= 1) distinct sessions of one model in a single forward pass:
 * tokens[i] is appended to sessions[i], whatever its length. The row-wise work (matmuls,
 * norms) runs once over a [count, hidden] activation; attention and the KV cache stay per
 * session. logits_out (may be NULL) receives [count][vocab] f32, row i for sessions[i]: what
 * gk_session_step of that session alone gives, up to float rounding. Sequences join a batch
 * by being created and prefilled (gk_session_step) and leave it by being left out (their
 * KV cache goes with gk_session_release). INVALID_ARGUMENT for sessions of different models,
 * a session given twice or a token id out of range; OUT_OF_RANGE naming a full session; no
 * session changes then. Scratch memory is charged to sessions[0]'s task, and the whole step
 * runs on sessions[0]'s task stream (the default stream when it has no task), whatever the
 * other sessions' tasks: put the session whose task should carry the batch first. No session
 * may be stepped from another thread meanwhile. */
GK_API gk_status gk_session_step_batch(gk_session* const* sessions, int32_t count,
                                       const int32_t* tokens, float* logits_out);

/* A generation batch: sequences with their own prompts and gk_generate_options (sampling
 * parameters, seed, stop tokens, token callback), generated together: each gk_batch_step is
 * one forward pass over every sequence still generating (gk_session_step_batch). Sequences
 * are added and removed between steps. Each owns a session made with the batch's session
 * options (max_context, task); its KV cache is freed as soon as the sequence finishes or is
 * removed. A sequence's tokens are those gk_session_generate gives for the same prompt and
 * options. Use a batch from one thread at a time. */
typedef struct gk_batch gk_batch;

/* Makes an empty batch over `model` (which it keeps alive). `options` (may be NULL; copied)
 * are the options of every sequence's session. Release with gk_batch_release. Any thread. */
GK_API gk_status gk_batch_create(gk_model* model, const gk_session_options* options,
                                 gk_batch** out);

/* Frees the batch and the sessions of its sequences. NULL is a no-op. */
GK_API void gk_batch_release(gk_batch* batch);

/* Adds a sequence: opens its session, steps `prompt` (count >= 1 ids) and samples its first
 * token (calling options->on_token), as gk_session_generate begins. `options` is copied
 * (stop tokens included; user_data is passed back as given); options->max_tokens bounds the
 * sequence's tokens (0: it finishes at once). *out_id is the sequence's id in this batch,
 * never reused. The errors of gk_session_create and gk_session_generate (a KV cache over the
 * task's quota, invalid sampling parameters, …); nothing is added then. */
GK_API gk_status gk_batch_add(gk_batch* batch, const int32_t* prompt, int32_t count,
                              const gk_generate_options* options, int64_t* out_id);

/* One token for every sequence still generating: one forward pass over their latest tokens,
 * then each samples with its own options and calls its on_token. A sequence finishes after
 * a stop token, at its max_tokens, when on_token returns non-zero or when its session is
 * full; its session is released then. *out_active (may be NULL) receives how many sequences
 * still generate. With none, it does nothing. A failed forward pass changes no sequence.
 * With a task in the batch's options, the step and the draws run on the task stream of the
 * first sequence still generating (every sequence's session has one of the batch's task). */
GK_API gk_status gk_batch_step(gk_batch* batch, int32_t* out_active);

/* Sequence `id`'s generated tokens: the first min(count, capacity) go to out_tokens (may be
 * NULL when capacity is 0), *out_count receives how many it has, *out_finished (may be NULL)
 * 1 once it generates no more, else 0. NOT_FOUND for an id not in the batch. */
GK_API gk_status gk_batch_tokens(const gk_batch* batch, int64_t id, int32_t* out_tokens,
                                 int32_t capacity, int32_t* out_count, int32_t* out_finished);

/* Removes sequence `id`, finished or not, freeing its session now. NOT_FOUND for an id not
 * in the batch. */
GK_API gk_status gk_batch_remove(gk_batch* batch, int64_t id);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_MODEL_H_ */
