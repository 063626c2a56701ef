/*
 * gpukit_tokenizer.h — byte-level BPE tokenizers
 *
 * Part of the GPUkit C ABI; a client includes gpukit.h, which includes every part (each
 * part also compiles on its own). Rules for every part: gpukit.h's opening comment.
 */
#ifndef GPUKIT_GPUKIT_TOKENIZER_H_
#define GPUKIT_GPUKIT_TOKENIZER_H_

#include "gpukit_weights.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------
 * Tokenizer, ABI 1.5. Byte-level BPE (GPT-2's scheme: Llama 3, Qwen2, SmolLM2, GPT-2, …)
 * from a GGUF weight set's vocabulary (tokenizer.ggml.*) or an HF tokenizer.json. Text is
 * cut by the model's pre-tokenizer rules (GGUF tokenizer.ggml.pre, named as llama.cpp names
 * them, or the tokenizer.json's pre_tokenizer), then BPE merges by rank run inside each
 * piece. Ids are int32_t in 0 .. vocab size - 1. A tokenizer is immutable once made: every
 * call on it may run from any thread at the same time. See docs/llm.md.
 * ------------------------------------------------------------------------------- */

typedef struct gk_tokenizer gk_tokenizer;

/* Makes a tokenizer from the GGUF metadata of `weights` (tokenizer.ggml.model "gpt2",
 * .tokens, .merges, .token_type, .pre, the bos/eos/eot/padding ids, add_bos_token). The
 * tokenizer copies what it needs: it does not keep the weights alive, and the weights may be
 * closed first. INVALID_ARGUMENT naming the file and key for a missing or malformed
 * vocabulary (a SafeTensors weight set has none) or a merge naming a token not in it;
 * UNIMPLEMENTED for another tokenizer model (SentencePiece "llama", "bert", "t5") or a
 * pre-tokenizer name the library does not know (the message lists those it does). Release
 * *out with gk_tokenizer_release. Any thread. */
GK_API gk_status gk_tokenizer_from_weights(const gk_weights* weights, gk_tokenizer** out);

/* Makes a tokenizer from an HF tokenizer.json (model.type "BPE" with a ByteLevel step;
 * vocab, merges as "a b" or ["a", "b"], added_tokens, pre_tokenizer Sequence / Split
 * (Isolated) / ByteLevel / Digits, post_processor's template for BOS/EOS). The BOS, EOS, pad
 * and unk tokens and add_bos_token come from a tokenizer_config.json beside it when there is
 * one. NOT_FOUND when the file is missing; INVALID_ARGUMENT naming the file and key when it
 * is malformed; UNIMPLEMENTED for what is not byte-level BPE or a normalizer. `runtime` is
 * only checked. Release *out with gk_tokenizer_release. Any thread. */
GK_API gk_status gk_tokenizer_open(gk_runtime* runtime, const char* tokenizer_json_path,
                                   gk_tokenizer** out);

/* (ABI 1.12) Makes a tokenizer from a tiktoken-format vocabulary (openai-whisper's
 * gpt2.tiktoken and multilingual.tiktoken, tiktoken's .tiktoken files): a line per token,
 * its bytes in base64 and its rank 0, 1, 2, …, which is its id. Merges follow tiktoken's
 * rule (the adjacent pair whose bytes together have the lowest rank). `special_tokens`
 * (`num_special` strings, may be NULL when 0) become the control tokens after the last rank,
 * in order; "<|endoftext|>" among them is the EOS. `pattern` is the PCRE2 pattern that cuts
 * the text (NULL: GPT-2's, which Whisper and r50k/p50k use). NOT_FOUND when the file is
 * missing; INVALID_ARGUMENT naming the file and line when it is malformed (a field that is
 * not base64, a rank out of order) or a pattern PCRE2 refuses. Release *out with
 * gk_tokenizer_release. Any thread. */
GK_API gk_status gk_tokenizer_open_tiktoken(gk_runtime* runtime, const char* path,
                                            const char* const* special_tokens,
                                            int32_t num_special, const char* pattern,
                                            gk_tokenizer** out);

/* Releases the tokenizer. Detokenizers made from it stay valid (they hold what they need).
 * NULL is a no-op. No other call on this tokenizer may be in flight. */
GK_API void gk_tokenizer_release(gk_tokenizer* tokenizer);

/* The number of ids (0 for NULL). Any thread. */
GK_API int32_t gk_tokenizer_vocab_size(const gk_tokenizer* tokenizer);

typedef struct gk_tokenizer_info {
  size_t struct_size;  /* sizeof(gk_tokenizer_info), set by the caller */
  int32_t vocab_size;
  int32_t bos_id;      /* -1 when the model has none */
  int32_t eos_id;      /* -1 when the model has none */
  int32_t eot_id;      /* end of turn (e.g. <|eot_id|>, <|im_end|>); -1 when none */
  int32_t pad_id;      /* -1 when none */
  int32_t unk_id;      /* -1 when none */
  uint32_t add_bos;    /* 1 when GK_TOKENIZE_ADD_SPECIAL puts bos_id first */
  uint32_t add_eos;    /* 1 when GK_TOKENIZE_ADD_SPECIAL puts eos_id last */
  /* The pre-tokenizer: GGUF's tokenizer.ggml.pre ("llama-bpe", "qwen2", "smollm", …) or
   * "tokenizer.json". Valid while the tokenizer lives. */
  const char* pre;
} gk_tokenizer_info;

#define GK_TOKENIZER_INFO_SIZE GK_STRUCT_SIZE(gk_tokenizer_info, pre)

/* Fills *out (the caller sets out->struct_size, at least GK_TOKENIZER_INFO_SIZE; fields past
 * it are not written). Any thread. */
GK_API gk_status gk_tokenizer_info_get(const gk_tokenizer* tokenizer, gk_tokenizer_info* out);

/* Flags of gk_tokenizer_encode. */
enum {
  /* Add the model's BOS (and EOS) tokens where the model says to (gk_tokenizer_info's
   * add_bos/add_eos), as llama.cpp's add_special and HF's add_special_tokens do. */
  GK_TOKENIZE_ADD_SPECIAL = 1u,
  /* Text equal to a control or unknown token's text ("<|im_start|>") becomes that token;
   * without it such text is tokenized as plain text. User-defined added tokens are always
   * matched whole, as in HF tokenizers and llama.cpp. */
  GK_TOKENIZE_PARSE_SPECIAL = 2u
};

/* Encodes `length` bytes of UTF-8 `text` (NULL only when length is 0; NUL bytes are text).
 * Invalid UTF-8 does not fail: each maximal invalid part reads as U+FFFD, as Rust's
 * String::from_utf8_lossy (and so HF tokenizers) reads it. On OK, *out_count is the number
 * of ids and ids[0 .. *out_count) hold them. When `capacity` is smaller than needed, nothing
 * is written to `ids`, *out_count is set to the number needed and the call returns
 * OUT_OF_RANGE (pass capacity 0 and ids NULL to ask for the size). INVALID_ARGUMENT for an
 * unknown flag. Any thread. */
GK_API gk_status gk_tokenizer_encode(const gk_tokenizer* tokenizer, const char* text,
                                     size_t length, uint32_t flags, int32_t* ids,
                                     size_t capacity, size_t* out_count);

/* The vocabulary's text of token `id` as stored (byte-level form: "Ġthe" for " the"; an
 * added token's text as written), `*out_length` bytes at *out_text, NUL-terminated. Valid
 * while the tokenizer lives. INVALID_ARGUMENT naming the id and the vocab size when out of
 * range. Any thread. */
GK_API gk_status gk_tokenizer_token_text(const gk_tokenizer* tokenizer, int32_t id,
                                         const char** out_text, size_t* out_length);

/* Flags of gk_tokenizer_decode and gk_detokenizer_create. */
enum {
  /* Control and unknown tokens (BOS, EOS, <|im_start|>, …) produce no text; without it they
   * produce their text, as HF's decode does by default. */
  GK_DETOKENIZE_SKIP_SPECIAL = 1u
};

/* Decodes `count` ids into the bytes they stand for (a normal token's bytes, an added
 * token's text), exactly: the result is what was encoded, and may end inside a UTF-8
 * character when the ids do. On OK, out[0 .. *out_length) hold the bytes, followed by a NUL
 * when capacity > *out_length. When `capacity` is too small, nothing is written, *out_length
 * is set to the bytes needed and the call returns OUT_OF_RANGE. INVALID_ARGUMENT naming the
 * first id out of range and the vocab size. Any thread. */
GK_API gk_status gk_tokenizer_decode(const gk_tokenizer* tokenizer, const int32_t* ids,
                                     size_t count, uint32_t flags, char* out, size_t capacity,
                                     size_t* out_length);

/* A streaming decoder for generation: fed one id at a time, it returns only whole UTF-8
 * characters, holding back the bytes of a character split across tokens until a later
 * token completes it. Bytes that can never form a valid character come out as U+FFFD, so
 * its output is always valid UTF-8. One detokenizer serves one sequence, from one thread at a
 * time. */
typedef struct gk_detokenizer gk_detokenizer;

/* Makes a detokenizer over `tokenizer` (which it keeps alive) with GK_DETOKENIZE_* `flags`.
 * Release *out with gk_detokenizer_release. Any thread. */
GK_API gk_status gk_detokenizer_create(const gk_tokenizer* tokenizer, uint32_t flags,
                                       gk_detokenizer** out);

/* Releases the detokenizer; NULL is a no-op. */
GK_API void gk_detokenizer_release(gk_detokenizer* detokenizer);

/* Feeds token `id`; *out_text and *out_length receive the text it completes (possibly empty),
 * NUL-terminated, in the detokenizer's own buffer: valid until the next call on it.
 * INVALID_ARGUMENT for an id out of range (the state is unchanged). */
GK_API gk_status gk_detokenizer_push(gk_detokenizer* detokenizer, int32_t id,
                                     const char** out_text, size_t* out_length);

/* Ends the sequence: returns what is still held back (an incomplete character, as U+FFFD)
 * as gk_detokenizer_push does, and empties the state so the detokenizer can start over. */
GK_API gk_status gk_detokenizer_flush(gk_detokenizer* detokenizer, const char** out_text,
                                      size_t* out_length);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_TOKENIZER_H_ */
