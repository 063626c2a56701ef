// gk_asr_transcribe (ABI 1.11; options of ABI 1.12): Whisper's transcription as
// openai-whisper's transcribe() does it, over the public model API (gk_session_encode,
// gk_session_step, gk_session_copy), the log_mel_spectrogram op and the tokenizer:
//   features of the whole audio plus 30 s of zeros (one op call, one maximum, as Whisper);
//   the audio cut into parts at quiet moments when batch_size > 1 (else one part);
//   per round, one 30 s window of every unfinished part at its `seek`: encode, decode
//   (asr/search.h: all windows' hypotheses in one batched step), decode again at the next
//   temperature the windows whose text is too repetitive or too unlikely, skip those that
//   are silence (and, undecoded, those of digital silence), cut the tokens into segments
//   at timestamp pairs and move `seek` to the last timestamp (or the window's end).
//   Segments reach on_segment in the audio's order.
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "asr/search.h"
#include "asr/vocab.h"
#include "capi/capi_util.h"
#include "capi/model_access.h"
#include "capi/model_state.h"
#include "gpukit/gpukit.h"

namespace gk::asr {
namespace {

constexpr int64_t kSampleRate = 16000;
constexpr int64_t kHop = 160;
constexpr int64_t kWindowFrames = 3000;                   // 30 s of features
constexpr int64_t kWindowSamples = kWindowFrames * kHop;  // 480000
constexpr double kSecondsPerTimestamp = 0.02;             // the encoder's stride of 2 frames
constexpr int64_t kCutSearchFrames = 250;    // a part's cut moves up to 2.5 s to a quiet spot
constexpr int64_t kQuietFrames = 20;         // …the quietest 0.2 s there
constexpr float kTopTemperature = 1.0f;      // the fallback's last temperature (Whisper's)
constexpr float kSilentPeak = 1.0f / 32768;  // one step of 16-bit audio: below, digital silence
// Bounds that keep a typo from asking for thousands of sessions (each holds a KV cache).
constexpr int32_t kMostHypotheses = 32;
constexpr int32_t kMostParts = 256;

struct Segment {
  double start = 0, end = 0;
  std::string text;
  double avg_logprob = 0, no_speech_prob = 0;
  std::vector<int32_t> tokens;
};

struct Transcript {
  std::string text;
  std::string language;
  std::vector<Segment> segments;
};

struct SessionRelease {
  void operator()(gk_session* s) const { gk_session_release(s); }
};
using SessionPtr = std::unique_ptr<gk_session, SessionRelease>;

// zlib's compression ratio of the text, Whisper's measure of a repetitive (looping) window.
double compression_ratio(const std::string& text) {
  if (text.empty()) return 0;
  uLongf size = compressBound(uLong(text.size()));
  std::vector<Bytef> packed(size);
  if (compress(packed.data(), &size, reinterpret_cast<const Bytef*>(text.data()),
               uLong(text.size())) != Z_OK) {
    fail(GK_INTERNAL, "gk_asr_transcribe: zlib could not compress a window's text");
  }
  return double(text.size()) / double(size);
}

// [start, end) frames of up to `parts` parts of [0, content), each about 30 s or longer, cut
// where the audio is quietest within 2.5 s of an even split.
std::vector<std::pair<int64_t, int64_t>> split_parts(const std::vector<float>& samples,
                                                     int64_t content, int32_t parts) {
  const int64_t count = std::clamp<int64_t>(content / kWindowFrames, 1, parts);
  std::vector<double> energy(size_t(content), 0.0);  // per frame of kHop samples
  for (size_t i = 0; i < samples.size() && i / kHop < size_t(content); ++i) {
    energy[i / kHop] += double(samples[i]) * double(samples[i]);
  }
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t start = 0;
  for (int64_t p = 1; p < count; ++p) {
    const int64_t even = p * content / count;
    const int64_t lo = std::max(start + kWindowFrames / 2, even - kCutSearchFrames);
    const int64_t hi = std::min(content - kQuietFrames, even + kCutSearchFrames);
    int64_t cut = even;
    double quietest = std::numeric_limits<double>::infinity();
    for (int64_t f = lo; f + kQuietFrames <= hi; ++f) {
      double e = 0;
      for (int64_t k = 0; k < kQuietFrames; ++k) e += energy[size_t(f + k)];
      if (e < quietest) {
        quietest = e;
        cut = f + kQuietFrames / 2;
      }
    }
    out.emplace_back(start, cut);
    start = cut;
  }
  out.emplace_back(start, content);
  return out;
}

// One part of the audio, transcribed window after window from `start` to `end` (frames).
struct Part {
  int64_t start = 0, end = 0, seek = 0;
  std::vector<int32_t> previous;  // the text so far, for <|startofprev|>
  std::vector<Segment> segments;
  size_t sent = 0;  // segments given to on_segment (or kept) so far
  bool done = false;
  SessionPtr window;  // the encoded window
  std::vector<SessionPtr> hyps;
  WindowJob job;
};

// The model's vocabulary and tokenizer, read from its folder at its first transcription.
struct Text {
  Vocab vocab;
  std::unique_ptr<gk_tokenizer, void (*)(gk_tokenizer*)> tokenizer{nullptr, gk_tokenizer_release};
};

class Transcriber {
 public:
  Transcriber(gk_model* model, const gk_transcribe_options& o) : model_(model), o_(o) {
    gk_model_info info{};
    info.struct_size = sizeof(info);
    check(gk_model_get_info(model, &info), "gk_asr_transcribe");
    vocab_size_ = info.vocab_size;
    n_ctx_ = info.context_length;
    device_ = info.device;
    gk_device_props props{};
    props.struct_size = sizeof(props);
    check(gk_device_get_props(model_runtime(model), device_, &props), "gk_asr_transcribe");
    on_cuda_ = props.kind == GK_DEVICE_KIND_CUDA;
    gk_encoder_info enc{};
    enc.struct_size = sizeof(enc);
    check(gk_model_get_encoder_info(model, &enc), "gk_asr_transcribe");
    if (enc.n_mels == 0) {
      fail(GK_INVALID_ARGUMENT, "gk_asr_transcribe: the model is a " +
                                    std::string(info.architecture) +
                                    ", not a Whisper model (it has no encoder)");
    }
    if (enc.max_frames < kWindowFrames) {
      fail(GK_INVALID_ARGUMENT,
           "gk_asr_transcribe: the model's encoder takes " + std::to_string(enc.max_frames) +
               " frames, less than a 30 s window of " + std::to_string(kWindowFrames));
    }
    n_mels_ = enc.n_mels;
    text_ = std::static_pointer_cast<const Text>(model_memo(model, "asr.text", [&] {
      auto text = std::make_shared<Text>();
      text->vocab = read_vocab(std::filesystem::path(model_path(model)), vocab_size_);
      text->tokenizer.reset(open_tokenizer(model_runtime(model), text->vocab));
      return std::shared_ptr<const void>(std::move(text));
    }));
    v_ = text_->vocab;
    rng_.seed(o.seed);
  }

