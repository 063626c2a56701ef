// The model C API's work on the device: a step (one session, or several batched), the
// sampling op over their logits, a session's opening. See model_api.cpp for the C entry points.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "capi/capi_util.h"
#include "capi/model_state.h"
#include "capi/op_call.h"
#include "memory/charge_scope.h"
#include "plugin/plugin_registry.h"
#include "runtime/objects.h"
#include "runtime/runtime.h"
#include "scheduler/scheduler.h"

namespace gk {

void join_default_stream(gk_stream* stream, gk_event* mark, const std::string& function) {
  if (!stream || !mark) return;
  check(gk_event_record(mark, nullptr), function);
  check(gk_stream_wait_event(stream, mark), function);
}

void finish_stream(gk_stream* stream, const std::string& function) {
  if (stream) check(gk_stream_synchronize(stream), function);
}

void copy_to_host(const gk_tensor* src, void* dst, uint64_t bytes, gk_stream* stream,
                  const std::string& function) {
  check(gk_copy_to_host(src, dst, bytes, stream), function);
  // A copy into pinned memory is queued on a stream, not waited for.
  finish_stream(stream, function);
}

void copy_from_host(gk_tensor* dst, const void* src, uint64_t bytes, gk_stream* stream,
                    const std::string& function) {
  check(gk_copy_from_host(dst, src, bytes, stream), function);
  // A copy from pinned memory may still read `src` when gk_copy_from_host returns.
  finish_stream(stream, function);
}

TensorRef run_step(gk_session& s, gk_stream* stream, const int32_t* tokens, int32_t count,
                   bool all_logits, const char* function) {
  ModelState& m = *s.model;
  if (count < 1)
    fail(GK_INVALID_ARGUMENT,
         std::string(function) + ": count " + std::to_string(count) + " is not >= 1");
  require_arg(tokens, function, "tokens");
  for (int32_t i = 0; i < count; ++i) {
    if (tokens[i] < 0 || tokens[i] >= m.info.vocab_size) {
      fail(GK_INVALID_ARGUMENT, std::string(function) + ": token id " + std::to_string(tokens[i]) +
                                    " at index " + std::to_string(i) + " is out of range [0, " +
                                    std::to_string(m.info.vocab_size) + ")");
    }
  }
  const int64_t start = s.length.load();
  if (start + count > s.capacity) {
    fail(GK_OUT_OF_RANGE, std::string(function) + ": " + std::to_string(count) + " tokens after " +
                              std::to_string(start) + " exceed the session's context of " +
                              std::to_string(s.capacity) + " positions");
  }
  TensorRef ids(new_device_tensor(m, stream, GK_DTYPE_I32, {count}, function));
  TensorRef positions(new_device_tensor(m, stream, GK_DTYPE_I32, {count}, function));
  TensorRef logits(new_device_tensor(m, stream, GK_DTYPE_F32,
                                     {all_logits ? count : 1, m.info.vocab_size}, function));
  std::vector<int32_t> pos(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) pos[size_t(i)] = int32_t(start + i);
  // Both copies queued, then one wait (on the default stream each copy waits).
  check(gk_copy_from_host(ids.t, tokens, uint64_t(count) * 4, stream), function);
  copy_from_host(positions.t, pos.data(), uint64_t(count) * 4, stream, function);
  gk_model_step_args args{sizeof(gk_model_step_args), stream ? stream->native : nullptr,
                          plugin_view(ids.t), plugin_view(positions.t), plugin_view(logits.t)};
  take_plugin_error();
  {
    ChargeScope charge(s.owner);
    PluginTaskStream on_task(stream);
    check_plugin(m.api->session_step(s.handle, &args), *m.plugin, function);
  }
  s.length += count;
  return logits;
}

gk_tensor* new_device_tensor(ModelState& m, gk_stream* stream, int32_t dtype,
                             std::initializer_list<int64_t> shape, const std::string& function) {
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.ndim = int32_t(shape.size());
  int i = 0;
  for (int64_t v : shape) d.shape[i++] = v;
  gk_tensor* t = nullptr;
  check(gk_tensor_create(&m.runtime, m.device, &d, stream, &t), function);
  return t;
}

// Row `row` of a [rows, vocab] tensor as a [1, vocab] tensor over the same memory.
TensorRef row_view(const gk_tensor& t, int64_t row) {
  gk_tensor_desc d = desc_of(t);
  d.shape[0] = 1;
  const uint64_t offset = uint64_t(row) * uint64_t(t.strides[0]) * uint64_t(gk_dtype_size(t.dtype));
  gk_tensor* v = new_tensor(*t.runtime, t.runtime->shared_from_this(), *t.device, d,
                            static_cast<char*>(t.data) + offset);
  v->allocation = t.allocation;
  v->data_offset = t.data_offset + offset;
  return TensorRef(v);
}

TensorRef run_batch_step(gk_session* const* sessions, int32_t count, const int32_t* tokens,
                         const std::string& function) {
  if (count < 1) {
    fail(GK_INVALID_ARGUMENT, function + ": count " + std::to_string(count) + " is not >= 1");
  }
  require_arg(sessions, function.c_str(), "sessions");
  require_arg(tokens, function.c_str(), "tokens");
  for (int32_t i = 0; i < count; ++i) {
    if (!sessions[i]) {
      fail(GK_INVALID_ARGUMENT, function + ": sessions[" + std::to_string(i) + "] is NULL");
    }
  }
  ModelState& m = *sessions[0]->model;
  const int64_t vocab = m.info.vocab_size;
  std::vector<int32_t> positions(size_t(count), 0);
  for (int32_t i = 0; i < count; ++i) {
    const gk_session& s = *sessions[i];
    const std::string which = "sessions[" + std::to_string(i) + "]";
    if (s.model.get() != &m) {
      fail(GK_INVALID_ARGUMENT, function + ": " + which + " is a session of another model (" +
                                    s.model->architecture + ") than sessions[0]'s");
    }
    for (int32_t j = 0; j < i; ++j) {
      if (sessions[j] == sessions[i]) {
        fail(GK_INVALID_ARGUMENT, function + ": " + which + " is sessions[" + std::to_string(j) +
                                      "] again; a session takes one token per step");
      }
    }
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      fail(GK_INVALID_ARGUMENT, function + ": token id " + std::to_string(tokens[i]) +
                                    " at index " + std::to_string(i) + " is out of range [0, " +
                                    std::to_string(vocab) + ")");
    }
    positions[size_t(i)] = int32_t(s.length.load());
    if (s.length.load() + 1 > s.capacity) {
      fail(GK_OUT_OF_RANGE, function + ": " + which + " is full: it holds " +
                                std::to_string(s.length.load()) + " of its " +
                                std::to_string(s.capacity) + " positions");
    }
  }
  // Every call on a task's stream ends waiting for it, so the other sessions' streams have
  // nothing of theirs queued; what the default stream has queued is joined here.
  auto [stream, mark] = batch_stream(sessions);
  join_default_stream(stream, mark, function);
  TensorRef logits(new_device_tensor(m, stream, GK_DTYPE_F32, {count, vocab}, function));
  const bool batches = m.api->struct_size >= GK_MODEL_API_SIZE_1_2 && m.api->batch_step;
  if (!batches) {
    for (int32_t i = 0; i < count; ++i) {
      TensorRef row = run_step(*sessions[i], stream, tokens + i, 1, false, function.c_str());
      check(gk_copy(row_view(*logits.t, i).t, row.t, stream), function);
    }
    return logits;
  }
  TensorRef ids(new_device_tensor(m, stream, GK_DTYPE_I32, {count}, function));
  TensorRef pos(new_device_tensor(m, stream, GK_DTYPE_I32, {count}, function));
  check(gk_copy_from_host(ids.t, tokens, uint64_t(count) * 4, stream), function);
  copy_from_host(pos.t, positions.data(), uint64_t(count) * 4, stream, function);
  std::vector<void*> handles(static_cast<size_t>(count), nullptr);
  for (int32_t i = 0; i < count; ++i) handles[size_t(i)] = sessions[i]->handle;
  gk_model_step_args args{sizeof(gk_model_step_args), stream ? stream->native : nullptr,
                          plugin_view(ids.t), plugin_view(pos.t), plugin_view(logits.t)};
  take_plugin_error();
  {
    ChargeScope charge(sessions[0]->owner);
    PluginTaskStream on_task(stream);
    check_plugin(m.api->batch_step(m.handle, handles.data(), count, &args), *m.plugin, function);
  }
  for (int32_t i = 0; i < count; ++i) sessions[i]->length += 1;
  return logits;
}

