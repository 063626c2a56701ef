// The llm ops' reference: embedding, rope, attention, kv_cache_write and sample (docs/ops.md,
// "LLM ops").
//
// Plain loops over strided tensors, arithmetic in f64 for every dtype. Attributes are read
// with kernels/llm/llm_params.h, as the core's rules and the CUDA plugin read them; values
// held in tensors (ids, kv_lengths, block ids, slots) are checked here, since no rule can
// see them.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "cpu_ops.h"
#include "llm/llm_params.h"
#include "strided_iter.h"

namespace gk::cpu {
namespace {

// Address of element `index` of `t` (byte arithmetic; strides are in elements).
inline char* at(const gk_plugin_tensor& t, std::initializer_list<int64_t> index) {
  int64_t offset = 0;
  int32_t d = 0;
  for (int64_t i : index) offset += i * t.strides[d++];
  return static_cast<char*>(t.data) + offset * static_cast<int64_t>(dtype_size(t.dtype));
}

inline int64_t load_index(const gk_plugin_tensor& t, const char* p) {
  if (t.dtype == GK_DTYPE_I64) return load<int64_t>(p);
  return load<int32_t>(p);
}

constexpr std::initializer_list<int32_t> kFloatingDtypes = {GK_DTYPE_F32, GK_DTYPE_F64,
                                                            GK_DTYPE_F16, GK_DTYPE_BF16};

gk_status check_ndim(const gk_kernel_args& args, const gk_plugin_tensor& t, const char* role,
                     int32_t ndim, std::string& message) {
  if (t.ndim == ndim) return GK_OK;
  return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", role, " has shape ",
              shape_string(t), "; expected ", ndim, " dimensions");
}

gk_status check_shape(const gk_kernel_args& args, const gk_plugin_tensor& t, const char* role,
                      const std::vector<int64_t>& want, std::string& message) {
  bool same = t.ndim == static_cast<int32_t>(want.size());
  for (int32_t d = 0; same && d < t.ndim; ++d) same = t.shape[d] == want[size_t(d)];
  if (same) return GK_OK;
  std::string text = "[";
  for (size_t d = 0; d < want.size(); ++d) text += cat(d ? ", " : "", want[d]);
  return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': ", role, " has shape ",
              shape_string(t), "; expected ", text, "]");
}

// ---- embedding ----

gk_status check_embedding(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 2, 2, 1, message)) return s;
  if (gk_status s = check_dtype(args, args.inputs[0], "input 'table'", kFloatingDtypes, message))
    return s;
  if (gk_status s =
          check_dtype(args, args.inputs[1], "input 'ids'", {GK_DTYPE_I32, GK_DTYPE_I64}, message))
    return s;
  return check_same_dtype(args, args.outputs[0], "output 'out'", args.inputs[0].dtype,
                          "input 'table'", message);
}

template <class T>
gk_status embedding_rows(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& table = args.inputs[0];
  const gk_plugin_tensor& ids = args.inputs[1];
  const gk_plugin_tensor& out = args.outputs[0];
  const int64_t vocab = table.shape[0], dim = table.shape[1];
  int64_t count = 1;
  for (int32_t d = 0; d < ids.ndim; ++d) count *= ids.shape[d];
  // Every id first, so that a bad one leaves `out` unwritten rather than half written.
  std::vector<int64_t> rows(static_cast<size_t>(count));
  std::vector<int64_t> index(static_cast<size_t>(ids.ndim), 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t ids_off = 0, rem = n;
    for (int32_t d = ids.ndim - 1; d >= 0; --d) {
      index[size_t(d)] = rem % ids.shape[d];
      rem /= ids.shape[d];
      ids_off += index[size_t(d)] * ids.strides[d];
    }
    const int64_t id = load_index(
        ids, static_cast<const char*>(ids.data) + ids_off * int64_t(dtype_size(ids.dtype)));
    if (id < 0 || id >= vocab) {
      std::string where;
      for (int64_t i : index) where += cat(where.empty() ? "" : ", ", i);
      return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'ids' holds ", id,
                  " at [", where, "], outside the table's ", vocab, " rows (valid ids: 0..",
                  vocab - 1, ")");
    }
    rows[size_t(n)] = id;
  }
  const int64_t es = sizeof(T);
  for (int64_t n = 0; n < count; ++n) {
    int64_t out_off = 0, rem = n;
    for (int32_t d = ids.ndim - 1; d >= 0; --d) {
      out_off += (rem % ids.shape[d]) * out.strides[d];
      rem /= ids.shape[d];
    }
    const char* src = at(table, {rows[size_t(n)], 0});
    char* dst = static_cast<char*>(out.data) + out_off * es;
    for (int64_t j = 0; j < dim; ++j) {
      std::memcpy(dst + j * out.strides[ids.ndim] * es, src + j * table.strides[1] * es, es);
    }
  }
  return GK_OK;
}