  // Transcribes `samples` into `out` (up to where on_segment asked to stop).
  void run(const std::vector<float>& samples, Transcript& out);

 private:
  // Log-mel features of `samples` followed by a window of zeros: [n_mels, frames] on the host.
  std::vector<float> features(const std::vector<float>& samples, int64_t* frames) {
    gk_runtime* rt = model_runtime(model_);
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    d.dtype = GK_DTYPE_F32;
    d.ndim = 1;
    d.shape[0] = int64_t(samples.size()) + kWindowSamples;
    gk_tensor* audio = nullptr;
    check(gk_tensor_create(rt, device_, &d, nullptr, &audio), "gk_asr_transcribe");
    std::unique_ptr<gk_tensor, void (*)(gk_tensor*)> audio_ref(audio, gk_tensor_release);
    std::vector<float> padded(samples);
    padded.resize(size_t(d.shape[0]), 0.0f);
    check(gk_copy_from_host(audio, padded.data(), padded.size() * 4, nullptr), "gk_asr_transcribe");
    d.ndim = 2;
    d.shape[0] = n_mels_;
    d.shape[1] = int64_t(padded.size()) / kHop;
    gk_tensor* mel = nullptr;
    check(gk_tensor_create(rt, device_, &d, nullptr, &mel), "gk_asr_transcribe");
    std::unique_ptr<gk_tensor, void (*)(gk_tensor*)> mel_ref(mel, gk_tensor_release);
    gk_attr attr{};
    attr.name = "n_mels";
    attr.type = GK_ATTR_INT;
    attr.value.i = n_mels_;
    gk_tensor* in[1] = {audio};
    gk_tensor* out[1] = {mel};
    gk_op_args args{sizeof(gk_op_args), in, 1, out, 1, &attr, 1, nullptr};
    check(gk_op_call(rt, "log_mel_spectrogram", &args), "gk_asr_transcribe");
    std::vector<float> host(size_t(n_mels_ * d.shape[1]));
    check(gk_copy_to_host(mel, host.data(), host.size() * 4, nullptr), "gk_asr_transcribe");
    *frames = d.shape[1];
    return host;
  }

