#include "common/environment.h"

#include <cstdlib>

namespace gk {

std::optional<std::string> env_value(const char* name) {
  // secure_getenv returns NULL in setuid/setgid processes (AT_SECURE).
  const char* v = secure_getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

}  // namespace gk
