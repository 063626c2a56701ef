// Audio in: sound files (libsndfile) and sample arrays to mono float32, resampled by
// libsoxr. The C ABI (capi/audio_api.cpp, gpukit_audio.h) and the audio fuzz target call
// these; errors are gk::Error with the file's name and the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gk::audio {

// The most mono samples one call returns (8 GiB of f32: about 37 hours at 16 kHz).
inline constexpr int64_t kMaxSamples = int64_t(1) << 31;
// The most channels a source may have (libsndfile's own limit).
inline constexpr int32_t kMaxChannels = 1024;
// The highest sample rate in or out (GK_AUDIO_MAX_SAMPLE_RATE).
inline constexpr int32_t kMaxSampleRate = 768000;
// The largest sample magnitude accepted (GK_AUDIO_MAX_SAMPLE_MAGNITUDE): far above any real
// recording, low enough that resampling filters cannot overflow f32.
inline constexpr float kMaxSampleMagnitude = 1.0e6f;

struct Mono {
  std::vector<float> samples;
  int32_t sample_rate = 0;
};

// Decodes the file at `path` to mono. NOT_FOUND when it does not exist; INVALID_ARGUMENT
// naming the file when libsndfile cannot read it, it holds no samples, or a sample that is
// not finite or passes kMaxSampleMagnitude;
// RESOURCE_EXHAUSTED past `max_samples`.
Mono decode_file(const std::string& path, int64_t max_samples = kMaxSamples);

// The same for a file's bytes in memory; `name` names them in errors.
Mono decode_memory(const void* data, size_t size, const std::string& name,
                   int64_t max_samples = kMaxSamples);

// Averages the channels of each of `frames` interleaved frames. INVALID_ARGUMENT (naming
// `what`) for a sample that is not finite or passes kMaxSampleMagnitude.
std::vector<float> mix_down(const float* interleaved, int64_t frames, int32_t channels,
                            const std::string& what);

// `samples` at `from_rate` Hz resampled to `to_rate` Hz by libsoxr (high quality: 20-bit
// precision, passband to 91% of the lower Nyquist frequency, linear phase). Returns the
// input unchanged when the rates are equal. RESOURCE_EXHAUSTED when the output would pass
// `max_samples`.
std::vector<float> resample(std::vector<float> samples, int32_t from_rate, int32_t to_rate,
                            const std::string& what, int64_t max_samples = kMaxSamples);

// Fails INVALID_ARGUMENT unless 1 <= rate <= kMaxSampleRate; `what` names the argument.
void check_rate(int64_t rate, const std::string& what);

}  // namespace gk::audio
