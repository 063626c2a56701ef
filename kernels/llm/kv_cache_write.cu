// kv_cache_write: one block per source row; its threads cast the row's H x Dh elements into
// the slot's row of the pool, element by element, so any stride of src and cache is served.
//
//   for n in rows (grid.x, then grid.y past 65535):                 block
//     slot = slots[n]; skip the row unless 0 <= slot < num_blocks * block_size
//     for e in [0, H * Dh) step blockDim.x:                         threads
//       cache[slot / block_size, slot % block_size, e / Dh, e % Dh] = src[n, e / Dh, e % Dh]
#include "llm/device.cuh"
#include "llm/kv_cache_write.cuh"

namespace gk::kernels::llm {
namespace {

constexpr int kThreads = 256;  // a row of 2 x 128 (a small model's kv heads) in one step

struct KvCacheWriteArgs {
  char* cache;
  const char* src;
  const int32_t* slots;
  int64_t rows, block_size, capacity, heads, head_dim;
  int64_t cs[4], ss[3], slot_stride;
};

template <class S, class D>
__global__ void kv_cache_write_kernel(const KvCacheWriteArgs a) {
  for (int64_t n = blockIdx.x + int64_t(blockIdx.y) * gridDim.x; n < a.rows;
       n += int64_t(gridDim.x) * gridDim.y) {
    const int64_t slot = a.slots[n * a.slot_stride];
    if (slot < 0 || slot >= a.capacity) continue;
    D* dst = reinterpret_cast<D*>(a.cache) + (slot / a.block_size) * a.cs[0] +
             (slot % a.block_size) * a.cs[1];
    const S* row = reinterpret_cast<const S*>(a.src) + n * a.ss[0];
    for (int64_t e = threadIdx.x; e < a.heads * a.head_dim; e += blockDim.x) {
      const int64_t h = e / a.head_dim, d = e % a.head_dim;
      dst[h * a.cs[2] + d * a.cs[3]] = from_f32<D>(to_f32(row[h * a.ss[1] + d * a.ss[2]]));
    }
  }
}

}  // namespace

cudaError_t launch_kv_cache_write(const View& cache, const View& src, const View& slots,
                                  cudaStream_t stream) {
  if (cache.ndim != 4 || src.ndim != 3 || slots.ndim != 1) return cudaErrorInvalidValue;
  KvCacheWriteArgs a{};
  a.cache = static_cast<char*>(cache.data);
  a.src = static_cast<const char*>(src.data);
  a.slots = static_cast<const int32_t*>(slots.data);
  a.rows = src.shape[0];
  a.block_size = cache.shape[1];
  a.capacity = cache.shape[0] * cache.shape[1];
  a.heads = cache.shape[2];
  a.head_dim = cache.shape[3];
  for (int d = 0; d < 4; ++d) a.cs[d] = cache.strides[d];
  for (int d = 0; d < 3; ++d) a.ss[d] = src.strides[d];
  a.slot_stride = slots.strides[0];
  if (a.rows == 0 || a.heads * a.head_dim == 0) return cudaSuccess;
  // The kernel strides over rows by the whole grid: the grid only caps the block count.
  const int64_t y = (a.rows + 65534) / 65535;
  const dim3 grid(unsigned(a.rows < 65535 ? a.rows : 65535), unsigned(y < 65535 ? y : 65535));
  bool cache_ok = false;
  const bool src_ok = visit_floating(src.dtype, [&](auto src_tag) {
    using S = decltype(src_tag);
    cache_ok = visit_floating(cache.dtype, [&](auto cache_tag) {
      using D = decltype(cache_tag);
      kv_cache_write_kernel<S, D><<<grid, kThreads, 0, stream>>>(a);
    });
  });
  if (!src_ok || !cache_ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace gk::kernels::llm
