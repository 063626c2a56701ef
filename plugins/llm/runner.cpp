// The runner's shared parts: views, op calls, weight checks, the KV cache and attention.
#include "runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

namespace gk::llm {

int64_t element_size(int32_t dtype) {
  const size_t size = gk::plugin::dtype_size(dtype);
  if (size == 0) {
    fail(GK_INVALID_ARGUMENT, std::string("llm: dtype ") + gk::plugin::dtype_name(dtype) +
                                  " has no element size");
  }
  return static_cast<int64_t>(size);
}

bool is_packed(int32_t dtype) {
  const gk::plugin::DtypeInfo* d = gk::plugin::dtype_info(dtype);
  return d && d->block > 1;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int32_t d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

Tensor Tensor::contiguous(void* data, int32_t dtype, std::initializer_list<int64_t> shape) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.ndim = int32_t(shape.size());
  int32_t d = 0;
  for (int64_t s : shape) t.shape[d++] = s;
  int64_t stride = 1;
  for (d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = stride;
    stride *= t.shape[d];
  }
  return t;
}

Tensor Tensor::from_plugin(const gk_plugin_tensor& p) {
  Tensor t;
  t.data = p.data;
  t.dtype = p.dtype;
  t.ndim = p.ndim;
  for (int32_t d = 0; d < p.ndim && d < GK_MAX_DIMS; ++d) {
    t.shape[d] = p.shape[d];
    t.strides[d] = p.strides[d];
  }
  return t;
}

Tensor Tensor::reshaped(std::initializer_list<int64_t> shape) const {
  return contiguous(data, dtype, shape);
}

Tensor Tensor::rows(int64_t first, int64_t count) const {
  Tensor t = *this;
  t.data = static_cast<char*>(data) + first * strides[0] * element_size(dtype);
  t.shape[0] = count;
  return t;
}

gk_plugin_tensor Tensor::plugin() const {
  return gk_plugin_tensor{data, dtype, ndim, shape, strides, 0};
}

std::string shape_text(const int64_t* shape, int32_t ndim) {
  std::string s = "[";
  for (int32_t d = 0; d < ndim; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

gk_attr attr_int(const char* name, int64_t value) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_INT;
  a.value.i = value;
  return a;
}

gk_attr attr_float(const char* name, double value) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_FLOAT;
  a.value.f = value;
  return a;
}

gk_attr attr_string(const char* name, const char* value) {
  gk_attr a{};
  a.name = name;
  a.type = GK_ATTR_STRING;
  a.value.s = value;
  return a;
}

// ---- ops ----

Ops::~Ops() {
  for (void* p : scratch_) host_->free(host_->host_context, device_, p, stream_);
}

void Ops::call(const char* op, std::initializer_list<const Tensor*> inputs,
               std::initializer_list<const Tensor*> outputs, std::initializer_list<gk_attr> attrs) {
  gk_plugin_tensor in[8], out[4];
  int32_t ni = 0, no = 0;
  for (const Tensor* t : inputs) in[ni++] = t->plugin();
  for (const Tensor* t : outputs) out[no++] = t->plugin();
  gk_kernel_args args{sizeof(gk_kernel_args), op, device_, stream_, in, ni, out, no, attrs.begin(),
                      int32_t(attrs.size())};
  gk_status status = host_->op_call(host_->host_context, &args);
  // The service left the op's message for the host's caller.
  if (status != GK_OK) fail(status, "");
}

void* Ops::keep(uint64_t bytes) {
  void* p = nullptr;
  gk_status status = host_->alloc(host_->host_context, device_, bytes ? bytes : 1, stream_, &p);
  if (status != GK_OK) fail(status, "");
  return p;
}

Tensor Ops::scratch_like(const Tensor& x, int32_t dtype) {
  Tensor y = scratch({x.numel()}, dtype);
  y.ndim = x.ndim;
  int64_t stride = 1;
  for (int32_t d = x.ndim - 1; d >= 0; --d) {
    y.shape[d] = x.shape[d];
    y.strides[d] = stride;
    stride *= x.shape[d];
  }
  return y;
}

Tensor Ops::to(const Tensor& x, int32_t dtype) {
  if (x.dtype == dtype) return x;
  Tensor y = scratch_like(x, dtype);
  call("cast", {&x}, {&y});
  return y;
}

Tensor Ops::scratch(std::initializer_list<int64_t> shape, int32_t dtype) {
  Tensor t = Tensor::contiguous(nullptr, dtype, shape);
  uint64_t bytes = uint64_t(t.numel() * element_size(dtype));
  void* p = nullptr;
  gk_status status = host_->alloc(host_->host_context, device_, bytes ? bytes : 1, stream_, &p);
  if (status != GK_OK) fail(status, "");
  scratch_.push_back(p);
  t.data = p;
  return t;
}

Tensor Ops::linear(const Tensor& x, const Tensor& w, const Tensor& b, bool w_in_out) {
  const int64_t out_features = w_in_out ? w.shape[1] : w.shape[0];
  // A packed weight takes the input as it comes (the caller cast it to the model's dtype),
  // or in the bias's dtype, which matmul requires of a.
  Tensor in = !is_packed(w.dtype) ? to(x, w.dtype) : b ? to(x, b.dtype) : x;
  Tensor y = scratch({x.shape[0], out_features});
  gk_attr transpose = attr_int("transpose_b", w_in_out ? 0 : 1);
  if (b) {
    call("matmul", {&in, &w, &b}, {&y}, {transpose});
  } else {
    call("matmul", {&in, &w}, {&y}, {transpose});
  }
  return y;
}

Tensor Ops::add(const Tensor& a, const Tensor& b) {
  Tensor y = scratch({a.shape[0], a.shape[1]});
  call("add", {&a, &b}, {&y});
  return y;
}

Tensor Ops::rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  // x is [T, D] or per head [1, T, H, Dh].
  Tensor y = scratch_like(x, x.dtype);
  call("rmsnorm", {&x, &w}, {&y}, {attr_float("eps", eps)});
  return y;
}

