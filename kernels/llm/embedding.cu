// embedding: one block per looked-up id; its threads copy the row, element by element, so
// any stride of table and out is served.
//
//   for n in ids (grid.x, then grid.y for more than 2^31 - 1):   block
//     id = ids[n]  (one load per thread; all threads read the same address)
//     for d in [0, D) step blockDim.x:                           threads
//       out[n, d] = 0 <= id < V ? table[id, d] : 0
#include "llm/device.cuh"
#include "llm/embedding.cuh"

namespace gk::kernels::llm {
namespace {

constexpr int kThreads = 256;  // one row of D up to 256 in one step; wider rows loop

struct EmbeddingArgs {
  const char* table;
  const char* ids;
  char* out;
  int64_t vocab, dim, count;
  int64_t table_stride0, table_stride1;
  int ids_ndim;
  bool ids64;
  int64_t ids_shape[kMaxDims];
  int64_t ids_strides[kMaxDims];
  int64_t out_strides[kMaxDims];  // ids_ndim + 1 of them
};

template <class T>
__global__ void embedding_kernel(EmbeddingArgs a) {
  for (int64_t n = blockIdx.x + int64_t(blockIdx.y) * gridDim.x; n < a.count;
       n += int64_t(gridDim.x) * gridDim.y) {
    int64_t ids_off = 0, out_off = 0, rem = n;
    for (int d = a.ids_ndim - 1; d >= 0; --d) {
      const int64_t i = rem % a.ids_shape[d];
      rem /= a.ids_shape[d];
      ids_off += i * a.ids_strides[d];
      out_off += i * a.out_strides[d];
    }
    const int64_t id = a.ids64 ? reinterpret_cast<const int64_t*>(a.ids)[ids_off]
                               : reinterpret_cast<const int32_t*>(a.ids)[ids_off];
    const bool valid = id >= 0 && id < a.vocab;
    const T* row = reinterpret_cast<const T*>(a.table) + (valid ? id : 0) * a.table_stride0;
    T* dst = reinterpret_cast<T*>(a.out) + out_off;
    const int64_t out_step = a.out_strides[a.ids_ndim];
    for (int64_t d = threadIdx.x; d < a.dim; d += blockDim.x) {
      dst[d * out_step] = valid ? row[d * a.table_stride1] : from_f32<T>(0.0f);
    }
  }
}

}  // namespace

cudaError_t launch_embedding(const View& table, const View& ids, const View& out,
                             cudaStream_t stream) {
  EmbeddingArgs a{};
  a.table = static_cast<const char*>(table.data);
  a.ids = static_cast<const char*>(ids.data);
  a.out = static_cast<char*>(out.data);
  a.vocab = table.shape[0];
  a.dim = table.shape[1];
  a.table_stride0 = table.strides[0];
  a.table_stride1 = table.strides[1];
  a.ids_ndim = ids.ndim;
  a.ids64 = ids.dtype == DType::i64;
  a.count = 1;
  for (int d = 0; d < ids.ndim; ++d) {
    a.ids_shape[d] = ids.shape[d];
    a.ids_strides[d] = ids.strides[d];
    a.count *= ids.shape[d];
  }
  for (int d = 0; d <= ids.ndim; ++d) a.out_strides[d] = out.strides[d];
  if (a.count == 0 || a.dim == 0) return cudaSuccess;
  // The kernel strides over ids by the whole grid: the grid only caps the block count.
  const int64_t y = (a.count + 65534) / 65535;
  const dim3 grid(unsigned(a.count < 65535 ? a.count : 65535), unsigned(y < 65535 ? y : 65535));
  bool ok = visit_floating(table.dtype, [&](auto tag) {
    using T = decltype(tag);
    embedding_kernel<T><<<grid, kThreads, 0, stream>>>(a);
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace gk::kernels::llm
