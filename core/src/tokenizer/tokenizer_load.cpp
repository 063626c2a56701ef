// Loading a tokenizer: from GGUF metadata (llama.cpp's keys) or an HF tokenizer.json.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

namespace gk::tokenizer {

namespace {

using json = nlohmann::json;

// llama.cpp's fallback when a GGUF names no pre-tokenizer.
const std::vector<std::string> kDefaultPatterns = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    "[0-9][0-9][0-9]",
};

// Splits a merge written "left right" at its first space after the first byte (a byte-level
// token holds no space, but a left side may be one).
bool split_merge(const std::string& text, Merge& out) {
  const size_t at = text.find(' ', 1);
  if (at == std::string::npos) return false;
  out = {text.substr(0, at), text.substr(at + 1)};
  return true;
}

std::string shown(const std::string& s) {
  return "'" + (s.size() > 64 ? s.substr(0, 64) + "…" : s) + "'";
}

}  // namespace

void Loader::finish(const std::vector<std::string>& patterns, const std::string& merges_what) {
  Tokenizer& k = *t;
  if (k.tokens_.empty()) fail(GK_INVALID_ARGUMENT, k.source_ + ": the vocabulary is empty");
  k.by_text_.reserve(k.tokens_.size());
  for (size_t i = 0; i < k.tokens_.size(); ++i) {
    // A text stored twice means its last id, as llama.cpp reads GGUF vocabularies.
    if (!k.tokens_[i].empty()) k.by_text_[k.tokens_[i]] = int32_t(i);
  }
  const ByteLevel& bl = byte_level();
  for (int b = 0; b < 256; ++b) k.byte_token_[b] = k.find(bl.encoded[b]);

  k.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int32_t ia = k.find(a), ib = k.find(b), im = k.find(a + b);
    const int32_t missing_in = ia < 0 ? 0 : ib < 0 ? 1 : im < 0 ? 2 : -1;
    if (missing_in >= 0) {
      const std::string name = missing_in == 0 ? a : missing_in == 1 ? b : a + b;
      fail(GK_INVALID_ARGUMENT, k.source_ + ": " + merges_what + "[" + std::to_string(rank) + "] " +
                                    shown(a + " " + b) + " names " + shown(name) +
                                    ", which is not in the vocabulary");
    }
    // A pair listed twice keeps its first (lowest) rank.
    k.merges_.emplace(uint64_t(uint32_t(ia)) << 32 | uint32_t(ib),
                      uint64_t(rank) << 32 | uint32_t(im));
  }

  for (size_t i = 0; i < k.tokens_.size(); ++i) {
    const TokenType type = k.types_[i];
    if (type == TokenType::kControl || type == TokenType::kUserDefined ||
        type == TokenType::kUnknown) {
      k.special_.push_back(int32_t(i));
    }
  }
  std::stable_sort(k.special_.begin(), k.special_.end(), [&](int32_t a, int32_t b) {
    return k.tokens_[size_t(a)].size() > k.tokens_[size_t(b)].size();
  });

  k.pieces_.resize(k.tokens_.size());
  for (size_t i = 0; i < k.tokens_.size(); ++i) {
    switch (k.types_[i]) {
      case TokenType::kNormal:
        k.pieces_[i] = byte_level_decode(k.tokens_[i]);
        break;
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        k.pieces_[i] = k.tokens_[i];
        break;
      default:
        break;  // unused, byte and undefined tokens decode to nothing, as in llama.cpp
    }
  }
  k.pre_ = std::make_unique<PreTokenizer>(patterns, k.source_);
  for (int32_t* id : {&k.bos_, &k.eos_, &k.eot_, &k.pad_, &k.unk_}) {
    if (*id >= k.vocab_size()) *id = -1;
  }
}

// ---------------------------------------------------------------------------------------
// GGUF
// ---------------------------------------------------------------------------------------

