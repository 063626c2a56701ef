#include "generate.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <vector>

#include "cli_common.h"
#include "op_signatures.h"

namespace gk::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The tokenizer beside the model: a GGUF file carries its vocabulary; an HF folder holds a
// tokenizer.json.
TokenizerPtr open_tokenizer(gk_runtime* rt, const std::string& path) {
  gk_tokenizer* tok = nullptr;
  if (std::filesystem::is_directory(path)) {
    const std::string json = (std::filesystem::path(path) / "tokenizer.json").string();
    check(gk_tokenizer_open(rt, json.c_str(), &tok), "gk_tokenizer_open");
  } else {
    gk_weights* raw = nullptr;
    check(gk_weights_open(rt, path.c_str(), nullptr, &raw), "gk_weights_open");
    WeightsPtr weights(raw);
    check(gk_tokenizer_from_weights(weights.get(), &tok), "gk_tokenizer_from_weights");
  }
  return TokenizerPtr(tok);
}

std::vector<int32_t> encode(const gk_tokenizer* tok, const std::string& text, uint32_t flags) {
  size_t count = 0;
  const gk_status sized =
      gk_tokenizer_encode(tok, text.data(), text.size(), flags, nullptr, 0, &count);
  if (sized != GK_OK && sized != GK_OUT_OF_RANGE) check(sized, "gk_tokenizer_encode");
  std::vector<int32_t> ids(count);
  check(gk_tokenizer_encode(tok, text.data(), text.size(), flags, ids.data(), ids.size(), &count),
        "gk_tokenizer_encode");
  ids.resize(count);
  return ids;
}

// Streams each token's text to stdout as soon as it completes a character.
struct Printer {
  gk_detokenizer* detokenizer = nullptr;
  int32_t generated = 0;

  static int32_t on_token(void* user_data, int32_t token) {
    auto* self = static_cast<Printer*>(user_data);
    ++self->generated;
    const char* text = nullptr;
    size_t length = 0;
    if (gk_detokenizer_push(self->detokenizer, token, &text, &length) != GK_OK) return 1;
    std::fwrite(text, 1, length, stdout);
    std::fflush(stdout);
    return 0;
  }
};

}  // namespace

int cmd_generate(gk_runtime* rt, int32_t device, const GenerateOptions& o) {
  const int32_t dtype = parse_dtype(o.dtype);
  if (dtype != GK_DTYPE_F32 && dtype != GK_DTYPE_BF16 && dtype != GK_DTYPE_F16) {
    throw std::invalid_argument("--dtype " + o.dtype + ": give f32, bf16 or f16");
  }
  if (o.max_tokens < 0) throw std::invalid_argument("--max-tokens must be >= 0");
  const bool terminal = isatty(STDERR_FILENO);

  const Clock::time_point load_start = Clock::now();
  if (terminal) std::fprintf(stderr, "loading %s ...\r", o.model.c_str());
  auto tok = open_tokenizer(rt, o.model);
  gk_model_options options{};
  options.struct_size = sizeof options;
  options.device = device;
  options.dtype = dtype;
  gk_model* raw_model = nullptr;
  check(gk_model_load(rt, o.model.c_str(), &options, &raw_model), "gk_model_load");
  ModelPtr model(raw_model);
  gk_session* raw_session = nullptr;
  check(gk_session_create(model.get(), nullptr, &raw_session), "gk_session_create");
  SessionPtr session(raw_session);
  const double load_s = seconds_since(load_start);
  if (terminal) std::fprintf(stderr, "\033[K");  // clears the loading line

  gk_tokenizer_info info{};
  info.struct_size = sizeof info;
  check(gk_tokenizer_info_get(tok.get(), &info), "gk_tokenizer_info_get");
  // --chat: one user turn of a ChatML conversation (SmolLM2, Qwen2), the reply's start last.
  const std::string text =
      o.chat ? "<|im_start|>user\n" + o.prompt + "<|im_end|>\n<|im_start|>assistant\n" : o.prompt;
  const std::vector<int32_t> prompt =
      encode(tok.get(), text, GK_TOKENIZE_ADD_SPECIAL | (o.chat ? GK_TOKENIZE_PARSE_SPECIAL : 0));
  if (prompt.empty()) throw std::invalid_argument("--prompt gives no token; give some text");

  gk_detokenizer* raw_detok = nullptr;
  check(gk_detokenizer_create(tok.get(), GK_DETOKENIZE_SKIP_SPECIAL, &raw_detok),
        "gk_detokenizer_create");
  DetokenizerPtr detok(raw_detok);

  // Prefill is every prompt token but the last, timed alone; generation steps the last one
  // and then decodes, so its time is the decode speed.
  const Clock::time_point prefill_start = Clock::now();
  if (prompt.size() > 1) {
    check(gk_session_step(session.get(), prompt.data(), static_cast<int32_t>(prompt.size() - 1), 0,
                          nullptr),
          "gk_session_step");
  }
  const double prefill_s = seconds_since(prefill_start);

  std::vector<int32_t> stops;
  for (int32_t id : {info.eos_id, info.eot_id}) {
    if (id >= 0) stops.push_back(id);
  }
  Printer printer{detok.get()};
  gk_generate_options g{};
  g.struct_size = sizeof g;
  g.max_tokens = o.max_tokens;
  g.top_k = o.top_k;
  g.temperature = o.temperature;
  g.top_p = o.top_p;
  g.min_p = o.min_p;
  g.repetition_penalty = o.repetition_penalty;
  g.seed = o.seed;
  g.stop_tokens = stops.data();
  g.num_stop_tokens = static_cast<int32_t>(stops.size());
  g.on_token = &Printer::on_token;
  g.user_data = &printer;
  std::vector<int32_t> out(static_cast<size_t>(o.max_tokens) + 1);
  int32_t count = 0;
  const Clock::time_point decode_start = Clock::now();
  check(gk_session_generate(session.get(), &prompt.back(), 1, &g, out.data(),
                            static_cast<int32_t>(out.size()), &count),
        "gk_session_generate");
  const double decode_s = seconds_since(decode_start);
  const char* rest = nullptr;
  size_t rest_length = 0;
  check(gk_detokenizer_flush(detok.get(), &rest, &rest_length), "gk_detokenizer_flush");
  std::fwrite(rest, 1, rest_length, stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);

  const size_t prefilled = prompt.size() - 1;
  std::fprintf(stderr,
               "load %.2f s; prefill %zu tokens in %.3f s (%.1f tok/s); decode %d tokens in "
               "%.3f s (%.1f tok/s)\n",
               load_s, prefilled, prefill_s, prefill_s > 0 ? prefilled / prefill_s : 0.0, count,
               decode_s, decode_s > 0 ? count / decode_s : 0.0);
  return 0;
}

}  // namespace gk::cli
