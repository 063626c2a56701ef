// Fuzz target: the tiktoken-format vocabulary reader (core/src/tokenizer/tokenizer_tiktoken.cpp,
// behind gk_tokenizer_open_tiktoken). The input is a vocabulary file's text, read with two
// Whisper special tokens after its ranks; a vocabulary that loads encodes a fixed text, and
// the ids are decoded back. Checked: every id is in range, and a vocabulary holding every
// byte gives the text back. Any gk::Error is a fine answer; a crash, a leak, another
// exception or a broken check is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace {

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_tiktoken: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto t = gk::tokenizer::Tokenizer::from_tiktoken_text(
        text, "fuzz input", {"<|endoftext|>", "<|startoftranscript|>"}, "");
    const std::string sample = "Hello, world! 123 <|endoftext|> caf\xc3\xa9";
    std::vector<int32_t> ids;
    t->encode(sample, gk::tokenizer::EncodeOptions{}, ids);
    std::string back;
    for (int32_t id : ids) {
      if (id < 0 || id >= t->vocab_size()) broken("an id out of the vocabulary");
      t->append_piece(id, false, back);
    }
    bool every_byte = true;
    for (int b = 0; b < 256 && every_byte; ++b) every_byte = t->has_byte(uint8_t(b));
    if (every_byte && back != sample) broken("decode did not give the text back");
  } catch (const gk::Error&) {
    // A refused vocabulary, with its status and message.
  }
  return 0;
}
