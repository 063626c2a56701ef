#include "common/error.h"

namespace gk {
namespace {
thread_local std::string t_last_error;
}  // namespace

void set_last_error(std::string message) { t_last_error = std::move(message); }
const char* last_error() { return t_last_error.c_str(); }

void fail_null_arg(const char* function, const char* name) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": argument '" + name + "' is NULL");
}

void fail_struct_size(size_t given, size_t minimum, const char* function, const char* type) {
  fail(GK_INVALID_ARGUMENT, std::string(function) + ": " + type + ".struct_size is " +
                                std::to_string(given) + ", smaller than the " +
                                std::to_string(minimum) + " bytes of ABI 1.0");
}

}  // namespace gk
