// Picks the plugin that runs a call: the plugins whose manifests list the op for this
// device and dtype, highest priority first; the first whose supports() accepts wins.
// Every rejected candidate keeps its reason, for errors and for gk_explain.
#pragma once

#include <string>
#include <vector>

#include "gpukit/gpukit_plugin.h"
#include "plugin/plugin_registry.h"

namespace gk {

struct Device;

struct DispatchCandidate {
  const PluginRecord* plugin;
  bool accepted = false;
  std::string reason;
};

struct DispatchDecision {
  const PluginRecord* chosen = nullptr;
  std::vector<DispatchCandidate> candidates;

  // "no plugin accepts …: cpu: reason; matmul_sm90: reason".
  std::string refusal_text(const std::string& op, const Device& device) const;
};

// With `every_candidate`, keeps asking after the choice (for explain); otherwise stops
// at the first plugin that accepts, and `candidates` then holds only the plugins that
// declined before it (every one of them when none accepts, for refusal_text).
DispatchDecision decide(const PluginRegistry& plugins, const Device& device,
                        const gk_kernel_args& args, bool every_candidate);

}  // namespace gk