std::shared_ptr<Tokenizer> Tokenizer::from_gguf_metadata(const json& md,
                                                         const std::string& source) {
  Loader l;
  Tokenizer& k = *l.t;
  k.source_ = source;
  auto key = [&](const char* name) -> const json* {
    const auto it = md.find(name);
    return it == md.end() ? nullptr : &*it;
  };
  auto bad = [&](const std::string& name, const std::string& what) {
    fail(GK_INVALID_ARGUMENT, source + ": key '" + name + "': " + what);
  };

  const json* model = key("tokenizer.ggml.model");
  if (!model) {
    fail(GK_INVALID_ARGUMENT, source +
                                  ": no key 'tokenizer.ggml.model': the file holds no "
                                  "tokenizer vocabulary");
  }
  if (!model->is_string()) bad("tokenizer.ggml.model", "not a string");
  const std::string model_name = model->get<std::string>();
  if (model_name != "gpt2") {
    fail(GK_UNIMPLEMENTED, source + ": tokenizer.ggml.model is '" + model_name +
                               "'; only byte-level BPE ('gpt2') is supported (SentencePiece "
                               "'llama', WordPiece 'bert' and Unigram 't5' are not)");
  }

  const json* tokens = key("tokenizer.ggml.tokens");
  if (!tokens) fail(GK_INVALID_ARGUMENT, source + ": no key 'tokenizer.ggml.tokens'");
  if (!tokens->is_array()) bad("tokenizer.ggml.tokens", "not an array");
  if (tokens->size() >= size_t(INT32_MAX)) bad("tokenizer.ggml.tokens", "too many tokens");
  k.tokens_.reserve(tokens->size());
  for (size_t i = 0; i < tokens->size(); ++i) {
    const json& v = (*tokens)[i];
    if (!v.is_string())
      bad("tokenizer.ggml.tokens", "element " + std::to_string(i) + " is not a string");
    k.tokens_.push_back(v.get<std::string>());
  }
  k.types_.assign(k.tokens_.size(), TokenType::kNormal);
  if (const json* types = key("tokenizer.ggml.token_type")) {
    if (!types->is_array() || types->size() != k.tokens_.size()) {
      bad("tokenizer.ggml.token_type",
          "not an array of " + std::to_string(k.tokens_.size()) + " integers (one per token)");
    }
    for (size_t i = 0; i < types->size(); ++i) {
      const json& v = (*types)[i];
      if (!v.is_number_integer()) {
        bad("tokenizer.ggml.token_type", "element " + std::to_string(i) + " is not an integer");
      }
      const int64_t t = v.get<int64_t>();
      k.types_[i] = t >= 0 && t <= 6 ? TokenType(t) : TokenType::kUndefined;
    }
  }

  if (const json* merges = key("tokenizer.ggml.merges")) {
    if (!merges->is_array()) bad("tokenizer.ggml.merges", "not an array");
    l.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const json& v = (*merges)[i];
      Merge m;
      if (!v.is_string() || !split_merge(v.get_ref<const std::string&>(), m)) {
        bad("tokenizer.ggml.merges",
            "element " + std::to_string(i) + " is not a string \"left right\"");
      }
      l.merges.push_back(std::move(m));
    }
  } else {
    fail(GK_INVALID_ARGUMENT, source +
                                  ": no key 'tokenizer.ggml.merges' (a BPE vocabulary "
                                  "needs its merges)");
  }

  std::string pre = "default";
  if (const json* p = key("tokenizer.ggml.pre")) {
    if (!p->is_string()) bad("tokenizer.ggml.pre", "not a string");
    pre = p->get<std::string>();
  }
  k.pre_name_ = pre;
  PreRule rule;
  if (pre == "default") {
    rule.patterns = kDefaultPatterns;
  } else if (!pre_rule_for(pre, rule)) {
    fail(GK_UNIMPLEMENTED, source + ": tokenizer.ggml.pre '" + pre +
                               "' is not a supported pre-tokenizer; supported: default, " +
                               supported_pre_names());
  }
  k.ignore_merges_ = rule.ignore_merges;
  k.add_bos_ = rule.add_bos;

  // Ids as llama.cpp reads them: out-of-range ones are dropped (finish() sets them to -1).
  auto id_key = [&](const char* name, int32_t& id) {
    const json* v = key(name);
    if (!v) return;
    if (!v->is_number_integer()) bad(name, "not an integer");
    const int64_t x = v->get<int64_t>();
    id = x >= 0 && x <= INT32_MAX ? int32_t(x) : -1;
  };
  // GPT-2's <|endoftext|>, what llama.cpp assumes when a BPE file names none.
  k.bos_ = k.eos_ = 11;
  id_key("tokenizer.ggml.bos_token_id", k.bos_);
  id_key("tokenizer.ggml.eos_token_id", k.eos_);
  id_key("tokenizer.ggml.eot_token_id", k.eot_);
  id_key("tokenizer.ggml.padding_token_id", k.pad_);
  id_key("tokenizer.ggml.unknown_token_id", k.unk_);
  auto bool_key = [&](const char* name, bool& flag) {
    const json* v = key(name);
    if (!v) return;
    if (!v->is_boolean()) bad(name, "not a boolean");
    flag = v->get<bool>();
  };
  bool_key("tokenizer.ggml.add_bos_token", k.add_bos_);
  bool_key("tokenizer.ggml.add_eos_token", k.add_eos_);

  l.finish(rule.patterns, "tokenizer.ggml.merges");
  if (k.eot_ < 0) {
    // Files written before the key existed: llama.cpp finds the end-of-turn token by its text.
    for (const char* text :
         {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"}) {
      const int32_t id = k.find(text);
      if (id >= 0 && k.types_[size_t(id)] == TokenType::kControl) {
        k.eot_ = id;
        break;
      }
    }
  }
  return l.t;
}

