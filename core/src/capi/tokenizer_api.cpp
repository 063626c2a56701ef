// The tokenizer C API (ABI 1.5): gk_tokenizer_* and gk_detokenizer_* over
// tokenizer/tokenizer.h.
#include <algorithm>
#include <cstring>
#include <string_view>

#include "capi/capi_util.h"
#include "capi/weights_handle.h"
#include "tokenizer/tokenizer.h"

struct gk_tokenizer {
  std::shared_ptr<const gk::tokenizer::Tokenizer> impl;
};

struct gk_detokenizer {
  gk::tokenizer::StreamDecoder decoder;
};

namespace {

const gk::tokenizer::Tokenizer& tokenizer_of(const gk_tokenizer* t, const char* function) {
  gk::require_arg(t, function, "tokenizer");
  return *t->impl;
}

void check_flags(uint32_t flags, uint32_t known, const char* function) {
  if (flags & ~known) {
    gk::fail(GK_INVALID_ARGUMENT, std::string(function) + ": unknown flag bits " +
                                      std::to_string(flags & ~known) +
                                      " (known: " + std::to_string(known) + ")");
  }
}

// Hands out a detokenizer's text: its own buffer, valid until the next call.
void give_text(const std::string& text, const char** out_text, size_t* out_length) {
  *out_text = text.c_str();
  *out_length = text.size();
}

}  // namespace

extern "C" {

GK_API gk_status gk_tokenizer_from_weights(const gk_weights* weights, gk_tokenizer** out) {
  return gk::c_guard([&] {
    gk::require_arg(weights, "gk_tokenizer_from_weights", "weights");
    gk::require_arg(out, "gk_tokenizer_from_weights", "out");
    const auto& set = *weights->set;
    if (std::string_view(set.format()) != "gguf") {
      gk::fail(GK_INVALID_ARGUMENT, "gk_tokenizer_from_weights: " + set.path() + " is a " +
                                        set.format() +
                                        " weight set, which holds no vocabulary; open the "
                                        "tokenizer.json beside it with gk_tokenizer_open");
    }
    auto t = std::make_unique<gk_tokenizer>();
    t->impl = gk::tokenizer::Tokenizer::from_gguf_metadata(set.metadata(), set.path());
    *out = t.release();
  });
}

GK_API gk_status gk_tokenizer_open(gk_runtime* runtime, const char* tokenizer_json_path,
                                   gk_tokenizer** out) {
  return gk::c_guard([&] {
    gk::runtime_of(runtime, "gk_tokenizer_open");
    gk::require_arg(tokenizer_json_path, "gk_tokenizer_open", "tokenizer_json_path");
    gk::require_arg(out, "gk_tokenizer_open", "out");
    auto t = std::make_unique<gk_tokenizer>();
    t->impl = gk::tokenizer::Tokenizer::from_tokenizer_json(tokenizer_json_path);
    *out = t.release();
  });
}

GK_API gk_status gk_tokenizer_open_tiktoken(gk_runtime* runtime, const char* path,
                                            const char* const* special_tokens,
                                            int32_t num_special, const char* pattern,
                                            gk_tokenizer** out) {
  return gk::c_guard([&] {
    const char* fn = "gk_tokenizer_open_tiktoken";
    gk::runtime_of(runtime, fn);
    gk::require_arg(path, fn, "path");
    gk::require_arg(out, fn, "out");
    if (num_special < 0 || (num_special > 0 && !special_tokens)) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": num_special " +
                                        std::to_string(num_special) + " with special_tokens " +
                                        (special_tokens ? "given" : "NULL"));
    }
    std::vector<std::string> specials;
    for (int32_t i = 0; i < num_special; ++i) {
      if (!special_tokens[i] || !*special_tokens[i]) {
        gk::fail(GK_INVALID_ARGUMENT,
                 std::string(fn) + ": special_tokens[" + std::to_string(i) + "] is empty");
      }
      specials.emplace_back(special_tokens[i]);
    }
    auto t = std::make_unique<gk_tokenizer>();
    t->impl = gk::tokenizer::Tokenizer::from_tiktoken(path, specials, pattern ? pattern : "");
    *out = t.release();
  });
}

GK_API void gk_tokenizer_release(gk_tokenizer* tokenizer) {
  delete tokenizer;
}

GK_API int32_t gk_tokenizer_vocab_size(const gk_tokenizer* tokenizer) {
  return tokenizer ? tokenizer->impl->vocab_size() : 0;
}

GK_API gk_status gk_tokenizer_info_get(const gk_tokenizer* tokenizer, gk_tokenizer_info* out) {
  return gk::c_guard([&] {
    const auto& t = tokenizer_of(tokenizer, "gk_tokenizer_info_get");
    gk::require_arg(out, "gk_tokenizer_info_get", "out");
    gk::require_struct(out->struct_size, GK_TOKENIZER_INFO_SIZE, "gk_tokenizer_info_get",
                       "gk_tokenizer_info");
    gk_tokenizer_info info{};
    info.struct_size = out->struct_size;
    info.vocab_size = t.vocab_size();
    info.bos_id = t.bos_id();
    info.eos_id = t.eos_id();
    info.eot_id = t.eot_id();
    info.pad_id = t.pad_id();
    info.unk_id = t.unk_id();
    info.add_bos = t.add_bos() && t.bos_id() >= 0;
    info.add_eos = t.add_eos() && t.eos_id() >= 0;
    info.pre = t.pre_name().c_str();
    std::memcpy(out, &info, std::min(out->struct_size, sizeof(info)));
  });
}

