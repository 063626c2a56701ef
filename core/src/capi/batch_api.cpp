// gk_batch (model C API): several sequences of one model decoded together, each with its own
// sampling options, one forward pass per step where the plugin batches.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "capi/capi_util.h"
#include "capi/model_state.h"

namespace gk {

// One sequence of a gk_batch: its session until it finishes, its options, what it has seen.
struct BatchSequence {
  int64_t id = 0;
  std::unique_ptr<gk_session> session;  // released when the sequence finishes
  gk_generate_options options{};
  std::vector<int32_t> stop_tokens;  // options.stop_tokens points here
  std::vector<int32_t> seen;         // the prompt, then the generated tokens
  std::vector<int32_t> generated;
  bool finished = false;
  gk_tensor* ids = nullptr;  // the sample op's output, made at the first draw

  ~BatchSequence() { finish(); }

  bool greedy() const { return options.temperature == 0 && options.repetition_penalty == 1.0; }

  // The next token from this sequence's logits `row` [1, vocab] on the device, with its own
  // options, drawn on `stream` (the one the row was computed on); the same draws as
  // gk_session_generate. A repetition penalty rewrites the row.
  int32_t sample(ModelState& m, gk_stream* stream, gk_tensor* row, const char* function) {
    const int64_t vocab = m.info.vocab_size;
    // Made on the sequence's own stream (every draw waits for its stream, so the draws of
    // later steps on another batch stream find it idle).
    if (!ids) ids = new_device_tensor(m, session->stream, GK_DTYPE_I32, {1}, function);
    if (options.repetition_penalty != 1.0) {
      std::vector<float> penalized(static_cast<size_t>(vocab));
      copy_to_host(row, penalized.data(), uint64_t(vocab) * 4, stream, function);
      apply_repetition_penalty(penalized.data(), vocab, seen, options.repetition_penalty);
      copy_from_host(row, penalized.data(), uint64_t(vocab) * 4, stream, function);
    }
    return sample_op(m, stream, options, row, ids, session->length.load(), function);
  }

  // Records `token` and finishes the sequence as gk_session_generate stops.
  void accept(int32_t token) {
    generated.push_back(token);
    seen.push_back(token);
    bool stop = options.on_token && options.on_token(options.user_data, token) != 0;
    for (int32_t t : stop_tokens) stop = stop || t == token;
    if (stop || int32_t(generated.size()) >= options.max_tokens ||
        session->length.load() >= session->capacity) {
      finish();
    }
  }

  // Frees the session (its KV cache) and the sampling tensors now.
  void finish() {
    finished = true;
    session.reset();
    gk_tensor_release(ids);
    ids = nullptr;
  }
};

}  // namespace gk

struct gk_batch {
  std::shared_ptr<gk::ModelState> model;
  gk_session_options options{};
  std::vector<std::unique_ptr<gk::BatchSequence>> sequences;  // in the order added
  int64_t next_id = 0;

  const gk::BatchSequence& find(int64_t id, const char* function) const {
    for (const auto& s : sequences) {
      if (s->id == id) return *s;
    }
    gk::fail(GK_NOT_FOUND, std::string(function) + ": sequence " + std::to_string(id) +
                               " is not in the batch (never added, or removed)");
  }
};