// ---------------------------------------------------------------------------------------
// HF tokenizer.json
// ---------------------------------------------------------------------------------------

namespace {

struct JsonContext {
  std::string source;
  [[noreturn]] void bad(const std::string& where, const std::string& what) const {
    fail(GK_INVALID_ARGUMENT, source + ": " + where + ": " + what);
  }
  [[noreturn]] void unsupported(const std::string& where, const std::string& what) const {
    fail(GK_UNIMPLEMENTED, source + ": " + where + ": " + what);
  }
};

std::string json_type_of(const json& node) {
  const auto it = node.find("type");
  return it != node.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Lenient field reads: a missing, null or mistyped optional field is its default.
std::string str_of(const json& node, const char* name, const std::string& fallback = {}) {
  const auto it = node.find(name);
  return it != node.end() && it->is_string() ? it->get<std::string>() : fallback;
}
bool bool_of(const json& node, const char* name, bool fallback) {
  const auto it = node.find(name);
  return it != node.end() && it->is_boolean() ? it->get<bool>() : fallback;
}
const json& node_of(const json& node, const char* name) {
  static const json null_node;
  const auto it = node.find(name);
  return it != node.end() ? *it : null_node;
}

// Appends the patterns of an HF pre-tokenizer node; sets *byte_level when it holds a
// ByteLevel step.
void read_pre_tokenizer(const JsonContext& c, const json& node, const std::string& where,
                        std::vector<std::string>& patterns, bool& byte_level,
                        bool& add_prefix_space) {
  if (node.is_null()) return;
  if (!node.is_object()) c.bad(where, "not an object");
  const std::string type = json_type_of(node);
  if (type == "Sequence") {
    const auto it = node.find("pretokenizers");
    if (it == node.end() || !it->is_array()) c.bad(where, "a Sequence without 'pretokenizers'");
    for (size_t i = 0; i < it->size(); ++i) {
      read_pre_tokenizer(c, (*it)[i], where + ".pretokenizers[" + std::to_string(i) + "]", patterns,
                         byte_level, add_prefix_space);
    }
  } else if (type == "ByteLevel") {
    byte_level = true;
    if (bool_of(node, "add_prefix_space", false)) add_prefix_space = true;
    if (bool_of(node, "use_regex", true)) patterns.push_back(kGpt2Pattern);
  } else if (type == "Split") {
    const auto pattern = node.find("pattern");
    if (pattern == node.end() || !pattern->is_object()) c.bad(where, "a Split without 'pattern'");
    std::string regex;
    if (pattern->contains("Regex") && (*pattern)["Regex"].is_string()) {
      regex = (*pattern)["Regex"].get<std::string>();
    } else if (pattern->contains("String") && (*pattern)["String"].is_string()) {
      regex = "\\Q" + (*pattern)["String"].get<std::string>() + "\\E";
    } else {
      c.bad(where + ".pattern", "neither a 'Regex' nor a 'String'");
    }
    const std::string behavior = str_of(node, "behavior", "Isolated");
    if (behavior != "Isolated" || bool_of(node, "invert", false)) {
      c.unsupported(where, "Split with behavior '" + behavior +
                               "'/invert; only Isolated, not inverted, is supported");
    }
    patterns.push_back(regex);
  } else if (type == "Digits") {
    patterns.push_back(bool_of(node, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else {
    c.unsupported(where, "pre-tokenizer type '" + type +
                             "' is not supported (Sequence, ByteLevel, Split, Digits are)");
  }
}

// The token a TemplateProcessing step names, or "".
std::string template_special(const json& step) {
  if (!step.is_object()) return {};
  const auto it = step.find("SpecialToken");
  if (it == step.end() || !it->is_object()) return {};
  return str_of(*it, "id");
}

// Reads BOS/EOS addition from a post_processor (TemplateProcessing, possibly in a Sequence).
void read_post_processor(const json& node, std::string& bos, std::string& eos) {
  if (!node.is_object()) return;
  const std::string type = json_type_of(node);
  if (type == "Sequence" && node.contains("processors") && node["processors"].is_array()) {
    for (const json& p : node["processors"]) read_post_processor(p, bos, eos);
  } else if (type == "TemplateProcessing" && node.contains("single") && node["single"].is_array() &&
             !node["single"].empty()) {
    const json& single = node["single"];
    bos = template_special(single.front());
    if (single.size() > 1) eos = template_special(single.back());
  }
}

// A token named in tokenizer_config.json: a string or {"content": ...}.
std::string config_token(const json& config, const char* name) {
  const auto it = config.find(name);
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return str_of(*it, "content");
  return {};
}

}  // namespace

std::shared_ptr<Tokenizer> Tokenizer::from_tokenizer_json_text(std::string_view text,
                                                               const std::string& source) {
  const JsonContext c{source};
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    fail(GK_INVALID_ARGUMENT, source + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) c.bad("the document", "not a JSON object");
  Loader l;
  Tokenizer& k = *l.t;
  k.source_ = source;
  k.pre_name_ = "tokenizer.json";

  const auto model_it = root.find("model");
  if (model_it == root.end() || !model_it->is_object())
    c.bad("'model'", "missing or not an object");
  const json& model = *model_it;
  const std::string type = json_type_of(model);
  if (type != "BPE") {
    c.unsupported("model.type", "'" + type + "'; only byte-level BPE is supported");
  }
  if (bool_of(model, "byte_fallback", false)) {
    c.unsupported("model.byte_fallback",
                  "true (SentencePiece-style BPE); only byte-level BPE is "
                  "supported");
  }
  const auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) {
    c.bad("model.vocab", "missing or not an object {token: id}");
  }
  const auto added_it = root.find("added_tokens");
  const json empty = json::array();
  const json& added = added_it != root.end() && !added_it->is_null() ? *added_it : empty;
  if (!added.is_array()) c.bad("added_tokens", "not an array");

  // The vocabulary's size is one past its highest id, added tokens included.
  int64_t size = 0;
  auto check_id = [&](const json& v, const std::string& where) -> int32_t {
    if (!v.is_number_integer()) c.bad(where, "the id is not an integer");
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id >= (int64_t(1) << 24)) {
      c.bad(where, "id " + std::to_string(id) + " is outside 0..16777215");
    }
    size = std::max(size, id + 1);
    return int32_t(id);
  };
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    check_id(it.value(), "model.vocab[" + shown(it.key()) + "]");
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const json& a = added[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!a.is_object() || !a.contains("id") || !a.contains("content") ||
        !a["content"].is_string()) {
      c.bad(where, "not an object with 'id' and 'content'");
    }
    check_id(a["id"], where);
  }
  k.tokens_.resize(size_t(size));
  k.types_.assign(size_t(size), TokenType::kUnused);  // ids no entry names
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    const size_t id = size_t(it.value().get<int64_t>());
    if (k.types_[id] != TokenType::kUnused) {
      c.bad("model.vocab[" + shown(it.key()) + "]",
            "id " + std::to_string(id) + " is also " + shown(k.tokens_[id]));
    }
    k.tokens_[id] = it.key();
    k.types_[id] = TokenType::kNormal;
  }
  for (const json& a : added) {
    const size_t id = size_t(a["id"].get<int64_t>());
    k.tokens_[id] = a["content"].get<std::string>();
    k.types_[id] = bool_of(a, "special", false) ? TokenType::kControl : TokenType::kUserDefined;
    uint8_t strip = 0;
    if (bool_of(a, "lstrip", false)) strip |= kStripLeft;
    if (bool_of(a, "rstrip", false)) strip |= kStripRight;
    if (strip) k.strip_[int32_t(id)] = strip;
  }