Tensor Ops::layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor y = scratch({x.shape[0], x.shape[1]});
  call("layernorm", {&x, &w, &b}, {&y}, {attr_float("eps", eps)});
  return y;
}

Tensor Ops::add_norm(const Tensor& x, const Tensor& residual, const Tensor& w, const Tensor& b,
                     double eps, bool rms, Tensor& sum) {
  Tensor y = scratch({x.shape[0], x.shape[1]});
  sum = scratch({x.shape[0], x.shape[1]});
  if (rms) {
    call("add_rmsnorm", {&x, &residual, &w}, {&y, &sum}, {attr_float("eps", eps)});
  } else {
    call("add_layernorm", {&x, &residual, &w, &b}, {&y, &sum}, {attr_float("eps", eps)});
  }
  return y;
}

void Residual::add(const Tensor& branch) {
  if (pending_) fail(GK_INTERNAL, "llm runner: two block outputs wait for one norm");
  pending_ = branch;
}

Tensor Residual::norm(Ops& ops, const Tensor& w, const Tensor& b, double eps, bool rms,
                      int64_t first, int64_t count) {
  if (count < 0) count = x_.shape[0] - first;
  const Tensor x = x_.rows(first, count);
  if (!pending_) return rms ? ops.rmsnorm(x, w, eps) : ops.layernorm(x, w, b, eps);
  Tensor sum;
  Tensor y = ops.add_norm(pending_.rows(first, count), x, w, b, eps, rms, sum);
  x_ = sum;
  pending_ = Tensor{};
  return y;
}

// ---- weights ----