gk_status run_embedding(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& table = args.inputs[0];
  const gk_plugin_tensor& ids = args.inputs[1];
  if (gk_status s = check_ndim(args, table, "input 'table'", 2, message)) return s;
  std::vector<int64_t> want(ids.shape, ids.shape + ids.ndim);
  want.push_back(table.shape[1]);
  if (gk_status s = check_shape(args, args.outputs[0], "output 'out'", want, message)) return s;
  for (int32_t i = 0; i < 2; ++i) {
    if (gk_status s =
            check_data(args, args.inputs[i], i ? "input 'ids'" : "input 'table'", message))
      return s;
  }
  if (gk_status s = check_data(args, args.outputs[0], "output 'out'", message)) return s;
  return visit_floating(
      table.dtype,
      [&](auto tag) { return embedding_rows<typename decltype(tag)::type>(args, message); },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ",
                    dtype_name(table.dtype));
      });
}

// ---- rope ----

gk_status check_rope(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 2, 2, 1, message)) return s;
  if (gk_status s = check_dtype(args, args.inputs[0], "input 'x'", kFloatingDtypes, message))
    return s;
  if (gk_status s = check_dtype(args, args.inputs[1], "input 'positions'", {GK_DTYPE_I32}, message))
    return s;
  return check_same_dtype(args, args.outputs[0], "output 'out'", args.inputs[0].dtype, "input 'x'",
                          message);
}

template <class T>
void rope_rows(const gk_kernel_args& args, const llm::RopeParams& p) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_plugin_tensor& pos = args.inputs[1];
  const gk_plugin_tensor& out = args.outputs[0];
  const int64_t B = x.shape[0], tokens = x.shape[1], H = x.shape[2], Dh = x.shape[3];
  const int64_t half = p.rotary_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv[size_t(i)] = llm::rope_inv_freq(p, i);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < tokens; ++t) {
      const int32_t position = load<int32_t>(pos.ndim == 1 ? at(pos, {t}) : at(pos, {b, t}));
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < half; ++i) {
          // HF's float32 angle, then cos and sin of it in f64.
          const float angle = static_cast<float>(position) * inv[size_t(i)];
          const double c = std::cos(double(angle)), s = std::sin(double(angle));
          const int64_t i0 = p.style == llm::RopeStyle::kHalf ? i : 2 * i;
          const int64_t i1 = p.style == llm::RopeStyle::kHalf ? i + half : 2 * i + 1;
          const double x0 = load<T>(at(x, {b, t, h, i0}));
          const double x1 = load<T>(at(x, {b, t, h, i1}));
          store<T>(at(out, {b, t, h, i0}), x0 * c - x1 * s);
          store<T>(at(out, {b, t, h, i1}), x1 * c + x0 * s);
        }
        // The rest of the head passes through (partial rotary); in place it is already there.
        for (int64_t d = p.rotary_dim; d < Dh; ++d) {
          char* dst = at(out, {b, t, h, d});
          const char* src = at(x, {b, t, h, d});
          if (dst != src) std::memcpy(dst, src, sizeof(T));
        }
      }
    }
  }
}

