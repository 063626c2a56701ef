// The tokenizer through the C API: a small hand-made tokenizer.json (encode, decode, special
// tokens, streaming decode of split characters, invalid UTF-8, bad ids, small buffers, bad
// files), small GGUF vocabularies, and llama.cpp's golden vectors for every byte-level BPE
// vocabulary it ships (tests/fixtures/fetch_tokenizer_vocabs.py fetches them).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "test_runtime.h"
#include "weights_writer.h"

namespace gk::test {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

struct TokenizerDeleter {
  void operator()(gk_tokenizer* t) const { gk_tokenizer_release(t); }
};
using TokenizerPtr = std::unique_ptr<gk_tokenizer, TokenizerDeleter>;
struct DetokenizerDeleter {
  void operator()(gk_detokenizer* d) const { gk_detokenizer_release(d); }
};
using DetokenizerPtr = std::unique_ptr<gk_detokenizer, DetokenizerDeleter>;

// GPT-2's byte -> character table, written out here independently of the library.
std::string byte_char(int b) {
  int cp = b;
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  if (!printable) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
    }
    cp = 256 + n;
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

std::string chars(const std::string& bytes) {
  std::string s;
  for (unsigned char c : bytes) s += byte_char(c);
  return s;
}

// Ids 0..255 are the bytes; then merges build "hello", " world" and the first two bytes of
// 😀 (F0 9F); 266.. are added tokens.
enum : int32_t {
  kHe = 256,
  kLl,
  kHell,
  kHello,
  kSpW,
  kOr,
  kSpWor,
  kLd,
  kSpWorld,
  kEmojiHead,
  kBos = 266,
  kEos = 267,
  kSep = 268,
  kVocab = 269
};

json tiny_tokenizer_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"},
      {"l", "l"},
      {"he", "ll"},
      {"hell", "o"},
      {chars(" "), "w"},
      {"o", "r"},
      {chars(" w"), "or"},
      {"l", "d"},
      {chars(" wor"), "ld"},
      {byte_char(0xF0), byte_char(0x9F)}};
  json m = json::array();
  int32_t id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    m.push_back(a + " " + b);
  }
  json j;
  j["version"] = "1.0";
  j["normalizer"] = nullptr;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}};
  j["added_tokens"] = json::array({
      {{"id", kBos}, {"content", "<|bos|>"}, {"special", true}},
      {{"id", kEos}, {"content", "<|eos|>"}, {"special", true}},
      {{"id", kSep}, {"content", "<sep>"}, {"special", false}},
  });
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
  j["decoder"] = {{"type", "ByteLevel"}};
  return j;
}

class TinyTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.write("tokenizer.json", tiny_tokenizer_json().dump());
    gk_tokenizer* t = nullptr;
    ASSERT_EQ(gk_tokenizer_open(rt_.get(), path_.c_str(), &t), GK_OK) << gk_last_error();
    tok_.reset(t);
  }
  Ids encode(const std::string& text, uint32_t flags = 0) {
    size_t n = 0;
    EXPECT_EQ(gk_tokenizer_encode(tok_.get(), text.data(), text.size(), flags, nullptr, 0, &n),
              text.empty() && !(flags & GK_TOKENIZE_ADD_SPECIAL) ? GK_OK : GK_OUT_OF_RANGE);
    Ids ids(n);
    EXPECT_EQ(gk_tokenizer_encode(tok_.get(), text.data(), text.size(), flags, ids.data(),
                                  ids.size(), &n),
              GK_OK)
        << gk_last_error();
    EXPECT_EQ(n, ids.size());
    return ids;
  }
  std::string decode(const Ids& ids, uint32_t flags = 0) {
    size_t n = 0;
    gk_tokenizer_decode(tok_.get(), ids.data(), ids.size(), flags, nullptr, 0, &n);
    std::string out(n + 1, '\0');
    EXPECT_EQ(
        gk_tokenizer_decode(tok_.get(), ids.data(), ids.size(), flags, out.data(), out.size(), &n),
        GK_OK)
        << gk_last_error();
    out.resize(n);
    return out;
  }

  RuntimePtr rt_ = make_runtime(test_options());
  ScratchDir dir_;
  std::string path_;
  TokenizerPtr tok_;
};