WeightTable::WeightTable(const gk_plugin_weight* weights, int64_t count, std::string architecture)
    : architecture_(std::move(architecture)) {
  for (int64_t i = 0; i < count; ++i) {
    if (weights[i].name) by_name_[weights[i].name] = Tensor::from_plugin(weights[i].tensor);
  }
}

Tensor WeightTable::optional(const std::string& name, std::initializer_list<int64_t> shape,
                             const std::string& why) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return Tensor{};
  const Tensor& t = it->second;
  bool same = t.ndim == int32_t(shape.size());
  int32_t d = 0;
  for (int64_t s : shape) {
    if (same && t.shape[d] != s) same = false;
    ++d;
  }
  if (!same) {
    std::vector<int64_t> expected(shape);
    fail(GK_INVALID_ARGUMENT, "tensor '" + name + "' has shape " + shape_text(t.shape, t.ndim) +
                                  " but the config implies " +
                                  shape_text(expected.data(), int32_t(expected.size())) + " (" +
                                  why + ")");
  }
  return t;
}

Tensor WeightTable::get(const std::string& name, std::initializer_list<int64_t> shape,
                        const std::string& why) const {
  if (!has(name)) {
    fail(GK_NOT_FOUND,
         "tensor '" + name + "' is missing from the weights (" + architecture_ + " needs it)");
  }
  return optional(name, shape, why);
}

// ---- config ----

int64_t config_int(const nlohmann::json& config, const char* key, const std::string& arch) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
    fail(GK_INVALID_ARGUMENT, std::string("config.json: '") + key +
                                  "' is missing or not a positive integer (" + arch + " needs it)");
  }
  return it->get<int64_t>();
}

int64_t config_int_or(const nlohmann::json& config, const char* key, int64_t fallback) {
  auto it = config.find(key);
  return (it != config.end() && it->is_number_integer()) ? it->get<int64_t>() : fallback;
}

double config_float_or(const nlohmann::json& config, const char* key, double fallback) {
  auto it = config.find(key);
  return (it != config.end() && it->is_number()) ? it->get<double>() : fallback;
}

// ---- the model ----

Model::~Model() {
  graphs.clear();
  for (void* p : owned) host->free(host->host_context, device, p, nullptr);
  for (const std::vector<void*>* pool : {&kv.k, &kv.v}) {
    for (void* p : *pool) {
      if (p) host->free(host->host_context, device, p, nullptr);
    }
  }
}

void Model::norms_to_f32() {
  if (dtype == GK_DTYPE_F32) return;
  Ops ops(host, device, nullptr);
  auto convert = [&](Tensor& w) {
    if (!w) return;
    Tensor f = Tensor::contiguous(nullptr, GK_DTYPE_F32, {w.numel()});
    f.data = ops.keep(uint64_t(w.numel()) * 4);
    owned.push_back(f.data);
    ops.call("cast", {&w}, {&f});
    w = f;
  };
  convert(out_norm);
  convert(out_norm_b);
  convert(enc_norm);
  convert(enc_norm_b);
  for (std::vector<Layer>* stack : {&layers, &encoder_layers}) {
    for (Layer& l : *stack) {
      for (Tensor* w : {&l.attn_norm, &l.attn_norm_b, &l.q_norm, &l.k_norm, &l.ffn_norm,
                        &l.ffn_norm_b, &l.cross_norm, &l.cross_norm_b}) {
        convert(*w);
      }
    }
  }
}

// ---- the KV cache and attention ----

ContextScope::ContextScope(const Driver& d) : d_(d) {
  if (d_.ctx_push(d_.context) != 0) fail(GK_INTERNAL, "llm: cuCtxPushCurrent failed");
}

ContextScope::~ContextScope() {
  void* popped = nullptr;
  d_.ctx_pop(&popped);
}

Tensor Model::kv_pool(size_t layer, bool values) const {
  return Tensor::contiguous(values ? kv.v[layer] : kv.k[layer], dtype,
                            {kv.num_blocks, kKvBlockSize, config.kv_heads, config.head_dim});
}

