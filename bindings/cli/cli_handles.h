// Owning pointers for the C handles the `gpukit` subcommands hold: each releases its handle
// with the gk_ call that the ABI names for it.
#ifndef GPUKIT_BINDINGS_CLI_CLI_HANDLES_H_
#define GPUKIT_BINDINGS_CLI_CLI_HANDLES_H_

#include <gpukit/gpukit.h>

#include <memory>

namespace gk::cli {

struct RuntimeDeleter {
  void operator()(gk_runtime* rt) const { gk_runtime_destroy(rt); }
};
using RuntimePtr = std::unique_ptr<gk_runtime, RuntimeDeleter>;

// A string the library allocated (gk_runtime_info_json, gk_explain, …).
struct StringDeleter {
  void operator()(char* s) const { gk_string_free(s); }
};
using GkString = std::unique_ptr<char, StringDeleter>;

struct TaskDeleter {
  void operator()(gk_task* t) const { gk_task_destroy(t); }
};
using TaskPtr = std::unique_ptr<gk_task, TaskDeleter>;

struct StreamDeleter {
  void operator()(gk_stream* s) const { gk_stream_destroy(s); }
};
using StreamPtr = std::unique_ptr<gk_stream, StreamDeleter>;

struct TensorDeleter {
  void operator()(gk_tensor* t) const { gk_tensor_release(t); }
};
using TensorPtr = std::unique_ptr<gk_tensor, TensorDeleter>;

struct WeightsDeleter {
  void operator()(gk_weights* w) const { gk_weights_close(w); }
};
using WeightsPtr = std::unique_ptr<gk_weights, WeightsDeleter>;

struct ModelDeleter {
  void operator()(gk_model* m) const { gk_model_release(m); }
};
using ModelPtr = std::unique_ptr<gk_model, ModelDeleter>;

struct SessionDeleter {
  void operator()(gk_session* s) const { gk_session_release(s); }
};
using SessionPtr = std::unique_ptr<gk_session, SessionDeleter>;

struct TokenizerDeleter {
  void operator()(gk_tokenizer* t) const { gk_tokenizer_release(t); }
};
using TokenizerPtr = std::unique_ptr<gk_tokenizer, TokenizerDeleter>;

struct DetokenizerDeleter {
  void operator()(gk_detokenizer* d) const { gk_detokenizer_release(d); }
};
using DetokenizerPtr = std::unique_ptr<gk_detokenizer, DetokenizerDeleter>;

struct TranscriptDeleter {
  void operator()(gk_transcript* t) const { gk_transcript_release(t); }
};
using TranscriptPtr = std::unique_ptr<gk_transcript, TranscriptDeleter>;

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_CLI_HANDLES_H_
