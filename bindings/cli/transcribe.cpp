#include "transcribe.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "op_signatures.h"

namespace gk::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Progress {
  bool print = false;     // segments as they come (not with --json)
  bool terminal = false;  // progress line on stderr
  double duration = 0;

  static int32_t on_segment(void* user_data, const gk_transcript_segment* s) {
    auto* self = static_cast<Progress*>(user_data);
    if (self->terminal) std::fprintf(stderr, "\033[K");
    if (self->print) {
      std::printf("[%8.2f --> %8.2f]%s\n", s->start, s->end, s->text);
      std::fflush(stdout);
    }
    if (self->terminal && self->duration > 0) {
      std::fprintf(stderr, "%5.1f%% of %.1f s\r", 100.0 * s->end / self->duration, self->duration);
    }
    return 0;
  }
};

}  // namespace

int cmd_transcribe(gk_runtime* rt, int32_t device, const TranscribeOptions& o) {
  const int32_t dtype = parse_dtype(o.dtype);
  if (dtype != GK_DTYPE_F32 && dtype != GK_DTYPE_BF16 && dtype != GK_DTYPE_F16) {
    throw std::invalid_argument("--dtype " + o.dtype + ": give f32, bf16 or f16");
  }
  const bool terminal = isatty(STDERR_FILENO);
  const Clock::time_point load_start = Clock::now();
  if (terminal) std::fprintf(stderr, "loading %s ...\r", o.model.c_str());
  gk_model_options options{};
  options.struct_size = sizeof options;
  options.device = device;
  options.dtype = dtype;
  gk_model* raw_model = nullptr;
  check(gk_model_load(rt, o.model.c_str(), &options, &raw_model), "gk_model_load");
  ModelPtr model(raw_model);
  gk_tensor* raw_audio = nullptr;
  check(gk_audio_load(rt, o.file.c_str(), 16000, nullptr, &raw_audio), "gk_audio_load");
  TensorPtr audio(raw_audio);
  gk_tensor_desc desc{};
  desc.struct_size = sizeof desc;
  check(gk_tensor_get_desc(audio.get(), &desc), "gk_tensor_get_desc");
  const double load_s = seconds_since(load_start);

  Progress progress;
  progress.print = !o.json;
  progress.terminal = terminal;
  progress.duration = double(desc.shape[0]) / 16000.0;
  gk_transcribe_options t = o.decoding;
  t.struct_size = sizeof t;
  t.without_previous_text = o.without_previous_text ? 1 : 0;
  t.language = o.language.empty() ? nullptr : o.language.c_str();
  t.without_timestamps = o.without_timestamps ? 1 : 0;
  t.on_segment = Progress::on_segment;
  t.user_data = &progress;
  const Clock::time_point start = Clock::now();
  gk_transcript* raw = nullptr;
  check(gk_asr_transcribe(model.get(), audio.get(), &t, &raw), "gk_asr_transcribe");
  TranscriptPtr transcript(raw);
  const double seconds = seconds_since(start);
  if (terminal) std::fprintf(stderr, "\033[K");

  if (o.json) {
    nlohmann::json j;
    j["text"] = gk_transcript_text(transcript.get());
    j["language"] = gk_transcript_language(transcript.get());
    j["duration"] = progress.duration;
    j["segments"] = nlohmann::json::array();
    for (int32_t i = 0, n = gk_transcript_num_segments(transcript.get()); i < n; ++i) {
      gk_transcript_segment s{};
      s.struct_size = sizeof s;
      check(gk_transcript_segment_at(transcript.get(), i, &s), "gk_transcript_segment_at");
      j["segments"].push_back(
          {{"start", s.start},
           {"end", s.end},
           {"text", s.text},
           {"avg_logprob", s.avg_logprob},
           {"no_speech_prob", s.no_speech_prob},
           {"tokens", std::vector<int32_t>(s.tokens, s.tokens + s.num_tokens)}});
    }
    std::printf("%s\n", j.dump(2).c_str());
  }
  std::fprintf(stderr, "audio %.2f s, load %.2f s, transcribed in %.2f s: RTFx %.2f\n",
               progress.duration, load_s, seconds, seconds > 0 ? progress.duration / seconds : 0.0);
  return 0;
}

}  // namespace gk::cli
