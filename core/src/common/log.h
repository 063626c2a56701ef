// The runtime's logger: a level and a sink (the caller's gk_log_fn, or stderr).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gpukit/gpukit.h"

namespace gk {

class Logger {
 public:
  Logger(int32_t level, gk_log_fn fn, void* user_data)
      : level_(level), fn_(fn), user_data_(user_data) {}

  bool enabled(int32_t level) const { return level >= level_ && level < GK_LOG_OFF; }
  void log(int32_t level, const std::string& message) const;
  void info(const std::string& message) const { log(GK_LOG_INFO, message); }
  void warning(const std::string& message) const { log(GK_LOG_WARNING, message); }
  void debug(const std::string& message) const { log(GK_LOG_DEBUG, message); }

 private:
  int32_t level_;
  gk_log_fn fn_;
  void* user_data_;
};

// "debug", "info", "warning"/"warn", "error", "off" → GK_LOG_*.
std::optional<int32_t> log_level_from_name(std::string_view name);

}  // namespace gk