gk_status run_rope(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& x = args.inputs[0];
  const gk_plugin_tensor& pos = args.inputs[1];
  if (gk_status s = check_ndim(args, x, "input 'x'", 4, message)) return s;
  const std::vector<int64_t> shape(x.shape, x.shape + 4);
  if (gk_status s = check_shape(args, args.outputs[0], "output 'out'", shape, message)) return s;
  if (!(pos.ndim == 1 && pos.shape[0] == x.shape[1]) &&
      !(pos.ndim == 2 && pos.shape[0] == x.shape[0] && pos.shape[1] == x.shape[1])) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'positions' has shape ",
                shape_string(pos), "; expected [T] or [B, T] of input 'x' ", shape_string(x));
  }
  const llm::RopeParams p = llm::read_rope(args.attrs, args.num_attrs, x.shape[3]);
  if (p.rotary_dim < 2 || p.rotary_dim % 2 || p.rotary_dim > x.shape[3]) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': attribute 'rotary_dim' is ",
                p.rotary_dim, "; expected an even value in 2..", x.shape[3]);
  }
  for (int32_t i = 0; i < 2; ++i) {
    if (gk_status s =
            check_data(args, args.inputs[i], i ? "input 'positions'" : "input 'x'", message))
      return s;
  }
  if (gk_status s = check_data(args, args.outputs[0], "output 'out'", message)) return s;
  return visit_floating(
      x.dtype,
      [&](auto tag) {
        rope_rows<typename decltype(tag)::type>(args, p);
        return gk_status{GK_OK};
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(x.dtype));
      });
}

// ---- attention ----

gk_status check_attention(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 3, 5, 1, message)) return s;
  const int32_t dtype = args.inputs[0].dtype;
  if (gk_status s = check_dtype(args, args.inputs[0], "input 'q'", kFloatingDtypes, message))
    return s;
  if (gk_status s =
          check_same_dtype(args, args.inputs[1], "input 'k'", dtype, "input 'q'", message))
    return s;
  if (gk_status s =
          check_same_dtype(args, args.inputs[2], "input 'v'", dtype, "input 'q'", message))
    return s;
  if (args.num_inputs >= 4) {
    if (gk_status s =
            check_dtype(args, args.inputs[3], "input 'kv_lengths'", {GK_DTYPE_I32}, message))
      return s;
  }
  if (args.num_inputs == 5) {
    if (gk_status s =
            check_dtype(args, args.inputs[4], "input 'block_table'", {GK_DTYPE_I32}, message))
      return s;
  }
  return check_same_dtype(args, args.outputs[0], "output 'out'", dtype, "input 'q'", message);
}

// Where key position j of sequence b lives in k and v: (b, j) for a cache per sequence,
// (block_table[b, j / block_size], j % block_size) for a block pool.
struct KeyRows {
  int64_t block_size = 0;  // 0: no block table
  int64_t max_blocks = 0;
  std::vector<int64_t> blocks;  // [B, max_blocks], the ids the lengths reach (checked)

  std::pair<int64_t, int64_t> at(int64_t b, int64_t j) const {
    if (block_size == 0) return {b, j};
    return {blocks[size_t(b * max_blocks + j / block_size)], j % block_size};
  }
};

