// Whisper's special tokens and suppression lists, read from a model folder's tokenizer.json
// and generation_config.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gpukit/gpukit.h"

namespace gk::asr {

struct Vocab {
  int32_t eot = -1, sot = -1, translate = -1, transcribe = -1, sot_lm = -1, sot_prev = -1;
  int32_t no_speech = -1, no_timestamps = -1, timestamp_begin = -1;
  std::vector<std::pair<std::string, int32_t>> languages;  // "en" -> <|en|>
  std::vector<int32_t> suppress, begin_suppress;
  bool multilingual = false;
  // The tokenizer: tokenizer.json, or a tiktoken vocabulary with Whisper's specials after it.
  std::filesystem::path tokenizer_file;
  std::vector<std::string> tiktoken_specials;  // empty for tokenizer.json
};

// The special tokens come from tokenizer.json's added tokens (the timestamps follow
// <|notimestamps|>, which tokenizer.json need not list) or, without one, from Whisper's
// layout after the folder's multilingual.tiktoken or gpt2.tiktoken (openai-whisper's
// vocabularies; the model's vocab_size says how many languages); the suppressed ones from
// generation_config.json when the folder has one. NOT_FOUND without a vocabulary;
// INVALID_ARGUMENT naming the file when a token Whisper needs is missing or outside the
// model's `vocab_size` ids.
Vocab read_vocab(const std::filesystem::path& folder, int64_t vocab_size);

// The tokenizer `v` names (release it with gk_tokenizer_release).
gk_tokenizer* open_tokenizer(gk_runtime* runtime, const Vocab& v);

}  // namespace gk::asr
