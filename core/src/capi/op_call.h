// Running an op by name inside the core: what gk_op_call does, for callers that hold the
// runtime already (the host's op-call service of model plugins).
#pragma once

#include "gpukit/gpukit.h"
#include "gpukit/gpukit_plugin.h"

namespace gk {

class Runtime;

// gk_op_call's body: checks, dispatches and launches; throws gk::Error on failure.
void call_op(Runtime& runtime, const char* name, const gk_op_args* args);

// The op-call host service: a plugin's views of memory, run as gk_op_call runs tensors.
void host_op_call(Runtime& runtime, const gk_kernel_args* args);

}  // namespace gk
