// The llm model runner: decoder-only transformers composed of ops. Everything here runs on
// the host and drives the model's device only through the host's op-call service, so each
// matmul, norm or attention goes to the best kernel plugin for that device.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <tuple>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpukit/gpukit_plugin.h"
#include "gpukit/gpukit_plugin.hpp"

namespace gk::llm {

// What the runner throws: the plugin SDK's Failure, which plugin.cpp's entry points turn into
// a status and host->report_error (gk::plugin::guard). An empty message means the host's
// op-call service already recorded one (an op failed).
using gk::plugin::Failure;
using gk::plugin::fail;

// A strided view of device memory (shape and strides in elements).
struct Tensor {
  void* data = nullptr;
  int32_t dtype = 0;
  int32_t ndim = 0;
  int64_t shape[GK_MAX_DIMS] = {};
  int64_t strides[GK_MAX_DIMS] = {};

  explicit operator bool() const { return data != nullptr; }
  int64_t numel() const;
  // A contiguous tensor of `shape` at `data`.
  static Tensor contiguous(void* data, int32_t dtype, std::initializer_list<int64_t> shape);
  static Tensor from_plugin(const gk_plugin_tensor& t);
  // The same contiguous memory seen with another shape of the same element count.
  Tensor reshaped(std::initializer_list<int64_t> shape) const;
  // Rows [first, first + count) along axis 0.
  Tensor rows(int64_t first, int64_t count) const;
  gk_plugin_tensor plugin() const;  // points into this Tensor
};

std::string shape_text(const int64_t* shape, int32_t ndim);

gk_attr attr_int(const char* name, int64_t value);
gk_attr attr_float(const char* name, double value);
gk_attr attr_string(const char* name, const char* value);

// The ops of one step: calls through host->op_call on one device and stream, and scratch
// memory from host->alloc that lives until the step ends.
class Ops {
 public:
  Ops(const gk_host_services* host, int32_t device, void* stream)
      : host_(host), device_(device), stream_(stream) {}
  ~Ops();
  Ops(const Ops&) = delete;
  Ops& operator=(const Ops&) = delete;

  void call(const char* op, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<const Tensor*> outputs,
            std::initializer_list<gk_attr> attrs = {});
  // Scratch, f32 (the activations' dtype) unless `dtype` says otherwise, freed when the
  // step ends.
  Tensor scratch(std::initializer_list<int64_t> shape, int32_t dtype = GK_DTYPE_F32);
  // Contiguous scratch with x's shape.
  Tensor scratch_like(const Tensor& x, int32_t dtype);
  // x as `dtype` (x itself when it has it already), contiguous when cast.
  Tensor to(const Tensor& x, int32_t dtype);

  // out = x @ w^T (+ b) for nn.Linear weights [out, in], x @ w (+ b) for Conv1D [in, out]:
  // x is cast to the weights' dtype, out is f32 (matmul accumulates in f32 and may write
  // f32 for f16/bf16 inputs), so the residual stream never rounds to a 16-bit dtype.
  Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, bool w_in_out);
  Tensor add(const Tensor& a, const Tensor& b);
  Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps);
  Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps);
  // x + residual into `sum`, and its norm (rmsnorm when `b` is empty and `rms`), one op.
  Tensor add_norm(const Tensor& x, const Tensor& residual, const Tensor& w, const Tensor& b,
                  double eps, bool rms, Tensor& sum);

  // Memory that outlives the step (the caller frees it with host->free).
  void* keep(uint64_t bytes);
  void* stream() const { return stream_; }

 private:
  const gk_host_services* host_;
  int32_t device_;
  void* stream_;
  std::vector<void*> scratch_;
};

// The residual stream of a pre-norm decoder and the block output still to be added to it.
// The add happens in the next norm (add_rmsnorm / add_layernorm): one op instead of two,
// and one pass over the stream instead of three.
class Residual {
 public:
  explicit Residual(const Tensor& x) : x_(x) {}
  // `branch` [T, D] is added to the stream at the next norm (only one may wait).
  void add(const Tensor& branch);
  // The norm of the stream (with what waits added) over its rows [first, first + count):
  // rmsnorm when `rms`, else layernorm with bias `b`. Past the last layer `first` skips the
  // rows whose logits are not wanted.
  Tensor norm(Ops& ops, const Tensor& w, const Tensor& b, double eps, bool rms,
              int64_t first = 0, int64_t count = -1);

