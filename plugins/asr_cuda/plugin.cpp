// asr_cuda: the asr ops (log_mel_spectrogram) on CUDA SM 80+, with cuFFT, a plugin SDK class
// (gpukit_plugin.hpp). CUDA runs on the device's primary context through the statically
// linked runtime.
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <vector>

#include "asr/log_mel.cuh"
#include "asr/mel_params.h"
#include "cuda_device_guard.h"
#include "gpukit/gpukit_plugin.hpp"

namespace gk::plugins::asr_cuda {
namespace {

namespace ka = gk::kernels::asr;

constexpr const char* kOp = "log_mel_spectrogram";

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

// The pool memory of one launch, returned stream-ordered when it goes out of scope.
class Workspace {
 public:
  Workspace(const gk_host_services* host, const gk_kernel_args& args, size_t bytes)
      : host_(host), args_(args) {
    if (host->alloc(host->host_context, args.device, bytes, args.stream, &data_) != GK_OK) {
      gk::plugin::fail(GK_RESOURCE_EXHAUSTED,
                       "workspace of " + std::to_string(bytes) +
                           " bytes (frames, spectra, filterbank) could not be allocated");
    }
  }
  ~Workspace() { host_->free(host_->host_context, args_.device, data_, args_.stream); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* data() const { return data_; }

 private:
  const gk_host_services* host_;
  const gk_kernel_args& args_;
  void* data_ = nullptr;
};

struct AsrCuda {
  static constexpr const char* kName = "asr_cuda";
  static constexpr const char* kVersion = "0.1.0";
  const gk_host_services* host;

  explicit AsrCuda(const gk_host_services* h) : host(h) {}

  bool supports(const gk_kernel_args& args, std::string* why) const {
    if (std::strcmp(args.op, kOp) != 0) {
      *why = std::string(args.op) + ": op is not served by asr_cuda";
      return false;
    }
    ka::LogMelProblem p{};
    asr::MelParams mel;
    return resolve(&args, &p, &mel, why);
  }

  void launch(const gk_kernel_args& args) const {
    ka::LogMelProblem p{};
    asr::MelParams mel;
    std::string why;
    if (std::strcmp(args.op, kOp) != 0) gk::plugin::fail(GK_UNIMPLEMENTED, "not served by asr_cuda");
    if (!resolve(&args, &p, &mel, &why)) gk::plugin::fail(GK_INVALID_ARGUMENT, why);
    const gk_plugin_device dev = gk::plugin::call_device(host, args);
    DeviceGuard guard;
    check_cuda(guard.enter(dev.ordinal), "cudaSetDevice");
    Workspace workspace(host, args, ka::log_mel_workspace_bytes(p));
    const std::vector<double> filters64 = asr::slaney_mel_filters(mel);
    const std::vector<float> filters(filters64.begin(), filters64.end());
    const char* what = "";
    const cudaError_t err = ka::launch_log_mel(
        p, static_cast<const float*>(args.inputs[0].data), filters.data(),
        static_cast<float*>(args.outputs[0].data), workspace.data(),
        static_cast<cudaStream_t>(args.stream), &what);
    check_cuda(err, what);
  }
};

}  // namespace
}  // namespace gk::plugins::asr_cuda

GK_PLUGIN_DEFINE(gk::plugins::asr_cuda::AsrCuda)
