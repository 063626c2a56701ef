// Whisper's decoding of encoded windows, as openai-whisper's DecodingTask does it: the logit
// filters, then greedy decoding, beam search, or sampling of several candidates at a
// temperature, the likeliest kept. Many windows decode at once: each step is one
// gk_session_step_batch over every live hypothesis of every window.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "asr/vocab.h"
#include "gpukit/gpukit.h"

namespace gk::asr {

struct Decoded {
  std::vector<int32_t> tokens;  // sampled, up to (not including) EOT
  double sum_logprob = 0;       // of the sampled tokens and EOT
  double avg_logprob = 0;       // sum_logprob / (tokens + 1)
  double no_speech_prob = 0;    // of <|nospeech|> right after <|startoftranscript|>
  float temperature = 0;
};

// One window to decode. `window` holds the encoded window (gk_session_encode) and is never
// stepped; `hyps` are sessions of the same model, at least as many as the search has
// hypotheses (beam_size, or best_of when sampling); the search overwrites them.
struct WindowJob {
  gk_session* window = nullptr;
  std::vector<gk_session*> hyps;
  std::vector<int32_t> head;      // [<|startofprev|> previous text…] <|startoftranscript|>
  std::vector<int32_t> sot_rest;  // language, task, <|notimestamps|>: after the head
  Decoded result;                 // what decode_windows finds
};

struct SearchParams {
  int32_t beam_size = 1;  // at temperature 0
  int32_t best_of = 1;    // at a temperature > 0
  float temperature = 0;
  bool timestamps = true;
  int64_t n_ctx = 0;  // the decoder's context (Whisper: 448)
  int64_t vocab_size = 0;
  // Sessions whose hypotheses ended stay in the batch, stepped on a token nobody reads,
  // while they have room: a batch that keeps its sessions keeps replaying its decode graph
  // (docs/llm.md) instead of running op by op until each smaller batch is captured. Worth it
  // where steps replay graphs (CUDA); on the cpu it would only add work.
  bool keep_batch = false;
};

// The batch of a search with SearchParams::keep_batch: every session stepped so far, in the
// order of its first step (a decode graph is kept per batch of sessions, in order).
struct Roster {
  std::vector<gk_session*> sessions;
  std::vector<int32_t> tokens;  // this step's, per session
  std::vector<size_t> row_of;   // live[i]'s row of the step
  // This step: the `live` sessions step on `live_tokens` (a new one joins at the end), the
  // others on `filler`; one of those leaves when it has no room for another position.
  void step(const std::vector<gk_session*>& live, const std::vector<int32_t>& live_tokens,
            int32_t filler, const std::function<bool(gk_session*)>& has_room);
};

// log(sum(exp(x))) over [from, to) (-inf when every element is -inf, or none), with the
// position of the first largest element (-1 then). In float with an exp of relative error
// below 3e-7, summed in double: what the search's log-probabilities need, at a few times
// libm's speed.
struct LogSum {
  double value = -std::numeric_limits<double>::infinity();
  int64_t argmax = -1;
};
LogSum log_sum(const float* x, int64_t from, int64_t to);

// Decodes every job's window; on return each job's result is its best candidate (ranked by
// log-probability over length, as Whisper's MaximumLikelihoodRanker).
void decode_windows(const std::vector<WindowJob*>& jobs, const SearchParams& p, const Vocab& v,
                    std::mt19937_64& rng);

}  // namespace gk::asr