  // The [n_mels, 3000] window at `seek` of features [n_mels, frames] whose audio ends at
  // `content`: frames of the part up to `end`, then the padding's (silence).
  std::vector<float> window(const std::vector<float>& mel, int64_t frames, int64_t content,
                            int64_t seek, int64_t end) const {
    std::vector<float> w(size_t(n_mels_ * kWindowFrames));
    const int64_t inside = std::min(kWindowFrames, end - seek);
    for (int64_t m = 0; m < n_mels_; ++m) {
      const float* row = mel.data() + m * frames;
      float* to = w.data() + m * kWindowFrames;
      std::copy_n(row + seek, inside, to);
      std::copy_n(row + content, kWindowFrames - inside, to + inside);
    }
    return w;
  }

  SessionPtr new_session() {
    gk_session* s = nullptr;
    check(gk_session_create(model_, nullptr, &s), "gk_asr_transcribe");
    return SessionPtr(s);
  }

  // The language whose token is likeliest after SOT in the part's encoded window.
  std::string detect_language(Part& part) {
    gk_session* s = part.hyps[0].get();
    check(gk_session_copy(s, part.window.get()), "gk_asr_transcribe");
    std::vector<float> row(static_cast<size_t>(vocab_size_));
    check(gk_session_step(s, &v_.sot, 1, 0, row.data()), "gk_asr_transcribe");
    std::string best = "en";
    float best_logit = -std::numeric_limits<float>::infinity();
    for (const auto& [code, id] : v_.languages) {
      if (id < vocab_size_ && row[size_t(id)] > best_logit) {
        best_logit = row[size_t(id)];
        best = code;
      }
    }
    return best;
  }

  int32_t language_token(const std::string& code) const {
    for (const auto& [c, id] : v_.languages) {
      if (c == code) return id;
    }
    fail(GK_INVALID_ARGUMENT, "gk_asr_transcribe: language '" + code +
                                  "' is not one of the model's " +
                                  std::to_string(v_.languages.size()) + " languages");
  }

  // The text of `tokens` (special and timestamp tokens left out).
  std::string text_of(const std::vector<int32_t>& tokens) const {
    std::vector<int32_t> text;
    for (int32_t t : tokens) {
      if (t < v_.eot) text.push_back(t);
    }
    if (text.empty()) return "";
    size_t length = 0;
    gk_status s = gk_tokenizer_decode(text_->tokenizer.get(), text.data(), text.size(), 0, nullptr,
                                      0, &length);
    if (s != GK_OK && s != GK_OUT_OF_RANGE) check(s, "gk_asr_transcribe");
    std::string out(length + 1, '\0');
    check(gk_tokenizer_decode(text_->tokenizer.get(), text.data(), text.size(), 0, out.data(),
                              out.size(), &length),
          "gk_asr_transcribe");
    out.resize(length);
    return out;
  }