TEST_F(TinyTokenizer, encode_applies_merges_by_rank_and_decode_inverts_it) {
  EXPECT_EQ(encode("hello world"), (Ids{kHello, kSpWorld}));
  EXPECT_EQ(decode({kHello, kSpWorld}), "hello world");
  // No merge applies across the pre-tokenizer's pieces: "hello" and "," stay apart.
  EXPECT_EQ(encode("hello, world!"), (Ids{kHello, ',', kSpWorld, '!'}));
  EXPECT_EQ(encode(""), Ids{});
  EXPECT_EQ(gk_tokenizer_vocab_size(tok_.get()), kVocab);
}

TEST_F(TinyTokenizer, info_reports_specials_from_the_template) {
  gk_tokenizer_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(gk_tokenizer_info_get(tok_.get(), &info), GK_OK) << gk_last_error();
  EXPECT_EQ(info.vocab_size, kVocab);
  EXPECT_EQ(info.bos_id, kBos);
  EXPECT_EQ(info.add_bos, 1u);
  EXPECT_STREQ(info.pre, "tokenizer.json");
  info.struct_size = 8;
  EXPECT_EQ(gk_tokenizer_info_get(tok_.get(), &info), GK_INVALID_ARGUMENT);
}

TEST_F(TinyTokenizer, add_special_puts_bos_first) {
  EXPECT_EQ(encode("hello", GK_TOKENIZE_ADD_SPECIAL), (Ids{kBos, kHello}));
  EXPECT_EQ(encode("", GK_TOKENIZE_ADD_SPECIAL), (Ids{kBos}));
}

TEST_F(TinyTokenizer, control_tokens_are_matched_only_with_parse_special) {
  EXPECT_EQ(encode("hello<|eos|>", GK_TOKENIZE_PARSE_SPECIAL), (Ids{kHello, kEos}));
  const Ids plain = encode("hello<|eos|>");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kEos), 0);
  EXPECT_EQ(decode(plain), "hello<|eos|>");
  // A user-defined (non-special) added token is matched either way.
  EXPECT_EQ(encode("a<sep>b"), (Ids{'a', kSep, 'b'}));
  EXPECT_EQ(decode({kBos, kHello, kEos}), "<|bos|>hello<|eos|>");
  EXPECT_EQ(decode({kBos, kHello, kSep, kEos}, GK_DETOKENIZE_SKIP_SPECIAL), "hello<sep>");
}

TEST_F(TinyTokenizer, emoji_split_across_tokens_streams_as_one_character) {
  const std::string smile = "\xF0\x9F\x98\x80";  // U+1F600
  const Ids ids = encode("a" + smile);
  ASSERT_EQ(ids, (Ids{'a', kEmojiHead, 0x98, 0x80}));
  // Decoding a prefix gives the raw bytes, split character included.
  EXPECT_EQ(decode({'a', kEmojiHead}), "a\xF0\x9F");

  gk_detokenizer* d = nullptr;
  ASSERT_EQ(gk_detokenizer_create(tok_.get(), 0, &d), GK_OK) << gk_last_error();
  DetokenizerPtr det(d);
  const char* text = nullptr;
  size_t n = 0;
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    ASSERT_EQ(gk_detokenizer_push(d, id, &text, &n), GK_OK) << gk_last_error();
    pieces.emplace_back(text, n);
  }
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "", smile}));
  ASSERT_EQ(gk_detokenizer_flush(d, &text, &n), GK_OK);
  EXPECT_EQ(std::string(text, n), "");

  // A sequence cut short: the held-back bytes come out as one U+FFFD at the end.
  ASSERT_EQ(gk_detokenizer_push(d, kEmojiHead, &text, &n), GK_OK);
  EXPECT_EQ(n, 0u);
  ASSERT_EQ(gk_detokenizer_flush(d, &text, &n), GK_OK);
  EXPECT_EQ(std::string(text, n), "\xEF\xBF\xBD");
  // A byte that cannot continue the held-back sequence: U+FFFD, then the byte's character.
  ASSERT_EQ(gk_detokenizer_push(d, kEmojiHead, &text, &n), GK_OK);
  ASSERT_EQ(gk_detokenizer_push(d, 'x', &text, &n), GK_OK);
  EXPECT_EQ(std::string(text, n), "\xEF\xBF\xBDx");
}

