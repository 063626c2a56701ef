// The runner's shared parts: views, op calls, weight checks, the KV cache and attention.
#include "runner.h"

#include <cmath>
#include <cstring>

namespace gk::llm {

int64_t element_size(int32_t dtype) {
  const size_t size = gk::plugin::dtype_size(dtype);
  if (size == 0) {
    fail(GK_INVALID_ARGUMENT, std::string("llm: dtype ") + gk::plugin::dtype_name(dtype) +
                                  " has no element size");
  }
  return static_cast<int64_t>(size);
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
  Tensor in = to(x, w.dtype);
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
  for (void* p : owned) host->free(host->host_context, device, p, nullptr);
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

Session::~Session() {
  const gk_host_services* host = model->host;
  for (void* p : k_cache) {
    if (p) host->free(host->host_context, model->device, p, nullptr);
  }
  for (void* p : v_cache) {
    if (p) host->free(host->host_context, model->device, p, nullptr);
  }
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

Tensor Session::cache_view(const std::vector<void*>& cache, size_t layer, int64_t first,
                           int64_t count) const {
  const Config& c = model->config;
  Tensor all =
      Tensor::contiguous(cache[layer], model->dtype, {1, capacity, c.kv_heads, c.head_dim});
  Tensor t = all;
  t.data = static_cast<char*>(all.data) + first * all.strides[1] * element_size(model->dtype);
  t.shape[1] = count;
  return t;
}

Step Step::single(Session& session, int64_t count) {
  Step step;
  step.model = session.model;
  step.sessions = {&session};
  step.rows = {count};
  return step;
}

namespace {

// Tokens [first, first + count) of a [1, T, H, Dh] view.
Tensor token_slice(const Tensor& x, int64_t first, int64_t count) {
  Tensor t = x;
  t.data = static_cast<char*>(x.data) + first * x.strides[1] * element_size(x.dtype);
  t.shape[1] = count;
  return t;
}

}  // namespace

Tensor attend(Step& step, Ops& ops, size_t layer, const Tensor& q, const Tensor& k,
              const Tensor& v) {
  const Config& c = step.model->config;
  const int64_t t = q.shape[1];
  const int32_t cache_dtype = step.model->dtype;
  Tensor out = ops.scratch({1, t, c.heads, c.head_dim}, cache_dtype);
  Tensor queries = ops.to(q, cache_dtype);
  int64_t first = 0;
  for (size_t i = 0; i < step.sessions.size(); ++i) {
    Session& session = *step.sessions[i];
    const int64_t rows = step.rows[i];
    const int64_t start = session.length;
    // A cache append is a cast into a view of the cache's next positions.
    Tensor k_slot = session.cache_view(session.k_cache, layer, start, rows);
    Tensor v_slot = session.cache_view(session.v_cache, layer, start, rows);
    Tensor k_rows = token_slice(k, first, rows);
    Tensor v_rows = token_slice(v, first, rows);
    ops.call("cast", {&k_rows}, {&k_slot});
    ops.call("cast", {&v_rows}, {&v_slot});
    Tensor keys = session.cache_view(session.k_cache, layer, 0, start + rows);
    Tensor values = session.cache_view(session.v_cache, layer, 0, start + rows);
    Tensor q_rows = token_slice(queries, first, rows);
    Tensor out_rows = Tensor::contiguous(
        static_cast<char*>(out.data) + first * out.strides[1] * element_size(cache_dtype),
        cache_dtype, {1, rows, c.heads, c.head_dim});
    // The session's rows are its newest keys: causal attention over its filled prefix.
    ops.call("attention", {&q_rows, &keys, &values}, {&out_rows});
    first += rows;
  }
  return out.reshaped({t, c.heads * c.head_dim});
}

void rotate(Ops& ops, const Config& c, const Tensor& x, const Tensor& positions) {
  if (c.rope_scaling == "none") {
    ops.call("rope", {&x, &positions}, {&x}, {attr_float("theta", c.rope_theta)});
    return;
  }
  ops.call("rope", {&x, &positions}, {&x},
           {attr_float("theta", c.rope_theta), attr_string("scaling", c.rope_scaling.c_str()),
            attr_float("factor", c.rope_factor), attr_float("low_freq_factor", c.rope_low),
            attr_float("high_freq_factor", c.rope_high),
            attr_float("original_max_position", c.rope_original_max)});
}

void project_logits(Ops& ops, const Model& model, const Tensor& normed, const Tensor& logits) {
  const int64_t rows = logits.shape[0];
  Tensor h = ops.to(normed.rows(normed.shape[0] - rows, rows), model.lm_head.dtype);
  // The head is [vocab, hidden] (nn.Linear, or the tied embedding); f32 logits for every
  // dtype, which matmul accepts as the output of f16/bf16 inputs.
  ops.call("matmul", {&h, &model.lm_head}, {&logits}, {attr_int("transpose_b", 1)});
}

}  // namespace gk::llm