  // Decodes every part's job at the first temperature, then again at the next ones the
  // windows whose text fails a threshold (Whisper's decode_with_fallback).
  void decode_with_fallback(std::vector<Part*>& parts) {
    SearchParams p;
    p.beam_size = std::max(o_.beam_size, 1);
    p.best_of = std::max(o_.best_of, 1);
    p.temperature = o_.temperature;
    p.timestamps = !o_.without_timestamps;
    p.n_ctx = n_ctx_;
    p.vocab_size = vocab_size_;
    p.keep_batch = on_cuda_;
    std::vector<WindowJob*> jobs;
    for (Part* part : parts) jobs.push_back(&part->job);
    while (!jobs.empty()) {
      decode_windows(jobs, p, v_, rng_);
      const float next = p.temperature + o_.temperature_increment;
      if (o_.temperature_increment <= 0 || next > kTopTemperature + 1e-6f) break;
      std::vector<WindowJob*> again;
      for (WindowJob* job : jobs) {
        if (needs_fallback(job->result)) again.push_back(job);
      }
      jobs = std::move(again);
      p.temperature = next;
    }
  }

  bool needs_fallback(const Decoded& r) const {
    const bool unlikely = r.avg_logprob < o_.logprob_threshold;
    if (r.no_speech_prob > o_.no_speech_threshold && unlikely) return false;  // silence
    const bool repetitive = o_.compression_ratio_threshold > 0 &&
                            compression_ratio(text_of(r.tokens)) > o_.compression_ratio_threshold;
    return repetitive || unlikely;
  }

  // The sessions a part's searches need: the window's and one per hypothesis.
  void open_sessions(Part& part) {
    // beam_size at temperature 0; best_of once sampling can happen (a fallback or a start > 0).
    const bool samples = o_.temperature > 0 || o_.temperature_increment > 0;
    const int32_t n = std::max(o_.beam_size, samples ? o_.best_of : 1);
    part.window = new_session();
    for (int32_t i = 0; i < n; ++i) {
      part.hyps.push_back(new_session());
      part.job.hyps.push_back(part.hyps.back().get());
    }
    part.job.window = part.window.get();
  }

  // The result of the part's window: its segments, the next seek, the prompt's text.
  void take_result(Part& part) {
    const Decoded& r = part.job.result;
    const int64_t segment_size = std::min(kWindowFrames, part.end - part.seek);
    const double offset = double(part.seek * kHop) / double(kSampleRate);
    const double duration = double(segment_size * kHop) / double(kSampleRate);
    bool silence = r.no_speech_prob > o_.no_speech_threshold;
    if (r.avg_logprob > o_.logprob_threshold) silence = false;
    if (silence) {
      advance(part, segment_size);  // no text for this window
      return;
    }
    auto add = [&](double start, double end, const std::vector<int32_t>& tokens) {
      Segment s;
      s.start = start;
      s.end = end;
      for (int32_t tok : tokens) {
        if (tok < v_.eot) s.tokens.push_back(tok);
      }
      s.text = text_of(s.tokens);
      s.avg_logprob = r.avg_logprob;
      s.no_speech_prob = r.no_speech_prob;
      // An instantaneous or empty segment carries nothing (openai-whisper clears them).
      if (s.start == s.end || s.text.find_first_not_of(" \t\n") == std::string::npos) return;
      part.segments.push_back(std::move(s));
    };
    const std::vector<int32_t>& tok = r.tokens;
    const int32_t tb = v_.timestamp_begin;
    auto is_ts = [&](size_t i) { return tok[i] >= tb; };
    const size_t n = tok.size();
    const bool single_ending = n >= 2 && !is_ts(n - 2) && is_ts(n - 1);
    std::vector<size_t> cuts;  // after each consecutive timestamp pair
    for (size_t i = 1; i < n; ++i) {
      if (is_ts(i - 1) && is_ts(i)) cuts.push_back(i);
    }
    int64_t step = segment_size;
    if (!cuts.empty()) {
      if (single_ending) cuts.push_back(n);
      size_t last = 0;
      for (size_t cut : cuts) {
        const std::vector<int32_t> piece(tok.begin() + std::ptrdiff_t(last),
                                         tok.begin() + std::ptrdiff_t(cut));
        add(offset + (piece.front() - tb) * kSecondsPerTimestamp,
            offset + (piece.back() - tb) * kSecondsPerTimestamp, piece);
        last = cut;
      }
      if (!single_ending) {
        // Resume at the last timestamp: 2 frames per timestamp step.
        step = int64_t(tok[last - 1] - tb) * 2;
        if (step <= 0) step = segment_size;
      }
    } else {
      double end = duration;
      int32_t last_ts = -1;
      for (int32_t x : tok) {
        if (x >= tb) last_ts = x;
      }
      if (last_ts > tb) end = (last_ts - tb) * kSecondsPerTimestamp;
      add(offset, offset + end, tok);
    }
    part.previous.insert(part.previous.end(), tok.begin(), tok.end());
    // A window sampled hot is a poor prompt (Whisper resets it above 0.5).
    if (o_.without_previous_text || r.temperature > 0.5f) part.previous.clear();
    advance(part, step);
  }

