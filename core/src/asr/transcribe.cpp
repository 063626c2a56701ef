// Whole on purpose (a few lines over 600): one concept, Whisper's transcription: its vocabulary,
// the Transcriber's decoding loop and the gk_transcript handle it fills, with its accessors.
// gk_asr_transcribe (ABI 1.11): Whisper's greedy transcription as openai-whisper's
// transcribe() and DecodingTask do it, over the public model API (gk_session_encode,
// gk_session_step), the log_mel_spectrogram op and the tokenizer:
//   features of the whole audio plus 30 s of zeros (one op call, one maximum, as Whisper);
//   per 30 s window at `seek`: encode, step the prompt (previous text after <|startofprev|>,
//   then the SOT sequence), read the no-speech probability at SOT, sample greedily with the
//   logit filters (blank and suppress_tokens, timestamp rules), cut the tokens into segments
//   at timestamp pairs and move `seek` to the last timestamp (or the window's end).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "capi/model_access.h"
#include "gpukit/gpukit.h"

namespace gk::asr {
namespace {

constexpr int64_t kSampleRate = 16000;
constexpr int64_t kHop = 160;
constexpr int64_t kWindowFrames = 3000;                   // 30 s of features
constexpr int64_t kWindowSamples = kWindowFrames * kHop;  // 480000
constexpr double kSecondsPerTimestamp = 0.02;             // the encoder's stride of 2 frames
constexpr int64_t kMaxInitialTimestamp = 50;              // 1.0 s, in timestamp steps
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Segment {
  double start = 0, end = 0;
  std::string text;
  double avg_logprob = 0, no_speech_prob = 0;
  std::vector<int32_t> tokens;
};

void check(gk_status status, const std::string& context) {
  if (status != GK_OK) fail(status, context + ": " + last_error());
}

nlohmann::json read_json(const std::filesystem::path& path, bool required) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!required) return nlohmann::json::object();
    fail(GK_NOT_FOUND, "gk_asr_transcribe: cannot read '" + path.string() + "'");
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    fail(GK_INVALID_ARGUMENT, "gk_asr_transcribe: '" + path.string() + "' is not a JSON object");
  }
  return j;
}

// Whisper's special tokens, read from tokenizer.json's added tokens; the timestamps follow
// <|notimestamps|> in the model's vocabulary (tokenizer.json need not list them).
struct Vocab {
  int32_t eot = -1, sot = -1, translate = -1, transcribe = -1, sot_lm = -1, sot_prev = -1;
  int32_t no_speech = -1, no_timestamps = -1, timestamp_begin = -1;
  std::vector<std::pair<std::string, int32_t>> languages;  // "en" -> <|en|>
  std::vector<int32_t> suppress, begin_suppress;
  bool multilingual = false;
};

