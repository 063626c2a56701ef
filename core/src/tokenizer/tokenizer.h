// Byte-level BPE tokenizer (GPT-2's scheme, used by Llama 3, Qwen2, SmolLM2 and others): the
// vocabulary and merges from GGUF metadata or an HF tokenizer.json, a pre-tokenizer (a list of
// PCRE2 patterns, llama.cpp's rule sets by GGUF `tokenizer.ggml.pre` name), special tokens,
// encode and decode. Behind gk_tokenizer_* (capi/tokenizer_api.cpp); the rules are the header's
// "Tokenizer, ABI 1.5" and docs/llm.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/pretokenizer.h"

namespace gk::tokenizer {

// Token types as GGUF's tokenizer.ggml.token_type stores them.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct EncodeOptions {
  bool add_special = false;    // the model's BOS when its add_bos says so
  bool parse_special = false;  // control and unknown tokens' texts become those tokens
};

class Tokenizer {
 public:
  // From a GGUF metadata object (the weight set's, keys as GGUF names them). `source` names
  // the file in messages. INVALID_ARGUMENT naming the key for a missing or malformed vocab;
  // UNIMPLEMENTED for a model other than "gpt2" or an unknown pre-tokenizer name.
  static std::shared_ptr<Tokenizer> from_gguf_metadata(const nlohmann::json& metadata,
                                                       const std::string& source);
  // From an HF tokenizer.json at `path`: NOT_FOUND when missing; INVALID_ARGUMENT naming the
  // file and key when malformed; UNIMPLEMENTED for what is not byte-level BPE.
  static std::shared_ptr<Tokenizer> from_tokenizer_json(const std::string& path);
  // The same from the text of a tokenizer.json; `source` names it in messages.
  static std::shared_ptr<Tokenizer> from_tokenizer_json_text(std::string_view text,
                                                             const std::string& source);

  // From a tiktoken-format vocabulary at `path` (a line per token: its bytes in base64, then
  // its rank, the ranks 0 .. n-1), the merges being tiktoken's rule (the adjacent pair whose
  // bytes together have the lowest rank); `specials` follow as control tokens n, n+1, …, and
  // `pattern` (a PCRE2 pattern; empty: GPT-2's) cuts the text. NOT_FOUND when missing;
  // INVALID_ARGUMENT naming the file and line when malformed.
  static std::shared_ptr<Tokenizer> from_tiktoken(const std::string& path,
                                                  const std::vector<std::string>& specials,
                                                  const std::string& pattern);
  // The same from the file's text; `path` names it in messages.
  static std::shared_ptr<Tokenizer> from_tiktoken_text(std::string_view text,
                                                       const std::string& path,
                                                       const std::vector<std::string>& specials,
                                                       const std::string& pattern);

  int32_t vocab_size() const { return int32_t(tokens_.size()); }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t eot_id() const { return eot_; }
  int32_t pad_id() const { return pad_; }
  int32_t unk_id() const { return unk_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  const std::string& pre_name() const { return pre_name_; }
  const std::string& source() const { return source_; }
  const std::string& token_text(int32_t id) const { return tokens_[size_t(id)]; }
  TokenType token_type(int32_t id) const { return types_[size_t(id)]; }
  // Whether byte `b` alone is a token (else text holding it encodes without it).
  bool has_byte(uint8_t b) const { return byte_token_[b] >= 0; }
  // The id of a vocabulary string, or -1.
  int32_t find(std::string_view text) const;

  // Encodes UTF-8 `text` (invalid sequences are read as U+FFFD, one per maximal invalid
  // subpart, as Rust's String::from_utf8_lossy does) and appends the ids to `out`.
  void encode(std::string_view text, const EncodeOptions& options, std::vector<int32_t>& out) const;
  // Appends the bytes of token `id` to `out`: a normal token's bytes (byte-level decoded),
  // a user-defined token's text, a control or unknown token's text unless `skip_special`.
  // INVALID_ARGUMENT naming the id and the vocab size when it is out of range.
  void append_piece(int32_t id, bool skip_special, std::string& out) const;
  void check_id(int32_t id, const char* function) const;

 private:
  Tokenizer() = default;
  friend struct Loader;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;

  std::string source_;  // the file, for messages
  std::string pre_name_;
  std::vector<std::string> tokens_;  // by id, as the vocab stores them (byte-level form)
  std::vector<TokenType> types_;
  std::unordered_map<std::string_view, int32_t> by_text_;  // views into tokens_
  // (left id << 32 | right id) -> (rank << 32 | merged id)
  std::unordered_map<uint64_t, uint64_t> merges_;
  int32_t byte_token_[256];  // the token of each byte's byte-level character, or -1
  // Tokens matched whole before pre-tokenization, longest text first.
  std::vector<int32_t> special_;
  std::unique_ptr<PreTokenizer> pre_;
  std::vector<std::string> pieces_;             // by id, the bytes decode gives
  std::unordered_map<int32_t, uint8_t> strip_;  // kStripLeft/kStripRight of added tokens
  bool ignore_merges_ = false;     // a word found whole in the vocab is one token (Llama 3)
  bool add_prefix_space_ = false;  // HF ByteLevel's add_prefix_space
  bool add_bos_ = false;
  bool add_eos_ = false;
  int32_t bos_ = -1, eos_ = -1, eot_ = -1, pad_ = -1, unk_ = -1;
};

// Stateful decoding for generation: bytes of complete UTF-8 characters only; an incomplete
// sequence at the end is held back until a later token completes it. Bytes that cannot be
// part of a valid character come out as U+FFFD.
class StreamDecoder {
 public:
  StreamDecoder(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special)
      : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}
  // The text that token `id` completes (may be empty).
  const std::string& push(int32_t id);
  // What is still held back, as U+FFFD per invalid part; the state is empty afterwards.
  const std::string& flush();
  const Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_;
  std::string pending_;
  std::string out_;
};

// Appends `text` to `out` with every invalid UTF-8 part replaced by U+FFFD; returns the
// number of bytes consumed: all of `text`, or when `keep_incomplete_tail` the bytes before
// an incomplete but so far valid sequence at its end.
size_t append_valid_utf8(std::string_view text, bool keep_incomplete_tail, std::string& out);

}  // namespace gk::tokenizer
