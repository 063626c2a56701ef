// `gpukit weights`: a weight set's tensors, totals and metadata (gk_weights_*), in a table
// that fits 100 columns, or whole as JSON. --device / --dtype also load every tensor.
#ifndef GPUKIT_BINDINGS_CLI_WEIGHTS_H_
#define GPUKIT_BINDINGS_CLI_WEIGHTS_H_

#include <string>

#include "cli_common.h"

namespace gk::cli {

struct WeightsOptions {
  std::string path;
  std::string device;  // "" = list only
  std::string dtype;   // "" = as stored
  bool json = false;
};

int cmd_weights(const GlobalOptions& g, const WeightsOptions& o);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_WEIGHTS_H_
