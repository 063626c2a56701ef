// The host services that capture and replay CUDA graphs of op calls (gk_host_services
// graph_begin, graph_end, graph_launch, graph_release; plugin ABI 1.5). The contract is in
// gpukit_plugin.h; the host context is the plugin's HostContext (plugin_registry.h).
#pragma once

#include "gpukit/gpukit_plugin.h"

namespace gk {

gk_status service_graph_begin(void* context, int32_t device, void* stream);
gk_status service_graph_end(void* context, int32_t device, void* stream, void** graph);
gk_status service_graph_launch(void* context, void* graph, void* stream);
void service_graph_release(void* context, void* graph);

}  // namespace gk
