// Fuzz target: the tokenizer. A fixed small byte-level BPE tokenizer (a tokenizer.json with
// every byte, a few merges, added tokens and Llama 3's pre-tokenizer pattern) encodes the
// input's bytes under flags from its first byte; the ids are decoded back, and the input's
// bytes, read as ids, are streamed through a detokenizer. Checked: every id is in range,
// valid UTF-8 decodes back to itself, streamed text is always valid UTF-8 and, with its
// flush, equals the lossy reading of the whole decode. A crash, a leak or a broken check is
// a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_runtime.h"
#include "gpukit/gpukit.h"

namespace gk::fuzz {
namespace {

// GPT-2's byte-level character of byte `b`, as UTF-8.
std::string byte_char(int b) {
  auto printable = [](int x) {
    return (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE;
  };
  int cp = b;
  if (!printable(b)) {
    cp = 256;
    for (int x = 0; x < b; ++x) cp += !printable(x);
  }
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string tokenizer_json() {
  std::string vocab, merges;
  for (int b = 0; b < 256; ++b) {
    vocab += (b ? "," : "") + json_string(byte_char(b)) + ":" + std::to_string(b);
  }
  const char* pairs[][2] = {{"t", "h"},  {"th", "e"}, {"Ġ", "the"}, {"i", "n"},
                            {"Ġ", "in"}, {"ð", "Ł"},  {"1", "2"},   {"12", "3"}};
  int id = 256;
  for (const auto& p : pairs) {
    vocab += "," + json_string(std::string(p[0]) + p[1]) + ":" + std::to_string(id++);
    merges += std::string(merges.empty() ? "" : ",") + json_string(std::string(p[0]) + " " + p[1]);
  }
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  return R"({"version":"1.0","normalizer":null,"added_tokens":[)"
         R"({"id":264,"content":"<|bos|>","special":true},)"
         R"({"id":265,"content":"<|eot|>","special":true,"lstrip":true,"rstrip":true},)"
         R"({"id":266,"content":"<tool>","special":false}],)"
         R"("pre_tokenizer":{"type":"Sequence","pretokenizers":[)"
         R"({"type":"Split","pattern":{"Regex":)" +
         json_string(llama3) +
         R"(},"behavior":"Isolated","invert":false},)"
         R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]},)"
         R"("post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|bos|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}]},)"
         R"("decoder":{"type":"ByteLevel"},)"
         R"("model":{"type":"BPE","ignore_merges":true,"vocab":{)" +
         vocab + R"(},"merges":[)" + merges + "]}}";
}

gk_tokenizer* shared_tokenizer() {
  static gk_tokenizer* tokenizer = [] {
    const std::filesystem::path dir =
        std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    const std::string path =
        (dir / ("gk_fuzz_tokenizer_" + std::to_string(::getpid()) + ".json")).string();
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << tokenizer_json();
    }
    gk_tokenizer* t = nullptr;
    const gk_status s = gk_tokenizer_open(shared_runtime(), path.c_str(), &t);
    std::filesystem::remove(path);
    if (s != GK_OK) setup_failed("gk_tokenizer_open");
    return t;
  }();
  return tokenizer;
}

// Whether `s` is valid UTF-8 (shortest forms, no surrogates, at most U+10FFFF).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = uint8_t(s[i]);
    size_t n;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 3;
      lo = b == 0xE0 ? 0xA0 : 0x80;
      hi = b == 0xED ? 0x9F : 0xBF;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4;
      lo = b == 0xF0 ? 0x90 : 0x80;
      hi = b == 0xF4 ? 0x8F : 0xBF;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto c = uint8_t(s[i + k]);
      if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return false;
    }
    i += n;
  }
  return true;
}

std::string decode(gk_tokenizer* t, const std::vector<int32_t>& ids, uint32_t flags) {
  size_t n = 0;
  const gk_status s = gk_tokenizer_decode(t, ids.data(), ids.size(), flags, nullptr, 0, &n);
  if (s != GK_OK && s != GK_OUT_OF_RANGE) contract_broken("gk_tokenizer_decode of valid ids");
  std::string out(n, '\0');
  if (gk_tokenizer_decode(t, ids.data(), ids.size(), flags, out.data(), out.size(), &n) != GK_OK ||
      n != out.size()) {
    contract_broken("gk_tokenizer_decode with the size it asked for");
  }
  return out;
}

}  // namespace
}  // namespace gk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gk::fuzz;
  if (size == 0) return 0;
  gk_tokenizer* t = shared_tokenizer();
  const int32_t vocab = gk_tokenizer_vocab_size(t);
  const uint8_t mode = data[0];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const uint32_t flags = mode & (GK_TOKENIZE_ADD_SPECIAL | GK_TOKENIZE_PARSE_SPECIAL);

  size_t n = 0;
  gk_status s = gk_tokenizer_encode(t, text.data(), text.size(), flags, nullptr, 0, &n);
  if (s != GK_OK && s != GK_OUT_OF_RANGE) contract_broken("gk_tokenizer_encode size query");
  std::vector<int32_t> ids(n);
  size_t m = 0;
  if (gk_tokenizer_encode(t, text.data(), text.size(), flags, ids.data(), ids.size(), &m) !=
          GK_OK ||
      m != n) {
    contract_broken("gk_tokenizer_encode with the capacity it asked for");
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) contract_broken("encode produced an id out of range");
  }
  const std::string back = decode(t, ids, 0);
  // Without special parsing, added tokens, stripping and BOS, valid text comes back whole.
  if (flags == 0 && valid_utf8(text) && text.find("<tool>") == std::string::npos && back != text) {
    contract_broken("decode(encode(valid UTF-8)) differs from the text");
  }
  if (!valid_utf8(text) && !valid_utf8(back)) {
    contract_broken("encode of invalid UTF-8 decoded to invalid UTF-8 (not U+FFFD)");
  }

  // The input's bytes as ids (some out of range) through a streaming decoder.
  gk_detokenizer* d = nullptr;
  if (gk_detokenizer_create(t, (mode >> 2) & GK_DETOKENIZE_SKIP_SPECIAL, &d) != GK_OK) {
    contract_broken("gk_detokenizer_create");
  }
  std::vector<int32_t> streamed_ids;
  std::string streamed;
  for (size_t i = 1; i + 1 < size; i += 2) {
    const int32_t id = int32_t((data[i] << 8 | data[i + 1]) % uint32_t(vocab + 8)) - 4;
    const char* piece = nullptr;
    size_t len = 0;
    s = gk_detokenizer_push(d, id, &piece, &len);
    if (id < 0 || id >= vocab) {
      if (s != GK_INVALID_ARGUMENT) contract_broken("an id out of range was not refused");
      continue;
    }
    if (s != GK_OK || !piece) contract_broken("gk_detokenizer_push of a valid id");
    const std::string p(piece, len);
    if (!valid_utf8(p)) contract_broken("the detokenizer returned invalid UTF-8");
    streamed += p;
    streamed_ids.push_back(id);
  }
  const char* piece = nullptr;
  size_t len = 0;
  if (gk_detokenizer_flush(d, &piece, &len) != GK_OK) contract_broken("gk_detokenizer_flush");
  const std::string tail(piece, len);
  if (!valid_utf8(tail)) contract_broken("the flush returned invalid UTF-8");
  streamed += tail;
  gk_detokenizer_release(d);
  const std::string whole = decode(t, streamed_ids, (mode >> 2) & GK_DETOKENIZE_SKIP_SPECIAL);
  if (valid_utf8(whole) && whole != streamed) {
    contract_broken("streamed text differs from the decode of the same ids");
  }
  return 0;
}