 private:
  Tensor x_;
  Tensor pending_;
};

enum class Family { kLlama, kGpt2, kWhisper };

// The hyper-parameters a builder reads from config.json.
struct Config {
  std::string architecture;
  Family family = Family::kLlama;
  int64_t vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0;
  int64_t context = 0;
  double eps = 1e-5;
  double rope_theta = 10000.0;
  std::string rope_scaling = "none";  // the rope op's `scaling`: none, llama3, linear
  // The rope op's `style`: "half" (HF's), or "interleaved" for a GGUF Llama whose q/k rows
  // stay in llama.cpp's order (packed projections are not reordered at load).
  bool rope_interleaved = false;
  double rope_factor = 1.0, rope_low = 1.0, rope_high = 4.0, rope_original_max = 8192.0;
  // Read from GGUF metadata (llama.cpp's names, its `general.architecture`).
  bool gguf = false;
  std::string gguf_architecture;
  // Encoder-decoder models (Whisper): the encoder's sizes; 0 layers for the others.
  int64_t n_mels = 0, encoder_layers = 0, encoder_heads = 0, encoder_ffn = 0;
  int64_t encoder_positions = 0;  // after the stride-2 convolution (Whisper: 1500)
};

// One decoder layer's tensors, by role; absent ones are empty. Projections are nn.Linear
// [out, in] unless `in_out` (GPT-2's Conv1D [in, out], q/k/v fused in `wqkv`).
struct Layer {
  Tensor attn_norm, attn_norm_b;
  Tensor wq, wk, wv, bq, bk, bv, wqkv, bqkv;
  Tensor q_norm, k_norm;
  Tensor wo, bo;
  Tensor ffn_norm, ffn_norm_b;
  Tensor w_gate, w_up, w_down, b_up, b_down;
  // Cross-attention of an encoder-decoder's decoder layer (Whisper's encoder_attn).
  Tensor cross_norm, cross_norm_b;
  Tensor cwq, cbq, cwk, cwv, cbv, cwo, cbo;
};

// The weight set by name, with the checks every builder needs.
class WeightTable {
 public:
  WeightTable(const gk_plugin_weight* weights, int64_t count, std::string architecture);
  bool has(const std::string& name) const { return by_name_.count(name) != 0; }
  // The tensor `name` with exactly `shape`: NOT_FOUND when absent, INVALID_ARGUMENT naming
  // both shapes when it differs (`why` says where the expected shape comes from).
  Tensor get(const std::string& name, std::initializer_list<int64_t> shape,
             const std::string& why) const;
  // As get, or an empty Tensor when the file has no such tensor.
  Tensor optional(const std::string& name, std::initializer_list<int64_t> shape,
                  const std::string& why) const;

 private:
  std::unordered_map<std::string, Tensor> by_name_;
  std::string architecture_;
};

struct Model;
struct Session;
struct Step;

// One architecture family: reads its config, maps its tensor names to roles, runs a step.
struct Builder {
  void (*read_config)(const nlohmann::json& config, Config& out);
  void (*load)(Model& model, const WeightTable& weights);
  // Writes the logits of x's last rows (all rows when logits has T rows) for `tokens` at
  // `positions`, appending their keys and values to the caches of the step's sequences.
  // Everything but attention is row-wise, so a batch is just more rows.
  void (*forward)(Step& step, Ops& ops, const Tensor& tokens, const Tensor& positions,
                  const Tensor& logits);
  // Encoder-decoder models: runs the encoder on `features` [channels, frames], fills the
  // session's cross-attention keys and values and, when `output` has data, writes the
  // encoder's hidden states there. nullptr for decoder-only families.
  void (*encode)(Session& session, Ops& ops, const Tensor& features, const Tensor& output);
};

// The builder for an HF architecture name, or nullptr.
const Builder* find_builder(const std::string& architecture);