extern "C" {

// ---- gk_batch ----

GK_API gk_status gk_batch_create(gk_model* model, const gk_session_options* options,
                                 gk_batch** out) {
  return gk::c_guard([&] {
    gk::require_arg(model, "gk_batch_create", "model");
    gk::require_arg(out, "gk_batch_create", "out");
    auto b = std::make_unique<gk_batch>();
    b->model = model->state;
    b->options.struct_size = sizeof(gk_session_options);
    if (options) {
      gk::require_struct(options->struct_size, GK_SESSION_OPTIONS_SIZE, "gk_batch_create",
                         "gk_session_options");
      std::memcpy(&b->options, options, std::min(options->struct_size, sizeof(gk_session_options)));
      b->options.struct_size = sizeof(gk_session_options);
    }
    *out = b.release();
  });
}

GK_API void gk_batch_release(gk_batch* batch) {
  delete batch;
}

GK_API gk_status gk_batch_add(gk_batch* batch, const int32_t* prompt, int32_t count,
                              const gk_generate_options* options, int64_t* out_id) {
  return gk::c_guard([&] {
    const char* fn = "gk_batch_add";
    gk::require_arg(batch, fn, "batch");
    gk::require_arg(options, fn, "options");
    gk::require_arg(out_id, fn, "out_id");
    gk::require_struct(options->struct_size, GK_GENERATE_OPTIONS_SIZE, fn, "gk_generate_options");
    gk::check_generate_options(*options, options->max_tokens, fn);
    auto seq = std::make_unique<gk::BatchSequence>();
    seq->options = *options;
    seq->stop_tokens.assign(options->stop_tokens,
                            options->stop_tokens + std::max(options->num_stop_tokens, 0));
    seq->options.stop_tokens = seq->stop_tokens.data();
    seq->session = gk::open_session(batch->model, &batch->options, fn);
    gk_session& s = *seq->session;
    gk::join_default_stream(s.stream, s.default_stream_mark, fn);
    gk::TensorRef logits = gk::run_step(s, s.stream, prompt, count, false, fn);
    seq->seen.assign(prompt, prompt + count);
    gk::ModelState& m = *batch->model;
    if (options->max_tokens == 0) {
      gk::finish_stream(s.stream, fn);
      seq->finish();
    } else {
      seq->accept(seq->sample(m, s.stream, logits.t, fn));
    }
    seq->id = batch->next_id++;
    *out_id = seq->id;
    batch->sequences.push_back(std::move(seq));
  });
}

GK_API gk_status gk_batch_step(gk_batch* batch, int32_t* out_active) {
  return gk::c_guard([&] {
    const char* fn = "gk_batch_step";
    gk::require_arg(batch, fn, "batch");
    std::vector<gk::BatchSequence*> active;
    std::vector<gk_session*> sessions;
    std::vector<int32_t> tokens;
    for (auto& seq : batch->sequences) {
      if (seq->finished) continue;
      active.push_back(seq.get());
      sessions.push_back(seq->session.get());
      tokens.push_back(seq->generated.back());
    }
    if (!active.empty()) {
      gk::ModelState& m = *batch->model;
      const int32_t count = int32_t(sessions.size());
      gk::TensorRef logits = gk::run_batch_step(sessions.data(), count, tokens.data(), fn);
      // The draws run where the step ran: the first active sequence's task stream, if any.
      gk_stream* stream = gk::batch_stream(sessions.data()).first;
      // Every draw first, then the callbacks: a failed draw leaves no sequence half-done.
      // The logits stay on the device: greedy rows are all drawn by one sample call and one
      // copy of `count` ids, the others row by row with their own options.
      std::vector<int32_t> next(active.size());
      if (std::all_of(active.begin(), active.end(), [](auto* s) { return s->greedy(); })) {
        gk::TensorRef ids(gk::new_device_tensor(m, stream, GK_DTYPE_I32, {count}, fn));
        gk::sample_op_rows(m, stream, active[0]->options, logits.t, ids.t, 0, fn);
        gk::copy_to_host(ids.t, next.data(), uint64_t(count) * 4, stream, fn);
      } else {
        for (size_t i = 0; i < active.size(); ++i) {
          next[i] = active[i]->sample(m, stream, gk::row_view(*logits.t, int64_t(i)).t, fn);
        }
      }
      for (size_t i = 0; i < active.size(); ++i) active[i]->accept(next[i]);
    }
    if (out_active) {
      int32_t n = 0;
      for (auto& seq : batch->sequences) n += seq->finished ? 0 : 1;
      *out_active = n;
    }
  });
}

GK_API gk_status gk_batch_tokens(const gk_batch* batch, int64_t id, int32_t* out_tokens,
                                 int32_t capacity, int32_t* out_count, int32_t* out_finished) {
  return gk::c_guard([&] {
    const char* fn = "gk_batch_tokens";
    gk::require_arg(batch, fn, "batch");
    gk::require_arg(out_count, fn, "out_count");
    if (capacity < 0) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": capacity " + std::to_string(capacity) +
                                        " is negative");
    }
    if (capacity > 0) gk::require_arg(out_tokens, fn, "out_tokens");
    const gk::BatchSequence& seq = batch->find(id, fn);
    const size_t n = std::min(seq.generated.size(), size_t(capacity));
    std::copy(seq.generated.begin(), seq.generated.begin() + std::ptrdiff_t(n), out_tokens);
    *out_count = int32_t(seq.generated.size());
    if (out_finished) *out_finished = seq.finished ? 1 : 0;
  });
}

GK_API gk_status gk_batch_remove(gk_batch* batch, int64_t id) {
  return gk::c_guard([&] {
    gk::require_arg(batch, "gk_batch_remove", "batch");
    const gk::BatchSequence* seq = &batch->find(id, "gk_batch_remove");
    std::erase_if(batch->sequences, [&](const auto& s) { return s.get() == seq; });
  });
}

}  // extern "C"

