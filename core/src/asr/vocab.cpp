// Whisper's vocabulary as transcription needs it: special token ids by name and the
// suppressed tokens (openai-whisper's tokenizer.py and DecodingTask._get_suppress_tokens).
#include "asr/vocab.h"

#include <nlohmann/json.hpp>

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

}  // namespace

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

}  // namespace gk::asr
