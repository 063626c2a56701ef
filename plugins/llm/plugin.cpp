// The llm model plugin: builds decoder-only transformers from a weight set plus an HF
// config and runs their steps as op calls through the host (see README.md). It serves no
// op of its own: supports() declines every call.
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>

#include "runner.h"

namespace gk::llm {

const Builder* find_builder(const std::string& architecture) {
  if (architecture == "LlamaForCausalLM" || architecture == "MistralForCausalLM" ||
      architecture == "Qwen2ForCausalLM" || architecture == "Qwen3ForCausalLM") {
    return &kLlamaBuilder;
  }
  if (architecture == "GPT2LMHeadModel") return &kGpt2Builder;
  if (architecture == "WhisperForConditionalGeneration") return &kWhisperBuilder;
  return nullptr;
}

namespace {

// Each model entry point runs in gk::plugin::guard: a failure becomes its status, with its
// message reported to the host.

// The driver functions the runner calls on a CUDA device (Driver in runner.h).
void resolve_driver(Model& m) {
  gk_plugin_device d{};
  d.struct_size = sizeof(d);
  if (m.host->device_info(m.host->host_context, m.device, &d) != GK_OK) {
    fail(GK_INVALID_ARGUMENT, "llm: model_create: device " + std::to_string(m.device) +
                                  " is not a device of the runtime");
  }
  if (d.kind != GK_DEVICE_KIND_CUDA) return;
  auto symbol = [&](const char* name, auto& fn) {
    void* p = nullptr;
    if (m.host->cuda_driver_symbol(m.host->host_context, name, &p) != GK_OK || !p) {
      fail(GK_UNAVAILABLE, std::string("llm: the CUDA driver has no ") + name +
                               " (the runner copies its steps' inputs and graphs with it)");
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  symbol("cuCtxPushCurrent_v2", m.driver.ctx_push);
  symbol("cuCtxPopCurrent_v2", m.driver.ctx_pop);
  symbol("cuCtxSynchronize", m.driver.ctx_synchronize);
  symbol("cuMemcpyHtoDAsync_v2", m.driver.copy_to_device);
  symbol("cuMemcpyDtoDAsync_v2", m.driver.copy_on_device);
  symbol("cuStreamCreate", m.driver.stream_create);
  symbol("cuStreamDestroy_v2", m.driver.stream_destroy);
  m.driver.context = d.cuda_context;
}

// The plugin's state is the host services of the runtime that loaded it.
gk_status model_create(void* state, const gk_model_create_args* args, void** out) {
  const auto* host = static_cast<const gk_host_services*>(state);
  return gk::plugin::guard(host, "llm", [&] {
    if (!args || args->struct_size < GK_MODEL_CREATE_ARGS_SIZE || !out || !args->architecture ||
        !args->config_json) {
      fail(GK_INVALID_ARGUMENT, "llm: model_create: bad arguments");
    }
    auto model = std::make_unique<Model>();
    model->host = host;
    model->device = args->device;
    model->dtype = args->dtype;
    model->config.architecture = args->architecture;
    model->builder = find_builder(args->architecture);
    if (!model->builder) {
      fail(GK_UNIMPLEMENTED,
           std::string("llm: architecture '") + args->architecture + "' has no builder");
    }
    nlohmann::json config = nlohmann::json::parse(args->config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      fail(GK_INVALID_ARGUMENT, "config.json is not a JSON object");
    }
    resolve_driver(*model);
    model->builder->read_config(config, model->config);
    model->builder->load(*model,
                         WeightTable(args->weights, args->num_weights, model->config.architecture));
    model->norms_to_f32();
    model->graphs.enable(*model);
    *out = model.release();
  });
}

void model_destroy(void* model) {
  delete static_cast<Model*>(model);
}

gk_status model_info(void* model, gk_plugin_model_info* out) {
  return gk::plugin::guard(static_cast<Model*>(model)->host, "llm", [&] {
    if (!out || out->struct_size < GK_PLUGIN_MODEL_INFO_SIZE) {
      fail(GK_INVALID_ARGUMENT, "llm: model_info: bad arguments");
    }
    const Config& c = static_cast<Model*>(model)->config;
    out->vocab_size = c.vocab;
    out->context_length = c.context;
    out->num_layers = int32_t(c.layers);
    out->hidden_size = int32_t(c.hidden);
    if (out->struct_size >= GK_PLUGIN_MODEL_INFO_SIZE_1_3) {
      out->encoder_channels = int32_t(c.n_mels);
      // The stride-2 convolution halves the frames.
      out->encoder_frames = 2 * c.encoder_positions;
    }
  });
}

gk_status session_create(void* model_ptr, int64_t capacity, void** out) {
  return gk::plugin::guard(static_cast<Model*>(model_ptr)->host, "llm", [&] {
    Model& m = *static_cast<Model*>(model_ptr);
    if (capacity <= 0 || !out) fail(GK_INVALID_ARGUMENT, "llm: session capacity must be positive");
    auto s = std::make_unique<Session>();
    s->model = &m;
    s->capacity = capacity;
    {
      // Every block the session can fill, taken now: a step never runs out of cache.
      std::unique_lock lock(m.kv_lock);
      s->blocks = m.take_blocks((capacity + kKvBlockSize - 1) / kKvBlockSize);
    }
    *out = s.release();
  });
}

void session_destroy(void* session) {
  delete static_cast<Session*>(session);
}

gk_status session_step(void* session_ptr, const gk_model_step_args* args) {
  return gk::plugin::guard(static_cast<Session*>(session_ptr)->model->host, "llm", [&] {
    if (!args || args->struct_size < GK_MODEL_STEP_ARGS_SIZE) {
      fail(GK_INVALID_ARGUMENT, "llm: session_step: bad arguments");
    }
    Session& s = *static_cast<Session*>(session_ptr);
    Model& m = *s.model;
    Tensor tokens = Tensor::from_plugin(args->tokens);
    Tensor positions = Tensor::from_plugin(args->positions);
    Tensor logits = Tensor::from_plugin(args->logits);
    const int64_t t = tokens.shape[0];
    if (tokens.ndim != 1 || t < 1 || s.length + t > s.capacity) {
      fail(GK_OUT_OF_RANGE, "llm: " + std::to_string(t) + " tokens after " +
                                std::to_string(s.length) + " do not fit the session's " +
                                std::to_string(s.capacity) + " positions");
    }
    {
      std::shared_lock lock(m.kv_lock);
      Step step = Step::single(s, t);
      if (t != 1 || !m.graphs.run(step, tokens, logits, args->stream)) {
        Ops ops(m.host, m.device, args->stream);
        m.builder->forward(step, ops, tokens, positions, logits);
      }
    }
    s.length += t;
  });
}

gk_status batch_step(void* model_ptr, void* const* sessions, int32_t count,
                     const gk_model_step_args* args) {
  Model& m = *static_cast<Model*>(model_ptr);
  return gk::plugin::guard(m.host, "llm", [&] {
    if (!args || args->struct_size < GK_MODEL_STEP_ARGS_SIZE || !sessions || count < 1) {
      fail(GK_INVALID_ARGUMENT, "llm: batch_step: bad arguments");
    }
    Tensor tokens = Tensor::from_plugin(args->tokens);
    Tensor positions = Tensor::from_plugin(args->positions);
    Tensor logits = Tensor::from_plugin(args->logits);
    if (tokens.ndim != 1 || tokens.shape[0] != count || logits.ndim != 2 ||
        logits.shape[0] != count) {
      fail(GK_INVALID_ARGUMENT, "llm: batch_step: " + std::to_string(count) +
                                    " sessions need tokens [" + std::to_string(count) +
                                    "] and logits [" + std::to_string(count) + ", vocab]");
    }
    Step step;
    step.model = &m;
    for (int32_t i = 0; i < count; ++i) {
      auto* s = static_cast<Session*>(sessions[i]);
      if (!s || s->model != &m) {
        fail(GK_INVALID_ARGUMENT,
             "llm: batch_step: session " + std::to_string(i) + " is not a session of this model");
      }
      if (s->length + 1 > s->capacity) {
        fail(GK_OUT_OF_RANGE, "llm: batch_step: session " + std::to_string(i) + " holds " +
                                  std::to_string(s->length) + " of its " +
                                  std::to_string(s->capacity) + " positions, no room for one more");
      }
      for (Session* other : step.sessions) {
        if (other == s) {
          fail(GK_INVALID_ARGUMENT,
               "llm: batch_step: session " + std::to_string(i) + " appears twice in the batch");
        }
      }
      step.sessions.push_back(s);
      step.rows.push_back(1);
    }
    {
      std::shared_lock lock(m.kv_lock);
      if (!m.graphs.run(step, tokens, logits, args->stream)) {
        Ops ops(m.host, m.device, args->stream);
        m.builder->forward(step, ops, tokens, positions, logits);
      }
    }
    for (Session* s : step.sessions) s->length += 1;
  });
}

gk_status session_encode(void* session_ptr, const gk_model_encode_args* args) {
  return gk::plugin::guard(static_cast<Session*>(session_ptr)->model->host, "llm", [&] {
    if (!args || args->struct_size < GK_MODEL_ENCODE_ARGS_SIZE) {
      fail(GK_INVALID_ARGUMENT, "llm: session_encode: bad arguments");
    }
    Session& s = *static_cast<Session*>(session_ptr);
    Model& m = *s.model;
    const Config& c = m.config;
    if (!m.builder->encode) {
      fail(GK_UNIMPLEMENTED,
           "llm: " + c.architecture + " has no encoder (session_encode is for Whisper)");
    }
    Tensor features = Tensor::from_plugin(args->features);
    Tensor output = Tensor::from_plugin(args->output);
    if (features.ndim != 2 || features.shape[0] != c.n_mels || features.shape[1] < 1 ||
        features.shape[1] > 2 * c.encoder_positions) {
      fail(GK_INVALID_ARGUMENT, "llm: session_encode: features " +
                                    shape_text(features.shape, features.ndim) + " are not [" +
                                    std::to_string(c.n_mels) + ", 1.." +
                                    std::to_string(2 * c.encoder_positions) + "]");
    }
    Ops ops(m.host, m.device, args->stream);
    m.builder->encode(s, ops, features, output);
  });
}

gk_status session_copy(void* dst_ptr, void* src_ptr, void* stream) {
  return gk::plugin::guard(static_cast<Session*>(src_ptr)->model->host, "llm", [&] {
    Session& dst = *static_cast<Session*>(dst_ptr);
    const Session& src = *static_cast<Session*>(src_ptr);
    if (dst.model != src.model) {
      fail(GK_INVALID_ARGUMENT, "llm: session_copy: the sessions belong to different models");
    }
    if (src.length > dst.capacity) {
      fail(GK_OUT_OF_RANGE, "llm: session_copy: the source holds " + std::to_string(src.length) +
                                " positions, more than the destination's " +
                                std::to_string(dst.capacity));
    }
    if (&dst == &src) return;
    Model& m = *src.model;
    std::shared_lock lock(m.kv_lock);
    Ops ops(m.host, m.device, stream);
    // The blocks src has filled, into dst's, one cast per run of consecutive ids on both
    // sides (sessions take fresh blocks in ascending order, so runs are long).
    const size_t used = size_t((src.length + kKvBlockSize - 1) / kKvBlockSize);
    for (size_t first = 0; first < used;) {
      size_t end = first + 1;
      while (end < used && src.blocks[end] == src.blocks[end - 1] + 1 &&
             dst.blocks[end] == dst.blocks[end - 1] + 1) {
        ++end;
      }
      for (size_t i = 0; i < m.layers.size(); ++i) {
        for (bool values : {false, true}) {
          const Tensor pool = m.kv_pool(i, values);
          Tensor from = pool.rows(src.blocks[first], int64_t(end - first));
          Tensor to = pool.rows(dst.blocks[first], int64_t(end - first));
          ops.call("cast", {&from}, {&to});
        }
      }
      first = end;
    }
    dst.cross = src.cross;
    dst.length = src.length;
  });
}

gk_status supports(void*, const gk_kernel_args*, char* reason, size_t capacity) {
  if (reason && capacity) std::snprintf(reason, capacity, "llm is a model plugin and serves no op");
  return GK_UNIMPLEMENTED;
}

gk_status launch(void*, const gk_kernel_args*) {
  return GK_UNIMPLEMENTED;
}

gk_status init(const gk_host_services* host, void** state) {
  if (host->struct_size < GK_HOST_SERVICES_SIZE_1_1 || !host->op_call) {
    host->report_error(host->host_context, "llm needs the host's op-call service (plugin ABI 1.1)");
    return GK_FAILED_PRECONDITION;
  }
  *state = const_cast<gk_host_services*>(host);
  return GK_OK;
}

void shutdown(void*) {}

const gk_model_api kModelApi = {sizeof(gk_model_api), model_create,    model_destroy, model_info,
                                session_create,       session_destroy, session_step,  batch_step,
                                session_encode,       session_copy};

const gk_plugin_api kApi = {sizeof(gk_plugin_api),
                            GK_PLUGIN_ABI_VERSION,
                            "llm",
                            "0.1.0",
                            init,
                            shutdown,
                            supports,
                            launch,
                            &kModelApi};

}  // namespace
}  // namespace gk::llm

extern "C" GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,
                                                      const gk_plugin_api** api) {
  gk_status status = gk_plugin_check_host(host, "llm");
  if (status != GK_OK) return status;
  *api = &gk::llm::kApi;
  return GK_OK;
}
