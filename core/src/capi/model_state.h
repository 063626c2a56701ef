// What the model C API's files share (model_api.cpp: gk_model_* and gk_session_*;
// model_steps.cpp: steps and sampling on the device; batch_api.cpp: gk_batch_*): the state
// behind a gk_model and a gk_session, and the step and sampling helpers.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpukit/gpukit.h"
#include "gpukit/gpukit_plugin.h"
#include "common/error.h"
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
  ~gk_session() {
    if (handle) model->api->session_destroy(handle);
  }
};


namespace gk {

// One step: ids checked and uploaded, the plugin's step, logits [rows, vocab] f32 on the
// device (returned).
TensorRef run_step(gk_session& s, const int32_t* tokens, int32_t count, bool all_logits,
                   const char* function);
gk_tensor* new_device_tensor(ModelState& m, int32_t dtype, std::initializer_list<int64_t> shape,
                             const std::string& function);
// Row `row` of a [rows, vocab] tensor as a [1, vocab] tensor over the same memory.
TensorRef row_view(const gk_tensor& t, int64_t row);
// One decode step of several sessions of one model: their logits [count, vocab] f32 on the
// model's device (they stay there: sampling runs there too). One forward pass where the
// plugin batches (plugin ABI 1.2 batch_step), else one step per session.
TensorRef run_batch_step(gk_session* const* sessions, int32_t count, const int32_t* tokens,
                         const std::string& function);
void check_generate_options(const gk_generate_options& o, int32_t capacity,
                            const char* function = "gk_session_generate");
void apply_repetition_penalty(float* row, int64_t vocab, const std::vector<int32_t>& seen,
                              double penalty);
void sample_op_rows(ModelState& m, const gk_generate_options& o, gk_tensor* logits,
                    gk_tensor* ids, int64_t offset, const char* function);
int32_t sample_op(ModelState& m, const gk_generate_options& o, gk_tensor* logits, gk_tensor* ids,
                  int64_t offset, const char* function);
std::unique_ptr<gk_session> open_session(const std::shared_ptr<ModelState>& model,
                                         const gk_session_options* options,
                                         const char* function);

}  // namespace gk
