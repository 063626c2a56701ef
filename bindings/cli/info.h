// `gpukit info`, `gpukit plugins`, `gpukit cache` and `gpukit explain`: what the runtime
// found (versions, devices, plugin manifests), the JIT's disk cache, and how one op call
// would be dispatched.
#ifndef GPUKIT_BINDINGS_CLI_INFO_H_
#define GPUKIT_BINDINGS_CLI_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli_common.h"

namespace gk::cli {

int cmd_info(const GlobalOptions& g, bool json);
// The JIT's disk cache (gpukit_jit.h): where, how full; `clear` empties it. Needs no runtime.
int cmd_cache(bool clear, bool json);
int cmd_plugins(const GlobalOptions& g, bool json);

struct ExplainOptions {
  std::string op;
  int32_t device = -1;  // -1: gk_device_default
  std::string dtype = "f32";
  std::string out_dtype;
  std::vector<std::string> shapes;
  std::vector<std::string> attrs;
  bool json = false;
};

// The candidates for one op call and why each was taken or refused; 3 when none serves it.
int cmd_explain(const GlobalOptions& g, const ExplainOptions& o);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_INFO_H_