TEST_F(TinyTokenizer, invalid_utf8_reads_as_replacement_characters) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(encode("a\xFF"
                   "b"),
            encode("a" + fffd + "b"));
  // A truncated three-byte sequence is one maximal invalid part: one U+FFFD.
  EXPECT_EQ(encode("\xE2\x82"
                   "a"),
            encode(fffd + "a"));
  EXPECT_EQ(encode("\xC0\x80"), encode(fffd + fffd));             // overlong: each byte invalid
  EXPECT_EQ(encode("\xED\xA0\x80"), encode(fffd + fffd + fffd));  // a surrogate
  const std::string nul("a\0b", 3);
  EXPECT_EQ(encode(nul), (Ids{'a', 0, 'b'}));
}

TEST_F(TinyTokenizer, ids_out_of_range_are_refused_naming_id_and_vocab_size) {
  const Ids bad = {kHello, kVocab};
  size_t n = 0;
  char buf[64];
  EXPECT_EQ(gk_tokenizer_decode(tok_.get(), bad.data(), bad.size(), 0, buf, sizeof(buf), &n),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("269"), std::string::npos) << gk_last_error();
  EXPECT_NE(std::string(gk_last_error()).find("vocab size is 269"), std::string::npos);
  const int32_t negative = -1;
  EXPECT_EQ(gk_tokenizer_decode(tok_.get(), &negative, 1, 0, buf, sizeof(buf), &n),
            GK_INVALID_ARGUMENT);
  const char* text = nullptr;
  EXPECT_EQ(gk_tokenizer_token_text(tok_.get(), 100000, &text, &n), GK_INVALID_ARGUMENT);
  ASSERT_EQ(gk_tokenizer_token_text(tok_.get(), kSpWorld, &text, &n), GK_OK);
  EXPECT_EQ(std::string(text, n), chars(" world"));

  gk_detokenizer* d = nullptr;
  ASSERT_EQ(gk_detokenizer_create(tok_.get(), 0, &d), GK_OK);
  DetokenizerPtr det(d);
  ASSERT_EQ(gk_detokenizer_push(d, kEmojiHead, &text, &n), GK_OK);
  EXPECT_EQ(gk_detokenizer_push(d, -5, &text, &n), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("-5"), std::string::npos);
  // The held-back bytes survived the refused id.
  ASSERT_EQ(gk_detokenizer_push(d, 0x98, &text, &n), GK_OK);
  ASSERT_EQ(gk_detokenizer_push(d, 0x80, &text, &n), GK_OK);
  EXPECT_EQ(std::string(text, n), "\xF0\x9F\x98\x80");
}

TEST_F(TinyTokenizer, small_buffers_report_the_size_needed) {
  const std::string text = "hello world";
  int32_t one = -7;
  size_t n = 0;
  EXPECT_EQ(gk_tokenizer_encode(tok_.get(), text.data(), text.size(), 0, &one, 1, &n),
            GK_OUT_OF_RANGE);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(one, -7);  // nothing written
  const Ids ids = {kHello, kSpWorld};
  char buf[4] = {'x', 'x', 'x', 'x'};
  EXPECT_EQ(gk_tokenizer_decode(tok_.get(), ids.data(), ids.size(), 0, buf, sizeof(buf), &n),
            GK_OUT_OF_RANGE);
  EXPECT_EQ(n, 11u);
  EXPECT_EQ(buf[0], 'x');
  EXPECT_EQ(gk_tokenizer_encode(tok_.get(), text.data(), text.size(), 0x80, nullptr, 0, &n),
            GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_tokenizer_encode(nullptr, text.data(), text.size(), 0, nullptr, 0, &n),
            GK_INVALID_ARGUMENT);
}

