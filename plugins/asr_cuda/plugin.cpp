// asr_cuda: the asr ops (log_mel_spectrogram) on CUDA SM 80+, with cuFFT. Exports
// gk_plugin_entry only. Every entry point catches C++ exceptions; CUDA runs on the device's
// primary context through the statically linked runtime.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "asr/log_mel.cuh"
#include "asr/mel_params.h"
#include "cuda_device_guard.h"
#include "gpukit/gpukit_plugin.h"

namespace gk::plugins::asr_cuda {
namespace {

namespace ka = gk::kernels::asr;

constexpr const char* kOp = "log_mel_spectrogram";

struct State {
  const gk_host_services* host;
};

void write_reason(const std::string& why, char* reason, size_t capacity) {
  if (reason == nullptr || capacity == 0) return;
  std::snprintf(reason, capacity, "%s", why.c_str());
}

void report(const gk_host_services* host, const std::string& msg) {
  if (host && host->report_error) host->report_error(host->host_context, msg.c_str());
}

std::string shape_text(const gk_plugin_tensor& t) {
  std::string s = "[";
  for (int32_t d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + "]";
}

// The call as a kernel problem, or false with `why` naming the argument and value.
bool resolve(const gk_kernel_args* args, ka::LogMelProblem* p, asr::MelParams* mel,
             std::string* why) {
  if (args->num_inputs != 1 || args->num_outputs != 1 || args->inputs == nullptr ||
      args->outputs == nullptr) {
    *why = std::string(kOp) + ": expected 1 input and 1 output";
    return false;
  }
  const gk_plugin_tensor& audio = args->inputs[0];
  const gk_plugin_tensor& out = args->outputs[0];
  if (audio.dtype != GK_DTYPE_F32 || out.dtype != GK_DTYPE_F32) {
    *why = std::string(kOp) + ": asr_cuda serves f32 audio and output only";
    return false;
  }
  *mel = asr::read_mel(args->attrs, args->num_attrs);
  const asr::MelProblem problem = asr::check_mel(*mel);
  if (!problem.attr.empty()) {
    *why = std::string(kOp) + ": attribute '" + problem.attr + "' " + problem.problem;
    return false;
  }
  if ((audio.ndim != 1 && audio.ndim != 2) || out.ndim != audio.ndim + 1) {
    *why = std::string(kOp) + ": input 'audio' " + shape_text(audio) + " and output 'out' " +
           shape_text(out) + " are not [samples] -> [n_mels, frames] or [batch, samples] -> " +
           "[batch, n_mels, frames]";
    return false;
  }
  p->batch = audio.ndim == 2 ? audio.shape[0] : 1;
  p->samples = audio.shape[audio.ndim - 1];
  p->row_stride = audio.ndim == 2 ? audio.strides[0] : p->samples;
  p->n_fft = mel->n_fft;
  p->hop = mel->hop_length;
  p->n_mels = mel->n_mels;
  p->frames = mel->frames(p->samples);
  if (audio.strides[audio.ndim - 1] != 1 || p->row_stride < 0) {
    *why = std::string(kOp) + ": asr_cuda reads audio rows with unit stride; input 'audio' " +
           shape_text(audio) + " has a sample stride of " +
           std::to_string(audio.strides[audio.ndim - 1]) + " (copy it contiguous first)";
    return false;
  }
  if (p->samples <= p->n_fft / 2 || p->frames < 1) {
    *why = std::string(kOp) + ": input 'audio' has " + std::to_string(p->samples) +
           " samples; more than n_fft / 2 and at least one hop are needed";
    return false;
  }
  const bool out_ok = (audio.ndim == 1 || out.shape[0] == p->batch) &&
                      out.shape[out.ndim - 2] == p->n_mels && out.shape[out.ndim - 1] == p->frames;
  int64_t expected = 1;
  bool contiguous = true;
  for (int32_t d = out.ndim - 1; d >= 0; --d) {
    if (out.shape[d] != 1 && out.strides[d] != expected) contiguous = false;
    expected *= out.shape[d];
  }
  if (!out_ok || !contiguous) {
    *why = std::string(kOp) + ": output 'out' " + shape_text(out) +
           " must be contiguous [" + (audio.ndim == 2 ? std::to_string(p->batch) + ", " : "") +
           std::to_string(p->n_mels) + ", " + std::to_string(p->frames) + "]";
    return false;
  }
  if (const char* refusal = ka::log_mel_can_implement(*p)) {
    *why = std::string(kOp) + ": " + refusal;
    return false;
  }
  return true;
}

gk_status init(const gk_host_services* host, void** state) {
  try {
    *state = new State{host};
    return GK_OK;
  } catch (...) {
    report(host, "asr_cuda init: out of memory");
    return GK_INTERNAL;
  }
}

void shutdown(void* state) {
  delete static_cast<State*>(state);
}

gk_status supports(void* /*state*/, const gk_kernel_args* args, char* reason,
                   size_t reason_capacity) {
  try {
    if (args == nullptr || args->op == nullptr || std::strcmp(args->op, kOp) != 0) {
      write_reason(std::string(args && args->op ? args->op : "(null)") +
                       ": op is not served by asr_cuda",
                   reason, reason_capacity);
      return GK_UNIMPLEMENTED;
    }
    ka::LogMelProblem p{};
    asr::MelParams mel;
    std::string why;
    if (!resolve(args, &p, &mel, &why)) {
      write_reason(why, reason, reason_capacity);
      return GK_UNIMPLEMENTED;
    }
    return GK_OK;
  } catch (const std::exception& e) {
    write_reason(std::string("asr_cuda supports: ") + e.what(), reason, reason_capacity);
    return GK_UNIMPLEMENTED;
  }
}

gk_status launch(void* state, const gk_kernel_args* args) {
  const gk_host_services* host = static_cast<State*>(state)->host;
  const std::string op = args && args->op ? args->op : "(null)";
  void* workspace = nullptr;
  try {
    ka::LogMelProblem p{};
    asr::MelParams mel;
    std::string why;
    if (op != kOp || !resolve(args, &p, &mel, &why)) {
      report(host, why.empty() ? op + ": not served by asr_cuda" : why);
      return GK_INVALID_ARGUMENT;
    }
    gk_plugin_device dev;
    std::memset(&dev, 0, sizeof(dev));
    dev.struct_size = sizeof(dev);
    gk_status st = host->device_info(host->host_context, args->device, &dev);
    if (st != GK_OK) {
      report(host, op + ": device_info for device " + std::to_string(args->device) + " failed");
      return st;
    }
    DeviceGuard guard;
    cudaError_t err = guard.enter(dev.ordinal);
    if (err != cudaSuccess) {
      report(host, op + ": cudaSetDevice(" + std::to_string(dev.ordinal) +
                       ") failed: " + cudaGetErrorString(err));
      return GK_INTERNAL;
    }
    const size_t bytes = ka::log_mel_workspace_bytes(p);
    st = host->alloc(host->host_context, args->device, bytes, args->stream, &workspace);
    if (st != GK_OK) {
      report(host, op + ": workspace of " + std::to_string(bytes) +
                       " bytes (frames, spectra, filterbank) could not be allocated");
      return st;
    }
    const std::vector<double> filters64 = asr::slaney_mel_filters(mel);
    const std::vector<float> filters(filters64.begin(), filters64.end());
    const char* what = "";
    err = ka::launch_log_mel(p, static_cast<const float*>(args->inputs[0].data), filters.data(),
                             static_cast<float*>(args->outputs[0].data), workspace,
                             static_cast<cudaStream_t>(args->stream), &what);
    host->free(host->host_context, args->device, workspace, args->stream);
    if (err != cudaSuccess) {
      report(host, op + ": " + what + " failed: " + cudaGetErrorString(err));
      return GK_INTERNAL;
    }
    return GK_OK;
  } catch (const std::exception& e) {
    if (workspace) host->free(host->host_context, args->device, workspace, args->stream);
    report(host, op + ": " + e.what());
    return GK_INTERNAL;
  }
}

const gk_plugin_api kApi = {
    sizeof(gk_plugin_api), GK_PLUGIN_ABI_VERSION, "asr_cuda", "0.1.0",
    init,                  shutdown,              supports,   launch,
};

}  // namespace
}  // namespace gk::plugins::asr_cuda

extern "C" GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                                      const gk_plugin_api** api) {
  using gk::plugins::asr_cuda::kApi;
  if (api == nullptr) return GK_INVALID_ARGUMENT;
  const gk_status status = gk_plugin_check_host(host, "asr_cuda");
  if (status == GK_OK) *api = &kApi;
  return status;
}