GK_API gk_status gk_tokenizer_encode(const gk_tokenizer* tokenizer, const char* text, size_t length,
                                     uint32_t flags, int32_t* ids, size_t capacity,
                                     size_t* out_count) {
  return gk::c_guard([&] {
    const auto& t = tokenizer_of(tokenizer, "gk_tokenizer_encode");
    if (length) gk::require_arg(text, "gk_tokenizer_encode", "text");
    if (capacity) gk::require_arg(ids, "gk_tokenizer_encode", "ids");
    gk::require_arg(out_count, "gk_tokenizer_encode", "out_count");
    check_flags(flags, GK_TOKENIZE_ADD_SPECIAL | GK_TOKENIZE_PARSE_SPECIAL, "gk_tokenizer_encode");
    gk::tokenizer::EncodeOptions o;
    o.add_special = flags & GK_TOKENIZE_ADD_SPECIAL;
    o.parse_special = flags & GK_TOKENIZE_PARSE_SPECIAL;
    std::vector<int32_t> result;
    t.encode(std::string_view(text ? text : "", length), o, result);
    *out_count = result.size();
    if (result.size() > capacity) {
      gk::fail(GK_OUT_OF_RANGE, "gk_tokenizer_encode: the text needs " +
                                    std::to_string(result.size()) + " ids; capacity is " +
                                    std::to_string(capacity));
    }
    std::copy(result.begin(), result.end(), ids);
  });
}

GK_API gk_status gk_tokenizer_token_text(const gk_tokenizer* tokenizer, int32_t id,
                                         const char** out_text, size_t* out_length) {
  return gk::c_guard([&] {
    const auto& t = tokenizer_of(tokenizer, "gk_tokenizer_token_text");
    gk::require_arg(out_text, "gk_tokenizer_token_text", "out_text");
    gk::require_arg(out_length, "gk_tokenizer_token_text", "out_length");
    t.check_id(id, "gk_tokenizer_token_text");
    give_text(t.token_text(id), out_text, out_length);
  });
}

GK_API gk_status gk_tokenizer_decode(const gk_tokenizer* tokenizer, const int32_t* ids,
                                     size_t count, uint32_t flags, char* out, size_t capacity,
                                     size_t* out_length) {
  return gk::c_guard([&] {
    const auto& t = tokenizer_of(tokenizer, "gk_tokenizer_decode");
    if (count) gk::require_arg(ids, "gk_tokenizer_decode", "ids");
    if (capacity) gk::require_arg(out, "gk_tokenizer_decode", "out");
    gk::require_arg(out_length, "gk_tokenizer_decode", "out_length");
    check_flags(flags, GK_DETOKENIZE_SKIP_SPECIAL, "gk_tokenizer_decode");
    for (size_t i = 0; i < count; ++i) t.check_id(ids[i], "gk_tokenizer_decode");
    std::string text;
    for (size_t i = 0; i < count; ++i) {
      t.append_piece(ids[i], flags & GK_DETOKENIZE_SKIP_SPECIAL, text);
    }
    *out_length = text.size();
    if (text.size() > capacity) {
      gk::fail(GK_OUT_OF_RANGE, "gk_tokenizer_decode: the text needs " +
                                    std::to_string(text.size()) + " bytes; capacity is " +
                                    std::to_string(capacity));
    }
    if (!text.empty()) std::memcpy(out, text.data(), text.size());
    if (capacity > text.size()) out[text.size()] = '\0';
  });
}

GK_API gk_status gk_detokenizer_create(const gk_tokenizer* tokenizer, uint32_t flags,
                                       gk_detokenizer** out) {
  return gk::c_guard([&] {
    tokenizer_of(tokenizer, "gk_detokenizer_create");
    gk::require_arg(out, "gk_detokenizer_create", "out");
    check_flags(flags, GK_DETOKENIZE_SKIP_SPECIAL, "gk_detokenizer_create");
    *out = new gk_detokenizer{
        gk::tokenizer::StreamDecoder(tokenizer->impl, flags & GK_DETOKENIZE_SKIP_SPECIAL)};
  });
}

GK_API void gk_detokenizer_release(gk_detokenizer* detokenizer) {
  delete detokenizer;
}

GK_API gk_status gk_detokenizer_push(gk_detokenizer* detokenizer, int32_t id, const char** out_text,
                                     size_t* out_length) {
  return gk::c_guard([&] {
    gk::require_arg(detokenizer, "gk_detokenizer_push", "detokenizer");
    gk::require_arg(out_text, "gk_detokenizer_push", "out_text");
    gk::require_arg(out_length, "gk_detokenizer_push", "out_length");
    detokenizer->decoder.tokenizer().check_id(id, "gk_detokenizer_push");
    give_text(detokenizer->decoder.push(id), out_text, out_length);
  });
}

GK_API gk_status gk_detokenizer_flush(gk_detokenizer* detokenizer, const char** out_text,
                                      size_t* out_length) {
  return gk::c_guard([&] {
    gk::require_arg(detokenizer, "gk_detokenizer_flush", "detokenizer");
    gk::require_arg(out_text, "gk_detokenizer_flush", "out_text");
    gk::require_arg(out_length, "gk_detokenizer_flush", "out_length");
    give_text(detokenizer->decoder.flush(), out_text, out_length);
  });
}

}  // extern "C"
