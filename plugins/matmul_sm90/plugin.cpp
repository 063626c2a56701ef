// matmul_sm90 plugin: bf16/f16/tf32 matmul on Hopper through sm90_gemm_tma_ws (wgmma + TMA).
// The only exported symbol is gk_plugin_entry; every entry point catches.
#include <cuda_runtime.h>

#include <exception>
#include <string>

#include "gpukit/gpukit_plugin.h"
#include "matmul_host_glue.h"
#include "sm90_gemm_tma_ws.cuh"

namespace {

using gk::matmul::MatmulProblem;

struct State {
  const gk_host_services* host;
  gk::matmul::TensorMapEncodeFn encode;
};

gk_status plugin_init(const gk_host_services* host, void** state) {
  try {
    void* fn = nullptr;
    if (host->cuda_driver_symbol(host->host_context, "cuTensorMapEncodeTiled", &fn) != GK_OK ||
        !fn) {
      gk::matmul::report(host, "the CUDA driver has no cuTensorMapEncodeTiled (TMA needs 12.0+)");
      return GK_UNAVAILABLE;
    }
    *state = new State{host, reinterpret_cast<gk::matmul::TensorMapEncodeFn>(fn)};
    return GK_OK;
  } catch (const std::exception& e) {
    gk::matmul::report(host, std::string("matmul_sm90 init: ") + e.what());
    return GK_INTERNAL;
  } catch (...) {
    return GK_INTERNAL;
  }
}

void plugin_shutdown(void* state) { delete static_cast<State*>(state); }

gk_status plugin_supports(void* state, const gk_kernel_args* args, char* reason,
                          size_t capacity) {
  try {
    const State* s = static_cast<const State*>(state);
    gk_plugin_device dev;
    MatmulProblem p;
    std::string why;
    if (!gk::matmul::describe_call(s->host, args, 90, 90, &dev, &p, &why) ||
        !gk::matmul::sm90_gemm_can_implement(p, s->encode, &why)) {
      gk::matmul::write_reason(reason, capacity, why);
      return GK_UNIMPLEMENTED;
    }
    return GK_OK;
  } catch (const std::exception& e) {
    gk::matmul::write_reason(reason, capacity, std::string("matmul_sm90: ") + e.what());
    return GK_UNIMPLEMENTED;
  } catch (...) {
    return GK_UNIMPLEMENTED;
  }
}

gk_status plugin_launch(void* state, const gk_kernel_args* args) {
  const State* s = static_cast<const State*>(state);
  try {
    gk_plugin_device dev;
    MatmulProblem p;
    std::string why;
    if (!gk::matmul::describe_call(s->host, args, 90, 90, &dev, &p, &why)) {
      gk::matmul::report(s->host, "matmul: " + why);
      return GK_INVALID_ARGUMENT;
    }
    cudaError_t err = cudaSetDevice(dev.ordinal);
    if (err == cudaSuccess)
      err = gk::matmul::sm90_gemm_run(p, s->encode, dev.sm_count,
                                      static_cast<cudaStream_t>(args->stream), &why);
    if (err != cudaSuccess) {
      gk::matmul::report(s->host, "matmul: " + (why.empty() ? std::string(cudaGetErrorString(err)) : why));
      return GK_INTERNAL;
    }
    return GK_OK;
  } catch (const std::exception& e) {
    gk::matmul::report(s->host, std::string("matmul: ") + e.what());
    return GK_INTERNAL;
  } catch (...) {
    return GK_INTERNAL;
  }
}

const gk_plugin_api kApi = {sizeof(gk_plugin_api), GK_PLUGIN_ABI_VERSION, "matmul_sm90", "0.1.0",
                            plugin_init, plugin_shutdown, plugin_supports, plugin_launch};

}  // namespace

extern "C" GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                                      const gk_plugin_api** api) {
  const gk_status status = gk_plugin_check_host(host, "matmul_sm90");
  if (status == GK_OK) *api = &kApi;
  return status;
}