void Model::upload(void* dst, const void* src, uint64_t bytes, void* stream) const {
  if (!driver.context) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // Pageable source memory is staged before the call returns, so `src` may go after it;
  // the copy itself runs in the stream's order, after the allocation of `dst` there.
  ContextScope current(driver);
  if (driver.copy_to_device(uint64_t(reinterpret_cast<uintptr_t>(dst)), src, bytes, stream) != 0) {
    fail(GK_INTERNAL, "llm: cuMemcpyHtoDAsync of the step's block table failed");
  }
}

std::vector<int32_t> Model::take_blocks(int64_t count) {
  const int64_t missing = count - int64_t(kv.free.size());
  if (missing > 0) {
    const int64_t grown = kv.num_blocks + missing;
    if (grown > INT32_MAX) {
      fail(GK_RESOURCE_EXHAUSTED,
           "llm: the KV pool would need " + std::to_string(grown) + " blocks; block ids are i32");
    }
    const uint64_t block_bytes =
        uint64_t(kKvBlockSize * config.kv_heads * config.head_dim * element_size(dtype));
    // Every new allocation first: one that fails leaves the pool as it was.
    std::vector<void*> k_new(layers.size(), nullptr), v_new(layers.size(), nullptr);
    gk_status status = GK_OK;
    for (size_t i = 0; i < layers.size() && status == GK_OK; ++i) {
      status = host->alloc(host->host_context, device, uint64_t(grown) * block_bytes, nullptr,
                           &k_new[i]);
      if (status == GK_OK) {
        status = host->alloc(host->host_context, device, uint64_t(grown) * block_bytes, nullptr,
                             &v_new[i]);
      }
    }
    if (status != GK_OK) {
      for (const std::vector<void*>* pool : {&k_new, &v_new}) {
        for (void* p : *pool) {
          if (p) host->free(host->host_context, device, p, nullptr);
        }
      }
      // The pool's message (who holds what) stands for the host's caller.
      fail(status, "");
    }
    if (kv.num_blocks > 0) {
      graphs.clear();  // they hold the old pool's addresses
      // Steps of other sessions may still read the old pool on their streams.
      if (driver.context) {
        ContextScope current(driver);
        if (driver.ctx_synchronize() != 0) {
          fail(GK_INTERNAL, "llm: cuCtxSynchronize before the KV pool grows failed");
        }
      }
      Ops ops(host, device, nullptr);
      for (size_t i = 0; i < layers.size(); ++i) {
        for (bool values : {false, true}) {
          const Tensor from = kv_pool(i, values);
          Tensor to = from;
          to.data = values ? v_new[i] : k_new[i];
          ops.call("cast", {&from}, {&to});
        }
      }
      for (size_t i = 0; i < layers.size(); ++i) {
        host->free(host->host_context, device, kv.k[i], nullptr);
        host->free(host->host_context, device, kv.v[i], nullptr);
      }
    }
    kv.k = std::move(k_new);
    kv.v = std::move(v_new);
    // Taken from the back: the new ids in ascending order.
    for (int64_t id = grown - 1; id >= kv.num_blocks; --id) kv.free.push_back(int32_t(id));
    kv.num_blocks = grown;
  }
  std::vector<int32_t> taken(kv.free.end() - count, kv.free.end());
  std::reverse(taken.begin(), taken.end());
  kv.free.resize(kv.free.size() - size_t(count));
  return taken;
}

void Model::return_blocks(const std::vector<int32_t>& blocks) {
  // In reverse, so that the next session takes them in the same order.
  kv.free.insert(kv.free.end(), blocks.rbegin(), blocks.rend());
}

Session::~Session() {
  std::unique_lock lock(model->kv_lock);
  model->return_blocks(blocks);
}

