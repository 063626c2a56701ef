// Environment variables, ignored in setuid/setgid processes so a privileged program
// cannot be made to load plugins from a path the caller chose.
#pragma once

#include <optional>
#include <string>

namespace gk {

// The variable's value, or nullopt when unset, empty, or the process runs setuid/setgid.
std::optional<std::string> env_value(const char* name);

}  // namespace gk
