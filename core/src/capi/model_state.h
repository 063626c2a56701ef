// What the model C API's files share (model_api.cpp: gk_model_* and gk_session_*;
// model_steps.cpp: steps and sampling on the device; batch_api.cpp: gk_batch_*): the state
// behind a gk_model and a gk_session, and the step and sampling helpers.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "gpukit/gpukit.h"
#include "gpukit/gpukit_plugin.h"
#include "plugin/plugin_registry.h"
#include "runtime/objects.h"

namespace gk {

struct Task;
struct MemoryOwner;

// A C call that failed left its message on this thread: carry it up with `context`.
inline void check(gk_status status, const std::string& context) {
  if (status != GK_OK) fail(status, context + ": " + last_error());
}

// A plugin call's failure: its report_error message, else the op-call service's.
inline void check_plugin(gk_status status, const PluginRecord& plugin, const std::string& context) {
  if (status == GK_OK) return;
  std::string why = take_plugin_error();
  if (why.empty()) why = last_error();
  fail(status, context + " (model plugin " + plugin.name + "): " + why);
}

struct TensorRef {
  gk_tensor* t = nullptr;
  TensorRef() = default;
  explicit TensorRef(gk_tensor* tensor) : t(tensor) {}
  TensorRef(const TensorRef&) = delete;
  TensorRef& operator=(const TensorRef&) = delete;
  TensorRef(TensorRef&& o) noexcept : t(std::exchange(o.t, nullptr)) {}
  TensorRef& operator=(TensorRef&& o) noexcept {
    std::swap(t, o.t);
    return *this;
  }
  ~TensorRef() { gk_tensor_release(t); }
};

inline gk_plugin_tensor plugin_view(const gk_tensor* t) {
  return gk_plugin_tensor{t->data, t->dtype, t->ndim, t->shape, t->strides, t->flags};
}

// What a gk_model handle and its sessions share; the plugin's model goes first.
struct ModelState {
  gk_runtime runtime;  // a handle of our own, for the C calls on the runtime
  const PluginRecord* plugin = nullptr;
  const gk_model_api* api = nullptr;
  void* handle = nullptr;
  gk_weights* weights = nullptr;
  std::vector<TensorRef> tensors;
  std::vector<gk_plugin_weight> table;
  std::string architecture;
  std::string config_json;
  std::string path;  // as gk_model_load was given it
  int32_t device = 0;
  int32_t dtype = GK_DTYPE_F32;
  gk_plugin_model_info info{};
  // Values derived once from the model and kept while it lives (model_memo).
  std::mutex memo_mu;
  std::map<std::string, std::shared_ptr<const void>> memo;

  ~ModelState() {
    if (handle) api->model_destroy(handle);
    tensors.clear();
    gk_weights_close(weights);
  }
};

}  // namespace gk

struct gk_model {
  std::shared_ptr<gk::ModelState> state;
};

struct gk_session {
  std::shared_ptr<gk::ModelState> model;
  void* handle = nullptr;
  int64_t capacity = 0;
  std::atomic<int64_t> length{0};
  // The task charged for the KV cache and the steps' scratch (gk_session_options.task).
  std::shared_ptr<gk::Task> task;
  gk::MemoryOwner* owner = nullptr;
  // With a task: a stream of the task that all of the session's device work runs on
  // (uploads, the plugin's steps, sampling, copies back), so the work has the task's stream
  // priority and SM partition and its ops are counted and paced as the task's. NULL without
  // a task: the device's default stream.
  gk_stream* stream = nullptr;
  // Recorded on the default stream before work on `stream` (see gk::join_default_stream).
  gk_event* default_stream_mark = nullptr;
  ~gk_session() {
    // Waits for the stream before the KV cache its work may still read goes.
    gk_stream_destroy(stream);
    gk_event_destroy(default_stream_mark);
    if (handle) model->api->session_destroy(handle);
  }
};

namespace gk {

// A session's calls on its task's stream (gk_session::stream; NULL: the default stream,
// and these do nothing but the copy). A task's stream is non-blocking: it does not wait for
// the default stream by itself.
//
// Makes `stream` wait for the work queued so far on the device's default stream (the
// weights, the copies of a KV pool growth, steps of sessions without a task), using `mark`.
void join_default_stream(gk_stream* stream, gk_event* mark, const std::string& function);
// Waits for `stream`: a call returns when its results are complete, as on the default
// stream, whose copies wait.
void finish_stream(gk_stream* stream, const std::string& function);
// gk_copy_to_host on `stream`, complete when it returns.
void copy_to_host(const gk_tensor* src, void* dst, uint64_t bytes, gk_stream* stream,
                  const std::string& function);
// gk_copy_from_host on `stream`, complete when it returns (`src` may go then).
void copy_from_host(gk_tensor* dst, const void* src, uint64_t bytes, gk_stream* stream,
                    const std::string& function);

// One step on `stream` (the session's own, or sessions[0]'s in a batch): ids checked and
// uploaded, the plugin's step, logits [rows, vocab] f32 on the device (returned). The step
// is queued, not waited for.
TensorRef run_step(gk_session& s, gk_stream* stream, const int32_t* tokens, int32_t count,
                   bool all_logits, const char* function);
// A tensor on the model's device, allocated in `stream`'s order (NULL: the default stream's).
gk_tensor* new_device_tensor(ModelState& m, gk_stream* stream, int32_t dtype,
                             std::initializer_list<int64_t> shape, const std::string& function);
// Row `row` of a [rows, vocab] tensor as a [1, vocab] tensor over the same memory.
TensorRef row_view(const gk_tensor& t, int64_t row);
// One decode step of several sessions of one model: their logits [count, vocab] f32 on the
// model's device (they stay there: sampling runs there too). One forward pass where the
// plugin batches (plugin ABI 1.2 batch_step), else one step per session. All of it runs on
// sessions[0]'s stream (batch_stream), whatever the other sessions' tasks.
TensorRef run_batch_step(gk_session* const* sessions, int32_t count, const int32_t* tokens,
                         const std::string& function);
void check_generate_options(const gk_generate_options& o, int32_t capacity,
                            const char* function = "gk_session_generate");
void apply_repetition_penalty(float* row, int64_t vocab, const std::vector<int32_t>& seen,
                              double penalty);
// The stream a batched step of `sessions` runs on: sessions[0]'s, the one whose task its
// scratch is charged to. Its default-stream mark goes with it.
inline std::pair<gk_stream*, gk_event*> batch_stream(gk_session* const* sessions) {
  return {sessions[0]->stream, sessions[0]->default_stream_mark};
}
void sample_op_rows(ModelState& m, gk_stream* stream, const gk_generate_options& o,
                    gk_tensor* logits, gk_tensor* ids, int64_t offset, const char* function);
int32_t sample_op(ModelState& m, gk_stream* stream, const gk_generate_options& o, gk_tensor* logits,
                  gk_tensor* ids, int64_t offset, const char* function);
std::unique_ptr<gk_session> open_session(const std::shared_ptr<ModelState>& model,
                                         const gk_session_options* options, const char* function);

}  // namespace gk
