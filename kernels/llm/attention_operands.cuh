// The operands of one attention call as the attention kernels read them (attention.cu,
// attention_tc.cu, attention_sm90.cu): base pointers, element strides and the sizes each
// kernel needs, filled once on the host from the views.
#pragma once

#include <cstdint>

#include "llm/common.cuh"

namespace gk::kernels::llm {

struct AttentionOperands {
  const char* q;
  const char* k;
  const char* v;
  char* out;
  const int32_t* lengths;  // [B] kv lengths (stride ls), or null: every sequence holds Tk keys
  const int32_t* table;    // [B, max_blocks] block ids (strides ts), or null: k, v [B, Tk, ...]
  int64_t Tq, Hq, Dh, group;
  int64_t Tk;  // keys a sequence may hold: k's positions, or block_size * max_blocks
  int64_t qs[4], ks[4], vs[4], os[4], ls, ts[2];
  int64_t block_size, num_blocks;  // of the pool, with a table
};

// q [B, Tq, Hq, Dh], k and v [B, Tk, Hkv, Dh] or, with block_table.data, pools
// [num_blocks, block_size, Hkv, Dh]; kv_lengths and block_table may have no data.
inline AttentionOperands attention_operands(const View& q, const View& k, const View& v,
                                            const View& kv_lengths, const View& block_table,
                                            const View& out) {
  AttentionOperands a{};
  a.q = static_cast<const char*>(q.data);
  a.k = static_cast<const char*>(k.data);
  a.v = static_cast<const char*>(v.data);
  a.out = static_cast<char*>(out.data);
  a.lengths = static_cast<const int32_t*>(kv_lengths.data);
  a.ls = kv_lengths.data ? kv_lengths.strides[0] : 0;
  a.table = static_cast<const int32_t*>(block_table.data);
  a.Tk = k.shape[1];
  if (a.table) {
    a.ts[0] = block_table.strides[0];
    a.ts[1] = block_table.strides[1];
    a.block_size = k.shape[1];
    a.num_blocks = k.shape[0];
    a.Tk = k.shape[1] * block_table.shape[1];
  }
  a.Tq = q.shape[1];
  a.Hq = q.shape[2];
  a.Dh = q.shape[3];
  a.group = k.shape[2] > 0 ? q.shape[2] / k.shape[2] : 1;
  for (int d = 0; d < 4; ++d) {
    a.qs[d] = q.strides[d];
    a.ks[d] = k.strides[d];
    a.vs[d] = v.strides[d];
    a.os[d] = out.strides[d];
  }
  return a;
}

// Whether every row of t [B, T, H, Dh] (of every batch entry and head) starts on a multiple
// of `elements` elements from an equally aligned base, its elements contiguous: 16-byte
// rows of 16-bit elements for elements = 8, 4-byte pairs for 2.
inline bool rows_aligned(const View& t, int64_t elements, int64_t element_bytes) {
  return t.strides[3] == 1 &&
         reinterpret_cast<uintptr_t>(t.data) % uintptr_t(elements * element_bytes) == 0 &&
         t.strides[0] % elements == 0 && t.strides[1] % elements == 0 &&
         t.strides[2] % elements == 0;
}

}  // namespace gk::kernels::llm