CrossCache::CrossCache(const Model& m)
    : model(&m), k(m.layers.size(), nullptr), v(m.layers.size(), nullptr) {}

CrossCache::~CrossCache() {
  const gk_host_services* host = model->host;
  for (const std::vector<void*>* cache : {&k, &v}) {
    for (void* p : *cache) {
      if (p) host->free(host->host_context, model->device, p, nullptr);
    }
  }
}

Step Step::single(Session& session, int64_t count) {
  Step step;
  step.model = session.model;
  step.sessions = {&session};
  step.rows = {count};
  return step;
}

int32_t* write_pages(const Step& step, int64_t width, int32_t* out) {
  int64_t t = 0;
  for (int64_t rows : step.rows) t += rows;
  const int64_t sessions = int64_t(step.sessions.size());
  int32_t* slots = out;
  int32_t* lengths = slots + t;
  int32_t* table = lengths + sessions;
  int64_t row = 0;
  for (int64_t i = 0; i < sessions; ++i) {
    const Session& s = *step.sessions[size_t(i)];
    const int64_t length = s.length + step.rows[size_t(i)];
    for (int64_t p = s.length; p < length; ++p) {
      slots[row++] = int32_t(s.blocks[size_t(p / kKvBlockSize)] * kKvBlockSize + p % kKvBlockSize);
    }
    lengths[i] = int32_t(length);
    const int64_t used = (length + kKvBlockSize - 1) / kKvBlockSize;
    std::copy(s.blocks.begin(), s.blocks.begin() + used, table + i * width);
  }
  return table;
}

namespace {

// Tokens [first, first + count) of a [1, T, H, Dh] view.
Tensor token_slice(const Tensor& x, int64_t first, int64_t count) {
  Tensor t = x;
  t.data = static_cast<char*>(x.data) + first * x.strides[1] * element_size(x.dtype);
  t.shape[1] = count;
  return t;
}

// The step's slots, lengths and block table, built on the host and uploaded as one buffer.
void page_step(Step& step, Ops& ops) {
  const int64_t sessions = int64_t(step.sessions.size());
  int64_t t = 0, max_blocks = 1;
  for (size_t i = 0; i < step.sessions.size(); ++i) {
    t += step.rows[i];
    const int64_t length = step.sessions[i]->length + step.rows[i];
    max_blocks = std::max(max_blocks, (length + kKvBlockSize - 1) / kKvBlockSize);
  }
  std::vector<int32_t> host(size_t(t + sessions + sessions * max_blocks), 0);
  int32_t* table = write_pages(step, max_blocks, host.data());
  Tensor all = ops.scratch({int64_t(host.size())}, GK_DTYPE_I32);
  step.model->upload(all.data, host.data(), host.size() * sizeof(int32_t), ops.stream());
  step.slots = all.rows(0, t);
  step.kv_lengths = all.rows(t, sessions);
  step.block_table = Tensor::contiguous(table - host.data() + static_cast<int32_t*>(all.data),
                                        GK_DTYPE_I32, {sessions, max_blocks});
}

}  // namespace

