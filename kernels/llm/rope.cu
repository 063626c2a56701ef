// rope: one thread per element pair; the rest of each head (past rotary_dim) is copied by
// the threads of its first pairs.
//
//   for (b, t, h, i) in [B, T, H, max(rotary_dim / 2, Dh - rotary_dim)]:   threads (grid-stride)
//     if i < rotary_dim / 2:
//       angle = float(pos[b, t]) * inv_freq[i]                 (f32, as HF computes it)
//       (x0, x1) = the pair (i, i + rotary_dim/2) ("half") or (2i, 2i+1) ("interleaved")
//       out = (x0 cos - x1 sin, x1 cos + x0 sin)               (f32, one rounding on store)
//     if i < Dh - rotary_dim: out[rotary_dim + i] = x[rotary_dim + i]
// Each thread reads both elements of its pair before writing either, so out may be x.
// The inverse frequencies ride in the kernel parameters (at most 256 floats).
#include "llm/device.cuh"
#include "llm/rope.cuh"

namespace gk::kernels::llm {
namespace {

constexpr int kThreads = 256;

struct RopeArgs {
  const char* x;
  const char* pos;
  char* out;
  int64_t B, T, H, Dh, rot_half, pass, lanes;  // lanes = max(rot_half, pass)
  int64_t xs[4], os[4], ps[2];
  bool pos_batched, interleaved;
  float inv_freq[gk::llm::kMaxRotaryDim / 2];
};

template <class T>
__global__ void rope_kernel(const RopeArgs a) {
  const int64_t total = a.B * a.T * a.H * a.lanes;
  for (int64_t n = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; n < total;
       n += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = n;
    const int64_t i = rem % a.lanes;
    rem /= a.lanes;
    const int64_t h = rem % a.H;
    rem /= a.H;
    const int64_t t = rem % a.T;
    const int64_t b = rem / a.T;
    const T* x = reinterpret_cast<const T*>(a.x) + b * a.xs[0] + t * a.xs[1] + h * a.xs[2];
    T* out = reinterpret_cast<T*>(a.out) + b * a.os[0] + t * a.os[1] + h * a.os[2];
    if (i < a.rot_half) {
      const int32_t p = reinterpret_cast<const int32_t*>(
          a.pos)[a.pos_batched ? b * a.ps[0] + t * a.ps[1] : t * a.ps[0]];
      const float angle = float(p) * a.inv_freq[i];
      float s, c;
      sincosf(angle, &s, &c);
      const int64_t i0 = a.interleaved ? 2 * i : i;
      const int64_t i1 = a.interleaved ? 2 * i + 1 : i + a.rot_half;
      const float x0 = to_f32(x[i0 * a.xs[3]]);
      const float x1 = to_f32(x[i1 * a.xs[3]]);
      out[i0 * a.os[3]] = from_f32<T>(x0 * c - x1 * s);
      out[i1 * a.os[3]] = from_f32<T>(x1 * c + x0 * s);
    }
    if (i < a.pass) {
      const int64_t d = 2 * a.rot_half + i;
      out[d * a.os[3]] = x[d * a.xs[3]];
    }
  }
}

}  // namespace

cudaError_t launch_rope(const View& x, const View& positions, const View& out,
                        const float* inv_freq, int64_t rotary_dim, bool interleaved,
                        cudaStream_t stream) {
  if (rotary_dim < 2 || rotary_dim > gk::llm::kMaxRotaryDim || rotary_dim % 2 != 0) {
    return cudaErrorInvalidValue;
  }
  RopeArgs a{};
  a.x = static_cast<const char*>(x.data);
  a.pos = static_cast<const char*>(positions.data);
  a.out = static_cast<char*>(out.data);
  a.B = x.shape[0];
  a.T = x.shape[1];
  a.H = x.shape[2];
  a.Dh = x.shape[3];
  a.rot_half = rotary_dim / 2;
  a.pass = a.Dh - rotary_dim;
  a.lanes = a.rot_half > a.pass ? a.rot_half : a.pass;
  for (int d = 0; d < 4; ++d) {
    a.xs[d] = x.strides[d];
    a.os[d] = out.strides[d];
  }
  a.pos_batched = positions.ndim == 2;
  a.ps[0] = positions.strides[0];
  a.ps[1] = positions.ndim == 2 ? positions.strides[1] : 0;
  a.interleaved = interleaved;
  for (int64_t i = 0; i < a.rot_half; ++i) a.inv_freq[i] = inv_freq[i];
  const int64_t total = a.B * a.T * a.H * a.lanes;
  if (total == 0) return cudaSuccess;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const unsigned grid = unsigned(blocks < (1 << 20) ? blocks : (1 << 20));
  bool ok = visit_floating(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<grid, kThreads, 0, stream>>>(a);
  });
  if (!ok) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace gk::kernels::llm
