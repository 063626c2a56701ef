// An address as the pool's messages and its JSON snapshot show it: "0x7f3a00000000".
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gk {

inline std::string address_text(uintptr_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%" PRIxPTR, value);
  return text;
}

}  // namespace gk