Vocab read_vocab(const std::filesystem::path& folder, int64_t vocab_size) {
  Vocab v;
  const nlohmann::json tok = read_json(folder / "tokenizer.json", true);
  std::vector<std::pair<std::string, int32_t>> added;
  if (auto a = tok.find("added_tokens"); a != tok.end() && a->is_array()) {
    for (const auto& t : *a) {
      if (t.contains("content") && t["content"].is_string() && t.contains("id") &&
          t["id"].is_number_integer()) {
        added.emplace_back(t["content"].get<std::string>(), t["id"].get<int32_t>());
      }
    }
  }
  auto id = [&](const char* name) {
    for (const auto& [text, i] : added) {
      if (text == name) return i;
    }
    return -1;
  };
  v.eot = id("<|endoftext|>");
  v.sot = id("<|startoftranscript|>");
  v.translate = id("<|translate|>");
  v.transcribe = id("<|transcribe|>");
  v.sot_lm = id("<|startoflm|>");
  v.sot_prev = id("<|startofprev|>");
  v.no_speech = id("<|nospeech|>") >= 0 ? id("<|nospeech|>") : id("<|nocaptions|>");
  v.no_timestamps = id("<|notimestamps|>");
  for (auto [name, value] : {std::pair{"<|endoftext|>", v.eot},
                             {"<|startoftranscript|>", v.sot},
                             {"<|notimestamps|>", v.no_timestamps}}) {
    if (value < 0 || value >= vocab_size) {
      fail(GK_INVALID_ARGUMENT, "gk_asr_transcribe: " + (folder / "tokenizer.json").string() +
                                    " has no Whisper token " + name + " within the model's " +
                                    std::to_string(vocab_size) + " ids");
    }
  }
  v.timestamp_begin = v.no_timestamps + 1;
  // Language tokens sit between <|startoftranscript|> and <|translate|>.
  for (const auto& [text, i] : added) {
    if (i > v.sot && (v.translate < 0 || i < v.translate) && text.size() > 4 &&
        text.rfind("<|", 0) == 0 && text.compare(text.size() - 2, 2, "|>") == 0) {
      v.languages.emplace_back(text.substr(2, text.size() - 4), i);
    }
  }
  const nlohmann::json gen = read_json(folder / "generation_config.json", false);
  auto ids = [&](const char* key) {
    std::vector<int32_t> out;
    if (auto a = gen.find(key); a != gen.end() && a->is_array()) {
      for (const auto& t : *a) {
        if (t.is_number_integer() && t.get<int64_t>() >= 0 && t.get<int64_t>() < vocab_size) {
          out.push_back(t.get<int32_t>());
        }
      }
    }
    return out;
  };
  v.suppress = ids("suppress_tokens");
  // openai-whisper's "-1" adds the task and context tokens to the non-speech ones.
  for (int32_t t : {v.transcribe, v.translate, v.sot, v.sot_prev, v.sot_lm, v.no_speech}) {
    if (t >= 0 && t < vocab_size) v.suppress.push_back(t);
  }
  v.begin_suppress = ids("begin_suppress_tokens");
  if (!gen.contains("begin_suppress_tokens")) v.begin_suppress = {220, v.eot};  // " ", EOT
  v.multilingual = gen.value("is_multilingual", vocab_size >= 51865);
  return v;
}

double log_sum_exp(const float* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(x[i]));
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - m);
  return m + std::log(s);
}

// openai-whisper's SuppressBlank, SuppressTokens and ApplyTimestampRules on one row.
void apply_filters(std::vector<float>& logits, const std::vector<int32_t>& sampled, bool timestamps,
                   const Vocab& v) {
  const int64_t n = int64_t(logits.size());
  const int32_t tb = v.timestamp_begin;
  if (sampled.empty()) {
    for (int32_t t : v.begin_suppress) logits[size_t(t)] = kNegInf;
  }
  for (int32_t t : v.suppress) logits[size_t(t)] = kNegInf;
  if (!timestamps) return;
  logits[size_t(v.no_timestamps)] = kNegInf;
  const size_t len = sampled.size();
  const bool last_ts = len >= 1 && sampled[len - 1] >= tb;
  const bool penultimate_ts = len < 2 || sampled[len - 2] >= tb;
  auto mask = [&](int64_t from, int64_t to) {
    for (int64_t i = std::max<int64_t>(from, 0); i < std::min(to, n); ++i) {
      logits[size_t(i)] = kNegInf;
    }
  };
  // Timestamps come in pairs: after a pair, text (or EOT); after a lone one, a timestamp.
  if (last_ts) {
    if (penultimate_ts) {
      mask(tb, n);
    } else {
      mask(0, v.eot);
    }
  }
  // Timestamps never decrease, and a segment is never empty.
  int32_t last_timestamp = -1;
  for (int32_t t : sampled) {
    if (t >= tb) last_timestamp = t;
  }
  if (last_timestamp >= 0) {
    mask(tb, (last_ts && !penultimate_ts) ? last_timestamp : last_timestamp + 1);
  }
  if (sampled.empty()) {
    mask(0, tb);
    mask(tb + kMaxInitialTimestamp + 1, n);
  }
  // A timestamp is forced when all of them together are likelier than the best text token.
  const double total = log_sum_exp(logits.data(), n);
  const double ts_logprob = log_sum_exp(logits.data() + tb, n - tb) - total;
  float max_text = kNegInf;
  for (int64_t i = 0; i < tb; ++i) max_text = std::max(max_text, logits[size_t(i)]);
  if (ts_logprob > double(max_text) - total) mask(0, tb);
}