TEST_F(TinyTokenizer, threads_share_one_tokenizer) {
  const std::string text = "hello world \xF0\x9F\x98\x80 <sep> hello";
  const Ids expected = encode(text);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        Ids ids(64);
        size_t n = 0;
        if (gk_tokenizer_encode(tok_.get(), text.data(), text.size(), 0, ids.data(), ids.size(),
                                &n) != GK_OK) {
          ++mismatches;
          continue;
        }
        ids.resize(n);
        if (ids != expected) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ---------------------------------------------------------------------------------------
// Bad files
// ---------------------------------------------------------------------------------------

gk_status open_json(gk_runtime* rt, const ScratchDir& dir, const std::string& text) {
  const std::string path = dir.write("tokenizer.json", text);
  gk_tokenizer* t = nullptr;
  const gk_status s = gk_tokenizer_open(rt, path.c_str(), &t);
  gk_tokenizer_release(t);
  return s;
}

TEST(TokenizerFiles, malformed_tokenizer_json_fails_naming_file_and_key) {
  auto rt = make_runtime(test_options());
  ScratchDir dir;
  EXPECT_EQ(open_json(rt.get(), dir, "{\"model\": "), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("tokenizer.json: not valid JSON"), std::string::npos)
      << gk_last_error();

  json j = tiny_tokenizer_json();
  j["model"]["merges"].push_back("zz qq");
  EXPECT_EQ(open_json(rt.get(), dir, j.dump()), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("model.merges[10] 'zz qq' names 'zz'"),
            std::string::npos)
      << gk_last_error();

  j = tiny_tokenizer_json();
  j["model"]["merges"].push_back(42);
  EXPECT_EQ(open_json(rt.get(), dir, j.dump()), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("model.merges[10]"), std::string::npos);

  j = tiny_tokenizer_json();
  j["model"]["vocab"]["h"] = "seven";
  EXPECT_EQ(open_json(rt.get(), dir, j.dump()), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("model.vocab['h']"), std::string::npos);

  j = tiny_tokenizer_json();
  j["model"]["type"] = "Unigram";
  EXPECT_EQ(open_json(rt.get(), dir, j.dump()), GK_UNIMPLEMENTED);
  EXPECT_NE(std::string(gk_last_error()).find("'Unigram'"), std::string::npos);

  j = tiny_tokenizer_json();
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(open_json(rt.get(), dir, j.dump()), GK_UNIMPLEMENTED);

  j = tiny_tokenizer_json();
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(open_json(rt.get(), dir, j.dump()), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("(unclosed"), std::string::npos);

  gk_tokenizer* t = nullptr;
  EXPECT_EQ(gk_tokenizer_open(rt.get(), dir.file("missing.json").c_str(), &t), GK_NOT_FOUND);
  EXPECT_EQ(t, nullptr);
}

// The message of from_gguf's last failure (gk_last_error() is reset by the calls after it).
std::string g_message;
const std::string& last_message() {
  return g_message;
}

// A GGUF holding one tensor and the given tokenizer keys.
std::string write_gguf(const ScratchDir& dir, const std::function<void(GgufWriter&)>& keys) {
  GgufWriter w;
  keys(w);
  w.tensor("t", {2}, 0, Bytes(8, 0));
  return dir.write("vocab.gguf", w.bytes());
}

gk_status from_gguf(gk_runtime* rt, const std::string& path, TokenizerPtr* out = nullptr) {
  gk_weights* w = nullptr;
  EXPECT_EQ(gk_weights_open(rt, path.c_str(), nullptr, &w), GK_OK) << gk_last_error();
  gk_tokenizer* t = nullptr;
  const gk_status s = gk_tokenizer_from_weights(w, &t);
  const std::string message = gk_last_error();
  gk_weights_close(w);  // the tokenizer does not need the weights
  if (out)
    out->reset(t);
  else
    gk_tokenizer_release(t);
  g_message = message;
  return s;
}

TEST(TokenizerFiles, gguf_vocab_loads_and_bad_ones_are_refused) {
  auto rt = make_runtime(test_options());
  ScratchDir dir;
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(b));
  tokens.push_back("12");
  tokens.push_back("<|endoftext|>");
  auto vocab = [&](GgufWriter& w) {
    w.kv_string("tokenizer.ggml.model", "gpt2");
    w.kv_string("tokenizer.ggml.pre", "smollm");
    w.kv_strings("tokenizer.ggml.tokens", tokens);
    w.kv_strings("tokenizer.ggml.merges", {"1 2"});
    Bytes& types = w.key("tokenizer.ggml.token_type", kGgufArray);
    put<uint32_t>(types, kGgufI32);
    put<uint64_t>(types, tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) put<int32_t>(types, i == 257 ? 3 : 1);
    w.kv<uint32_t>("tokenizer.ggml.eos_token_id", kGgufU32, 257);
  };
  TokenizerPtr tok;
  ASSERT_EQ(from_gguf(rt.get(), write_gguf(dir, vocab), &tok), GK_OK) << gk_last_error();
  // smollm cuts digits one by one, so the merge "1 2" never applies.
  const std::string text = "x12<|endoftext|>";
  Ids ids(16);
  size_t n = 0;
  ASSERT_EQ(gk_tokenizer_encode(tok.get(), text.data(), text.size(), GK_TOKENIZE_PARSE_SPECIAL,
                                ids.data(), ids.size(), &n),
            GK_OK)
      << gk_last_error();
  ids.resize(n);
  EXPECT_EQ(ids, (Ids{'x', '1', '2', 257}));
  gk_tokenizer_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(gk_tokenizer_info_get(tok.get(), &info), GK_OK);
  EXPECT_EQ(info.eos_id, 257);
  EXPECT_EQ(info.eot_id, 257);  // found by its text, as llama.cpp does
  EXPECT_STREQ(info.pre, "smollm");

  EXPECT_EQ(from_gguf(rt.get(), write_gguf(dir, [](GgufWriter&) {})), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_message().find("no key 'tokenizer.ggml.model'"), std::string::npos)
      << last_message();
  EXPECT_NE(last_message().find("vocab.gguf"), std::string::npos);

  EXPECT_EQ(
      from_gguf(
          rt.get(),
          write_gguf(dir, [](GgufWriter& w) { w.kv_string("tokenizer.ggml.model", "llama"); })),
      GK_UNIMPLEMENTED);
  EXPECT_NE(last_message().find("'llama'"), std::string::npos);

  EXPECT_EQ(from_gguf(rt.get(), write_gguf(dir,
                                           [&](GgufWriter& w) {
                                             w.kv_string("tokenizer.ggml.model", "gpt2");
                                             w.kv_string("tokenizer.ggml.pre", "no-such-pre");
                                             w.kv_strings("tokenizer.ggml.tokens", tokens);
                                             w.kv_strings("tokenizer.ggml.merges", {});
                                           })),
            GK_UNIMPLEMENTED);
  EXPECT_NE(last_message().find("'no-such-pre'"), std::string::npos);
  EXPECT_NE(last_message().find("llama-bpe"), std::string::npos);

  EXPECT_EQ(from_gguf(rt.get(), write_gguf(dir,
                                           [&](GgufWriter& w) {
                                             w.kv_string("tokenizer.ggml.model", "gpt2");
                                             w.kv_strings("tokenizer.ggml.tokens", tokens);
                                             w.kv_strings("tokenizer.ggml.merges", {"1 Q9"});
                                           })),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_message().find("tokenizer.ggml.merges[0] '1 Q9' names 'Q9'"), std::string::npos)
      << last_message();

  EXPECT_EQ(from_gguf(rt.get(), write_gguf(dir,
                                           [&](GgufWriter& w) {
                                             w.kv_string("tokenizer.ggml.model", "gpt2");
                                             w.kv_string("tokenizer.ggml.tokens", "abc");
                                           })),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_message().find("'tokenizer.ggml.tokens': not an array"), std::string::npos);

  // A SafeTensors weight set has no vocabulary.
  EXPECT_EQ(from_gguf(rt.get(), dir.write("model.safetensors",
                                          safetensors_file({{"a", "F32", {2}, Bytes(8, 0)}}))),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_message().find("model.safetensors is a safetensors weight set, which holds no "
                                "vocabulary"),
            std::string::npos)
      << last_message();
  gk_tokenizer* t = nullptr;
  EXPECT_EQ(gk_tokenizer_from_weights(nullptr, &t), GK_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------------------
// llama.cpp's golden vectors
// ---------------------------------------------------------------------------------------

std::filesystem::path fixtures_dir() {
  const char* env = std::getenv("GPUKIT_FIXTURES");
  const char* home = std::getenv("HOME");
  std::filesystem::path root =
      env && *env ? env : std::string(home ? home : ".") + "/.cache/gpukit/fixtures";
  return root / "llama-vocab";
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Inputs separated by "\n__ggml_vocab_test__\n" (the file ends with one); outputs one line
// of space-separated ids per input, as tests/test-tokenizer-0.cpp reads them.
std::vector<std::pair<std::string, Ids>> read_golden(const std::filesystem::path& inp,
                                                     const std::filesystem::path& out) {
  const std::string raw = read_all(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  for (;;) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      if (pos < raw.size()) inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<Ids> outputs;
  std::istringstream lines(read_all(out));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    Ids ids;
    for (int32_t id; words >> id;) ids.push_back(id);
    outputs.push_back(std::move(ids));
  }
  std::vector<std::pair<std::string, Ids>> tests;
  EXPECT_EQ(inputs.size(), outputs.size()) << inp;
  for (size_t i = 0; i < std::min(inputs.size(), outputs.size()); ++i) {
    tests.emplace_back(inputs[i], outputs[i]);
  }
  return tests;
}

TEST(TokenizerGolden, llama_cpp_vocabularies_match_every_golden_vector) {
  const auto dir = fixtures_dir();
  if (!std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << "no llama.cpp vocabularies in " << dir
                 << " (run tests/fixtures/fetch_tokenizer_vocabs.py or make deps)";
  }
  auto rt = make_runtime(test_options());
  std::vector<std::filesystem::path> inputs;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".inp") inputs.push_back(e.path());
  }
  std::sort(inputs.begin(), inputs.end());
  std::map<std::string, bool> supported;
  for (const auto& inp : inputs) {
    const std::string gguf = inp.parent_path() / inp.stem();  // drops ".inp"
    const std::string name = inp.stem().stem().string();      // ggml-vocab-<name>
    gk_weights* w = nullptr;
    ASSERT_EQ(gk_weights_open(rt.get(), gguf.c_str(), nullptr, &w), GK_OK) << gk_last_error();
    gk_tokenizer* t = nullptr;
    const gk_status s = gk_tokenizer_from_weights(w, &t);
    gk_weights_close(w);
    if (s == GK_UNIMPLEMENTED) {
      std::printf("[ golden   ] %-28s not applicable: %s\n", name.c_str(), gk_last_error());
      supported[name] = false;
      continue;
    }
    ASSERT_EQ(s, GK_OK) << name << ": " << gk_last_error();
    TokenizerPtr tok(t);
    supported[name] = true;
    const auto tests = read_golden(inp, std::string(gguf) + ".out");
    size_t matched = 0, round_trips = 0;
    for (const auto& [text, expected] : tests) {
      Ids ids(text.size() + 8);
      size_t n = 0;
      ASSERT_EQ(
          gk_tokenizer_encode(tok.get(), text.data(), text.size(), 0, ids.data(), ids.size(), &n),
          GK_OK)
          << gk_last_error();
      ids.resize(n);
      if (ids == expected) {
        ++matched;
      } else {
        ADD_FAILURE() << name << ": input '" << text << "'";
        EXPECT_EQ(ids, expected) << name;
      }
      std::string back(text.size() + 16, '\0');
      size_t len = 0;
      ASSERT_EQ(
          gk_tokenizer_decode(tok.get(), ids.data(), ids.size(), 0, back.data(), back.size(), &len),
          GK_OK)
          << gk_last_error();
      back.resize(len);
      if (back == text) ++round_trips;
    }
    std::printf("[ golden   ] %-28s %zu/%zu golden vectors match; decode restores %zu/%zu\n",
                name.c_str(), matched, tests.size(), round_trips, tests.size());
    EXPECT_EQ(matched, tests.size()) << name;
    EXPECT_EQ(round_trips, tests.size()) << name;
  }
  for (const char* required : {"ggml-vocab-gpt-2", "ggml-vocab-llama-bpe", "ggml-vocab-qwen2"}) {
    ASSERT_TRUE(supported.count(required)) << required << " missing from " << dir;
    EXPECT_TRUE(supported[required]) << required << " must be supported";
  }
}

}  // namespace
}  // namespace gk::test
