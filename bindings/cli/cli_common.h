// What every `gpukit` subcommand shares: a failed gk_ call as an exception, the global
// options and the runtime they open, JSON as text, devices and the cells that describe them.
#ifndef GPUKIT_BINDINGS_CLI_CLI_COMMON_H_
#define GPUKIT_BINDINGS_CLI_CLI_COMMON_H_

#include <gpukit/gpukit.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_handles.h"

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

// JSON as text; bytes that are not UTF-8 (a name from a manifest, say) become U+FFFD
// instead of failing the whole view.
template <typename Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// The options before the subcommand, which say how to open the runtime.
struct GlobalOptions {
  std::string devices;      // "" = library default
  std::string plugin_path;  // extra manifest folders
  std::string plugins_disable;
  std::string log_level = "warning";
};

RuntimePtr open_runtime(const GlobalOptions& g);

inline std::string str(const char* s) { return s ? s : ""; }

// "1.11" from a packed ABI version.
std::string version_string(uint32_t v);
// CUDA's 13000 → "13.0"; 0 → "-".
std::string cuda_version_string(int32_t v);
// 90 → "9.0"; 0 → "-".
std::string sm_string(int32_t sm);
// "79.1 GiB"; 0 → "-".
std::string bytes_string(uint64_t bytes);
// "cpu", "cuda" or "-".
const char* kind_string(int32_t kind);

std::vector<gk_device_props> devices_of(const gk_runtime* rt);
// A device from "3", "cpu", "cuda" or "cuda:N".
int32_t parse_device(const gk_runtime* rt, const std::string& spec);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_CLI_COMMON_H_