struct Decoded {
  std::vector<int32_t> tokens;  // sampled, up to (not including) EOT
  double avg_logprob = 0;
  double no_speech_prob = 0;
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
    gk_encoder_info enc{};
    enc.struct_size = sizeof(enc);
    check(gk_model_get_encoder_info(model, &enc), "gk_asr_transcribe");
    if (enc.n_mels == 0) {
      fail(GK_INVALID_ARGUMENT, "gk_asr_transcribe: the model is a " +
                                    std::string(info.architecture) +
                                    ", not a Whisper model (it has no encoder)");
    }
    if (enc.max_frames < kWindowFrames) {
      fail(GK_INVALID_ARGUMENT, "gk_asr_transcribe: the model's encoder takes " +
                                    std::to_string(enc.max_frames) +
                                    " frames, less than a 30 s "
                                    "window of " +
                                    std::to_string(kWindowFrames));
    }
    n_mels_ = enc.n_mels;
    const std::filesystem::path folder(model_path(model));
    v_ = read_vocab(folder, vocab_size_);
    gk_tokenizer* tok = nullptr;
    check(gk_tokenizer_open(model_runtime(model), (folder / "tokenizer.json").c_str(), &tok),
          "gk_asr_transcribe");
    tokenizer_.reset(tok);
    gk_session* s = nullptr;
    check(gk_session_create(model, nullptr, &s), "gk_asr_transcribe");
    session_.reset(s);
  }

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

  // The [n_mels, 3000] window at `seek` of features [n_mels, frames].
  std::vector<float> window(const std::vector<float>& mel, int64_t frames, int64_t seek) const {
    std::vector<float> w(size_t(n_mels_ * kWindowFrames));
    for (int64_t m = 0; m < n_mels_; ++m) {
      std::copy_n(mel.begin() + std::ptrdiff_t(m * frames + seek), kWindowFrames,
                  w.begin() + std::ptrdiff_t(m * kWindowFrames));
    }
    return w;
  }

  void encode(const std::vector<float>& window) {
    check(gk_session_encode(session_.get(), window.data(), n_mels_, kWindowFrames, nullptr),
          "gk_asr_transcribe");
  }

  std::vector<float> step(const std::vector<int32_t>& tokens) {
    std::vector<float> row(static_cast<size_t>(vocab_size_));
    check(gk_session_step(session_.get(), tokens.data(), int32_t(tokens.size()), 0, row.data()),
          "gk_asr_transcribe");
    return row;
  }

  // The language whose token is likeliest after SOT in the encoded window.
  std::string detect_language() {
    std::vector<float> row = step({v_.sot});
    std::string best = "en";
    float best_logit = kNegInf;
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

  // Greedy decoding of the encoded window after `previous` text tokens.
  Decoded decode(const std::vector<int32_t>& previous, const std::vector<int32_t>& sot_sequence) {
    Decoded out;
    std::vector<int32_t> head;
    if (!previous.empty() && v_.sot_prev >= 0) {
      head.push_back(v_.sot_prev);
      const size_t keep = std::min(previous.size(), size_t(n_ctx_ / 2 - 1));
      head.insert(head.end(), previous.end() - std::ptrdiff_t(keep), previous.end());
    }
    head.push_back(v_.sot);
    std::vector<float> row = step(head);
    if (v_.no_speech >= 0) {
      const double total = log_sum_exp(row.data(), vocab_size_);
      out.no_speech_prob = std::exp(double(row[size_t(v_.no_speech)]) - total);
    }
    if (sot_sequence.size() > 1) {
      row = step(std::vector<int32_t>(sot_sequence.begin() + 1, sot_sequence.end()));
    }
    const int64_t prompt = int64_t(head.size() + sot_sequence.size() - 1);
    const int64_t sample_len = std::min(n_ctx_ / 2, n_ctx_ - prompt);
    const bool timestamps = !o_.without_timestamps;
    double sum_logprob = 0;
    for (int64_t i = 0; i < sample_len; ++i) {
      apply_filters(row, out.tokens, timestamps, v_);
      const int32_t next = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
      sum_logprob += double(row[size_t(next)]) - log_sum_exp(row.data(), vocab_size_);
      if (next == v_.eot) break;
      out.tokens.push_back(next);
      if (i + 1 == sample_len) break;
      row = step({next});
    }
    out.avg_logprob = sum_logprob / double(out.tokens.size() + 1);
    return out;
  }

  std::string text_of(const std::vector<int32_t>& tokens) const {
    std::vector<int32_t> text;
    for (int32_t t : tokens) {
      if (t < v_.eot) text.push_back(t);
    }
    if (text.empty()) return "";
    size_t length = 0;
    gk_status s =
        gk_tokenizer_decode(tokenizer_.get(), text.data(), text.size(), 0, nullptr, 0, &length);
    if (s != GK_OK && s != GK_OUT_OF_RANGE) check(s, "gk_asr_transcribe");
    std::string out(length + 1, '\0');
    check(gk_tokenizer_decode(tokenizer_.get(), text.data(), text.size(), 0, out.data(), out.size(),
                              &length),
          "gk_asr_transcribe");
    out.resize(length);
    return out;
  }

  const Vocab& vocab() const { return v_; }
  int32_t n_mels() const { return n_mels_; }

 private:
  struct SessionRelease {
    void operator()(gk_session* s) const { gk_session_release(s); }
  };
  struct TokenizerRelease {
    void operator()(gk_tokenizer* t) const { gk_tokenizer_release(t); }
  };
  gk_model* model_;
  gk_transcribe_options o_;
  int64_t vocab_size_ = 0, n_ctx_ = 0;
  int32_t device_ = 0, n_mels_ = 0;
  Vocab v_;
  std::unique_ptr<gk_tokenizer, TokenizerRelease> tokenizer_;
  std::unique_ptr<gk_session, SessionRelease> session_;
};