void check_generate_options(const gk_generate_options& o, int32_t capacity,
                            const char* function) {
  auto bad = [&](const std::string& what) {
    fail(GK_INVALID_ARGUMENT, std::string(function) + ": " + what);
  };
  if (o.max_tokens < 0) bad("max_tokens " + std::to_string(o.max_tokens) + " is negative");
  if (capacity < o.max_tokens) {
    bad("capacity " + std::to_string(capacity) + " is below max_tokens " +
        std::to_string(o.max_tokens));
  }
  if (!std::isfinite(o.temperature) || o.temperature < 0) {
    bad("temperature " + std::to_string(o.temperature) + " is not a finite value >= 0");
  }
  if (o.top_k < 0) bad("top_k " + std::to_string(o.top_k) + " is negative (0 turns it off)");
  if (!(o.top_p > 0 && o.top_p <= 1)) {
    bad("top_p " + std::to_string(o.top_p) + " is not in (0, 1] (1 turns it off)");
  }
  if (!(o.min_p >= 0 && o.min_p <= 1)) {
    bad("min_p " + std::to_string(o.min_p) + " is not in [0, 1] (0 turns it off)");
  }
  if (!(o.repetition_penalty > 0) || !std::isfinite(o.repetition_penalty)) {
    bad("repetition_penalty " + std::to_string(o.repetition_penalty) +
        " is not a finite value > 0 (1 turns it off)");
  }
  if (o.num_stop_tokens < 0 || (o.num_stop_tokens > 0 && !o.stop_tokens)) {
    bad("num_stop_tokens " + std::to_string(o.num_stop_tokens) + " without stop_tokens");
  }
}