  // Whether the part's next window is digital silence: no sample above one step of 16-bit
  // audio. Whisper's model writes text there (tiny.en: " you", likely enough that the
  // no-speech rule keeps it), so such a window is skipped undecoded, as a silent one is.
  static bool silent_window(const std::vector<float>& samples, const Part& part) {
    const size_t begin = std::min(samples.size(), size_t(part.seek * kHop));
    const size_t end =
        std::min(samples.size(), size_t(std::min(part.seek + kWindowFrames, part.end) * kHop));
    for (size_t i = begin; i < end; ++i) {
      if (!(std::fabs(samples[i]) <= kSilentPeak)) return false;  // NaN: not silence
    }
    return true;
  }

  static void advance(Part& part, int64_t frames) {
    part.seek += frames;
    if (part.seek >= part.end) part.done = true;
  }

  // The prompt of the part's next window.
  void set_prompt(Part& part, const std::vector<int32_t>& sot_sequence) const {
    std::vector<int32_t>& head = part.job.head;
    head.clear();
    if (!part.previous.empty() && v_.sot_prev >= 0) {
      head.push_back(v_.sot_prev);
      const size_t keep = std::min(part.previous.size(), size_t(n_ctx_ / 2 - 1));
      head.insert(head.end(), part.previous.end() - std::ptrdiff_t(keep), part.previous.end());
    }
    head.push_back(v_.sot);
    part.job.sot_rest.assign(sot_sequence.begin() + 1, sot_sequence.end());
  }

  // Gives the parts' new segments to the transcript and on_segment in the audio's order (a
  // part's once the parts before it are done); false when on_segment asks to stop.
  bool send(std::vector<Part>& parts, size_t& first, Transcript& out) const {
    for (; first < parts.size(); ++first) {
      Part& p = parts[first];
      for (; p.sent < p.segments.size(); ++p.sent) {
        out.segments.push_back(p.segments[p.sent]);
        const Segment& s = out.segments.back();
        out.text += s.text;
        if (!o_.on_segment) continue;
        const gk_transcript_segment view{sizeof(gk_transcript_segment),
                                         s.start,
                                         s.end,
                                         s.text.c_str(),
                                         s.avg_logprob,
                                         s.no_speech_prob,
                                         s.tokens.data(),
                                         int32_t(s.tokens.size())};
        if (o_.on_segment(o_.user_data, &view) != 0) return false;
      }
      if (!p.done) break;
    }
    return true;
  }

