// Byte counts for messages: "1.50 GiB", "12.0 MiB", "3.5 KiB", "512 B".
#pragma once

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gk {

inline std::string human_bytes(uint64_t bytes) {
  char text[48];
  if (bytes >= (uint64_t(1) << 30)) {
    std::snprintf(text, sizeof(text), "%.2f GiB", double(bytes) / double(uint64_t(1) << 30));
  } else if (bytes >= (uint64_t(1) << 20)) {
    std::snprintf(text, sizeof(text), "%.1f MiB", double(bytes) / double(uint64_t(1) << 20));
  } else if (bytes >= 1024) {
    std::snprintf(text, sizeof(text), "%.1f KiB", double(bytes) / 1024.0);
  } else {
    std::snprintf(text, sizeof(text), "%" PRIu64 " B", bytes);
  }
  return text;
}

}  // namespace gk
