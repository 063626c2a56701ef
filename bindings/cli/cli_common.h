// What every `gpukit` subcommand shares: a failed gk_ call as an exception, and an owned
// runtime.
#ifndef GPUKIT_BINDINGS_CLI_CLI_COMMON_H_
#define GPUKIT_BINDINGS_CLI_CLI_COMMON_H_

#include <gpukit/gpukit.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace gk::cli {

// A failed gk_ call, carrying its status and the thread's gk_last_error() message.
class GkError : public std::runtime_error {
 public:
  GkError(gk_status status, const std::string& what)
      : std::runtime_error(std::string(gk_status_name(status)) + ": " + what), status_(status) {}
  gk_status status() const { return status_; }

 private:
  gk_status status_;
};

inline void check(gk_status status, const char* call) {
  if (status != GK_OK) {
    const std::string message = gk_last_error();
    throw GkError(status, message.empty() ? std::string(call) + " failed" : message);
  }
}

struct RuntimeDeleter {
  void operator()(gk_runtime* rt) const { gk_runtime_destroy(rt); }
};
using RuntimePtr = std::unique_ptr<gk_runtime, RuntimeDeleter>;

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_CLI_COMMON_H_