extern const Builder kLlamaBuilder;  // llama.cpp
extern const Builder kGpt2Builder;   // gpt2.cpp
extern const Builder kWhisperBuilder;  // whisper.cpp

// Bytes per element of the floating and index dtypes the runner uses (the plugin does not
// link libgpukit, so not gk_dtype_size).
int64_t element_size(int32_t dtype);

// Whether `dtype` is block-quantized: a GGUF projection gk_model_load kept packed, which only
// matmul reads (b of [N, K] with transpose_b, an f32/f16/bf16 input, out f32).
bool is_packed(int32_t dtype);

// The dtype a projection's input is cast to: the weight's, or the model's for a packed weight
// (whose bias, if any, is in the model's dtype as well).
inline int32_t linear_input_dtype(int32_t weight_dtype, int32_t model_dtype) {
  return is_packed(weight_dtype) ? model_dtype : weight_dtype;
}

// Positions per block of the paged KV cache. 16 leaves a session at most 15 unused
// positions in its last block, and a block of 16 rows x kv_heads x head_dim is a few KB of
// contiguous keys for the attention kernel to stream, while a 4096-position session's row of
// the block table stays 256 ids.
inline constexpr int64_t kKvBlockSize = 16;

// The CUDA driver calls the runner makes itself (the plugin does not link libcuda): an
// upload of a step's block table and slots, and a wait for the device before the KV pool
// moves. Resolved at model_create for a CUDA device; all null on the cpu device, whose
// memory the host reads and writes directly.
struct Driver {
  void* context = nullptr;             // the device's primary context
  int (*ctx_push)(void*) = nullptr;    // cuCtxPushCurrent_v2
  int (*ctx_pop)(void**) = nullptr;    // cuCtxPopCurrent_v2
  int (*ctx_synchronize)() = nullptr;  // cuCtxSynchronize
  int (*copy_to_device)(uint64_t, const void*, size_t, void*) = nullptr;  // cuMemcpyHtoDAsync_v2
  // Decode graphs (DecodeGraphs): their capture stream, and their inputs and logits copied in
  // and out around each replay.
  int (*copy_on_device)(uint64_t, uint64_t, size_t, void*) = nullptr;  // cuMemcpyDtoDAsync_v2
  int (*stream_create)(void**, unsigned) = nullptr;                    // cuStreamCreate
  int (*stream_destroy)(void*) = nullptr;                              // cuStreamDestroy_v2
};

// Makes the driver's context current for a scope (the runner's own driver calls).
class ContextScope {
 public:
  explicit ContextScope(const Driver& d);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  const Driver& d_;
};

struct Model;
struct Step;
struct CrossCache;

// One decode step's shapes captured as a CUDA graph (host->graph_*, plugin ABI 1.5).
struct DecodeGraph {
  void* graph = nullptr;
  void* stream = nullptr;  // replays run there, in its order (it keys the graph)
  int64_t batch = 0;       // sessions, one token each
  int64_t width = 0;       // block-table width
  // Encoder-decoder models: each session's encoded window, whose cross-attention keys and
  // values the graph reads at their addresses. Held, so that no other window can take those
  // addresses while the graph lives; a graph whose windows no session holds any more is
  // released.
  std::vector<std::shared_ptr<const CrossCache>> windows;
  // i32 [tokens B | positions B | slots B | lengths B | block table B x width] and f32 logits
  // [B, vocab]: the graph's own input and output, copied in and out around each replay.
  void* inputs = nullptr;
  void* logits = nullptr;
  uint64_t last_use = 0;
};