template <class T>
void attention_rows(const gk_kernel_args& args, const llm::AttentionParams& p,
                    const std::vector<int64_t>& lengths, const KeyRows& rows_of) {
  const gk_plugin_tensor& q = args.inputs[0];
  const gk_plugin_tensor& k = args.inputs[1];
  const gk_plugin_tensor& v = args.inputs[2];
  const gk_plugin_tensor& out = args.outputs[0];
  const int64_t B = q.shape[0], Tq = q.shape[1], Hq = q.shape[2], Dh = q.shape[3];
  const int64_t Hkv = k.shape[2], group = Hq / Hkv;
  // Queries in blocks of kRows, so that the f64 scores of a block stay small for any Tq.
  constexpr int64_t kRows = 256;
  std::vector<double> keys, values, queries, scores, acc;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = lengths[size_t(b)];
    for (int64_t hk = 0; hk < Hkv; ++hk) {
      // This kv head's keys and values, read once as f64 rows for every query that reads
      // them (an encoder's 1500 queries each read all 1500 keys).
      keys.resize(static_cast<size_t>(L * Dh));
      values.resize(static_cast<size_t>(L * Dh));
      for (int64_t j = 0; j < L; ++j) {
        const auto [kb, kj] = rows_of.at(b, j);
        for (int64_t d = 0; d < Dh; ++d) {
          keys[size_t(j * Dh + d)] = double(load<T>(at(k, {kb, kj, hk, d})));
          values[size_t(j * Dh + d)] = double(load<T>(at(v, {kb, kj, hk, d})));
        }
      }
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        for (int64_t i0 = 0; i0 < Tq; i0 += kRows) {
          const int64_t rows = std::min(kRows, Tq - i0);
          queries.resize(static_cast<size_t>(rows * Dh));
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t d = 0; d < Dh; ++d) {
              queries[size_t(i * Dh + d)] = double(load<T>(at(q, {b, i0 + i, h, d})));
            }
          }
          // scores = scale · Q · Kᵀ (f64 BLAS), then each row's softmax over its keys.
          scores.assign(static_cast<size_t>(rows * std::max<int64_t>(L, 1)), 0.0);
          if (L > 0) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(rows), blasint(L),
                        blasint(Dh), p.scale, queries.data(), blasint(Dh), keys.data(),
                        blasint(Dh), 0.0, scores.data(), blasint(L));
          }
          std::vector<double> sums(static_cast<size_t>(rows), 0.0);
          for (int64_t i = 0; i < rows; ++i) {
            // Query i0 + i of the Tq newest tokens sits at cache position L - Tq + i0 + i.
            const int64_t last = p.causal ? std::min(L - 1, L - Tq + i0 + i) : L - 1;
            double* row = scores.data() + i * L;
            double max = -std::numeric_limits<double>::infinity();
            for (int64_t j = 0; j <= last; ++j) max = std::max(max, row[j]);
            double sum = 0.0;
            for (int64_t j = 0; j < L; ++j) {
              row[j] = j <= last ? std::exp(row[j] - max) : 0.0;
              sum += row[j];
            }
            sums[size_t(i)] = sum;
          }
          // out = weights · V, each row divided by its weights' sum.
          acc.assign(static_cast<size_t>(rows * Dh), 0.0);
          if (L > 0) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(rows), blasint(Dh),
                        blasint(L), 1.0, scores.data(), blasint(L), values.data(), blasint(Dh),
                        0.0, acc.data(), blasint(Dh));
          }
          // A query with no key to attend to (an empty cache, or causal with L < Tq) gives 0.
          for (int64_t i = 0; i < rows; ++i) {
            const double sum = sums[size_t(i)];
            for (int64_t d = 0; d < Dh; ++d) {
              store<T>(at(out, {b, i0 + i, h, d}), sum > 0.0 ? acc[size_t(i * Dh + d)] / sum : 0.0);
            }
          }
        }
      }
    }
  }
}

