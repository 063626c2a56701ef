// libsndfile decoding and libsoxr resampling (audio.h). One reading loop serves files and
// memory: it reads fixed-size chunks until libsndfile reports the end, so a header that
// claims more frames than the data holds costs nothing, and mixes each chunk down at once,
// so only the mono samples are ever held whole.
#include "audio/audio.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "common/error.h"

namespace gk::audio {
namespace {

constexpr sf_count_t kChunkFrames = 4096;

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndfileHandle = std::unique_ptr<SNDFILE, SndfileCloser>;

// A file's bytes in memory, read through libsndfile's virtual I/O.
struct MemoryFile {
  const unsigned char* data;
  sf_count_t size;
  sf_count_t position;
};

sf_count_t memory_length(void* user) { return static_cast<MemoryFile*>(user)->size; }

sf_count_t memory_seek(sf_count_t offset, int whence, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  sf_count_t base = whence == SEEK_CUR ? m->position : whence == SEEK_END ? m->size : 0;
  // Out-of-range targets are clamped: libsndfile then reads nothing and reports the error.
  if (offset > 0 && base > m->size - offset) {
    m->position = m->size;
  } else {
    m->position = std::clamp<sf_count_t>(base + offset, 0, m->size);
  }
  return m->position;
}

sf_count_t memory_read(void* out, sf_count_t count, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  const sf_count_t n = std::clamp<sf_count_t>(count, 0, m->size - m->position);
  if (n > 0) std::memcpy(out, m->data + m->position, size_t(n));
  m->position += n;
  return n;
}

sf_count_t memory_write(const void*, sf_count_t, void*) { return 0; }

sf_count_t memory_tell(void* user) { return static_cast<MemoryFile*>(user)->position; }

bool in_range(float sample) { return std::fabs(sample) <= kMaxSampleMagnitude; }

void check_samples(const float* samples, int64_t count, int64_t first_index,
                   const std::string& what) {
  for (int64_t i = 0; i < count; ++i) {
    if (!in_range(samples[i])) {
      const float s = samples[i];
      fail(GK_INVALID_ARGUMENT,
           what + ": sample " + std::to_string(first_index + i) + " is " +
               (std::isnan(s) ? std::string("NaN") : std::to_string(s)) +
               "; audio samples must be finite and within +-" +
               std::to_string(int64_t(kMaxSampleMagnitude)) + " (float formats hold [-1, 1])");
    }
  }
}

Mono read_all(SNDFILE* file, const SF_INFO& info, const std::string& what,
              int64_t max_samples) {
  if (info.channels < 1 || info.channels > kMaxChannels) {
    fail(GK_INVALID_ARGUMENT, what + ": has " + std::to_string(info.channels) +
                                  " channels; expected 1.." + std::to_string(kMaxChannels));
  }
  if (info.samplerate < 1 || info.samplerate > kMaxSampleRate) {
    fail(GK_INVALID_ARGUMENT, what + ": has a sample rate of " +
                                  std::to_string(info.samplerate) + " Hz; expected 1.." +
                                  std::to_string(kMaxSampleRate));
  }
  Mono mono;
  mono.sample_rate = info.samplerate;
  std::vector<float> chunk(size_t(kChunkFrames) * size_t(info.channels));
  for (;;) {
    const sf_count_t got = sf_readf_float(file, chunk.data(), kChunkFrames);
    if (got <= 0) break;
    if (int64_t(mono.samples.size()) + got > max_samples) {
      fail(GK_RESOURCE_EXHAUSTED, what + ": holds more than " + std::to_string(max_samples) +
                                      " frames, the most one call decodes");
    }
    std::vector<float> part = mix_down(chunk.data(), got, info.channels, what);
    mono.samples.insert(mono.samples.end(), part.begin(), part.end());
  }
  if (sf_error(file) != SF_ERR_NO_ERROR) {
    fail(GK_INVALID_ARGUMENT,
         what + ": decoding failed after " + std::to_string(mono.samples.size()) +
             " frames: " + sf_strerror(file));
  }
  if (mono.samples.empty()) {
    fail(GK_INVALID_ARGUMENT, what + ": holds no audio samples");
  }
  return mono;
}

std::string describe(const std::string& name) { return "audio file '" + name + "'"; }

}  // namespace

void check_rate(int64_t rate, const std::string& what) {
  if (rate < 1 || rate > kMaxSampleRate) {
    fail(GK_INVALID_ARGUMENT, what + " is " + std::to_string(rate) + "; expected 1.." +
                                  std::to_string(kMaxSampleRate) + " Hz");
  }
}

std::vector<float> mix_down(const float* interleaved, int64_t frames, int32_t channels,
                            const std::string& what) {
  std::vector<float> mono(static_cast<size_t>(frames));
  if (channels == 1) {
    std::memcpy(mono.data(), interleaved, size_t(frames) * sizeof(float));
    check_samples(mono.data(), frames, 0, what);
    return mono;
  }
  for (int64_t f = 0; f < frames; ++f) {
    const float* frame = interleaved + f * channels;
    double sum = 0.0;
    for (int32_t c = 0; c < channels; ++c) {
      if (!in_range(frame[c])) check_samples(frame, channels, f * channels, what);
      sum += frame[c];
    }
    mono[size_t(f)] = float(sum / channels);
  }
  return mono;
}

std::vector<float> resample(std::vector<float> samples, int32_t from_rate, int32_t to_rate,
                            const std::string& what, int64_t max_samples) {
  if (from_rate == to_rate || samples.empty()) return samples;
  const double ratio = double(to_rate) / double(from_rate);
  const double expected = std::ceil(double(samples.size()) * ratio);
  if (expected > double(max_samples)) {
    fail(GK_RESOURCE_EXHAUSTED, what + ": " + std::to_string(samples.size()) + " samples at " +
                                    std::to_string(from_rate) + " Hz become about " +
                                    std::to_string(int64_t(expected)) + " at " +
                                    std::to_string(to_rate) + " Hz, more than the " +
                                    std::to_string(max_samples) + " one call returns");
  }
  std::vector<float> out(size_t(expected) + 1);
  size_t consumed = 0, produced = 0;
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  soxr_error_t error = soxr_oneshot(double(from_rate), double(to_rate), 1, samples.data(),
                                    samples.size(), &consumed, out.data(), out.size(), &produced,
                                    &io, &quality, nullptr);
  if (error != nullptr) {
    fail(GK_INTERNAL, what + ": libsoxr failed to resample " + std::to_string(from_rate) +
                          " Hz to " + std::to_string(to_rate) + " Hz: " + error);
  }
  out.resize(produced);
  return out;
}

Mono decode_file(const std::string& path, int64_t max_samples) {
  const std::string what = describe(path);
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    fail(GK_NOT_FOUND, what + ": no such file");
  }
  if (std::filesystem::is_directory(status)) {
    fail(GK_INVALID_ARGUMENT, what + ": is a directory, not a sound file");
  }
  SF_INFO info{};
  SndfileHandle file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) {
    fail(GK_INVALID_ARGUMENT, what + ": libsndfile cannot decode it (WAV, FLAC, Ogg Vorbis/Opus "
                                     "and the other libsndfile formats are read): " +
                                  sf_strerror(nullptr));
  }
  return read_all(file.get(), info, what, max_samples);
}

Mono decode_memory(const void* data, size_t size, const std::string& name,
                   int64_t max_samples) {
  const std::string what = describe(name);
  MemoryFile memory{static_cast<const unsigned char*>(data), sf_count_t(size), 0};
  SF_VIRTUAL_IO io{memory_length, memory_seek, memory_read, memory_write, memory_tell};
  SF_INFO info{};
  SndfileHandle file(sf_open_virtual(&io, SFM_READ, &info, &memory));
  if (!file) {
    fail(GK_INVALID_ARGUMENT,
         what + ": libsndfile cannot decode it: " + sf_strerror(nullptr));
  }
  return read_all(file.get(), info, what, max_samples);
}

}  // namespace gk::audio
