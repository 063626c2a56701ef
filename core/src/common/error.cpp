#include "common/error.h"

namespace gk {
namespace {
thread_local std::string t_last_error;
}  // namespace

void set_last_error(std::string message) { t_last_error = std::move(message); }
const char* last_error() { return t_last_error.c_str(); }

}  // namespace gk
