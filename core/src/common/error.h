// Errors inside the core: a gk::Error carries a gk_status and a message; every C entry
// point turns it into a status code plus the thread's last-error message (c_guard).
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "gpukit/gpukit.h"

namespace gk {

class Error : public std::exception {
 public:
  Error(gk_status status, std::string message) : status_(status), message_(std::move(message)) {}
  gk_status status() const { return status_; }
  const std::string& message() const { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  gk_status status_;
  std::string message_;
};

[[noreturn]] inline void fail(gk_status status, std::string message) {
  throw Error(status, std::move(message));
}

// Runs `fn`; rethrows any gk::Error with `context` in front ("loading x.yaml: …").
template <typename Fn>
auto with_context(const std::string& context, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const Error& e) {
    throw Error(e.status(), context + ": " + e.message());
  }
}

// The calling thread's last error message.
void set_last_error(std::string message);
const char* last_error();

// Runs `fn` behind a C entry point: no exception escapes, the status is returned and the
// message recorded for gk_last_error(). Always inlined: each instance has one caller, its
// entry point, and a call would only pass the lambda's captures through memory.
template <typename Fn>
[[gnu::always_inline]] inline gk_status c_guard(Fn&& fn) noexcept {
  try {
    fn();
    return GK_OK;
  } catch (const Error& e) {
    set_last_error(e.message());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return GK_RESOURCE_EXHAUSTED;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error: ") + e.what());
    return GK_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return GK_INTERNAL;
  }
}

// The failures of the checks below, out of line so that the checks stay a compare and a
// branch in every C entry point.
[[noreturn]] void fail_null_arg(const char* function, const char* name);
[[noreturn]] void fail_struct_size(size_t given, size_t minimum, const char* function,
                                   const char* type);

// Checks a required pointer argument of a C entry point.
inline void require_arg(const void* p, const char* function, const char* name) {
  if (!p) fail_null_arg(function, name);
}

// Checks a caller's struct_size against the smallest size this ABI major accepts.
inline void require_struct(size_t given, size_t minimum, const char* function, const char* type) {
  if (given < minimum) fail_struct_size(given, minimum, function, type);
}

}  // namespace gk
