// matmul_host_glue.h — the host side the matmul plugins share: device lookup, the call as
// a MatmulProblem, error reporting. Header-only; the plugins' entry points (the plugin SDK,
// gpukit_plugin.hpp) catch what problem_or_fail throws.
#ifndef GPUKIT_KERNELS_MATMUL_MATMUL_HOST_GLUE_H_
#define GPUKIT_KERNELS_MATMUL_MATMUL_HOST_GLUE_H_

#include <cstring>
#include <string>

#include "gpukit/gpukit_plugin.h"
#include "gpukit/gpukit_plugin.hpp"
#include "matmul_problem.h"

namespace gk::matmul {

// The entry's half of version negotiation: accept only if the host takes our ABI.
inline void report(const gk_host_services* host, const std::string& msg) {
  if (host && host->report_error) host->report_error(host->host_context, msg.c_str());
}

// Looks up the device of a call. False (with *why) when it is no CUDA device whose SM
// lies in [sm_min, sm_max].
inline bool call_device(const gk_host_services* host, const gk_kernel_args* args, int sm_min,
                        int sm_max, gk_plugin_device* dev, std::string* why) {
  std::memset(dev, 0, sizeof(*dev));
  dev->struct_size = sizeof(*dev);
  if (host->device_info(host->host_context, args->device, dev) != GK_OK) {
    *why = "no device info for device " + std::to_string(args->device);
    return false;
  }
  if (dev->kind != GK_DEVICE_KIND_CUDA) {
    *why = "not a CUDA device";
    return false;
  }
  if (dev->sm_version < sm_min || dev->sm_version > sm_max) {
    *why = "SM " + std::to_string(dev->sm_version) + " is outside " + std::to_string(sm_min) +
           ".." + std::to_string(sm_max);
    return false;
  }
  return true;
}

// Common front of supports()/launch(): op name, device, problem.
inline bool describe_call(const gk_host_services* host, const gk_kernel_args* args, int sm_min,
                          int sm_max, gk_plugin_device* dev, MatmulProblem* p,
                          std::string* why) {
  if (!args || args->struct_size < GK_KERNEL_ARGS_SIZE || !args->op ||
      std::strcmp(args->op, "matmul") != 0) {
    *why = std::string("serves op matmul only, not '") + (args && args->op ? args->op : "?") +
           "'";
    return false;
  }
  return call_device(host, args, sm_min, sm_max, dev, why) && parse_matmul_args(args, p, why);
}

// describe_call for launch(): the problem, or the plugin SDK's Failure (INVALID_ARGUMENT).
inline MatmulProblem problem_or_fail(const gk_host_services* host, const gk_kernel_args& args,
                                     int sm_min, int sm_max, gk_plugin_device* dev) {
  MatmulProblem p;
  std::string why;
  if (!describe_call(host, &args, sm_min, sm_max, dev, &p, &why)) {
    gk::plugin::fail(GK_INVALID_ARGUMENT, why);
  }
  return p;
}

}  // namespace gk::matmul

#endif  // GPUKIT_KERNELS_MATMUL_MATMUL_HOST_GLUE_H_