// A model's decode steps as CUDA graphs: a step of B sessions, one token each, is a replay of
// one graph instead of ~20 op calls per layer from the host, each a dispatch and a launch
// (docs/kernels/llm.md, "What bounds decode"). A decode step's kernels depend only on B and
// the block table's width: the width is the longest session's blocks rounded up to a power
// of two (at least kMinGraphBlocks), so a graph serves many steps and is captured
// again only when that bucket, B or the stream changes; everything else (ids, positions,
// slots, lengths, block ids) is data, copied into the graph's inputs before each replay.
// A shape is captured on its third step (the first ones run op by op, so that every op's
// plan and kernel are loaded first); a capture that fails leaves that shape op by op.
// Graphs hold the KV pool's addresses: growing the pool releases them all. An
// encoder-decoder model's graph also holds its sessions' encoded windows (Whisper's
// cross-attention caches), so the windows key it too: a batch of windows is captured once
// and replayed for the rest of their tokens.
// Off on the cpu device, with a host older than plugin ABI 1.5, and with
// GPUKIT_DECODE_GRAPHS=0.
class DecodeGraphs {
 public:
  static constexpr int64_t kMinGraphBlocks = 4;  // 64 positions
  static constexpr size_t kMaxGraphs = 8;         // least recently used ones released first
  static constexpr int kEagerStepsFirst = 2;

  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Set at model_create.
  void enable(Model& model);
  bool enabled() const { return model_ != nullptr; }
  // Runs `step` (every session one row) as a replay when its shape has a graph, capturing it
  // when due; false when the caller must run the step op by op.
  bool run(Step& step, const Tensor& tokens, const Tensor& logits, void* stream);
  // Releases every graph (the KV pool is about to move). Call with kv_lock held exclusively.
  void clear();

 private:
  struct Key {
    void* stream;
    int64_t batch, width;
    std::vector<const CrossCache*> windows;  // per session; empty for decoder-only models
    bool operator<(const Key& o) const {
      return std::tie(stream, batch, width, windows) <
             std::tie(o.stream, o.batch, o.width, o.windows);
    }
  };
  // Whether `g` was captured for `key`'s shape.
  static bool serves(const DecodeGraph& g, const Key& key);
  DecodeGraph* capture(Step& step, const Key& key);
  // The capture stream of `replay` (created on first use), or nullptr when none can be made.
  void* capture_stream(void* replay);
  void release(DecodeGraph& g);

  Model* model_ = nullptr;
  std::mutex lock_;
  // Per replay stream, the private stream its graphs are captured on: kernels that keep
  // state per stream (cuBLASLt's workspace) then share it only among graphs whose replays
  // are ordered on one stream.
  std::map<void*, void*> capture_streams_;
  std::vector<std::unique_ptr<DecodeGraph>> graphs_;
  // Steps run op by op per shape; -1: its capture failed. Forgotten past kMaxSeen shapes
  // (a long transcription meets a new set of windows every few seconds of audio).
  std::map<Key, int> seen_;
  static constexpr size_t kMaxSeen = 256;
  uint64_t clock_ = 0;
};

// The keys and values of every session of a model: per layer, a pool of blocks
// [num_blocks, kKvBlockSize, kv_heads, head_dim] in the model's dtype, from host->alloc.
// Sessions hold block ids; a block is free when no session holds it.
struct KvPool {
  std::vector<void*> k, v;
  int64_t num_blocks = 0;
  std::vector<int32_t> free;  // taken from the back
};

struct Model {
  const gk_host_services* host = nullptr;
  int32_t device = 0;
  int32_t dtype = 0;
  Config config;
  const Builder* builder = nullptr;
  std::string config_json;
  Tensor tok_embd, pos_embd, out_norm, out_norm_b, lm_head;
  std::vector<Layer> layers;
  // Whisper's encoder: each convolution as its three taps [out, in] (tap k reads input
  // t + k - 1), positions, layers (self-attention and MLP roles of Layer), final norm.
  Tensor conv1[3], conv1_b, conv2[3], conv2_b, enc_pos, enc_norm, enc_norm_b;
  std::vector<Layer> encoder_layers;
  // Norm weights are held in f32, the residual stream's dtype (copies made at load when
  // the weights are f16/bf16); freed with the model.
  std::vector<void*> owned;
  Driver driver;
  KvPool kv;
  // Steps and copies read the pool shared; taking or returning blocks (and growing the pool,
  // which moves it) is exclusive.
  mutable std::shared_mutex kv_lock;
  DecodeGraphs graphs;
  ~Model();
  void norms_to_f32();
  // Layer `layer`'s key (or value) pool as a tensor.
  Tensor kv_pool(size_t layer, bool values) const;
  // `count` free block ids, in ascending order when the pool had to grow. Grows every
  // layer's pool when the free list is short: a larger allocation, the old blocks copied
  // over, the old one freed, so every id keeps its place. When an allocation fails the pool
  // stays as it was and the host's out-of-memory message stands. Call with kv_lock held
  // exclusively.
  std::vector<int32_t> take_blocks(int64_t count);
  void return_blocks(const std::vector<int32_t>& blocks);
  // `bytes` of host memory into device memory `dst` from host->alloc, in `stream`'s order.
  void upload(void* dst, const void* src, uint64_t bytes, void* stream) const;
};