  const auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array()) {
    c.bad("model.merges", "missing or not an array");
  }
  l.merges.reserve(merges_it->size());
  for (size_t i = 0; i < merges_it->size(); ++i) {
    const json& v = (*merges_it)[i];
    Merge m;
    if (v.is_string() && split_merge(v.get_ref<const std::string&>(), m)) {
      l.merges.push_back(std::move(m));
    } else if (v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string()) {
      l.merges.emplace_back(v[0].get<std::string>(), v[1].get<std::string>());
    } else {
      c.bad("model.merges[" + std::to_string(i) + "]",
            "neither \"left right\" nor [\"left\", \"right\"]");
    }
  }
  k.ignore_merges_ = bool_of(model, "ignore_merges", false);

  if (root.contains("normalizer") && !root["normalizer"].is_null()) {
    c.unsupported("normalizer", "type '" + json_type_of(root["normalizer"]) +
                                    "'; normalizers are not supported (only null)");
  }
  std::vector<std::string> patterns;
  bool byte_level = false;
  read_pre_tokenizer(c, node_of(root, "pre_tokenizer"), "pre_tokenizer", patterns, byte_level,
                     k.add_prefix_space_);
  if (!byte_level && json_type_of(node_of(root, "decoder")) != "ByteLevel") {
    c.unsupported("pre_tokenizer", "no ByteLevel step; only byte-level BPE is supported");
  }

  // BOS/EOS: tokenizer_config.json beside the file names them; the post-processor's
  // template says whether they are added.
  std::string bos, eos, tbos, teos;
  read_post_processor(node_of(root, "post_processor"), tbos, teos);
  json config;
  const auto config_path = std::filesystem::path(source).parent_path() / "tokenizer_config.json";
  if (std::ifstream f{config_path}) {
    try {
      config = json::parse(f);
    } catch (const json::exception& e) {
      fail(GK_INVALID_ARGUMENT, config_path.string() + ": not valid JSON: " + e.what());
    }
  }
  if (config.is_object()) {
    bos = config_token(config, "bos_token");
    eos = config_token(config, "eos_token");
  }
  if (bos.empty()) bos = tbos;
  if (eos.empty()) eos = teos;
  l.finish(patterns, "model.merges");
  k.bos_ = bos.empty() ? -1 : k.find(bos);
  k.eos_ = eos.empty() ? -1 : k.find(eos);
  k.add_bos_ = !tbos.empty() && k.bos_ >= 0;
  k.add_eos_ = !teos.empty() && k.eos_ >= 0;
  if (config.is_object()) {
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
      k.add_bos_ = config["add_bos_token"].get<bool>() && k.bos_ >= 0;
    }
    const std::string pad = config_token(config, "pad_token");
    const std::string unk = config_token(config, "unk_token");
    if (!pad.empty()) k.pad_ = k.find(pad);
    if (!unk.empty()) k.unk_ = k.find(unk);
  }
  const std::string unk = str_of(model, "unk_token");
  if (k.unk_ < 0 && !unk.empty()) k.unk_ = k.find(unk);
  k.eot_ = k.eos_;
  return l.t;
}

std::shared_ptr<Tokenizer> Tokenizer::from_tokenizer_json(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(GK_NOT_FOUND, path + ": no such file");
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail(GK_INVALID_ARGUMENT, path + ": not a regular file");
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(GK_INVALID_ARGUMENT, path + ": cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  return from_tokenizer_json_text(ss.str(), path);
}

}  // namespace gk::tokenizer
