// Loading a tokenizer from a tiktoken-format vocabulary (openai-whisper's gpt2.tiktoken and
// multilingual.tiktoken, tiktoken's own files): a line per token, its bytes in base64 and its
// rank. tiktoken merges the adjacent pair whose bytes together have the lowest rank; as merges
// by rank that is, for each token, every split of it into two tokens, ranked by the token's
// rank (then by the halves' ranks), which is how HF converts these files too.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

namespace gk::tokenizer {
namespace {

// The bytes of standard base64 `text` (with '=' padding); false when it is not base64.
bool base64_decode(std::string_view text, std::string& out) {
  static const auto table = [] {
    std::array<int8_t, 256> t{};
    t.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[uint8_t(alphabet[i])] = int8_t(i);
    return t;
  }();
  out.clear();
  // Padding alone is the empty token (multilingual.tiktoken's last rank is one).
  if (!text.empty() && text.size() <= 2 && text.find_first_not_of('=') == std::string::npos) {
    return true;
  }
  if (text.empty() || text.size() % 4 != 0) return false;
  uint32_t bits = 0;
  int have = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '=') {
      // Padding only at the end, at most two.
      if (i + 2 < text.size() || (i + 1 < text.size() && text[i + 1] != '=')) return false;
      break;
    }
    const int v = table[uint8_t(c)];
    if (v < 0) return false;
    bits = (bits << 6) | uint32_t(v);
    have += 6;
    if (have >= 8) {
      have -= 8;
      out.push_back(char((bits >> have) & 0xff));
    }
  }
  return !out.empty();
}

// The byte-level form of `bytes` (GPT-2's alphabet, as the vocab stores tokens).
std::string byte_level_encode(std::string_view bytes) {
  const ByteLevel& bl = byte_level();
  std::string out;
  for (unsigned char b : bytes) out += bl.encoded[b];
  return out;
}

}  // namespace

std::shared_ptr<Tokenizer> Tokenizer::from_tiktoken(const std::string& path,
                                                    const std::vector<std::string>& specials,
                                                    const std::string& pattern) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(GK_NOT_FOUND, path + ": no such file");
  std::ifstream f(path, std::ios::binary);
  if (!f || !std::filesystem::is_regular_file(path, ec)) {
    fail(GK_INVALID_ARGUMENT, path + ": not a readable file");
  }
  std::stringstream text;
  text << f.rdbuf();
  return from_tiktoken_text(text.str(), path, specials, pattern);
}

std::shared_ptr<Tokenizer> Tokenizer::from_tiktoken_text(std::string_view text,
                                                         const std::string& path,
                                                         const std::vector<std::string>& specials,
                                                         const std::string& pattern) {
  std::istringstream f{std::string(text)};
  std::vector<std::string> by_rank;  // token bytes
  std::string line, bytes;
  for (size_t number = 1; std::getline(f, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    auto bad = [&](const std::string& why) {
      fail(GK_INVALID_ARGUMENT, path + ":" + std::to_string(number) + ": " + why +
                                    " (a tiktoken line is 'BASE64 RANK')");
    };
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      bad("expected two fields");
    }
    if (!base64_decode(std::string_view(line).substr(0, space), bytes)) {
      bad("'" + line.substr(0, std::min<size_t>(space, 40)) + "' is not base64 of a token");
    }
    const std::string rank_text = line.substr(space + 1);
    char* end = nullptr;
    const long long rank = std::strtoll(rank_text.c_str(), &end, 10);
    if (rank_text.empty() || *end != '\0' || rank < 0 || rank > INT32_MAX - 1) {
      bad("rank '" + rank_text + "' is not a token id");
    }
    if (size_t(rank) != by_rank.size()) {
      bad("rank " + rank_text + " out of order (expected " + std::to_string(by_rank.size()) +
          ": ranks run 0, 1, 2, …)");
    }
    by_rank.push_back(bytes);
  }
  if (by_rank.empty()) fail(GK_INVALID_ARGUMENT, path + ": no tokens");

  Loader l;
  Tokenizer& k = *l.t;
  k.source_ = path;
  k.pre_name_ = "tiktoken";
  std::unordered_map<std::string_view, int32_t> rank_of;
  rank_of.reserve(by_rank.size());
  for (size_t i = 0; i < by_rank.size(); ++i) {
    if (!rank_of.emplace(by_rank[i], int32_t(i)).second) {
      fail(GK_INVALID_ARGUMENT, path + ": token " + std::to_string(i) +
                                    " repeats the bytes of token " +
                                    std::to_string(rank_of[by_rank[i]]));
    }
    k.tokens_.push_back(byte_level_encode(by_rank[i]));
    k.types_.push_back(TokenType::kNormal);
  }
  for (const std::string& s : specials) {
    k.tokens_.push_back(s);
    k.types_.push_back(TokenType::kControl);
  }
  // Each token's splits into two tokens are its merges, at its rank.
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    const std::string_view token = by_rank[rank];
    struct Split {
      int32_t left, right;
      size_t at;
    };
    std::vector<Split> splits;
    for (size_t at = 1; at < token.size(); ++at) {
      const auto left = rank_of.find(token.substr(0, at));
      const auto right = rank_of.find(token.substr(at));
      if (left != rank_of.end() && right != rank_of.end()) {
        splits.push_back({left->second, right->second, at});
      }
    }
    std::sort(splits.begin(), splits.end(), [](const Split& a, const Split& b) {
      return a.left != b.left ? a.left < b.left : a.right < b.right;
    });
    for (const Split& s : splits) {
      l.merges.emplace_back(k.tokens_[size_t(s.left)], k.tokens_[size_t(s.right)]);
    }
  }
  // tiktoken's and Whisper's end of text, when it is among the specials.
  for (size_t i = 0; i < specials.size(); ++i) {
    if (specials[i] == "<|endoftext|>") k.eos_ = k.eot_ = int32_t(by_rank.size() + i);
  }
  l.finish({pattern.empty() ? std::string(kGpt2Pattern) : pattern}, "merges from the ranks");
  return l.t;
}

}  // namespace gk::tokenizer