  gk_model* model_;
  gk_transcribe_options o_;
  int64_t vocab_size_ = 0, n_ctx_ = 0;
  int32_t device_ = 0, n_mels_ = 0;
  bool on_cuda_ = false;
  std::shared_ptr<const Text> text_;  // kept with the model: tokenizer.json is read once
  Vocab v_;
  std::mt19937_64 rng_;
};

void Transcriber::run(const std::vector<float>& samples, Transcript& out) {
  const char* fn = "gk_asr_transcribe";
  int64_t frames = 0;
  const std::vector<float> mel = features(samples, &frames);
  const int64_t content = frames - kWindowFrames;
  std::vector<Part> parts(0);
  for (auto [start, end] : split_parts(samples, content, std::max(o_.batch_size, 1))) {
    parts.emplace_back();
    parts.back().start = parts.back().seek = start;
    parts.back().end = end;
  }
  for (Part& p : parts) open_sessions(p);
  auto encode = [&](Part& p) {
    const std::vector<float> w = window(mel, frames, content, p.seek, p.end);
    check(gk_session_encode(p.window.get(), w.data(), n_mels_, kWindowFrames, nullptr), fn);
  };

  std::vector<int32_t> sot_sequence{v_.sot};
  if (v_.multilingual) {
    std::string language = o_.language ? o_.language : "";
    if (language.empty()) {
      encode(parts[0]);
      language = detect_language(parts[0]);
    }
    out.language = language;
    sot_sequence.push_back(language_token(language));
    if (v_.transcribe >= 0) sot_sequence.push_back(v_.transcribe);
  } else {
    if (o_.language && std::string(o_.language) != "en") {
      fail(GK_INVALID_ARGUMENT,
           std::string(fn) + ": language '" + o_.language + "' for an English-only model");
    }
    out.language = "en";
  }
  if (o_.without_timestamps) sot_sequence.push_back(v_.no_timestamps);

  size_t first_unsent = 0;
  while (true) {
    std::vector<Part*> active;
    for (Part& p : parts) {
      if (!p.done) active.push_back(&p);
    }
    if (active.empty()) break;
    std::vector<Part*> decoding;
    for (Part* p : active) {
      if (silent_window(samples, *p)) {
        advance(*p, std::min(kWindowFrames, p->end - p->seek));
        continue;
      }
      encode(*p);
      set_prompt(*p, sot_sequence);
      decoding.push_back(p);
    }
    if (!decoding.empty()) {
      decode_with_fallback(decoding);
      for (Part* p : decoding) take_result(*p);
    }
    if (!send(parts, first_unsent, out)) break;
  }
}

gk_transcribe_options checked_options(const gk_transcribe_options* options) {
  gk_transcribe_options o = GK_TRANSCRIBE_OPTIONS_INIT;
  if (options) {
    require_struct(options->struct_size, GK_TRANSCRIBE_OPTIONS_SIZE, "gk_asr_transcribe",
                   "gk_transcribe_options");
    if (options->struct_size >= GK_TRANSCRIBE_OPTIONS_SIZE_1_12) {
      o = *options;
    } else {
      // A caller of ABI 1.11: its fields, and what that ABI did for the others.
      std::memcpy(&o, options, GK_TRANSCRIBE_OPTIONS_SIZE);
      o.temperature_increment = 0;
      o.compression_ratio_threshold = 0;
      o.without_previous_text = 0;
      o.batch_size = 1;
    }
    o.struct_size = sizeof(o);
  }
  auto bad = [](const std::string& what) {
    fail(GK_INVALID_ARGUMENT, "gk_asr_transcribe: " + what);
  };
  auto count = [&](int32_t& value, const char* name, int32_t zero_means, int32_t most) {
    if (value == 0) value = zero_means;
    if (value < 0 || value > most) {
      bad(std::string(name) + " " + std::to_string(value) + " is not in [1, " +
          std::to_string(most) + "] (0 means " + std::to_string(zero_means) + ")");
    }
  };
  count(o.beam_size, "beam_size", 1, kMostHypotheses);
  count(o.best_of, "best_of", 5, kMostHypotheses);
  count(o.batch_size, "batch_size", 1, kMostParts);
  auto non_negative = [&](float value, const char* name) {
    if (!std::isfinite(value) || value < 0) {
      bad(std::string(name) + " " + std::to_string(value) + " is not a finite value >= 0");
    }
  };
  non_negative(o.temperature, "temperature");
  non_negative(o.temperature_increment, "temperature_increment");
  non_negative(o.compression_ratio_threshold, "compression_ratio_threshold");
  if (!(o.no_speech_threshold >= 0 && o.no_speech_threshold <= 1)) {
    bad("no_speech_threshold " + std::to_string(o.no_speech_threshold) +
        " is not a probability in [0, 1]");
  }
  if (std::isnan(o.logprob_threshold)) bad("logprob_threshold is NaN");
  return o;
}

}  // namespace
}  // namespace gk::asr

