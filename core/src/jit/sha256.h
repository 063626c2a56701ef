// SHA-256 (FIPS 180-4), for the JIT cache's keys and entry checksums: a key must not
// collide across the sources, headers and options of every user of a shared cache folder.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gk::jit {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // A field of a key: its length first, so ("ab","c") and ("a","bc") differ.
  void field(std::string_view text);
  std::array<uint8_t, 32> digest();
  // The digest as 64 lower-case hex digits.
  std::string hex();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

}  // namespace gk::jit
