// Pre-tokenization: the text is cut into words with PCRE2 patterns (UTF + UCP, so \p{L},
// \p{N} and \s follow Unicode), before BPE runs inside each word. Several patterns apply in
// turn, as llama.cpp applies its lists: each pattern cuts every piece the previous ones left
// into its matches and the text between them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gk::tokenizer {

// The GPT-2 pattern (HF's ByteLevel pre-tokenizer with use_regex).
extern const char* const kGpt2Pattern;

class PreTokenizer {
 public:
  // Compiles `patterns` (PCRE2 syntax); INVALID_ARGUMENT naming `source`, the pattern and
  // PCRE2's message at the offending offset.
  PreTokenizer(const std::vector<std::string>& patterns, const std::string& source);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Cuts valid UTF-8 `text` into pieces (views into it), in order; together they cover it.
  // Thread-safe: match data is per call.
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// The patterns llama.cpp uses for GGUF `tokenizer.ggml.pre` == `name`, and whether that rule
// set takes a word found whole in the vocab as one token (`ignore_merges`) and adds BOS by
// default. False when the name is not one this library supports.
struct PreRule {
  std::vector<std::string> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
};
bool pre_rule_for(const std::string& name, PreRule& out);
// The supported names, comma-separated, for messages and docs.
std::string supported_pre_names();

}  // namespace gk::tokenizer