gk_transcribe_options checked_options(const gk_transcribe_options* options) {
  gk_transcribe_options o = GK_TRANSCRIBE_OPTIONS_INIT;
  if (options) {
    require_struct(options->struct_size, GK_TRANSCRIBE_OPTIONS_SIZE, "gk_asr_transcribe",
                   "gk_transcribe_options");
    o = *options;
  }
  auto bad = [](gk_status status, const std::string& what) {
    fail(status, "gk_asr_transcribe: " + what);
  };
  if (o.beam_size == 0) o.beam_size = 1;
  if (o.beam_size < 0)
    bad(GK_INVALID_ARGUMENT, "beam_size " + std::to_string(o.beam_size) + " is negative");
  if (o.beam_size > 1) {
    bad(GK_UNIMPLEMENTED, "beam_size " + std::to_string(o.beam_size) +
                              ": only greedy decoding (beam_size 1) is implemented");
  }
  if (!std::isfinite(o.temperature) || o.temperature < 0) {
    bad(GK_INVALID_ARGUMENT,
        "temperature " + std::to_string(o.temperature) + " is not a finite value >= 0");
  }
  if (o.temperature > 0) {
    bad(GK_UNIMPLEMENTED, "temperature " + std::to_string(o.temperature) +
                              ": only greedy decoding (temperature 0) is implemented");
  }
  if (!(o.no_speech_threshold >= 0 && o.no_speech_threshold <= 1)) {
    bad(GK_INVALID_ARGUMENT, "no_speech_threshold " + std::to_string(o.no_speech_threshold) +
                                 " is not a probability in [0, 1]");
  }
  if (std::isnan(o.logprob_threshold)) bad(GK_INVALID_ARGUMENT, "logprob_threshold is NaN");
  return o;
}

}  // namespace
}  // namespace gk::asr

