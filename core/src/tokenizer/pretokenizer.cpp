#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <map>

#include "common/error.h"

namespace gk::tokenizer {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// GPT-2's pattern as llama.cpp writes it: without the last `\s+`, whose matches it keeps as
// unmatched text, which becomes a piece of its own all the same.
constexpr const char* kGpt2Core =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3: contractions in either case, a letter run with one leading non-letter, numbers of
// up to three digits, punctuation runs with their line breaks, whitespace.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 but one digit per piece.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GGUF pre-tokenizer names and their rules, grouped as llama.cpp groups them.
const std::map<std::string, PreRule>& rules() {
  static const std::map<std::string, PreRule> table = [] {
    std::map<std::string, PreRule> t;
    const PreRule llama3{{kLlama3}, true, true};
    for (const char* n :
         {"llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "dbrx", "smaug-bpe"}) {
      t[n] = llama3;
    }
    const PreRule gpt2{{kGpt2Core}, false, false};
    for (const char* n : {"gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais", "trillion"}) {
      t[n] = gpt2;
    }
    const PreRule qwen2{{kQwen2}, false, false};
    for (const char* n : {"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez"}) t[n] = qwen2;
    // Digits one by one first, then GPT-2's rule on what is left.
    const PreRule digits_then_gpt2{{R"(\p{N})", kGpt2Core}, false, false};
    for (const char* n :
         {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}) {
      t[n] = digits_then_gpt2;
    }
    t["falcon"] = PreRule{{R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Core, "[0-9][0-9][0-9]"}, false, false};
    return t;
  }();
  return table;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) {
    return "PCRE2 error " + std::to_string(code);
  }
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns, const std::string& source)
    : patterns_(patterns) {
  for (const std::string& p : patterns_) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP,
                            &error, &offset, nullptr);
    if (!c->code) {
      fail(GK_INVALID_ARGUMENT, source + ": pre-tokenizer pattern '" + p + "': " +
                                    pcre2_message(error) + " at offset " + std::to_string(offset));
    }
    // The JIT is an optimisation only: where it is unavailable, the interpreter matches.
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> next;
  for (size_t k = 0; k < compiled_.size(); ++k) {
    const auto& c = compiled_[k];
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
        pcre2_match_data_create_from_pattern(c->code, nullptr), pcre2_match_data_free);
    if (!md) throw std::bad_alloc();
    next.clear();
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t start = 0;  // where the unmatched text begins
      size_t pos = 0;    // where the next search begins
      while (pos < piece.size()) {
        // The text was checked as UTF-8 once, before splitting.
        const int rc =
            pcre2_match(c->code, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
            rc == PCRE2_ERROR_HEAPLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          fail(GK_RESOURCE_EXHAUSTED, "pre-tokenizer pattern '" + patterns_[k] +
                                          "' on a piece of " + std::to_string(piece.size()) +
                                          " bytes: " + pcre2_message(rc));
        }
        if (rc < 0) fail(GK_INTERNAL, "pre-tokenizer: " + pcre2_message(rc));
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t b = ov[0], e = ov[1];
        if (e == b) {
          // An empty match cuts nothing: search again from the next character.
          pos = b + 1;
          while (pos < piece.size() && (uint8_t(piece[pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (b > start) next.push_back(piece.substr(start, b - start));
        next.push_back(piece.substr(b, e - b));
        start = pos = e;
      }
      if (start < piece.size()) next.push_back(piece.substr(start));
    }
    pieces.swap(next);
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

bool pre_rule_for(const std::string& name, PreRule& out) {
  const auto it = rules().find(name);
  if (it == rules().end()) return false;
  out = it->second;
  return true;
}

std::string supported_pre_names() {
  std::string names;
  for (const auto& [name, rule] : rules()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace gk::tokenizer