// An encoded window of an encoder-decoder model: per decoder layer, the cross-attention keys
// and values [1, length, heads, head_dim] in the model's dtype, from host->alloc. Read-only
// once made, so the sessions copied from the one that encoded it (beams) share it.
struct CrossCache {
  const Model* model = nullptr;
  std::vector<void*> k, v;
  int64_t length = 0;
  explicit CrossCache(const Model& m);
  ~CrossCache();
  CrossCache(const CrossCache&) = delete;
  CrossCache& operator=(const CrossCache&) = delete;
};

// A sequence and its KV cache: the blocks of the model's pool it holds, ceil(capacity /
// kKvBlockSize) of them taken when it is created, so that a step never waits for memory.
// Position p lives in block blocks[p / kKvBlockSize], row p % kKvBlockSize, of every
// layer's pool. Positions [0, length) are filled.
struct Session {
  Model* model = nullptr;
  int64_t capacity = 0;
  int64_t length = 0;
  std::vector<int32_t> blocks;
  // Encoder-decoder models: the window the builder's encode made (null before the first).
  std::shared_ptr<const CrossCache> cross;
  ~Session();  // returns its blocks
};

// The sequences one forward pass serves: its T token rows are split among `sessions` in
// order, `rows[i]` of them for sessions[i] (a prefill: one session, all T rows; a batched
// decode step: one row per session). Sessions' lengths are those before the step.
struct Step {
  Model* model = nullptr;
  std::vector<Session*> sessions;
  std::vector<int64_t> rows;
  // Where the step's rows go and what its sessions attend to, on the device, i32: the pool
  // slot of each new row [T], each session's length after the step [B] and its row of
  // block ids [B, max_blocks]. One upload at the first layer's attend serves every layer.
  Tensor slots, kv_lengths, block_table;
  // Captured into a decode graph: attention reads the block table even for one session, as
  // no shape may depend on the sessions' lengths.
  bool captured = false;
  // One session's step of `count` tokens.
  static Step single(Session& session, int64_t count);
};

// Where a step's rows go and what its sessions attend to, as attention and kv_cache_write
// read them, written to `out` (zeroed by the caller): i32 [slots (T) | lengths after the step
// (B) | block table (B x width)], width at least each session's blocks after the step (table
// entries past them are never read). Returns the table's start.
int32_t* write_pages(const Step& step, int64_t width, int32_t* out);

// Shared building blocks of the builders.
// Appends k and v ([1, T, Hkv, Dh] views) to layer `layer`'s cache of each of the step's
// sessions (its rows, at its length) and returns attention(q, that session's cached keys,
// cached values) for every row, as [T, Hq * Dh]: one kv_cache_write for k, one for v and
// one attention call over the block pool when every session has as many rows (a decode
// step, a prefill), else one attention call per session. A single session whose blocks
// follow each other is passed as a contiguous cache (no table: on SM 90 attention_sm90,
// which reads none, may take a prefill).
Tensor attend(Step& step, Ops& ops, size_t layer, const Tensor& q, const Tensor& k,
              const Tensor& v);
// rope over x [1, T, H, Dh] in place, with the model's theta and scaling.
void rotate(Ops& ops, const Config& config, const Tensor& x, const Tensor& positions);
// The final norm's output rows that logits asks for, projected by the LM head (f32 out).
void project_logits(Ops& ops, const Model& model, const Tensor& normed, const Tensor& logits);

// Config readers shared by families.
int64_t config_int(const nlohmann::json& config, const char* key, const std::string& arch);
int64_t config_int_or(const nlohmann::json& config, const char* key, int64_t fallback);
double config_float_or(const nlohmann::json& config, const char* key, double fallback);

}  // namespace gk::llm
