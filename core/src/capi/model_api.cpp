// The model C API (ABI 1.6): gk_model_* and gk_session_* over a model plugin's interface
// (gk_model_api in gpukit_plugin.h). The core loads the weights and the config, finds the
// plugin whose manifest lists the architecture, and moves tokens and logits between the
// host and the device; the plugin composes each step of ops. The steps and sampling live in
// model_steps.cpp, gk_batch in batch_api.cpp, the state they share in model_state.h.
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
#include "capi/model_state.h"
#include "capi/op_call.h"
#include "common/environment.h"
#include "memory/charge_scope.h"
#include "plugin/plugin_registry.h"
#include "runtime/objects.h"
#include "runtime/runtime.h"
#include "scheduler/scheduler.h"

namespace gk {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(GK_NOT_FOUND, "cannot read '" + path.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// GPUKIT_LLM_PACKED=1, read at each load unless the runtime ignores the environment: GGUF
// projections stay packed (stays_packed). Off by default: on an H200 the packed decode runs
// at 0.81-0.88x of the dequantized bf16 one, and a prefill's rows go through the GEMV eight at
// a time (docs/llm.md, "Packed projections"); it saves the memory.
bool packed_at_load(const Runtime& rt) {
  if (!rt.config().use_environment) return false;
  const std::optional<std::string> v = env_value("GPUKIT_LLM_PACKED");
  if (!v || *v == "0") return false;
  if (*v != "1") {
    fail(GK_INVALID_ARGUMENT, "gk_model_load: GPUKIT_LLM_PACKED is '" + *v + "'; expected 0 or 1");
  }
  return true;
}

// Whether GGUF tensor `info` stays packed on `device` for a builder that reads packed
// projections: a 2-D q8_0/q4_0/q4_1/q4_k tensor other than the token embedding (the embedding
// op reads rows of a plain dtype), where a loaded plugin for the device lists its dtype for
// matmul. Everything else is dequantized to the model's dtype.
bool stays_packed(const Runtime& rt, const Device& device, const gk_weight_info& info) {
  const int32_t d = info.dtype;
  if (d != GK_DTYPE_Q8_0 && d != GK_DTYPE_Q4_0 && d != GK_DTYPE_Q4_1 && d != GK_DTYPE_Q4_K) {
    return false;
  }
  if (info.ndim != 2 || std::strcmp(info.name, "token_embd.weight") == 0) return false;
  for (const auto& r : rt.plugins().records()) {
    if (!r->loaded || !r->api || !r->manifest_ok || r->manifest.device != device.kind) continue;
    if (device.is_cuda() && !r->manifest.matches_sm(device.sm_version)) continue;
    const ManifestOp* op = r->manifest.find_op("matmul");
    if (op && std::find(op->dtypes.begin(), op->dtypes.end(), d) != op->dtypes.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace

gk_runtime* model_runtime(gk_model* model) {
  return &model->state->runtime;
}

const std::string& model_path(const gk_model* model) {
  return model->state->path;
}

std::shared_ptr<const void> model_memo(gk_model* model, const std::string& key,
                                       const std::function<std::shared_ptr<const void>()>& make) {
  ModelState& m = *model->state;
  std::lock_guard<std::mutex> lock(m.memo_mu);
  std::shared_ptr<const void>& value = m.memo[key];
  if (!value) value = make();
  return value;
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
    bool keep_packed = false;  // set for GGUF architectures whose builder reads packed weights
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
      // `packed`: the builder reads block-quantized projections as stored (matmul with a
      // packed weight), so they need not be dequantized at load.
      struct GgufArchitecture {
        const char* gguf_name;
        const char* hf_name;
        bool packed;
      };
      static const GgufArchitecture kGgufArchitectures[] = {{"llama", "LlamaForCausalLM", true},
                                                            {"qwen2", "Qwen2ForCausalLM", true},
                                                            {"qwen3", "Qwen3ForCausalLM", true},
                                                            {"gpt2", "GPT2LMHeadModel", false}};
      auto a = config.find("general.architecture");
      std::string name = (a != config.end() && a->is_string()) ? a->get<std::string>() : "";
      m->architecture = "gguf:" + name;
      for (const auto& arch : kGgufArchitectures) {
        if (name == arch.gguf_name) {
          m->architecture = arch.hf_name;
          keep_packed = arch.packed && gk::packed_at_load(rt);
        }
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
      // block-quantized ones are dequantized to the model's dtype, unless they stay packed.
      const bool floating = info.dtype == GK_DTYPE_F32 || info.dtype == GK_DTYPE_F16 ||
                            info.dtype == GK_DTYPE_BF16 || info.dtype == GK_DTYPE_F64;
      if (!floating && gk_dtype_block(info.dtype, nullptr) <= 1) continue;
      const int32_t dtype =
          keep_packed && gk::stays_packed(rt, device, info) ? info.dtype : m->dtype;
      gk_tensor* t = nullptr;
      gk::check(gk_weights_get(m->weights, info.name, m->device, dtype, nullptr, &t),
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

GK_API gk_status gk_session_copy(gk_session* dst, const gk_session* src) {
  return gk::c_guard([&] {
    const char* fn = "gk_session_copy";
    gk::require_arg(dst, fn, "dst");
    gk::require_arg(src, fn, "src");
    if (dst == src) return;
    if (dst->model != src->model) {
      gk::fail(GK_INVALID_ARGUMENT,
               std::string(fn) + ": dst and src are sessions of different models");
    }
    gk::ModelState& m = *src->model;
    if (m.api->struct_size < GK_MODEL_API_SIZE_1_4 || !m.api->session_copy) {
      gk::fail(GK_UNIMPLEMENTED, std::string(fn) + ": model plugin " + m.plugin->name +
                                     " cannot copy sessions (plugin ABI 1.4)");
    }
    const int64_t length = src->length.load();
    if (length > dst->capacity) {
      gk::fail(GK_OUT_OF_RANGE, std::string(fn) + ": src holds " + std::to_string(length) +
                                    " positions; dst holds at most " +
                                    std::to_string(dst->capacity));
    }
    // On dst's stream (the copy is charged to its task); src's stream, if it has one, has
    // nothing queued: every call on a task's stream waits for it before returning.
    gk_stream* stream = dst->stream;
    gk::join_default_stream(stream, dst->default_stream_mark, fn);
    gk::take_plugin_error();
    {
      gk::ChargeScope charge(dst->owner);
      gk::PluginTaskStream on_task(stream);
      gk::check_plugin(
          m.api->session_copy(dst->handle, src->handle, stream ? stream->native : nullptr),
          *m.plugin, fn);
    }
    gk::finish_stream(stream, fn);
    dst->length = length;
  });
}

GK_API gk_status gk_session_step(gk_session* session, const int32_t* tokens, int32_t count,
                                 uint32_t flags, float* logits_out) {
  return gk::c_guard([&] {
    gk::require_arg(session, "gk_session_step", "session");
    if (flags & ~uint32_t(GK_STEP_ALL_LOGITS)) {
      gk::fail(GK_INVALID_ARGUMENT, "gk_session_step: unknown flag bits " + std::to_string(flags));
    }
    const bool all = flags & GK_STEP_ALL_LOGITS;
    gk_stream* stream = session->stream;
    gk::join_default_stream(stream, session->default_stream_mark, "gk_session_step");
    gk::TensorRef logits = gk::run_step(*session, stream, tokens, count, all, "gk_session_step");
    if (logits_out) {
      const uint64_t rows = all ? uint64_t(count) : 1;
      gk::copy_to_host(logits.t, logits_out, rows * uint64_t(session->model->info.vocab_size) * 4,
                       stream, "gk_session_step");
    }
    gk::finish_stream(stream, "gk_session_step");
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
    gk_stream* stream = session->stream;
    gk::join_default_stream(stream, session->default_stream_mark, fn);
    gk::TensorRef feats(gk::new_device_tensor(m, stream, GK_DTYPE_F32, {n_mels, frames}, fn));
    const uint64_t bytes = uint64_t(n_mels) * uint64_t(frames) * 4;
    gk::copy_from_host(feats.t, features, bytes, stream, fn);
    const int64_t positions = (frames + 1) / 2;
    gk::TensorRef hidden;
    if (out) {
      hidden = gk::TensorRef(
          gk::new_device_tensor(m, stream, GK_DTYPE_F32, {positions, m.info.hidden_size}, fn));
    }
    gk_model_encode_args args{};
    args.struct_size = sizeof(args);
    args.stream = stream ? stream->native : nullptr;
    args.features = gk::plugin_view(feats.t);
    if (hidden.t) args.output = gk::plugin_view(hidden.t);
    gk::take_plugin_error();
    {
      gk::ChargeScope charge(session->owner);
      gk::PluginTaskStream on_task(stream);
      gk::check_plugin(m.api->session_encode(session->handle, &args), *m.plugin, fn);
    }
    session->length = 0;
    if (out) {
      gk::copy_to_host(hidden.t, out, uint64_t(positions) * uint64_t(m.info.hidden_size) * 4,
                       stream, fn);
    }
    gk::finish_stream(stream, fn);
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
    const char* fn = "gk_session_generate";
    gk_stream* stream = session->stream;
    gk::join_default_stream(stream, session->default_stream_mark, fn);
    gk::TensorRef ids(gk::new_device_tensor(m, stream, GK_DTYPE_I32, {1}, fn));
    gk::TensorRef logits = gk::run_step(*session, stream, prompt, count, false, fn);
    for (int32_t i = 0; i < o.max_tokens; ++i) {
      if (o.repetition_penalty != 1.0) {
        row.resize(size_t(vocab));
        gk::copy_to_host(logits.t, row.data(), uint64_t(vocab) * 4, stream, fn);
        gk::apply_repetition_penalty(row.data(), vocab, seen, o.repetition_penalty);
        gk::copy_from_host(logits.t, row.data(), uint64_t(vocab) * 4, stream, fn);
      }
      // The token's copy back waits for the stream: the step and the draw are complete.
      int32_t token = gk::sample_op(m, stream, o, logits.t, ids.t, session->length.load(), fn);
      out_tokens[i] = token;
      *out_count = i + 1;
      seen.push_back(token);
      bool stop = o.on_token && o.on_token(o.user_data, token) != 0;
      for (int32_t k = 0; k < o.num_stop_tokens && !stop; ++k) stop = o.stop_tokens[k] == token;
      if (stop || i + 1 == o.max_tokens || session->length.load() >= session->capacity) break;
      logits = gk::run_step(*session, stream, &token, 1, false, fn);
    }
    gk::finish_stream(stream, fn);
  });
}

GK_API gk_status gk_session_step_batch(gk_session* const* sessions, int32_t count,
                                       const int32_t* tokens, float* logits_out) {
  return gk::c_guard([&] {
    const char* fn = "gk_session_step_batch";
    gk::TensorRef logits = gk::run_batch_step(sessions, count, tokens, fn);
    gk_stream* stream = gk::batch_stream(sessions).first;
    if (logits_out) {
      const uint64_t bytes = uint64_t(count) * uint64_t(sessions[0]->model->info.vocab_size) * 4;
      gk::copy_to_host(logits.t, logits_out, bytes, stream, fn);
    }
    gk::finish_stream(stream, fn);
  });
}

}  // extern "C"