gk_status run_attention(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& q = args.inputs[0];
  const gk_plugin_tensor& k = args.inputs[1];
  const gk_plugin_tensor& v = args.inputs[2];
  const bool paged = args.num_inputs == 5;
  if (gk_status s = check_ndim(args, q, "input 'q'", 4, message)) return s;
  if (gk_status s = check_ndim(args, k, "input 'k'", 4, message)) return s;
  const std::vector<int64_t> kshape(k.shape, k.shape + 4);
  if (gk_status s = check_shape(args, v, "input 'v'", kshape, message)) return s;
  if ((!paged && k.shape[0] != q.shape[0]) || k.shape[3] != q.shape[3] || k.shape[2] == 0 ||
      q.shape[2] % k.shape[2] != 0 || (paged && k.shape[1] == 0)) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'k' ", shape_string(k),
                " does not fit input 'q' ", shape_string(q),
                paged ? " (a block pool [num_blocks, block_size >= 1, kv_heads, head_dim]: same "
                        "head_dim; q heads a multiple of kv heads)"
                      : " (same batch and head_dim; q heads a multiple of kv heads)");
  }
  const std::vector<int64_t> qshape(q.shape, q.shape + 4);
  if (gk_status s = check_shape(args, args.outputs[0], "output 'out'", qshape, message)) return s;
  for (int32_t i = 0; i < args.num_inputs; ++i) {
    if (gk_status s = check_data(args, args.inputs[i], "an input", message)) return s;
  }
  if (gk_status s = check_data(args, args.outputs[0], "output 'out'", message)) return s;
  const int64_t B = q.shape[0];
  KeyRows rows_of;
  if (paged) {
    const gk_plugin_tensor& table = args.inputs[4];
    if (table.ndim != 2 || table.shape[0] != B) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args.op,
                  "': input 'block_table' has shape ", shape_string(table), "; expected [", B,
                  ", max_blocks]");
    }
    rows_of.block_size = k.shape[1];
    rows_of.max_blocks = table.shape[1];
  }
  // The keys a sequence may hold: its cache's positions, or its row of blocks.
  const int64_t Tk = paged ? rows_of.block_size * rows_of.max_blocks : k.shape[1];
  std::vector<int64_t> lengths(static_cast<size_t>(B), Tk);
  if (args.num_inputs >= 4) {
    const gk_plugin_tensor& len = args.inputs[3];
    if (len.ndim != 1 || len.shape[0] != B) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'kv_lengths' has shape ",
                  shape_string(len), "; expected [", B, "]");
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = load<int32_t>(at(len, {b}));
      if (L < 0 || L > Tk) {
        return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'kv_lengths' holds ",
                    L, " for sequence ", b, "; expected 0..", Tk,
                    paged ? cat(" (max_blocks ", rows_of.max_blocks,
                                " of input 'block_table' x block_size ", rows_of.block_size, ")")
                          : cat(" (the kv_tokens of input 'k' ", shape_string(k), ")"));
      }
      lengths[size_t(b)] = L;
    }
  }
  if (paged) {
    // Only the blocks that hold a sequence's keys are read, and each must be in the pool;
    // the rest of its row is not read.
    const gk_plugin_tensor& table = args.inputs[4];
    const int64_t num_blocks = k.shape[0];
    rows_of.blocks.assign(size_t(B * rows_of.max_blocks), 0);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t used = (lengths[size_t(b)] + rows_of.block_size - 1) / rows_of.block_size;
      for (int64_t j = 0; j < used; ++j) {
        const int64_t id = load<int32_t>(at(table, {b, j}));
        if (id < 0 || id >= num_blocks) {
          return fail(message, GK_INVALID_ARGUMENT, "op '", args.op,
                      "': input 'block_table' holds ", id, " at [", b, ", ", j,
                      "], outside the pool's ", num_blocks, " blocks (valid ids: 0..",
                      num_blocks - 1, ")");
        }
        rows_of.blocks[size_t(b * rows_of.max_blocks + j)] = id;
      }
    }
  }
  const llm::AttentionParams p = llm::read_attention(args.attrs, args.num_attrs, q.shape[3]);
  return visit_floating(
      q.dtype,
      [&](auto tag) {
        attention_rows<typename decltype(tag)::type>(args, p, lengths, rows_of);
        return gk_status{GK_OK};
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ", dtype_name(q.dtype));
      });
}

// ---- kv_cache_write ----

gk_status check_kv_cache_write(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 3, 3, 1, message)) return s;
  if (gk_status s = check_dtype(args, args.inputs[0], "input 'cache'", kFloatingDtypes, message))
    return s;
  if (gk_status s = check_dtype(args, args.inputs[1], "input 'src'", kFloatingDtypes, message))
    return s;
  if (gk_status s = check_dtype(args, args.inputs[2], "input 'slots'", {GK_DTYPE_I32}, message))
    return s;
  return check_same_dtype(args, args.outputs[0], "output 'out'", args.inputs[0].dtype,
                          "input 'cache'", message);
}

template <class S, class D>
void kv_cache_rows(const gk_kernel_args& args, const gk_plugin_tensor& src,
                   const std::vector<int64_t>& slots) {
  const gk_plugin_tensor& cache = args.outputs[0];
  const int64_t block_size = cache.shape[1], H = cache.shape[2], Dh = cache.shape[3];
  for (size_t n = 0; n < slots.size(); ++n) {
    const int64_t block = slots[n] / block_size, row = slots[n] % block_size;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < Dh; ++d) {
        store<D>(at(cache, {block, row, h, d}), double(load<S>(at(src, {int64_t(n), h, d}))));
      }
    }
  }
}

