// What tokenizer.cpp and the loaders (tokenizer_load.cpp, tokenizer_tiktoken.cpp) share:
// GPT-2's byte-level alphabet and the Loader that fills a Tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace gk::tokenizer {

// GPT-2's byte <-> character table: printable Latin-1 bytes stand for themselves, the other
// 68 are shifted to U+0100.. in byte order, so that every byte is one visible character.
struct ByteLevel {
  std::string encoded[256];                       // UTF-8 of each byte's character
  std::unordered_map<uint32_t, uint8_t> decoded;  // code point -> byte
};
const ByteLevel& byte_level();
// The bytes a byte-level token text stands for.
std::string byte_level_decode(std::string_view text);

// Added tokens' whitespace stripping (HF's lstrip/rstrip).
constexpr uint8_t kStripLeft = 1;
constexpr uint8_t kStripRight = 2;

using Merge = std::pair<std::string, std::string>;

// Fills a Tokenizer's private state; shared by every source.
struct Loader {
  std::shared_ptr<Tokenizer> t{new Tokenizer()};
  std::vector<Merge> merges;  // by rank, in byte-level form

  // Builds the lookup tables once the vocab, types, merges, specials and pre-tokenizer
  // patterns are set. `merges_what` names where the merges came from, for messages.
  void finish(const std::vector<std::string>& patterns, const std::string& merges_what);
};

}  // namespace gk::tokenizer
