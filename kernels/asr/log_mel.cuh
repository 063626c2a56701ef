// log_mel_spectrogram on CUDA: Whisper's features (kernels/asr/mel_params.h states the math)
// for a batch of contiguous f32 rows, with cuFFT for the spectra.
//
//   for item b, frame t (grid: one thread per frame sample):       frame_kernel
//     frames[b, t, i] = reflect_pad(audio[b])[t * hop + i] * hann[i]      (global memory)
//   cufftExecR2C over the B * T frames (one batched plan, cached)    spectra [B, T, bins]
//   for item b, frame t (grid: one block per (b, t), threads over mels):   mel_kernel
//     power[k] = |spectra[b, t, k]|^2 staged in shared memory (bins floats)
//     out[b, m, t] = log10(max(sum_k filters[m, k] * power[k], 1e-10))
//   per item b (one block per item):                                  item_max_kernel
//     max_b = max over m, t of out[b, m, t]   (block reduction in shared memory)
//   every element:                                                    scale_kernel
//     out = (max(out, max_b - 8) + 4) / 4
//
// The workspace holds the frames, the spectra, the filterbank (f32, uploaded per call) and
// the per-item maxima; log_mel_workspace_bytes says how much.
#pragma once

#include <cuda_runtime_api.h>
#include <cufft.h>

#include <cstddef>
#include <cstdint>

namespace gk::kernels::asr {

struct LogMelProblem {
  int64_t batch;
  int64_t samples;      // per item; rows are contiguous, `row_stride` floats apart
  int64_t row_stride;
  int64_t n_fft;
  int64_t hop;
  int64_t n_mels;
  int64_t frames;       // samples / hop
#if defined(__CUDACC__)
  __host__ __device__
#endif
  int64_t bins() const { return n_fft / 2 + 1; }
};

// Bytes of workspace for `p`, each part 256-byte aligned.
size_t log_mel_workspace_bytes(const LogMelProblem& p);

// Why a problem cannot run here (a cuFFT size limit), or nullptr.
const char* log_mel_can_implement(const LogMelProblem& p);

// Runs the op on `stream`: `audio` [batch, samples] (row_stride apart), `filters_host` the
// [n_mels, bins] filterbank in f32 (copied during the call), `out` [batch, n_mels, frames]
// contiguous. `what` receives the failing call's name on error.
cudaError_t launch_log_mel(const LogMelProblem& p, const float* audio,
                           const float* filters_host, float* out, void* workspace,
                           cudaStream_t stream, const char** what);

}  // namespace gk::kernels::asr