gk_status run_kv_cache_write(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& cache = args.inputs[0];
  const gk_plugin_tensor& slots = args.inputs[2];
  const gk_plugin_tensor& out = args.outputs[0];
  if (gk_status s = check_ndim(args, cache, "input 'cache'", 4, message)) return s;
  const std::vector<int64_t> cshape(cache.shape, cache.shape + 4);
  if (gk_status s = check_shape(args, out, "output 'out'", cshape, message)) return s;
  bool same = out.data == cache.data;
  for (int32_t d = 0; same && d < 4; ++d) same = out.strides[d] == cache.strides[d];
  if (!same) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op,
                "': output 'out' must be input 'cache' itself (the op changes it in place)");
  }
  // src as [N, H, Dh]: a leading dimension of 1 is dropped.
  gk_plugin_tensor src = args.inputs[1];
  if (src.ndim == 4 && src.shape[0] == 1) {
    src.shape = args.inputs[1].shape + 1;
    src.strides = args.inputs[1].strides + 1;
    src.ndim = 3;
  }
  if (src.ndim != 3 || src.shape[1] != cache.shape[2] || src.shape[2] != cache.shape[3]) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'src' has shape ",
                shape_string(args.inputs[1]), "; expected [rows, ", cache.shape[2], ", ",
                cache.shape[3], "] or [1, rows, ", cache.shape[2], ", ", cache.shape[3], "]");
  }
  const int64_t N = src.shape[0];
  if (gk_status s = check_shape(args, slots, "input 'slots'", {N}, message)) return s;
  for (int32_t i = 0; i < 3; ++i) {
    if (gk_status s = check_data(args, args.inputs[i], "an input", message)) return s;
  }
  // Every slot first, so that a bad one leaves the cache unwritten.
  const int64_t capacity = cache.shape[0] * cache.shape[1];
  std::vector<int64_t> rows(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t slot = load<int32_t>(at(slots, {n}));
    if (slot < 0 || slot >= capacity) {
      return fail(message, GK_INVALID_ARGUMENT, "op '", args.op, "': input 'slots' holds ", slot,
                  " at [", n, "], outside the cache's ", capacity, " slots (", cache.shape[0],
                  " blocks of ", cache.shape[1], "; valid slots: 0..", capacity - 1, ")");
    }
    rows[size_t(n)] = slot;
  }
  auto unsupported = [&] {
    return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtypes ", dtype_name(src.dtype),
                " into ", dtype_name(cache.dtype));
  };
  return visit_floating(
      src.dtype,
      [&](auto src_tag) {
        return visit_floating(
            cache.dtype,
            [&](auto cache_tag) {
              kv_cache_rows<typename decltype(src_tag)::type, typename decltype(cache_tag)::type>(
                  args, src, rows);
              return gk_status{GK_OK};
            },
            unsupported);
      },
      unsupported);
}

// ---- sample ----

gk_status check_sample(const gk_kernel_args& args, std::string& message) {
  if (gk_status s = check_counts(args, 1, 1, 1, message)) return s;
  if (gk_status s = check_dtype(args, args.inputs[0], "input 'logits'", kFloatingDtypes, message))
    return s;
  return check_dtype(args, args.outputs[0], "output 'ids'", {GK_DTYPE_I32}, message);
}

