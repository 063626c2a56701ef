// Encode, decode and the byte-level tables; loading lives in tokenizer_load.cpp.
#include <algorithm>
#include <cctype>
#include <queue>

#include "common/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

namespace gk::tokenizer {

namespace {

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 prefix of a sequence starting at text[0]: the full length
// when it is a complete valid character, else the bytes that could still start one (its
// "maximal subpart", at least 1 when invalid). `complete` tells which.
size_t utf8_prefix(std::string_view text, bool& complete) {
  const auto b0 = uint8_t(text[0]);
  complete = false;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b0 < 0x80) {
    complete = true;
    return 1;
  } else if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;  // can start nothing
  }
  size_t i = 1;
  for (; i < need && i < text.size(); ++i) {
    const auto b = uint8_t(text[i]);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return i;
  }
  complete = i == need;
  return i;
}

}  // namespace

size_t append_valid_utf8(std::string_view text, bool keep_incomplete_tail, std::string& out) {
  size_t pos = 0;
  while (pos < text.size()) {
    bool complete = false;
    const size_t n = utf8_prefix(text.substr(pos), complete);
    if (complete) {
      out.append(text.data() + pos, n);
      pos += n;
    } else if (keep_incomplete_tail && n > 0 && pos + n == text.size()) {
      return pos;  // could still be completed by bytes to come
    } else {
      out += kReplacement;
      pos += std::max<size_t>(n, 1);
    }
  }
  return pos;
}

const ByteLevel& byte_level() {
  static const ByteLevel table = [] {
    ByteLevel t;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const uint32_t cp = printable ? b : next++;
      append_utf8(cp, t.encoded[b]);
      t.decoded[cp] = uint8_t(b);
    }
    return t;
  }();
  return table;
}

std::string byte_level_decode(std::string_view text) {
  const ByteLevel& bl = byte_level();
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    bool complete = false;
    const size_t n = utf8_prefix(text.substr(pos), complete);
    if (!complete) {
      // Not UTF-8: no byte-level character; keep the byte.
      out += text[pos++];
      continue;
    }
    uint32_t cp = 0;
    const auto b0 = uint8_t(text[pos]);
    if (n == 1) {
      cp = b0;
    } else if (n == 2) {
      cp = (b0 & 0x1Fu) << 6 | (uint8_t(text[pos + 1]) & 0x3Fu);
    } else {
      cp = n == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
      for (size_t i = 1; i < n; ++i) cp = cp << 6 | (uint8_t(text[pos + i]) & 0x3Fu);
    }
    if (cp < 512 && bl.decoded.count(cp)) {
      out += char(bl.decoded.at(cp));
    } else {
      // A character outside the byte-level alphabet stands for itself, as in HF's decoder.
      out.append(text.data() + pos, n);
    }
    pos += n;
  }
  return out;
}

int32_t Tokenizer::find(std::string_view text) const {
  const auto it = by_text_.find(text);
  return it == by_text_.end() ? -1 : it->second;
}

void Tokenizer::check_id(int32_t id, const char* function) const {
  if (id < 0 || id >= vocab_size()) {
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": token id " + std::to_string(id) +
                                  " is outside 0.." + std::to_string(vocab_size() - 1) +
                                  " (the vocab size is " + std::to_string(vocab_size()) + ")");
  }
}

void Tokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const ByteLevel& bl = byte_level();
  if (ignore_merges_) {
    std::string encoded;
    for (char c : word) encoded += bl.encoded[uint8_t(c)];
    const int32_t id = find(encoded);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;
  };
  std::vector<Symbol> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    symbols[i] = {byte_token_[uint8_t(word[i])], int32_t(i) - 1,
                  i + 1 < word.size() ? int32_t(i + 1) : -1};
  }
  // A candidate merge of the symbols at `left` and `right` as they were when queued; lowest
  // rank first, then leftmost (as HF and llama.cpp order them).
  struct Pair {
    uint32_t rank;
    int32_t left, right;
    int32_t left_id, right_id;
    int32_t merged;
    bool operator>(const Pair& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Pair, std::vector<Pair>, std::greater<Pair>> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t a = symbols[size_t(left)].id, b = symbols[size_t(right)].id;
    if (a < 0 || b < 0) return;
    const auto it = merges_.find(uint64_t(uint32_t(a)) << 32 | uint32_t(b));
    if (it == merges_.end()) return;
    queue.push({uint32_t(it->second >> 32), left, right, a, b, int32_t(uint32_t(it->second))});
  };
  for (size_t i = 1; i < symbols.size(); ++i) consider(int32_t(i - 1), int32_t(i));
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = symbols[size_t(p.left)];
    Symbol& r = symbols[size_t(p.right)];
    // Stale when either side has merged since: its id (or the link) changed.
    if (l.id != p.left_id || r.id != p.right_id || l.next != p.right) continue;
    l.id = p.merged;
    l.next = r.next;
    if (r.next >= 0) symbols[size_t(r.next)].prev = p.left;
    r.id = -2;  // merged away
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }
  for (int32_t i = 0; i >= 0 && size_t(i) < symbols.size(); i = symbols[size_t(i)].next) {
    const int32_t id = symbols[size_t(i)].id;
    if (id >= 0) {
      out.push_back(id);
    } else if (unk_ >= 0) {
      out.push_back(unk_);  // a byte the vocabulary has no token for
    }
  }
}

void Tokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::string prefixed;
  if (add_prefix_space_ && !text.empty() && text[0] != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  std::vector<std::string_view> words;
  pre_->split(text, words);
  for (std::string_view w : words) encode_word(w, out);
}

void Tokenizer::encode(std::string_view input, const EncodeOptions& options,
                       std::vector<int32_t>& out) const {
  // PCRE2 in UTF mode needs valid UTF-8: invalid parts become U+FFFD.
  std::string clean;
  clean.reserve(input.size());
  append_valid_utf8(input, false, clean);
  const std::string_view text = clean;

  if (options.add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);

  // Cut out special tokens, longest first; what is between them is text.
  struct Fragment {
    int32_t token;  // -1 for text
    std::string_view text;
  };
  std::vector<Fragment> fragments{{-1, text}};
  std::vector<Fragment> next;
  for (int32_t id : special_) {
    const TokenType type = types_[size_t(id)];
    if (!options.parse_special && type != TokenType::kUserDefined) continue;
    const std::string& s = tokens_[size_t(id)];
    if (s.empty()) continue;
    const uint8_t strip = strip_.count(id) ? strip_.at(id) : 0;
    next.clear();
    bool found = false;
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      size_t at;
      while ((at = rest.find(s)) != std::string_view::npos) {
        found = true;
        std::string_view left = rest.substr(0, at);
        if (strip & kStripLeft) {
          while (!left.empty() && std::isspace(uint8_t(left.back()))) left.remove_suffix(1);
        }
        if (!left.empty()) next.push_back({-1, left});
        next.push_back({id, {}});
        rest = rest.substr(at + s.size());
        if (strip & kStripRight) {
          while (!rest.empty() && std::isspace(uint8_t(rest.front()))) rest.remove_prefix(1);
        }
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (found) fragments.swap(next);
  }

  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else {
      encode_text(f.text, out);
    }
  }
  if (options.add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
}

void Tokenizer::append_piece(int32_t id, bool skip_special, std::string& out) const {
  check_id(id, "decode");
  const TokenType type = types_[size_t(id)];
  if (skip_special && (type == TokenType::kControl || type == TokenType::kUnknown)) return;
  out += pieces_[size_t(id)];
}

const std::string& StreamDecoder::push(int32_t id) {
  out_.clear();
  tokenizer_->append_piece(id, skip_special_, pending_);
  const size_t used = append_valid_utf8(pending_, true, out_);
  pending_.erase(0, used);
  return out_;
}

const std::string& StreamDecoder::flush() {
  out_.clear();
  append_valid_utf8(pending_, false, out_);
  pending_.clear();
  return out_;
}

}  // namespace gk::tokenizer
