#include "common/log.h"

#include <cstdio>

namespace gk {

void Logger::log(int32_t level, const std::string& message) const {
  if (!enabled(level)) return;
  if (fn_) {
    fn_(user_data_, level, message.c_str());
    return;
  }
  static const char* const kNames[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "gpukit: %s: %s\n", kNames[level], message.c_str());
}

std::optional<int32_t> log_level_from_name(std::string_view name) {
  if (name == "debug") return GK_LOG_DEBUG;
  if (name == "info") return GK_LOG_INFO;
  if (name == "warning" || name == "warn") return GK_LOG_WARNING;
  if (name == "error") return GK_LOG_ERROR;
  if (name == "off") return GK_LOG_OFF;
  return std::nullopt;
}

}  // namespace gk
