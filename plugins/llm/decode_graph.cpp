// DecodeGraphs (runner.h): a model's decode steps captured once per shape as CUDA graphs
// through the host's graph services, and replayed.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "runner.h"

namespace gk::llm {
namespace {

uint64_t address(const void* p) { return uint64_t(reinterpret_cast<uintptr_t>(p)); }

// The step's block-table width: the most blocks a session holds after it, rounded up to a
// power of two.
int64_t table_width(const Step& step) {
  int64_t used = 1;
  for (const Session* s : step.sessions) {
    used = std::max(used, (s->length + 1 + kKvBlockSize - 1) / kKvBlockSize);
  }
  int64_t width = DecodeGraphs::kMinGraphBlocks;
  while (width < used) width *= 2;
  return width;
}

constexpr unsigned kStreamNonBlocking = 0x1;  // CU_STREAM_NON_BLOCKING

}  // namespace

DecodeGraphs::~DecodeGraphs() {
  clear();
  if (capture_streams_.empty()) return;
  ContextScope current(model_->driver);
  for (const auto& [replay, capture] : capture_streams_) model_->driver.stream_destroy(capture);
}

void* DecodeGraphs::capture_stream(void* replay) {
  if (auto it = capture_streams_.find(replay); it != capture_streams_.end()) return it->second;
  ContextScope current(model_->driver);
  // Those of replay streams no graph is kept for any more go first.
  for (auto it = capture_streams_.begin(); it != capture_streams_.end();) {
    const bool used = std::any_of(graphs_.begin(), graphs_.end(),
                                  [&](const auto& g) { return g->stream == it->first; });
    if (used) {
      ++it;
    } else {
      model_->driver.stream_destroy(it->second);
      it = capture_streams_.erase(it);
    }
  }
  void* stream = nullptr;
  if (model_->driver.stream_create(&stream, kStreamNonBlocking) != 0) return nullptr;
  capture_streams_[replay] = stream;
  return stream;
}

void DecodeGraphs::enable(Model& model) {
  const gk_host_services* host = model.host;
  const char* setting = std::getenv("GPUKIT_DECODE_GRAPHS");
  if (setting && std::strcmp(setting, "0") == 0) return;
  if (!model.driver.context) return;
  if (host->struct_size < GK_HOST_SERVICES_SIZE_1_5 || !host->graph_begin) return;
  model_ = &model;
}

bool DecodeGraphs::run(Step& step, const Tensor& tokens, const Tensor& logits, void* stream) {
  if (!model_) return false;
  const int64_t batch = int64_t(step.sessions.size());
  // The copies in and out below take the step's tensors as the core makes them: contiguous.
  if (tokens.ndim != 1 || tokens.shape[0] != batch || tokens.strides[0] != 1 ||
      logits.ndim != 2 || logits.shape[0] != batch || logits.shape[1] != model_->config.vocab ||
      logits.strides[0] != logits.shape[1] || logits.strides[1] != 1) {
    return false;
  }
  Key key{stream, batch, table_width(step), {}};
  if (model_->builder->encode) {
    for (const Session* s : step.sessions) key.windows.push_back(s->cross.get());
  }
  std::lock_guard<std::mutex> guard(lock_);
  // A graph whose windows no session holds any more can never be replayed: release it (and
  // the windows' memory with it).
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    const bool orphaned = std::any_of((*it)->windows.begin(), (*it)->windows.end(),
                                      [](const auto& w) { return w.use_count() == 1; });
    if (orphaned) {
      release(**it);
      it = graphs_.erase(it);
    } else {
      ++it;
    }
  }
  DecodeGraph* g = nullptr;
  for (const auto& each : graphs_) {
    if (serves(*each, key)) {
      g = each.get();
      break;
    }
  }
  if (!g) {
    if (seen_.size() >= kMaxSeen) seen_.clear();
    int& seen = seen_[key];
    if (seen < 0 || seen++ < kEagerStepsFirst) return false;
    g = capture(step, key);
    if (!g) {
      seen_[key] = -1;
      return false;
    }
  }
  g->last_use = ++clock_;

