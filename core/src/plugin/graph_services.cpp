// The host services graph_begin .. graph_release (plugin ABI 1.5): CUDA graphs of op calls.
// The capture itself is the driver's; what the host adds is memory: the scratch freed on the
// capturing stream is held for the graph (DeviceMemory::begin_capture), since every replay
// uses those addresses again.
#include "plugin/graph_services.h"

#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "device/device.h"
#include "memory/device_memory.h"
#include "plugin/plugin_registry.h"

namespace gk {
namespace {

struct CapturedGraph {
  const Device* device = nullptr;
  cuda::CUgraphExec exec = nullptr;
  std::vector<void*> held;  // scratch the captured kernels use, freed with the graph
  cuda::CUstream last_stream = nullptr;
  bool launched = false;
};

const PluginServices& services(void* context) {
  return static_cast<HostContext*>(context)->services;
}

const Device& cuda_device(const PluginServices& s, int32_t device, const char* function) {
  const Device& d = s.devices->at(device);
  if (!d.is_cuda() || !s.devices->driver()) {
    fail(GK_UNIMPLEMENTED, std::string(function) + ": device " + std::to_string(device) +
                               " is not a CUDA device; graphs of op calls need one");
  }
  return d;
}

void free_held(const PluginServices& s, const Device& d, std::vector<void*>& held,
               cuda::CUstream stream) {
  for (void* p : held) s.memory->deallocate(d, p, stream);
  held.clear();
}

}  // namespace

gk_status service_graph_begin(void* context, int32_t device, void* stream) {
  return c_guard([&] {
    const PluginServices& s = services(context);
    const Device& d = cuda_device(s, device, "host.graph_begin");
    if (!stream) {
      fail(GK_INVALID_ARGUMENT,
           "host.graph_begin: the legacy default stream cannot be captured; pass a stream the "
           "plugin created");
    }
    auto native = static_cast<cuda::CUstream>(stream);
    const cuda::Driver& driver = *s.devices->driver();
    s.memory->begin_capture(native);
    cuda::ContextGuard guard(driver, d.context);
    const cuda::CUresult r =
        driver.api().cuStreamBeginCapture(native, cuda::kStreamCaptureModeRelaxed);
    if (r != cuda::kSuccess) {
      s.memory->end_capture(native);
      fail(GK_INTERNAL, "host.graph_begin: cuStreamBeginCapture failed: " + driver.error_text(r));
    }
  });
}

gk_status service_graph_end(void* context, int32_t device, void* stream, void** graph) {
  return c_guard([&] {
    const PluginServices& s = services(context);
    const Device& d = cuda_device(s, device, "host.graph_end");
    require_arg(graph, "host.graph_end", "graph");
    *graph = nullptr;
    auto native = static_cast<cuda::CUstream>(stream);
    const cuda::Driver& driver = *s.devices->driver();
    auto out = std::make_unique<CapturedGraph>();
    out->device = &d;
    out->held = s.memory->end_capture(native);
    cuda::ContextGuard guard(driver, d.context);
    cuda::CUgraph g = nullptr;
    cuda::CUresult r = driver.api().cuStreamEndCapture(native, &g);
    if (r == cuda::kSuccess && g) {
      r = driver.api().cuGraphInstantiateWithFlags(&out->exec, g, 0);
      driver.api().cuGraphDestroy(g);
      if (r == cuda::kSuccess) {
        *graph = out.release();
        return;
      }
    }
    // Nothing captured ran: the held memory is free at once.
    free_held(s, d, out->held, native);
    const std::string why =
        "host.graph_end: the capture failed (" + driver.error_text(r) +
        "): an op in it synchronized, waited on work outside it, or failed";
    s.logger->warning(why);
    fail(GK_INTERNAL, why);
  });
}

gk_status service_graph_launch(void* context, void* graph, void* stream) {
  return c_guard([&] {
    require_arg(graph, "host.graph_launch", "graph");
    const PluginServices& s = services(context);
    auto* g = static_cast<CapturedGraph*>(graph);
    const cuda::Driver& driver = *s.devices->driver();
    cuda::ContextGuard guard(driver, g->device->context);
    auto native = static_cast<cuda::CUstream>(stream);
    const cuda::CUresult r = driver.api().cuGraphLaunch(g->exec, native);
    if (r != cuda::kSuccess) {
      const std::string why = "host.graph_launch: cuGraphLaunch failed: " + driver.error_text(r);
      s.logger->warning(why);
      fail(GK_INTERNAL, why);
    }
    g->last_stream = native;
    g->launched = true;
  });
}

void service_graph_release(void* context, void* graph) {
  if (!graph) return;
  const PluginServices& s = services(context);
  std::unique_ptr<CapturedGraph> g(static_cast<CapturedGraph*>(graph));
  const cuda::Driver& driver = *s.devices->driver();
  cuda::ContextGuard guard(driver, g->device->context);
  // Its kernels may still run on the stream of the last launch: they use the held memory.
  if (g->launched) driver.api().cuStreamSynchronize(g->last_stream);
  driver.api().cuGraphExecDestroy(g->exec);
  try {
    free_held(s, *g->device, g->held, g->last_stream);
  } catch (const std::exception& e) {
    s.logger->warning(std::string("host.graph_release: ") + e.what());
  }
}

}  // namespace gk