struct gk_transcript : gk::asr::Transcript {};

extern "C" {

GK_API gk_status gk_asr_transcribe(gk_model* model, const gk_tensor* audio,
                                   const gk_transcribe_options* options, gk_transcript** out) {
  return gk::c_guard([&] {
    using namespace gk::asr;
    const char* fn = "gk_asr_transcribe";
    gk::require_arg(model, fn, "model");
    gk::require_arg(audio, fn, "audio");
    gk::require_arg(out, fn, "out");
    *out = nullptr;
    const gk_transcribe_options o = checked_options(options);
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    gk::check(gk_tensor_get_desc(audio, &d), fn);
    const bool contiguous = d.ndim == 1 && (d.shape[0] <= 1 || d.strides[0] == 1);
    if (d.dtype != GK_DTYPE_F32 || !contiguous) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) +
                                        ": audio must be a contiguous 1-D f32 "
                                        "tensor of 16 kHz samples (gk_audio_load gives one)");
    }
    if (d.shape[0] < 1) gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": the audio is empty");
    std::vector<float> samples(size_t(d.shape[0]));
    gk::check(gk_copy_to_host(audio, samples.data(), samples.size() * 4, nullptr), fn);
    auto result = std::make_unique<gk_transcript>();
    Transcriber(model, o).run(samples, *result);
    *out = result.release();
  });
}

GK_API void gk_transcript_release(gk_transcript* transcript) {
  delete transcript;
}

GK_API const char* gk_transcript_text(const gk_transcript* transcript) {
  return transcript ? transcript->text.c_str() : "";
}

GK_API const char* gk_transcript_language(const gk_transcript* transcript) {
  return transcript ? transcript->language.c_str() : "";
}

GK_API int32_t gk_transcript_num_segments(const gk_transcript* transcript) {
  return transcript ? int32_t(transcript->segments.size()) : 0;
}

GK_API gk_status gk_transcript_segment_at(const gk_transcript* transcript, int32_t index,
                                          gk_transcript_segment* out) {
  return gk::c_guard([&] {
    const char* fn = "gk_transcript_segment_at";
    gk::require_arg(transcript, fn, "transcript");
    gk::require_arg(out, fn, "out");
    gk::require_struct(out->struct_size, GK_TRANSCRIPT_SEGMENT_SIZE, fn, "gk_transcript_segment");
    if (index < 0 || size_t(index) >= transcript->segments.size()) {
      gk::fail(GK_OUT_OF_RANGE, std::string(fn) + ": index " + std::to_string(index) +
                                    " is not in [0, " +
                                    std::to_string(transcript->segments.size()) + ")");
    }
    const gk::asr::Segment& s = transcript->segments[size_t(index)];
    out->start = s.start;
    out->end = s.end;
    out->text = s.text.c_str();
    out->avg_logprob = s.avg_logprob;
    out->no_speech_prob = s.no_speech_prob;
    out->tokens = s.tokens.data();
    out->num_tokens = int32_t(s.tokens.size());
  });
}

}  // extern "C"