  // positions | slots | lengths | block table: the inputs after the token ids.
  const Model& m = *model_;
  std::vector<int32_t> host(size_t(3 * batch + batch * g->width), 0);
  for (int64_t i = 0; i < batch; ++i) host[size_t(i)] = int32_t(step.sessions[size_t(i)]->length);
  write_pages(step, g->width, host.data() + batch);
  const gk_host_services* services = m.host;
  {
    ContextScope current(m.driver);
    if (m.driver.copy_on_device(address(g->inputs), address(tokens.data),
                                size_t(batch) * sizeof(int32_t), stream) != 0 ||
        m.driver.copy_to_device(address(g->inputs) + uint64_t(batch) * sizeof(int32_t),
                                host.data(), host.size() * sizeof(int32_t), stream) != 0) {
      fail(GK_INTERNAL, "llm: copying a decode step's inputs into its graph failed");
    }
  }
  // A stream the graph cannot be launched into (its work stays undone, the inputs copied in
  // are the graph's own): that shape runs op by op from now on, with the host's warning.
  if (services->graph_launch(services->host_context, g->graph, stream) != GK_OK) {
    seen_[key] = -1;
    auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const auto& p) { return p.get() == g; });
    release(*g);
    graphs_.erase(it);
    return false;
  }
  ContextScope current(m.driver);
  if (m.driver.copy_on_device(address(logits.data), address(g->logits),
                              size_t(batch * m.config.vocab) * sizeof(float), stream) != 0) {
    fail(GK_INTERNAL, "llm: copying a decode graph's logits out failed");
  }
  return true;
}

DecodeGraph* DecodeGraphs::capture(Step& step, const Key& key) {
  Model& m = *model_;
  const gk_host_services* host = m.host;
  void* context = host->host_context;
  void* const capture_on = capture_stream(key.stream);
  if (!capture_on) return nullptr;
  auto g = std::make_unique<DecodeGraph>();
  g->stream = key.stream;
  g->batch = key.batch;
  g->width = key.width;
  if (!key.windows.empty()) {
    for (const Session* s : step.sessions) g->windows.push_back(s->cross);
  }
  const int64_t batch = key.batch, vocab = m.config.vocab;
  const int64_t input_count = 4 * batch + batch * key.width;
  // The graph's input and output outlive the capture, so they are not its scratch.
  if (host->alloc(context, m.device, uint64_t(input_count) * sizeof(int32_t), key.stream,
                  &g->inputs) != GK_OK ||
      host->alloc(context, m.device, uint64_t(batch * vocab) * sizeof(float), key.stream,
                  &g->logits) != GK_OK) {
    release(*g);
    return nullptr;
  }
  const Tensor inputs = Tensor::contiguous(g->inputs, GK_DTYPE_I32, {input_count});
  Step captured = step;
  captured.captured = true;
  captured.slots = inputs.rows(2 * batch, batch);
  captured.kv_lengths = inputs.rows(3 * batch, batch);
  captured.block_table = Tensor::contiguous(static_cast<int32_t*>(g->inputs) + 4 * batch,
                                            GK_DTYPE_I32, {batch, key.width});
  const Tensor tokens = inputs.rows(0, batch), positions = inputs.rows(batch, batch);
  const Tensor logits = Tensor::contiguous(g->logits, GK_DTYPE_F32, {batch, vocab});

  if (host->graph_begin(context, m.device, capture_on) != GK_OK) {
    release(*g);
    return nullptr;
  }
  // An op that fails here fails again when the step runs op by op, which reports it.
  bool recorded = true;
  try {
    // Its scratch is freed on the capture stream, into the graph, before the capture ends.
    Ops ops(host, m.device, capture_on);
    m.builder->forward(captured, ops, tokens, positions, logits);
  } catch (const Failure&) {
    recorded = false;
  }
  void* graph = nullptr;
  const gk_status ended = host->graph_end(context, m.device, capture_on, &graph);
  if (!recorded || ended != GK_OK) {
    if (graph) host->graph_release(context, graph);
    release(*g);
    return nullptr;
  }
  g->graph = graph;
  if (graphs_.size() >= kMaxGraphs) {
    auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
      return a->last_use < b->last_use;
    });
    release(**oldest);
    graphs_.erase(oldest);
  }
  graphs_.push_back(std::move(g));
  host->log(context, GK_LOG_DEBUG,
            ("llm: decode step of " + std::to_string(batch) + " session(s), table width " +
             std::to_string(key.width) + " blocks, captured as a CUDA graph")
                .c_str());
  return graphs_.back().get();
}

bool DecodeGraphs::serves(const DecodeGraph& g, const Key& key) {
  return g.stream == key.stream && g.batch == key.batch && g.width == key.width &&
         std::equal(g.windows.begin(), g.windows.end(), key.windows.begin(), key.windows.end(),
                    [](const auto& held, const CrossCache* w) { return held.get() == w; });
}

void DecodeGraphs::release(DecodeGraph& g) {
  const gk_host_services* host = model_->host;
  // graph_release waits for the graph's last replay, which reads the inputs and writes the
  // logits in g.stream's order: their frees are ordered after it there.
  if (g.graph) host->graph_release(host->host_context, g.graph);
  if (g.inputs) host->free(host->host_context, model_->device, g.inputs, g.stream);
  if (g.logits) host->free(host->host_context, model_->device, g.logits, g.stream);
  g = DecodeGraph{};
}

void DecodeGraphs::clear() {
  if (!model_) return;
  std::lock_guard<std::mutex> guard(lock_);
  for (const auto& g : graphs_) release(*g);
  graphs_.clear();
}

}  // namespace gk::llm