// One row, filtered in HF transformers' order (temperature, top_k, top_p, min_p), each filter
// judged on what the previous ones kept; ties at a cut all stay. The draw walks the kept
// tokens in ascending id order until the cumulative weight passes u · (kept weight).
// kernels/llm/sample.cu implements the same definitions; docs/ops.md states them.
int32_t sample_row(const std::vector<double>& logits, const llm::SampleParams& p, uint64_t row) {
  const int64_t V = static_cast<int64_t>(logits.size());
  int64_t best = 0;  // the first largest logit (NaN was read as -inf)
  for (int64_t j = 1; j < V; ++j) {
    if (logits[size_t(j)] > logits[size_t(best)]) best = j;
  }
  const double max = logits[size_t(best)];
  if (p.temperature == 0.0 || std::isinf(max)) return int32_t(best);
  std::vector<double> w(static_cast<size_t>(V));
  for (int64_t j = 0; j < V; ++j)
    w[size_t(j)] = std::exp((logits[size_t(j)] - max) / p.temperature);
  std::vector<bool> keep(static_cast<size_t>(V), true);
  if (p.top_k > 0 && p.top_k < V) {
    // Keep j when fewer than top_k logits are strictly greater.
    std::vector<double> sorted(logits);
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    const double kth = sorted[size_t(p.top_k - 1)];
    for (int64_t j = 0; j < V; ++j) keep[size_t(j)] = logits[size_t(j)] >= kth;
  }
  if (p.top_p < 1.0) {
    // Keep j when the kept tokens strictly more probable than j hold less than top_p of the
    // kept mass: the smallest most-probable set that reaches top_p.
    std::vector<double> sorted;
    for (int64_t j = 0; j < V; ++j) {
      if (keep[size_t(j)]) sorted.push_back(w[size_t(j)]);
    }
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    std::vector<double> prefix(sorted.size() + 1, 0.0);
    for (size_t j = 0; j < sorted.size(); ++j) prefix[j + 1] = prefix[j] + sorted[j];
    const double mass = prefix.back();
    for (int64_t j = 0; j < V; ++j) {
      if (!keep[size_t(j)]) continue;
      const auto first =
          std::lower_bound(sorted.begin(), sorted.end(), w[size_t(j)], std::greater<double>());
      keep[size_t(j)] = prefix[size_t(first - sorted.begin())] < p.top_p * mass;
    }
  }
  if (p.min_p > 0.0) {
    // The largest weight is exp(0) = 1 and always kept, so min_p · p_max is min_p here.
    for (int64_t j = 0; j < V; ++j) keep[size_t(j)] = keep[size_t(j)] && w[size_t(j)] >= p.min_p;
  }
  double kept = 0.0;
  for (int64_t j = 0; j < V; ++j) kept += keep[size_t(j)] ? w[size_t(j)] : 0.0;
  const double target = llm::sample_uniform(p.seed, p.offset, row) * kept;
  double cumulative = 0.0;
  int64_t last_kept = best;
  for (int64_t j = 0; j < V; ++j) {
    if (!keep[size_t(j)]) continue;
    cumulative += w[size_t(j)];
    last_kept = j;
    if (cumulative > target) return int32_t(j);
  }
  return int32_t(last_kept);  // u · kept rounded up to the full sum
}

gk_status run_sample(const gk_kernel_args& args, std::string& message) {
  const gk_plugin_tensor& logits = args.inputs[0];
  if (gk_status s = check_ndim(args, logits, "input 'logits'", 2, message)) return s;
  if (gk_status s = check_shape(args, args.outputs[0], "output 'ids'", {logits.shape[0]}, message))
    return s;
  if (logits.shape[1] == 0) {
    return fail(message, GK_INVALID_ARGUMENT, "op '", args.op,
                "': input 'logits' has an empty vocabulary");
  }
  if (gk_status s = check_data(args, logits, "input 'logits'", message)) return s;
  if (gk_status s = check_data(args, args.outputs[0], "output 'ids'", message)) return s;
  const llm::SampleParams p = llm::read_sample(args.attrs, args.num_attrs);
  const int64_t B = logits.shape[0], V = logits.shape[1];
  std::vector<double> row(static_cast<size_t>(V));
  return visit_floating(
      logits.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (int64_t b = 0; b < B; ++b) {
          for (int64_t j = 0; j < V; ++j) {
            const double l = load<T>(at(logits, {b, j}));
            row[size_t(j)] = std::isnan(l) ? -std::numeric_limits<double>::infinity() : l;
          }
          store<int32_t>(at(args.outputs[0], {b}), sample_row(row, p, uint64_t(b)));
        }
        return gk_status{GK_OK};
      },
      [&] {
        return fail(message, GK_UNIMPLEMENTED, "op '", args.op, "': dtype ",
                    dtype_name(logits.dtype));
      });
}

constexpr OpDef kOps[] = {
    {"embedding", &check_embedding, &run_embedding},
    {"rope", &check_rope, &run_rope},
    {"attention", &check_attention, &run_attention},
    {"kv_cache_write", &check_kv_cache_write, &run_kv_cache_write},
    {"sample", &check_sample, &run_sample},
};

}  // namespace

std::span<const OpDef> llm_ops() {
  return kOps;
}

}  // namespace gk::cpu
