// The log_mel_spectrogram op's attributes and the math every implementation shares: the
// periodic Hann window, the Slaney mel filterbank (librosa.filters.mel with htk=False,
// norm="slaney", the filterbank Whisper ships as mel_filters.npz) and the output length.
//
// Plain C++17 over the public gk_attr: the core's op rule (core/src/dispatch/asr_ops.cpp),
// the cpu plugin and the asr_cuda plugin read attributes and build the tables through these
// functions, so the defaults and the filterbank live in one place. The readers do not
// validate; check_mel says what the rule refuses. docs/asr.md, "Features", states the op.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "llm/llm_params.h"

namespace gk::asr {

// Whisper's front end: 16 kHz, 25 ms windows (400 samples) every 10 ms (160 samples).
struct MelParams {
  int64_t n_mels = 80;
  int64_t n_fft = 400;
  int64_t hop_length = 160;
  int64_t sample_rate = 16000;

  // One-sided spectrum bins per frame.
  int64_t bins() const { return n_fft / 2 + 1; }
  // Frames of `samples` samples: torch.stft with center=True gives 1 + samples / hop, and
  // Whisper drops the last one.
  int64_t frames(int64_t samples) const { return samples / hop_length; }
};

inline constexpr int64_t kMaxMels = 512;
inline constexpr int64_t kMaxFft = 8192;
inline constexpr int64_t kMaxSampleRate = 768000;
// log10 of the smallest power kept, and the dynamic range kept below each item's maximum.
inline constexpr double kLogFloor = -10.0;
inline constexpr double kDynamicRangeLog10 = 8.0;

inline MelParams read_mel(const gk_attr* attrs, int32_t n) {
  MelParams p;
  p.n_mels = llm::attr_int(attrs, n, "n_mels", p.n_mels);
  p.n_fft = llm::attr_int(attrs, n, "n_fft", p.n_fft);
  p.hop_length = llm::attr_int(attrs, n, "hop_length", p.hop_length);
  p.sample_rate = llm::attr_int(attrs, n, "sample_rate", p.sample_rate);
  return p;
}

// What the op rule refuses, as (attribute, problem); an empty attribute when all is well.
struct MelProblem {
  std::string attr;
  std::string problem;
};
inline MelProblem check_mel(const MelParams& p) {
  if (p.n_mels < 1 || p.n_mels > kMaxMels) {
    return {"n_mels", "is " + std::to_string(p.n_mels) + "; expected 1.." +
                          std::to_string(kMaxMels) + " (Whisper: 80, or 128 for large-v3)"};
  }
  if (p.n_fft < 2 || p.n_fft > kMaxFft || p.n_fft % 2 != 0) {
    return {"n_fft", "is " + std::to_string(p.n_fft) + "; expected an even value in 2.." +
                         std::to_string(kMaxFft)};
  }
  if (p.hop_length < 1 || p.hop_length > p.n_fft) {
    return {"hop_length", "is " + std::to_string(p.hop_length) + "; expected 1..n_fft (" +
                              std::to_string(p.n_fft) + ")"};
  }
  if (p.sample_rate < 1 || p.sample_rate > kMaxSampleRate) {
    return {"sample_rate", "is " + std::to_string(p.sample_rate) + "; expected 1.." +
                               std::to_string(kMaxSampleRate) + " Hz"};
  }
  return {};
}

// torch.hann_window(n_fft) (periodic): 0.5 - 0.5 cos(2 pi i / n_fft).
inline std::vector<double> hann_window(int64_t n_fft) {
  std::vector<double> w(static_cast<size_t>(n_fft));
  const double pi = std::acos(-1.0);
  for (int64_t i = 0; i < n_fft; ++i) w[size_t(i)] = 0.5 - 0.5 * std::cos(2.0 * pi * double(i) / double(n_fft));
  return w;
}

// Slaney's mel scale (librosa.hz_to_mel / mel_to_hz with htk=False): linear below 1 kHz,
// logarithmic above.
inline double hz_to_mel_slaney(double hz) {
  const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  return hz >= min_log_hz ? min_log_mel + std::log(hz / min_log_hz) / logstep : hz / f_sp;
}
inline double mel_to_hz_slaney(double mel) {
  const double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  return mel >= min_log_mel ? min_log_hz * std::exp(logstep * (mel - min_log_mel)) : f_sp * mel;
}

// librosa.filters.mel(sr, n_fft, n_mels, fmin=0, fmax=sr/2, htk=False, norm="slaney"):
// row-major [n_mels, n_fft/2 + 1], triangles between n_mels + 2 points equally spaced in mel,
// each scaled by 2 / (its width in Hz) so that every filter has the same area.
inline std::vector<double> slaney_mel_filters(const MelParams& p) {
  const int64_t bins = p.bins();
  const double sr = double(p.sample_rate);
  std::vector<double> fft_hz(static_cast<size_t>(bins));
  for (int64_t k = 0; k < bins; ++k) fft_hz[size_t(k)] = double(k) * (sr / 2.0) / double(bins - 1);
  const double mel_max = hz_to_mel_slaney(sr / 2.0);
  std::vector<double> mel_hz(static_cast<size_t>(p.n_mels + 2));
  for (int64_t i = 0; i < p.n_mels + 2; ++i) {
    mel_hz[size_t(i)] = mel_to_hz_slaney(mel_max * double(i) / double(p.n_mels + 1));
  }
  std::vector<double> filters(size_t(p.n_mels * bins), 0.0);
  for (int64_t m = 0; m < p.n_mels; ++m) {
    const double lo = mel_hz[size_t(m)], mid = mel_hz[size_t(m + 1)], hi = mel_hz[size_t(m + 2)];
    const double enorm = 2.0 / (hi - lo);
    for (int64_t k = 0; k < bins; ++k) {
      const double f = fft_hz[size_t(k)];
      const double rising = (f - lo) / (mid - lo);
      const double falling = (hi - f) / (hi - mid);
      const double w = std::fmax(0.0, std::fmin(rising, falling));
      filters[size_t(m * bins + k)] = w * enorm;
    }
  }
  return filters;
}

// Whisper's scaling of a log10 power: the floor at kDynamicRangeLog10 below the item's
// maximum, then (x + 4) / 4.
inline double scale_log_mel(double log10_power, double item_max_log10) {
  return (std::fmax(log10_power, item_max_log10 - kDynamicRangeLog10) + 4.0) / 4.0;
}

}  // namespace gk::asr
