// `gpukit tasks`: the scheduler's view of a demo. Tasks belong to the process that made them,
// so this command makes four in its own process and shows gk_scheduler_json for them.
#ifndef GPUKIT_BINDINGS_CLI_TASKS_H_
#define GPUKIT_BINDINGS_CLI_TASKS_H_

#include <cstdint>

#include "cli_common.h"

namespace gk::cli {

// `device_option` -1: gk_device_default.
int cmd_tasks(const GlobalOptions& g, int32_t device_option, bool json);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_TASKS_H_