Tensor attend(Step& step, Ops& ops, size_t layer, const Tensor& q, const Tensor& k,
              const Tensor& v) {
  const Model& m = *step.model;
  const Config& c = m.config;
  const int64_t t = q.shape[1];
  const int32_t cache_dtype = m.dtype;
  if (!step.slots) page_step(step, ops);
  // The step's new keys and values into their slots of the pools (cast to the cache's dtype).
  Tensor k_pool = m.kv_pool(layer, false), v_pool = m.kv_pool(layer, true);
  ops.call("kv_cache_write", {&k_pool, &k, &step.slots}, {&k_pool});
  ops.call("kv_cache_write", {&v_pool, &v, &step.slots}, {&v_pool});

  Tensor out = ops.scratch({1, t, c.heads, c.head_dim}, cache_dtype);
  Tensor queries = ops.to(q, cache_dtype);
  const int64_t batch = int64_t(step.sessions.size());
  const bool even =
      std::all_of(step.rows.begin(), step.rows.end(), [&](int64_t r) { return r == step.rows[0]; });
  // Each session's rows are its newest keys: causal attention over its filled prefix.
  if (batch == 1 && !step.captured) {
    // One session whose blocks follow each other in the pool (a fresh session takes them in
    // ascending order) has a contiguous cache: attention without a table then, which on
    // SM 90 lets attention_sm90 (it reads no block table) take a prefill.
    const std::vector<int32_t>& blocks = step.sessions[0]->blocks;
    const int64_t length = step.sessions[0]->length + t;
    const int64_t used = (length + kKvBlockSize - 1) / kKvBlockSize;
    bool consecutive = true;
    for (int64_t i = 1; i < used && consecutive; ++i) {
      consecutive = blocks[size_t(i)] == blocks[size_t(i - 1)] + 1;
    }
    if (consecutive) {
      Tensor keys =
          k_pool.rows(blocks[0], used).reshaped({1, used * kKvBlockSize, c.kv_heads, c.head_dim});
      Tensor values =
          v_pool.rows(blocks[0], used).reshaped({1, used * kKvBlockSize, c.kv_heads, c.head_dim});
      ops.call("attention", {&queries, &keys, &values, &step.kv_lengths}, {&out});
      return out.reshaped({t, c.heads * c.head_dim});
    }
  }
  if (even) {
    // The T rows as [B, rows, Hq, Dh]: session i's rows follow each other in the token axis.
    const int64_t rows = step.rows[0];
    Tensor qb = queries;
    qb.shape[0] = batch;
    qb.shape[1] = rows;
    qb.strides[0] = rows * queries.strides[1];
    Tensor ob = out.reshaped({batch, rows, c.heads, c.head_dim});
    ops.call("attention", {&qb, &k_pool, &v_pool, &step.kv_lengths, &step.block_table}, {&ob});
    return out.reshaped({t, c.heads * c.head_dim});
  }
  int64_t first = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t rows = step.rows[size_t(i)];
    Tensor q_rows = token_slice(queries, first, rows);
    Tensor out_rows = token_slice(out, first, rows);
    Tensor length = step.kv_lengths.rows(i, 1);
    Tensor table = step.block_table.rows(i, 1);
    ops.call("attention", {&q_rows, &k_pool, &v_pool, &length, &table}, {&out_rows});
    first += rows;
  }
  return out.reshaped({t, c.heads * c.head_dim});
}

void rotate(Ops& ops, const Config& c, const Tensor& x, const Tensor& positions) {
  const gk_attr style = attr_string("style", c.rope_interleaved ? "interleaved" : "half");
  if (c.rope_scaling == "none") {
    ops.call("rope", {&x, &positions}, {&x}, {attr_float("theta", c.rope_theta), style});
    return;
  }
  ops.call("rope", {&x, &positions}, {&x},
           {attr_float("theta", c.rope_theta), attr_string("scaling", c.rope_scaling.c_str()),
            attr_float("factor", c.rope_factor), attr_float("low_freq_factor", c.rope_low),
            attr_float("high_freq_factor", c.rope_high),
            attr_float("original_max_position", c.rope_original_max), style});
}

void project_logits(Ops& ops, const Model& model, const Tensor& normed, const Tensor& logits) {
  const int64_t rows = logits.shape[0];
  Tensor h = ops.to(normed.rows(normed.shape[0] - rows, rows),
                    linear_input_dtype(model.lm_head.dtype, model.dtype));
  // The head is [vocab, hidden] (nn.Linear, or the tied embedding); f32 logits for every
  // dtype, which matmul accepts as the output of f16/bf16 inputs.
  ops.call("matmul", {&h, &model.lm_head}, {&logits}, {attr_int("transpose_b", 1)});
}

}  // namespace gk::llm
