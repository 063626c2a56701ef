// The model C API (ABI 1.6): gk_model_* and gk_session_* over a model plugin's interface
// (gk_model_api in gpukit_plugin.h). The core loads the weights and the config, finds the
// plugin whose manifest lists the architecture, and moves tokens and logits between the
// host and the device; the plugin composes each step of ops.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "capi/capi_util.h"
#include "capi/model_access.h"
#include "memory/charge_scope.h"
#include "plugin/plugin_registry.h"
#include "runtime/objects.h"
#include "runtime/runtime.h"
#include "scheduler/scheduler.h"

namespace gk {
namespace {

// A C call that failed left its message on this thread: carry it up with `context`.
void check(gk_status status, const std::string& context) {
  if (status != GK_OK) fail(status, context + ": " + last_error());
}

// A plugin call's failure: its report_error message, else the op-call service's.
void check_plugin(gk_status status, const PluginRecord& plugin, const std::string& context) {
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

gk_plugin_tensor plugin_view(const gk_tensor* t) {
  return gk_plugin_tensor{t->data, t->dtype, t->ndim, t->shape, t->strides, t->flags};
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(GK_NOT_FOUND, "cannot read '" + path.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

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
namespace {

// One step: ids checked and uploaded, the plugin's step, logits [rows, vocab] f32 on the
// device (returned).
TensorRef run_step(gk_session& s, const int32_t* tokens, int32_t count, bool all_logits,
                   const char* function) {
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
  gk_runtime* rt = &m.runtime;
  auto make = [&](int32_t dtype, std::initializer_list<int64_t> shape) {
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    d.dtype = dtype;
    d.ndim = int32_t(shape.size());
    int i = 0;
    for (int64_t v : shape) d.shape[i++] = v;
    gk_tensor* t = nullptr;
    check(gk_tensor_create(rt, m.device, &d, nullptr, &t), function);
    return TensorRef(t);
  };
  TensorRef ids = make(GK_DTYPE_I32, {count});
  TensorRef positions = make(GK_DTYPE_I32, {count});
  TensorRef logits = make(GK_DTYPE_F32, {all_logits ? count : 1, m.info.vocab_size});
  std::vector<int32_t> pos(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) pos[size_t(i)] = int32_t(start + i);
  check(gk_copy_from_host(ids.t, tokens, uint64_t(count) * 4, nullptr), function);
  check(gk_copy_from_host(positions.t, pos.data(), uint64_t(count) * 4, nullptr), function);
  gk_model_step_args args{sizeof(gk_model_step_args), nullptr, plugin_view(ids.t),
                          plugin_view(positions.t), plugin_view(logits.t)};
  take_plugin_error();
  {
    ChargeScope charge(s.owner);
    check_plugin(m.api->session_step(s.handle, &args), *m.plugin, function);
  }
  s.length += count;
  return logits;
}

gk_tensor* new_device_tensor(ModelState& m, int32_t dtype, std::initializer_list<int64_t> shape,
                             const std::string& function) {
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = dtype;
  d.ndim = int32_t(shape.size());
  int i = 0;
  for (int64_t v : shape) d.shape[i++] = v;
  gk_tensor* t = nullptr;
  check(gk_tensor_create(&m.runtime, m.device, &d, nullptr, &t), function);
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

// One decode step of several sessions of one model: their logits [count, vocab] f32 on the
// model's device (they stay there: sampling runs there too). One forward pass where the
// plugin batches (plugin ABI 1.2 batch_step), else one step per session.
TensorRef run_batch_step(gk_session* const* sessions, int32_t count,
                                  const int32_t* tokens, const std::string& function) {
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
  TensorRef logits(new_device_tensor(m, GK_DTYPE_F32, {count, vocab}, function));
  const bool batches = m.api->struct_size >= GK_MODEL_API_SIZE_1_2 && m.api->batch_step;
  if (!batches) {
    for (int32_t i = 0; i < count; ++i) {
      TensorRef row = run_step(*sessions[i], tokens + i, 1, false, function.c_str());
      check(gk_copy(row_view(*logits.t, i).t, row.t, nullptr), function);
    }
    return logits;
  }
  TensorRef ids(new_device_tensor(m, GK_DTYPE_I32, {count}, function));
  TensorRef pos(new_device_tensor(m, GK_DTYPE_I32, {count}, function));
  check(gk_copy_from_host(ids.t, tokens, uint64_t(count) * 4, nullptr), function);
  check(gk_copy_from_host(pos.t, positions.data(), uint64_t(count) * 4, nullptr), function);
  std::vector<void*> handles(static_cast<size_t>(count), nullptr);
  for (int32_t i = 0; i < count; ++i) handles[size_t(i)] = sessions[i]->handle;
  gk_model_step_args args{sizeof(gk_model_step_args), nullptr, plugin_view(ids.t),
                          plugin_view(pos.t), plugin_view(logits.t)};
  take_plugin_error();
  {
    ChargeScope charge(sessions[0]->owner);
    check_plugin(m.api->batch_step(m.handle, handles.data(), count, &args), *m.plugin, function);
  }
  for (int32_t i = 0; i < count; ++i) sessions[i]->length += 1;
  return logits;
}

void check_generate_options(const gk_generate_options& o, int32_t capacity,
                            const char* function = "gk_session_generate") {
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
void sample_op_rows(ModelState& m, const gk_generate_options& o, gk_tensor* logits,
                    gk_tensor* ids, int64_t offset, const char* function) {
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
  gk_op_args call{sizeof(gk_op_args), in, 1, outs, 1, attrs, 6, nullptr};
  check(gk_op_call(&m.runtime, "sample", &call), function);
}

// sample_op_rows over one row, its token copied to the host.
int32_t sample_op(ModelState& m, const gk_generate_options& o, gk_tensor* logits, gk_tensor* ids,
                  int64_t offset, const char* function) {
  sample_op_rows(m, o, logits, ids, offset, function);
  int32_t token = 0;
  check(gk_copy_to_host(ids, &token, 4, nullptr), function);
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

}  // namespace
}  // namespace gk

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
  // options; the same draws as gk_session_generate. A repetition penalty rewrites the row.
  int32_t sample(ModelState& m, gk_tensor* row, const char* function) {
    const int64_t vocab = m.info.vocab_size;
    if (!ids) ids = new_device_tensor(m, GK_DTYPE_I32, {1}, function);
    if (options.repetition_penalty != 1.0) {
      std::vector<float> penalized(static_cast<size_t>(vocab));
      check(gk_copy_to_host(row, penalized.data(), uint64_t(vocab) * 4, nullptr), function);
      apply_repetition_penalty(penalized.data(), vocab, seen, options.repetition_penalty);
      check(gk_copy_from_host(row, penalized.data(), uint64_t(vocab) * 4, nullptr), function);
    }
    return sample_op(m, options, row, ids, session->length.load(), function);
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

namespace gk {

gk_runtime* model_runtime(gk_model* model) {
  return &model->state->runtime;
}

const std::string& model_path(const gk_model* model) {
  return model->state->path;
}

}  // namespace gk

extern "C" {

GK_API gk_status gk_model_load(gk_runtime* runtime, const char* path,
                               const gk_model_options* options, gk_model** out) {
  return gk::c_guard([&] {
    auto& rt = gk::runtime_of(runtime, "gk_model_load");
    gk::require_arg(path, "gk_model_load", "path");
    gk::require_arg(out, "gk_model_load", "out");
    gk_model_options opts{sizeof(gk_model_options), 0, GK_DTYPE_F32};
    if (options) {
      gk::require_struct(options->struct_size, GK_MODEL_OPTIONS_SIZE, "gk_model_load",
                         "gk_model_options");
      opts = *options;
      if (!opts.dtype) opts.dtype = GK_DTYPE_F32;
    }
    if (opts.dtype != GK_DTYPE_F32 && opts.dtype != GK_DTYPE_BF16 && opts.dtype != GK_DTYPE_F16) {
      gk::fail(GK_INVALID_ARGUMENT,
               "gk_model_load: dtype " + std::to_string(opts.dtype) + " is not f32, bf16 or f16");
    }
    const gk::Device& device = rt.devices().at(opts.device);
    std::filesystem::path folder(path);
    std::error_code ec;
    // A GGUF file carries its config as metadata; an HF folder has config.json.
    const bool gguf = folder.extension() == ".gguf" && std::filesystem::is_regular_file(folder, ec);
    if (!gguf && !std::filesystem::is_directory(folder, ec)) {
      gk::fail(std::filesystem::exists(folder, ec) ? GK_INVALID_ARGUMENT : GK_NOT_FOUND,
               "gk_model_load: '" + folder.string() +
                   "' is neither a folder with config.json and SafeTensors weights nor a "
                   ".gguf file");
    }
    auto m = std::make_shared<gk::ModelState>();
    m->runtime.impl = runtime->impl;
    m->device = device.id;
    m->dtype = opts.dtype;
    m->path = path;
    gk::check(gk_weights_open(&m->runtime, folder.c_str(), nullptr, &m->weights), "gk_model_load");
    const std::string config_name =
        gguf ? folder.string() + " metadata" : (folder / "config.json").string();
    if (gguf) {
      char* text = nullptr;
      gk::check(gk_weights_metadata_json(m->weights, &text), "gk_model_load");
      m->config_json = text;
      gk_string_free(text);
    } else {
      m->config_json = gk::read_text(folder / "config.json");
    }
    auto config = nlohmann::json::parse(m->config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_model_load: " + config_name + " is not a JSON object");
    }
    if (gguf) {
      // llama.cpp's architecture names, as the HF classes the manifests list.
      static const std::pair<const char*, const char*> kGgufArchitectures[] = {
          {"llama", "LlamaForCausalLM"},
          {"qwen2", "Qwen2ForCausalLM"},
          {"qwen3", "Qwen3ForCausalLM"},
          {"gpt2", "GPT2LMHeadModel"}};
      auto a = config.find("general.architecture");
      std::string name = (a != config.end() && a->is_string()) ? a->get<std::string>() : "";
      m->architecture = "gguf:" + name;
      for (const auto& [gguf_name, hf_name] : kGgufArchitectures) {
        if (name == gguf_name) m->architecture = hf_name;
      }
      // llama.cpp keeps Llama 3's rope scaling in the tensor rope_freqs.weight. A model
      // plugin reads its config on the host and cannot read device memory, so the values
      // travel in the config, as "gpukit.rope_freqs".
      for (int64_t i = 0, n = gk_weights_count(m->weights); i < n; ++i) {
        gk_weight_info info{};
        info.struct_size = sizeof(info);
        gk::check(gk_weights_info(m->weights, i, &info), "gk_model_load");
        if (std::string(info.name) != "rope_freqs.weight") continue;
        int64_t numel = 1;
        for (int32_t d = 0; d < info.ndim; ++d) numel *= info.shape[d];
        if (info.ndim != 1 || numel <= 0 || numel > 65536) {
          gk::fail(GK_INVALID_ARGUMENT, "gk_model_load: " + config_name +
                                            ": rope_freqs.weight is not a vector of divisors");
        }
        gk_tensor* t = nullptr;
        gk::check(gk_weights_get(m->weights, info.name, m->device, GK_DTYPE_F32, nullptr, &t),
                  "gk_model_load");
        std::vector<float> values(static_cast<size_t>(numel));
        const gk_status copied = gk_copy_to_host(t, values.data(), uint64_t(numel) * 4, nullptr);
        gk_tensor_release(t);
        gk::check(copied, "gk_model_load");
        config["gpukit.rope_freqs"] = values;
        m->config_json = config.dump();
      }
    } else {
      auto archs = config.find("architectures");
      if (archs == config.end() || !archs->is_array() || archs->empty() ||
          !(*archs)[0].is_string()) {
        gk::fail(GK_INVALID_ARGUMENT, "gk_model_load: " + config_name +
                                          " has no \"architectures\" list naming the model class");
      }
      m->architecture = (*archs)[0].get<std::string>();
    }
    std::string known;
    for (const auto& r : rt.plugins().records()) {
      if (!r->loaded || !r->api) continue;
      for (const std::string& a : r->manifest.architectures) {
        if (a == m->architecture && !m->plugin) m->plugin = r.get();
        if (known.find(a) == std::string::npos) known += (known.empty() ? "" : ", ") + a;
      }
    }
    if (!m->plugin) {
      gk::fail(GK_NOT_FOUND,
               "gk_model_load: unknown architecture '" + m->architecture + "' in " + config_name +
                   " (known: " + (known.empty() ? "none, no model plugin is loaded" : known) + ")");
    }
    m->api = m->plugin->api->model;

    const int64_t count = gk_weights_count(m->weights);
    m->tensors.reserve(size_t(count));
    for (int64_t i = 0; i < count; ++i) {
      gk_weight_info info{};
      info.struct_size = sizeof(info);
      gk::check(gk_weights_info(m->weights, i, &info), "gk_model_load");
      // Integer and boolean tensors (GPT-2's causal-mask buffers) are no weights; GGUF's
      // block-quantized ones are dequantized to the model's dtype.
      const bool floating = info.dtype == GK_DTYPE_F32 || info.dtype == GK_DTYPE_F16 ||
                            info.dtype == GK_DTYPE_BF16 || info.dtype == GK_DTYPE_F64;
      if (!floating && gk_dtype_block(info.dtype, nullptr) <= 1) continue;
      gk_tensor* t = nullptr;
      gk::check(gk_weights_get(m->weights, info.name, m->device, m->dtype, nullptr, &t),
                "gk_model_load");
      m->tensors.emplace_back(t);
      m->table.push_back(gk_plugin_weight{info.name, gk::plugin_view(t)});
    }
    gk_model_create_args args{sizeof(gk_model_create_args),
                              m->architecture.c_str(),
                              m->config_json.c_str(),
                              m->device,
                              m->dtype,
                              m->table.data(),
                              int64_t(m->table.size())};
    gk::take_plugin_error();
    gk::check_plugin(m->api->model_create(m->plugin->state, &args, &m->handle), *m->plugin,
                     "gk_model_load: " + folder.string());
    m->info.struct_size = sizeof(m->info);
    gk::check_plugin(m->api->model_info(m->handle, &m->info), *m->plugin, "gk_model_load");
    *out = new gk_model{std::move(m)};
  });
}

GK_API void gk_model_release(gk_model* model) {
  delete model;
}

GK_API gk_status gk_model_get_info(const gk_model* model, gk_model_info* out) {
  return gk::c_guard([&] {
    gk::require_arg(model, "gk_model_get_info", "model");
    gk::require_arg(out, "gk_model_get_info", "out");
    gk::require_struct(out->struct_size, GK_MODEL_INFO_SIZE, "gk_model_get_info", "gk_model_info");
    const gk::ModelState& m = *model->state;
    out->architecture = m.architecture.c_str();
    out->plugin = m.plugin->name.c_str();
    out->vocab_size = m.info.vocab_size;
    out->context_length = m.info.context_length;
    out->num_layers = m.info.num_layers;
    out->hidden_size = m.info.hidden_size;
    out->device = m.device;
    out->dtype = m.dtype;
  });
}

GK_API gk_status gk_session_create(gk_model* model, const gk_session_options* options,
                                   gk_session** out) {
  return gk::c_guard([&] {
    gk::require_arg(model, "gk_session_create", "model");
    gk::require_arg(out, "gk_session_create", "out");
    *out = gk::open_session(model->state, options, "gk_session_create").release();
  });
}

GK_API void gk_session_release(gk_session* session) {
  delete session;
}

GK_API int64_t gk_session_length(const gk_session* session) {
  return session ? session->length.load() : 0;
}

GK_API gk_status gk_session_step(gk_session* session, const int32_t* tokens, int32_t count,
                                 uint32_t flags, float* logits_out) {
  return gk::c_guard([&] {
    gk::require_arg(session, "gk_session_step", "session");
    if (flags & ~uint32_t(GK_STEP_ALL_LOGITS)) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_session_step: unknown flag bits " + std::to_string(flags));
    }
    const bool all = flags & GK_STEP_ALL_LOGITS;
    gk::TensorRef logits = gk::run_step(*session, tokens, count, all, "gk_session_step");
    if (logits_out) {
      const uint64_t rows = all ? uint64_t(count) : 1;
      gk::check(gk_copy_to_host(logits.t, logits_out,
                                rows * uint64_t(session->model->info.vocab_size) * 4, nullptr),
                "gk_session_step");
    }
  });
}

GK_API gk_status gk_session_encode(gk_session* session, const float* features, int32_t n_mels,
                                   int64_t frames, float* out) {
  return gk::c_guard([&] {
    const char* fn = "gk_session_encode";
    gk::require_arg(session, fn, "session");
    gk::require_arg(features, fn, "features");
    gk::ModelState& m = *session->model;
    const bool encodes = m.api->struct_size >= GK_MODEL_API_SIZE_1_3 && m.api->session_encode &&
                         m.info.encoder_channels > 0;
    if (!encodes) {
      gk::fail(GK_UNIMPLEMENTED, std::string(fn) + ": " + m.architecture +
                                     " has no encoder (gk_session_encode is for Whisper)");
    }
    if (n_mels != m.info.encoder_channels) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": features have " + std::to_string(n_mels) +
                                        " mel bins; the model takes " +
                                        std::to_string(m.info.encoder_channels));
    }
    if (frames < 1 || frames > m.info.encoder_frames) {
      gk::fail(GK_INVALID_ARGUMENT, std::string(fn) + ": " + std::to_string(frames) +
                                        " frames are not in [1, " +
                                        std::to_string(m.info.encoder_frames) + "] (30 s)");
    }
    gk::TensorRef feats(gk::new_device_tensor(m, GK_DTYPE_F32, {n_mels, frames}, fn));
    const uint64_t bytes = uint64_t(n_mels) * uint64_t(frames) * 4;
    gk::check(gk_copy_from_host(feats.t, features, bytes, nullptr), fn);
    const int64_t positions = (frames + 1) / 2;
    gk::TensorRef hidden;
    if (out) hidden = gk::TensorRef(gk::new_device_tensor(m, GK_DTYPE_F32,
                                                          {positions, m.info.hidden_size}, fn));
    gk_model_encode_args args{};
    args.struct_size = sizeof(args);
    args.features = gk::plugin_view(feats.t);
    if (hidden.t) args.output = gk::plugin_view(hidden.t);
    gk::take_plugin_error();
    {
      gk::ChargeScope charge(session->owner);
      gk::check_plugin(m.api->session_encode(session->handle, &args), *m.plugin, fn);
    }
    session->length = 0;
    if (out) {
      gk::check(gk_copy_to_host(hidden.t, out,
                                uint64_t(positions) * uint64_t(m.info.hidden_size) * 4, nullptr),
                fn);
    }
  });
}

GK_API gk_status gk_model_get_encoder_info(const gk_model* model, gk_encoder_info* out) {
  return gk::c_guard([&] {
    gk::require_arg(model, "gk_model_get_encoder_info", "model");
    gk::require_arg(out, "gk_model_get_encoder_info", "out");
    gk::require_struct(out->struct_size, GK_ENCODER_INFO_SIZE, "gk_model_get_encoder_info",
                       "gk_encoder_info");
    out->n_mels = model->state->info.encoder_channels;
    out->max_frames = model->state->info.encoder_frames;
  });
}

GK_API gk_status gk_session_generate(gk_session* session, const int32_t* prompt, int32_t count,
                                     const gk_generate_options* options, int32_t* out_tokens,
                                     int32_t capacity, int32_t* out_count) {
  return gk::c_guard([&] {
    gk::require_arg(session, "gk_session_generate", "session");
    gk::require_arg(options, "gk_session_generate", "options");
    gk::require_arg(out_count, "gk_session_generate", "out_count");
    gk::require_struct(options->struct_size, GK_GENERATE_OPTIONS_SIZE, "gk_session_generate",
                       "gk_generate_options");
    const gk_generate_options& o = *options;
    gk::check_generate_options(o, capacity);
    if (o.max_tokens > 0) gk::require_arg(out_tokens, "gk_session_generate", "out_tokens");
    *out_count = 0;
    gk::ModelState& m = *session->model;
    const int64_t vocab = m.info.vocab_size;
    std::vector<int32_t> seen(prompt, prompt + std::max(count, 0));
    std::vector<float> row;
    gk_runtime* rt = &m.runtime;
    gk_tensor_desc id_desc{};
    id_desc.struct_size = sizeof(id_desc);
    id_desc.dtype = GK_DTYPE_I32;
    id_desc.ndim = 1;
    id_desc.shape[0] = 1;
    gk_tensor* ids_raw = nullptr;
    gk::check(gk_tensor_create(rt, m.device, &id_desc, nullptr, &ids_raw), "gk_session_generate");
    gk::TensorRef ids(ids_raw);
    gk::TensorRef logits = gk::run_step(*session, prompt, count, false, "gk_session_generate");
    for (int32_t i = 0; i < o.max_tokens; ++i) {
      if (o.repetition_penalty != 1.0) {
        row.resize(size_t(vocab));
        gk::check(gk_copy_to_host(logits.t, row.data(), uint64_t(vocab) * 4, nullptr),
                  "gk_session_generate");
        gk::apply_repetition_penalty(row.data(), vocab, seen, o.repetition_penalty);
        gk::check(gk_copy_from_host(logits.t, row.data(), uint64_t(vocab) * 4, nullptr),
                  "gk_session_generate");
      }
      int32_t token = gk::sample_op(m, o, logits.t, ids.t, session->length.load(),
                                    "gk_session_generate");
      out_tokens[i] = token;
      *out_count = i + 1;
      seen.push_back(token);
      bool stop = o.on_token && o.on_token(o.user_data, token) != 0;
      for (int32_t k = 0; k < o.num_stop_tokens && !stop; ++k) stop = o.stop_tokens[k] == token;
      if (stop || i + 1 == o.max_tokens || session->length.load() >= session->capacity) break;
      logits = gk::run_step(*session, &token, 1, false, "gk_session_generate");
    }
  });
}

GK_API gk_status gk_session_step_batch(gk_session* const* sessions, int32_t count,
                                       const int32_t* tokens, float* logits_out) {
  return gk::c_guard([&] {
    gk::TensorRef logits = gk::run_batch_step(sessions, count, tokens, "gk_session_step_batch");
    if (logits_out) {
      const uint64_t bytes = uint64_t(count) * uint64_t(sessions[0]->model->info.vocab_size) * 4;
      gk::check(gk_copy_to_host(logits.t, logits_out, bytes, nullptr), "gk_session_step_batch");
    }
  });
}

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
    gk::TensorRef logits = gk::run_step(*seq->session, prompt, count, false, fn);
    seq->seen.assign(prompt, prompt + count);
    gk::ModelState& m = *batch->model;
    if (options->max_tokens == 0) {
      seq->finish();
    } else {
      seq->accept(seq->sample(m, logits.t, fn));
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
      // Every draw first, then the callbacks: a failed draw leaves no sequence half-done.
      // The logits stay on the device: greedy rows are all drawn by one sample call and one
      // copy of `count` ids, the others row by row with their own options.
      std::vector<int32_t> next(active.size());
      if (std::all_of(active.begin(), active.end(), [](auto* s) { return s->greedy(); })) {
        gk::TensorRef ids(gk::new_device_tensor(m, GK_DTYPE_I32, {count}, fn));
        gk::sample_op_rows(m, active[0]->options, logits.t, ids.t, 0, fn);
        gk::check(gk_copy_to_host(ids.t, next.data(), uint64_t(count) * 4, nullptr), fn);
      } else {
        for (size_t i = 0; i < active.size(); ++i) {
          next[i] = active[i]->sample(m, gk::row_view(*logits.t, int64_t(i)).t, fn);
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
