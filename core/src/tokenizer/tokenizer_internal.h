// What tokenizer.cpp and tokenizer_load.cpp share: GPT-2's byte-level alphabet.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

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

}  // namespace gk::tokenizer
