// Whisper's vocabulary as transcription needs it: special token ids by name and the
// suppressed tokens (openai-whisper's tokenizer.py and DecodingTask._get_suppress_tokens).
#include "asr/vocab.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "common/error.h"

namespace gk::asr {
namespace {

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

// openai-whisper's language codes in token order (whisper/tokenizer.py's LANGUAGES):
// multilingual models have the first 99, large-v3 all 100.
constexpr const char* kLanguages[] = {
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv",
    "it", "id", "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
    "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr",
    "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu",
    "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};
constexpr int64_t kNumLanguages = int64_t(sizeof(kLanguages) / sizeof(kLanguages[0]));
constexpr int64_t kTimestamps = 1501;  // <|0.00|> … <|30.00|>

// Lines in a tiktoken file: its ranks.
int64_t count_ranks(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) n += !line.empty() && line != "\r";
  return n;
}

// Whisper's special tokens after a tiktoken vocabulary of `ranks` tokens, as
// openai-whisper's tokenizer lays them out for a model of `vocab_size` ids.
std::vector<std::string> whisper_specials(const std::filesystem::path& file, int64_t ranks,
                                          int64_t vocab_size) {
  const int64_t languages = vocab_size - ranks - 8 - kTimestamps;
  if (languages < 0 || languages > kNumLanguages) {
    fail(GK_INVALID_ARGUMENT,
         "gk_asr_transcribe: " + file.string() + " has " + std::to_string(ranks) +
             " tokens, which leaves " + std::to_string(languages) +
             " language tokens in the model's " + std::to_string(vocab_size) +
             " ids (Whisper has 0 to " + std::to_string(kNumLanguages) + ")");
  }
  std::vector<std::string> out = {"<|endoftext|>", "<|startoftranscript|>"};
  for (int64_t i = 0; i < languages; ++i) out.push_back(std::string("<|") + kLanguages[i] + "|>");
  for (const char* s : {"<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
                        "<|nospeech|>", "<|notimestamps|>"}) {
    out.emplace_back(s);
  }
  char stamp[16];
  for (int64_t i = 0; i < kTimestamps; ++i) {
    std::snprintf(stamp, sizeof(stamp), "<|%.2f|>", double(i) * 0.02);
    out.emplace_back(stamp);
  }
  return out;
}

// The special tokens by id: tokenizer.json's added tokens, else Whisper's layout after the
// folder's tiktoken vocabulary (recorded in `v` for open_tokenizer).
std::vector<std::pair<std::string, int32_t>> special_tokens(const std::filesystem::path& folder,
                                                            int64_t vocab_size, Vocab& v) {
  std::vector<std::pair<std::string, int32_t>> added;
  std::error_code ec;
  if (!std::filesystem::exists(folder / "tokenizer.json", ec)) {
    for (const char* name : {"multilingual.tiktoken", "gpt2.tiktoken"}) {
      const std::filesystem::path file = folder / name;
      if (!std::filesystem::exists(file, ec)) continue;
      const int64_t ranks = count_ranks(file);
      v.tokenizer_file = file;
      v.tiktoken_specials = whisper_specials(file, ranks, vocab_size);
      for (size_t i = 0; i < v.tiktoken_specials.size(); ++i) {
        added.emplace_back(v.tiktoken_specials[i], int32_t(ranks + int64_t(i)));
      }
      return added;
    }
    fail(GK_NOT_FOUND, "gk_asr_transcribe: " + folder.string() +
                           " has no tokenizer.json, multilingual.tiktoken or gpt2.tiktoken");
  }
  v.tokenizer_file = folder / "tokenizer.json";
  const nlohmann::json tok = read_json(v.tokenizer_file, true);
  if (auto a = tok.find("added_tokens"); a != tok.end() && a->is_array()) {
    for (const auto& t : *a) {
      if (t.contains("content") && t["content"].is_string() && t.contains("id") &&
          t["id"].is_number_integer()) {
        added.emplace_back(t["content"].get<std::string>(), t["id"].get<int32_t>());
      }
    }
  }
  return added;
}

}  // namespace

gk_tokenizer* open_tokenizer(gk_runtime* runtime, const Vocab& v) {
  gk_tokenizer* out = nullptr;
  gk_status status;
  if (v.tiktoken_specials.empty()) {
    status = gk_tokenizer_open(runtime, v.tokenizer_file.c_str(), &out);
  } else {
    std::vector<const char*> names;
    for (const std::string& s : v.tiktoken_specials) names.push_back(s.c_str());
    status = gk_tokenizer_open_tiktoken(runtime, v.tokenizer_file.c_str(), names.data(),
                                        int32_t(names.size()), nullptr, &out);
  }
  if (status != GK_OK) fail(status, std::string("gk_asr_transcribe: ") + last_error());
  return out;
}

Vocab read_vocab(const std::filesystem::path& folder, int64_t vocab_size) {
  Vocab v;
  const std::vector<std::pair<std::string, int32_t>> added =
      special_tokens(folder, vocab_size, v);
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
      fail(GK_INVALID_ARGUMENT, "gk_asr_transcribe: " + v.tokenizer_file.string() +
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

}  // namespace gk::asr
