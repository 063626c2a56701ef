// Running an op by name inside the core: what gk_op_call does, for callers that hold the
// runtime already (the host's op-call service of model plugins).
#pragma once

#include "gpukit/gpukit.h"
#include "gpukit/gpukit_plugin.h"
#include "memory/charge_scope.h"
#include "runtime/objects.h"

namespace gk {

class Runtime;

// A launch on a scheduler task's stream (an op's, a JIT kernel's): checked and paced
// before, charged to the task (outputs and plugin scratch) during, recorded as in flight
// after.
class TaskLaunch {
 public:
  TaskLaunch(Runtime& runtime, gk_stream& stream)
      : runtime_(runtime),
        stream_(stream),
        charge_(stream.task ? stream.task->owner : nullptr) {
    if (stream.task) runtime.scheduler().before_launch(*stream.task);
  }
  void launched() {
    if (stream_.task) runtime_.scheduler().after_launch(*stream_.task, stream_.native);
  }

 private:
  Runtime& runtime_;
  gk_stream& stream_;
  ChargeScope charge_;
};

// Around a model plugin's call that the core gives a task's stream (a session's step, copy
// or encode): the op calls the plugin makes on that stream's native handle (on the cpu
// device: NULL, as the plugin is given) are the task's, checked, paced, counted and charged
// as gk_op_call on the task's stream is. One per thread; a scope restores the one it hid.
class PluginTaskStream {
 public:
  explicit PluginTaskStream(gk_stream* stream);
  ~PluginTaskStream();
  PluginTaskStream(const PluginTaskStream&) = delete;
  PluginTaskStream& operator=(const PluginTaskStream&) = delete;
  // The task stream of this thread's scope when it is `native` on `device` of `runtime`,
  // else NULL.
  static gk_stream* find(const Runtime& runtime, const Device& device, void* native);

 private:
  gk_stream* hidden_;
};

// gk_op_call's body: checks, dispatches and launches; throws gk::Error on failure.
void call_op(Runtime& runtime, const char* name, const gk_op_args* args);

// The op-call host service: a plugin's views of memory, run as gk_op_call runs tensors.
void host_op_call(Runtime& runtime, const gk_kernel_args* args);

// gk_host_services.op_call, as the runtime wires it into the plugin host (PluginServices):
// host_op_call on the Runtime that is the service's op_call_context.
gk_status op_call_service(void* host_context, const gk_kernel_args* args);

}  // namespace gk
