// The audio C API (ABI 1.9, gpukit_audio.h): gk_audio_load and gk_audio_from_samples over
// audio/audio.h, each handing out a new 1-D f32 tensor on the cpu device.
#include <cstring>
#include <vector>

#include "audio/audio.h"
#include "capi/capi_util.h"
#include "dispatch/op_schema.h"

namespace {

constexpr int32_t kCpuDevice = 0;

void check_target_rate(int32_t target_rate, const char* function) {
  if (target_rate < 0 || target_rate > gk::audio::kMaxSampleRate) {
    gk::fail(GK_INVALID_ARGUMENT, std::string(function) + ": target_rate is " +
                                      std::to_string(target_rate) + "; expected 0 (keep the " +
                                      "source's rate) or 1.." +
                                      std::to_string(gk::audio::kMaxSampleRate) + " Hz");
  }
}

gk_tensor* to_tensor(gk_runtime* runtime, const std::vector<float>& samples,
                     const char* function) {
  gk::Runtime& rt = gk::runtime_of(runtime, function);
  gk_tensor_desc d = gk::make_desc(GK_DTYPE_F32, {int64_t(samples.size())});
  gk::fill_contiguous_strides(&d);
  const gk::Device& cpu = rt.devices().at(kCpuDevice);
  gk_stream& stream = gk::stream_for(rt, nullptr, cpu, function);
  gk_tensor* t = gk::create_tensor(runtime->impl, cpu, d, stream.native);
  if (!samples.empty()) {
    std::memcpy(gk_tensor_data(t), samples.data(), samples.size() * sizeof(float));
  }
  return t;
}

}  // namespace

extern "C" {

GK_API gk_status gk_audio_load(gk_runtime* runtime, const char* path, int32_t target_rate,
                               int32_t* out_source_rate, gk_tensor** out) {
  return gk::c_guard([&] {
    gk::runtime_of(runtime, "gk_audio_load");
    gk::require_arg(path, "gk_audio_load", "path");
    gk::require_arg(out, "gk_audio_load", "out");
    check_target_rate(target_rate, "gk_audio_load");
    gk::audio::Mono mono = gk::audio::decode_file(path);
    const int32_t to_rate = target_rate == 0 ? mono.sample_rate : target_rate;
    std::vector<float> samples = gk::audio::resample(
        std::move(mono.samples), mono.sample_rate, to_rate, "audio file '" + std::string(path) + "'");
    gk_tensor* t = to_tensor(runtime, samples, "gk_audio_load");
    if (out_source_rate) *out_source_rate = mono.sample_rate;
    *out = t;
  });
}

GK_API gk_status gk_audio_from_samples(gk_runtime* runtime, const float* samples, int64_t frames,
                                       int32_t channels, int32_t sample_rate,
                                       int32_t target_rate, gk_tensor** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_audio_from_samples";
    gk::runtime_of(runtime, fn);
    gk::require_arg(samples, fn, "samples");
    gk::require_arg(out, fn, "out");
    if (frames < 1 || frames > gk::audio::kMaxSamples) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": frames is " + std::to_string(frames) +
                                        "; expected 1.." +
                                        std::to_string(gk::audio::kMaxSamples));
    }
    if (channels < 1 || channels > gk::audio::kMaxChannels) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": channels is " +
                                        std::to_string(channels) + "; expected 1.." +
                                        std::to_string(gk::audio::kMaxChannels));
    }
    gk::audio::check_rate(sample_rate, std::string(fn) + ": sample_rate");
    check_target_rate(target_rate, fn);
    const std::string what = std::string(fn) + ": the samples";
    std::vector<float> mono = gk::audio::mix_down(samples, frames, channels, what);
    const int32_t to_rate = target_rate == 0 ? sample_rate : target_rate;
    *out = to_tensor(runtime, gk::audio::resample(std::move(mono), sample_rate, to_rate, what),
                     fn);
  });
}

}  // extern "C"
