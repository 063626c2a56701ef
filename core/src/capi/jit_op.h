// A JIT kernel serving a named op (gk_jit_op_register): a PluginRecord of its own, added
// beside the runtime's plugins (RuntimeRecords), whose supports() and launch() apply the
// registration's launch geometry. Dispatch and gk_explain then treat it as a plugin's kernel.
#pragma once

#include <memory>
#include <shared_mutex>
#include <string>

#include "gpukit/gpukit.h"
#include "plugin/plugin_registry.h"

namespace gk {
class Runtime;
}

namespace gk::jit {

struct JitOp {
  PluginRecord record;  // name "jit:<kernel>", manifest: the op, dtypes, device, priority
  std::shared_ptr<Runtime> runtime;  // empty once unregistered
  // Launches and supports() hold it shared; unregistering takes it exclusively, so a
  // kernel is never released under a launch.
  mutable std::shared_mutex mutex;
  gk_jit_kernel* kernel = nullptr;  // one reference; null once unregistered
  int32_t device_id = 0;
  uint32_t block_size = 256;
};

// Registers `kernel` (which must belong to `runtime`) for `op` on the kernel's device and
// returns the registration. Does not require the kernel to be loaded (the C entry point
// does), so the core's tests can register a kernel of the cpu device and watch dispatch.
JitOp* register_op(Runtime& runtime, const char* op, gk_jit_kernel* kernel,
                   const gk_jit_op_options& options);

// Unregisters: removes the record from dispatch, empties the dispatch cache and releases the
// kernel. The JitOp itself stays allocated until exit (a call may still hold its record).
void unregister_op(JitOp& op);

}  // namespace gk::jit

struct gk_jit_op {
  gk::jit::JitOp* op;
};
