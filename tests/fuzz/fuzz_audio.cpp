// Fuzz target: the audio decoder (core/src/audio, behind gk_audio_load). The input is a sound
// file's bytes, decoded from memory by libsndfile through the same reading loop as files,
// with at most kMaxFuzzSamples frames (so a small FLAC that claims hours of audio is refused,
// not decoded into gigabytes); what decodes is resampled to 16 kHz by libsoxr. Checked: a
// decode that succeeds has samples, a rate in range, finite samples, and resampling keeps
// the duration to within a sample and the samples finite. Any gk::Error is a fine answer; a
// crash, a leak, another exception or a broken check is a finding.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "audio/audio.h"
#include "common/error.h"

namespace {

constexpr int64_t kMaxFuzzSamples = int64_t(1) << 20;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_audio: %s\n", what);
  std::abort();
}

void check_finite(const std::vector<float>& samples, const char* what) {
  for (float s : samples) {
    if (!std::isfinite(s)) broken(what);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    gk::audio::Mono mono = gk::audio::decode_memory(data, size, "fuzz input", kMaxFuzzSamples);
    if (mono.samples.empty()) broken("decode succeeded without samples");
    if (int64_t(mono.samples.size()) > kMaxFuzzSamples) broken("decode passed max_samples");
    if (mono.sample_rate < 1 || mono.sample_rate > gk::audio::kMaxSampleRate) {
      broken("decode succeeded with a sample rate out of range");
    }
    check_finite(mono.samples, "decode returned a non-finite sample");
    const double seconds = double(mono.samples.size()) / mono.sample_rate;
    std::vector<float> out = gk::audio::resample(std::move(mono.samples), mono.sample_rate,
                                                 16000, "fuzz input", kMaxFuzzSamples * 4);
    if (std::fabs(double(out.size()) - seconds * 16000.0) > 2.0) {
      broken("resampling changed the duration");
    }
    check_finite(out, "resampling returned a non-finite sample");
  } catch (const gk::Error&) {
    // A refused input, with its status and message: the expected answer to most bytes.
  }
  return 0;
}
