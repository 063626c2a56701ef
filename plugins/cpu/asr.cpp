// The asr ops' reference: log_mel_spectrogram (docs/ops.md, "ASR ops"; docs/asr.md).
//
// Whisper's front end, in f64 throughout: reflect-pad each item by n_fft / 2, window each
// frame with the periodic Hann window, take its one-sided power spectrum with FFTW, project
// it on the Slaney mel filterbank (kernels/asr/mel_params.h), take log10 above 1e-10, floor
// at 8 below the item's maximum and map x to (x + 4) / 4. The last STFT frame is dropped,
// as Whisper does.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "asr/mel_params.h"
#include "cpu_ops.h"

namespace gk::cpu {
namespace {

// FFTW's planner is not thread-safe; executing a plan on new arrays is. Plans are made once
// per size, under this lock, and kept for the process.
class FftPlans {
 public:
  fftw_plan real_to_complex(int64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(n);
    if (it != plans_.end()) return it->second;
    double* in = fftw_alloc_real(size_t(n));
    fftw_complex* out = fftw_alloc_complex(size_t(n / 2 + 1));
    fftw_plan plan = fftw_plan_dft_r2c_1d(int(n), in, out, FFTW_ESTIMATE);
    fftw_free(in);
    fftw_free(out);
    plans_.emplace(n, plan);
    return plan;
  }

 private:
  std::mutex mutex_;
  std::map<int64_t, fftw_plan> plans_;
};

FftPlans& plans() {
  static FftPlans* p = new FftPlans();  // never destroyed: plans may run until exit
  return *p;
}

struct FftwFree {
  void operator()(void* p) const { fftw_free(p); }
};

gk_status check_log_mel(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 1, 1, 1, message)) return s;
  if (gk_status s = check_dtype(args, args.inputs[0], "input 'audio'", {GK_DTYPE_F32}, message))
    return s;
  if (gk_status s = check_dtype(args, args.outputs[0], "output 'out'", {GK_DTYPE_F32}, message))
    return s;
  const asr::MelProblem problem = asr::check_mel(asr::read_mel(args.attrs, args.num_attrs));
  if (!problem.attr.empty()) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': attribute '", problem.attr,
                "' ", problem.problem);
  }
  return GK_OK;
}

gk_status run_log_mel(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_log_mel(args, message)) return s;
  const gk_plugin_tensor& audio = args.inputs[0];
  const gk_plugin_tensor& out = args.outputs[0];
  const asr::MelParams p = asr::read_mel(args.attrs, args.num_attrs);
  if (audio.ndim != 1 && audio.ndim != 2) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'audio' has shape ",
                shape_string(audio), "; expected [samples] or [batch, samples]");
  }
  const int64_t batch = audio.ndim == 2 ? audio.shape[0] : 1;
  const int64_t samples = audio.shape[audio.ndim - 1];
  const int64_t pad = p.n_fft / 2;
  if (samples <= pad || samples < p.hop_length) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'audio' has ",
                samples, " samples; at least ", std::max(pad + 1, p.hop_length), " needed");
  }
  const int64_t frames = p.frames(samples);
  const bool shape_ok = out.ndim == audio.ndim + 1 &&
                        (audio.ndim == 1 || out.shape[0] == batch) &&
                        out.shape[out.ndim - 2] == p.n_mels && out.shape[out.ndim - 1] == frames;
  if (!shape_ok) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': output 'out' has shape ",
                shape_string(out), "; expected ", audio.ndim == 2 ? cat("[", batch, ", ") : "[",
                p.n_mels, ", ", frames, "]");
  }
  if (gk_status s = check_data(args, audio, "input 'audio'", message)) return s;
  if (gk_status s = check_data(args, out, "output 'out'", message)) return s;

  const int64_t bins = p.bins();
  const std::vector<double> window = asr::hann_window(p.n_fft);
  const std::vector<double> filters = asr::slaney_mel_filters(p);
  fftw_plan plan = plans().real_to_complex(p.n_fft);
  std::unique_ptr<double, FftwFree> frame(fftw_alloc_real(size_t(p.n_fft)));
  std::unique_ptr<fftw_complex, FftwFree> spectrum(fftw_alloc_complex(size_t(bins)));
  std::vector<double> padded(static_cast<size_t>(samples + 2 * pad));
  std::vector<double> power(static_cast<size_t>(bins));
  std::vector<double> log_mel(static_cast<size_t>(p.n_mels * frames));
  const int64_t a_item = audio.ndim == 2 ? audio.strides[0] : 0;
  const int64_t a_step = audio.strides[audio.ndim - 1];
  const int64_t o_item = out.ndim == 3 ? out.strides[0] : 0;
  const int64_t o_mel = out.strides[out.ndim - 2], o_frame = out.strides[out.ndim - 1];

  for (int64_t b = 0; b < batch; ++b) {
    const float* x = static_cast<const float*>(audio.data) + b * a_item;
    // torch.nn.functional.pad(mode="reflect"): the edge sample is not repeated.
    for (int64_t i = 0; i < samples + 2 * pad; ++i) {
      int64_t j = i - pad;
      if (j < 0) j = -j;
      if (j >= samples) j = 2 * (samples - 1) - j;
      padded[size_t(i)] = double(x[j * a_step]);
    }
    double item_max = -INFINITY;
    for (int64_t t = 0; t < frames; ++t) {
      for (int64_t i = 0; i < p.n_fft; ++i) {
        frame.get()[i] = padded[size_t(t * p.hop_length + i)] * window[size_t(i)];
      }
      fftw_execute_dft_r2c(plan, frame.get(), spectrum.get());
      for (int64_t k = 0; k < bins; ++k) {
        const double re = spectrum.get()[k][0], im = spectrum.get()[k][1];
        power[size_t(k)] = re * re + im * im;
      }
      for (int64_t m = 0; m < p.n_mels; ++m) {
        const double* row = filters.data() + m * bins;
        double energy = 0.0;
        for (int64_t k = 0; k < bins; ++k) energy += row[k] * power[size_t(k)];
        const double value = std::log10(std::max(energy, std::pow(10.0, asr::kLogFloor)));
        log_mel[size_t(m * frames + t)] = value;
        item_max = std::max(item_max, value);
      }
    }
    float* y = static_cast<float*>(out.data) + b * o_item;
    for (int64_t m = 0; m < p.n_mels; ++m) {
      for (int64_t t = 0; t < frames; ++t) {
        y[m * o_mel + t * o_frame] =
            float(asr::scale_log_mel(log_mel[size_t(m * frames + t)], item_max));
      }
    }
  }
  return GK_OK;
}

constexpr OpDef kOps[] = {
    {"log_mel_spectrogram", &check_log_mel, &run_log_mel},
};

}  // namespace

std::span<const OpDef> asr_ops() {
  return kOps;
}

}  // namespace gk::cpu
