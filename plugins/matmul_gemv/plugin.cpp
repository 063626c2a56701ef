// matmul_gemv plugin: skinny bf16/f16 matmul (M = 1, weights K-contiguous) through
// kernels/matmul/gemv.cu, on any SM from 80 up; it declines every other product, which then
// goes to cuBLASLt or the GEMM plugins. The only exported symbol is gk_plugin_entry; every
// entry point catches.
#include <cuda_runtime.h>

#include <exception>
#include <string>

#include "gemv.cuh"
#include "gpukit/gpukit_plugin.h"
#include "matmul_host_glue.h"

namespace {

using gk::matmul::MatmulProblem;

struct State {
  const gk_host_services* host;
};

gk_status plugin_init(const gk_host_services* host, void** state) {
  try {
    *state = new State{host};
    return GK_OK;
  } catch (...) {
    gk::matmul::report(host, "matmul_gemv init: out of memory");
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
    if (!gk::matmul::describe_call(s->host, args, 80, 999, &dev, &p, &why) ||
        !gk::matmul::gemv_can_implement(p, &why)) {
      gk::matmul::write_reason(reason, capacity, why);
      return GK_UNIMPLEMENTED;
    }
    return GK_OK;
  } catch (const std::exception& e) {
    gk::matmul::write_reason(reason, capacity, std::string("matmul_gemv: ") + e.what());
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
    if (!gk::matmul::describe_call(s->host, args, 80, 999, &dev, &p, &why) ||
        !gk::matmul::gemv_can_implement(p, &why)) {
      gk::matmul::report(s->host, "matmul: " + why);
      return GK_INVALID_ARGUMENT;
    }
    cudaError_t err = cudaSetDevice(dev.ordinal);
    if (err == cudaSuccess) err = gk::matmul::gemv_run(p, static_cast<cudaStream_t>(args->stream));
    if (err != cudaSuccess) {
      gk::matmul::report(s->host, std::string("matmul: ") + cudaGetErrorString(err));
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

const gk_plugin_api kApi = {sizeof(gk_plugin_api), GK_PLUGIN_ABI_VERSION, "matmul_gemv", "0.1.0",
                            plugin_init, plugin_shutdown, plugin_supports, plugin_launch};

}  // namespace

extern "C" GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                                      const gk_plugin_api** api) {
  const gk_status status = gk_plugin_check_host(host, "matmul_gemv");
  if (status == GK_OK) *api = &kApi;
  return status;
}