// HF's repetition penalty over one row of logits: each token seen once.
void apply_repetition_penalty(float* row, int64_t vocab, const std::vector<int32_t>& seen,
                              double penalty) {
  std::vector<bool> done(size_t(vocab), false);
  for (int32_t t : seen) {
    if (done[size_t(t)]) continue;
    done[size_t(t)] = true;
    float& l = row[size_t(t)];
    l = l > 0 ? float(l / penalty) : float(l * penalty);
  }
}

// The sample op over `logits` [rows, vocab] on the device (penalty applied already), into
// the i32 [rows] `ids`; `offset` is the session's length, so each draw of a seeded
// generation differs from the last, and repeats.
void sample_op_rows(ModelState& m, gk_stream* stream, const gk_generate_options& o,
                    gk_tensor* logits, gk_tensor* ids, int64_t offset, const char* function) {
  gk_attr attrs[6] = {};
  attrs[0] = gk_attr{"temperature", GK_ATTR_FLOAT, 0, {}};
  attrs[0].value.f = o.temperature;
  attrs[1] = gk_attr{"top_k", GK_ATTR_INT, 0, {}};
  attrs[1].value.i = o.top_k;
  attrs[2] = gk_attr{"top_p", GK_ATTR_FLOAT, 0, {}};
  attrs[2].value.f = o.top_p;
  attrs[3] = gk_attr{"min_p", GK_ATTR_FLOAT, 0, {}};
  attrs[3].value.f = o.min_p;
  attrs[4] = gk_attr{"seed", GK_ATTR_INT, 0, {}};
  attrs[4].value.i = int64_t(o.seed);
  attrs[5] = gk_attr{"offset", GK_ATTR_INT, 0, {}};
  attrs[5].value.i = offset;
  gk_tensor* in[1] = {logits};
  gk_tensor* outs[1] = {ids};
  gk_op_args call{sizeof(gk_op_args), in, 1, outs, 1, attrs, 6, stream};
  check(gk_op_call(&m.runtime, "sample", &call), function);
}

// sample_op_rows over one row, its token copied to the host.
int32_t sample_op(ModelState& m, gk_stream* stream, const gk_generate_options& o, gk_tensor* logits,
                  gk_tensor* ids, int64_t offset, const char* function) {
  sample_op_rows(m, stream, o, logits, ids, offset, function);
  int32_t token = 0;
  copy_to_host(ids, &token, 4, stream, function);
  return token;
}

// A session of `model` with `options` (NULL: the whole context, no task).
std::unique_ptr<gk_session> open_session(const std::shared_ptr<ModelState>& model,
                                         const gk_session_options* options,
                                         const char* function) {
  const ModelState& m = *model;
  int64_t capacity = m.info.context_length;
  auto s = std::make_unique<gk_session>();
  s->model = model;
  if (options) {
    require_struct(options->struct_size, GK_SESSION_OPTIONS_SIZE, function, "gk_session_options");
    if (options->max_context < 0 || options->max_context > m.info.context_length) {
      fail(GK_INVALID_ARGUMENT, std::string(function) + ": max_context " +
                                    std::to_string(options->max_context) + " is not in [0, " +
                                    std::to_string(m.info.context_length) +
                                    "] (the model's context length; 0 means all of it)");
    }
    if (options->max_context) capacity = options->max_context;
    if (options->struct_size >= GK_SESSION_OPTIONS_SIZE_1_7 && options->task) {
      gk_task* task = options->task;
      if (!task->task) {
        fail(GK_INVALID_ARGUMENT, std::string(function) + ": options->task is not a task");
      }
      if (task->task->device->id != m.device) {
        fail(GK_INVALID_ARGUMENT, std::string(function) + ": task '" + task->task->spec.name +
                                      "' is on device " + std::to_string(task->task->device->id) +
                                      ", the model on device " + std::to_string(m.device));
      }
      gk_task_info info{};
      info.struct_size = sizeof(info);
      check(gk_task_get_info(task, &info), function);
      if (info.state != GK_TASK_ADMITTED && info.state != GK_TASK_RUNNING &&
          info.state != GK_TASK_THROTTLED) {
        fail(GK_FAILED_PRECONDITION,
             std::string(function) + ": task '" + task->task->spec.name + "' is " +
                 task_state_name(info.state) +
                 "; a session's memory is charged to an admitted task that has not finished");
      }
      s->task = task->task;
      s->owner = task->task->owner;
      // The session's work runs where the task's does: its priority, its SM partition.
      check(gk_task_stream_create(task, &s->stream), function);
      check(gk_event_create(&s->model->runtime, m.device, &s->default_stream_mark), function);
    }
  }
  s->capacity = capacity;
  take_plugin_error();
  // The KV cache is allocated now, charged to the task.
  ChargeScope charge(s->owner);
  check_plugin(m.api->session_create(m.handle, capacity, &s->handle), *m.plugin,
               std::string(function) + " (KV cache of " + std::to_string(capacity) + " positions)");
  return s;
}

}  // namespace gk