struct gk_transcript {
  std::string text;
  std::string language;
  std::vector<gk::asr::Segment> segments;
};

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
    check(gk_tensor_get_desc(audio, &d), fn);
    const bool contiguous = d.ndim == 1 && (d.shape[0] <= 1 || d.strides[0] == 1);
    if (d.dtype != GK_DTYPE_F32 || !contiguous) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) +
                                        ": audio must be a contiguous 1-D f32 "
                                        "tensor of 16 kHz samples (gk_audio_load gives one)");
    }
    if (d.shape[0] < 1) gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": the audio is empty");
    std::vector<float> samples(size_t(d.shape[0]));
    check(gk_copy_to_host(audio, samples.data(), samples.size() * 4, nullptr), fn);

    Transcriber t(model, o);
    const Vocab& v = t.vocab();
    auto result = std::make_unique<gk_transcript>();
    int64_t frames = 0;
    const std::vector<float> mel = t.features(samples, &frames);
    const int64_t content = frames - kWindowFrames;

    std::vector<int32_t> sot_sequence{v.sot};
    if (v.multilingual) {
      std::string language = o.language ? o.language : "";
      if (language.empty()) {
        t.encode(t.window(mel, frames, 0));
        language = t.detect_language();
      }
      result->language = language;
      sot_sequence.push_back(t.language_token(language));
      if (v.transcribe >= 0) sot_sequence.push_back(v.transcribe);
    } else {
      if (o.language && std::string(o.language) != "en") {
        gk::fail(GK_INVALID_ARGUMENT,
                 std::string(fn) + ": language '" + o.language + "' for an English-only model");
      }
      result->language = "en";
    }
    if (o.without_timestamps) sot_sequence.push_back(v.no_timestamps);

    std::vector<int32_t> previous;  // the text so far, for <|startofprev|>
    bool stop = false;
    for (int64_t seek = 0; seek < content && !stop;) {
      const int64_t segment_size = std::min(kWindowFrames, content - seek);
      const double offset = double(seek * kHop) / double(kSampleRate);
      const double duration = double(segment_size * kHop) / double(kSampleRate);
      t.encode(t.window(mel, frames, seek));
      Decoded r = t.decode(previous, sot_sequence);
      if (r.no_speech_prob > o.no_speech_threshold && !(r.avg_logprob > o.logprob_threshold)) {
        seek += segment_size;  // silence: no text for this window
        continue;
      }
      std::vector<Segment> found;
      auto add = [&](double start, double end, std::vector<int32_t> tokens) {
        Segment s;
        s.start = start;
        s.end = end;
        s.tokens.clear();
        for (int32_t tok : tokens) {
          if (tok < v.eot) s.tokens.push_back(tok);
        }
        s.text = t.text_of(s.tokens);
        s.avg_logprob = r.avg_logprob;
        s.no_speech_prob = r.no_speech_prob;
        found.push_back(std::move(s));
      };
      const std::vector<int32_t>& tok = r.tokens;
      const int32_t tb = v.timestamp_begin;
      auto is_ts = [&](size_t i) { return tok[i] >= tb; };
      const size_t n = tok.size();
      const bool single_ending = n >= 2 && !is_ts(n - 2) && is_ts(n - 1);
      std::vector<size_t> cuts;  // after each consecutive timestamp pair
      for (size_t i = 1; i < n; ++i) {
        if (is_ts(i - 1) && is_ts(i)) cuts.push_back(i);
      }
      int64_t advance = segment_size;
      if (!cuts.empty()) {
        if (single_ending) cuts.push_back(n);
        size_t last = 0;
        for (size_t cut : cuts) {
          std::vector<int32_t> piece(tok.begin() + std::ptrdiff_t(last),
                                     tok.begin() + std::ptrdiff_t(cut));
          add(offset + (piece.front() - tb) * kSecondsPerTimestamp,
              offset + (piece.back() - tb) * kSecondsPerTimestamp, piece);
          last = cut;
        }
        if (!single_ending) {
          // Resume at the last timestamp: 2 frames per timestamp step.
          advance = int64_t(tok[last - 1] - tb) * 2;
          if (advance <= 0) advance = segment_size;
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
      seek += advance;
      previous.insert(previous.end(), tok.begin(), tok.end());
      for (Segment& s : found) {
        // An instantaneous or empty segment carries nothing (openai-whisper clears them).
        if (s.start == s.end || s.text.find_first_not_of(" \t\n") == std::string::npos) continue;
        result->text += s.text;
        result->segments.push_back(std::move(s));
        if (o.on_segment) {
          const Segment& last = result->segments.back();
          gk_transcript_segment view{sizeof(gk_transcript_segment),
                                     last.start,
                                     last.end,
                                     last.text.c_str(),
                                     last.avg_logprob,
                                     last.no_speech_prob,
                                     last.tokens.data(),
                                     int32_t(last.tokens.size())};
          if (o.on_segment(o.user_data, &view) != 0) {
            stop = true;
            break;
          }
        }
      }
    }
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
