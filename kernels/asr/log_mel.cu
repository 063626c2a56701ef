// log_mel_spectrogram on CUDA (log_mel.cuh states the loops).
#include "asr/log_mel.cuh"

#include <cfloat>
#include <climits>
#include <map>
#include <mutex>
#include <tuple>

namespace gk::kernels::asr {
namespace {

constexpr int kThreads = 256;
constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

struct Layout {
  size_t frames, spectra, filters, maxima, fft_work, total;
};

Layout layout(const LogMelProblem& p, size_t fft_work) {
  Layout l{};
  const size_t count = size_t(p.batch) * size_t(p.frames);
  l.frames = 0;
  l.spectra = l.frames + aligned(count * size_t(p.n_fft) * sizeof(float));
  l.filters = l.spectra + aligned(count * size_t(p.bins()) * sizeof(cufftComplex));
  l.maxima = l.filters + aligned(size_t(p.n_mels) * size_t(p.bins()) * sizeof(float));
  l.fft_work = l.maxima + aligned(size_t(p.batch) * sizeof(float));
  l.total = l.fft_work + aligned(fft_work);
  return l;
}

__global__ void frame_kernel(LogMelProblem p, const float* __restrict__ audio,
                             float* __restrict__ frames) {
  const int64_t total = p.batch * p.frames * p.n_fft;
  const float two_pi = 6.283185307179586f;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx % p.n_fft;
    const int64_t t = (idx / p.n_fft) % p.frames;
    const int64_t b = idx / (p.n_fft * p.frames);
    int64_t j = t * p.hop + i - p.n_fft / 2;
    if (j < 0) j = -j;
    if (j >= p.samples) j = 2 * (p.samples - 1) - j;
    const float window = 0.5f - 0.5f * cosf(two_pi * float(i) / float(p.n_fft));
    frames[idx] = audio[b * p.row_stride + j] * window;
  }
}

__global__ void mel_kernel(LogMelProblem p, const cufftComplex* __restrict__ spectra,
                           const float* __restrict__ filters, float* __restrict__ out) {
  extern __shared__ float power[];
  const int64_t bins = p.bins();
  const int64_t bt = blockIdx.x;  // b * frames + t
  const int64_t b = bt / p.frames, t = bt % p.frames;
  const cufftComplex* spectrum = spectra + bt * bins;
  for (int64_t k = threadIdx.x; k < bins; k += blockDim.x) {
    const cufftComplex c = spectrum[k];
    power[k] = c.x * c.x + c.y * c.y;
  }
  __syncthreads();
  for (int64_t m = threadIdx.x; m < p.n_mels; m += blockDim.x) {
    const float* row = filters + m * bins;
    float energy = 0.0f;
    for (int64_t k = 0; k < bins; ++k) energy = fmaf(row[k], power[k], energy);
    out[(b * p.n_mels + m) * p.frames + t] = log10f(fmaxf(energy, 1e-10f));
  }
}

__global__ void item_max_kernel(LogMelProblem p, const float* __restrict__ out,
                                float* __restrict__ maxima) {
  __shared__ float partial[kThreads];
  const int64_t b = blockIdx.x;
  const int64_t count = p.n_mels * p.frames;
  const float* item = out + b * count;
  float best = -FLT_MAX;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) best = fmaxf(best, item[i]);
  partial[threadIdx.x] = best;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + width]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) maxima[b] = partial[0];
}

__global__ void scale_kernel(LogMelProblem p, const float* __restrict__ maxima,
                             float* __restrict__ out) {
  const int64_t count = p.n_mels * p.frames;
  const int64_t total = p.batch * count;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const float floor = maxima[idx / count] - 8.0f;
    out[idx] = (fmaxf(out[idx], floor) + 4.0f) / 4.0f;
  }
}

unsigned grid_for(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return unsigned(blocks < 65535 * 32 ? (blocks > 0 ? blocks : 1) : 65535 * 32);
}

// A batched R2C plan that uses caller-provided work memory; `work_bytes` receives its size.
cufftResult make_plan(const LogMelProblem& p, cufftHandle* plan, size_t* work_bytes) {
  cufftResult r = cufftCreate(plan);
  if (r != CUFFT_SUCCESS) return r;
  r = cufftSetAutoAllocation(*plan, 0);
  int n = int(p.n_fft);
  if (r == CUFFT_SUCCESS) {
    r = cufftMakePlanMany(*plan, 1, &n, nullptr, 1, int(p.n_fft), nullptr, 1, int(p.bins()),
                          CUFFT_R2C, int(p.batch * p.frames), work_bytes);
  }
  if (r != CUFFT_SUCCESS) cufftDestroy(*plan);
  return r;
}

// Plans by (device, n_fft, transforms), kept for the process: a plan's twiddle tables live in
// device memory that a queued transform reads, so a plan is destroyed only after the device
// has finished (when the cache is full, it is emptied after a device synchronize). The lock
// also covers setting a plan's stream and work area and queueing its transform.
class PlanCache {
 public:
  static PlanCache& instance() {
    static PlanCache* cache = new PlanCache();  // never destroyed: plans may run until exit
    return *cache;
  }
  std::mutex& mutex() { return mutex_; }
  // With mutex() held.
  cufftResult get(const LogMelProblem& p, cufftHandle* plan, size_t* work_bytes) {
    int device = 0;
    cudaGetDevice(&device);
    const Key key{device, p.n_fft, p.batch * p.frames};
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      if (plans_.size() >= kMaxPlans) {
        cudaDeviceSynchronize();
        for (auto& entry : plans_) cufftDestroy(entry.second.plan);
        plans_.clear();
      }
      Entry e{};
      const cufftResult r = make_plan(p, &e.plan, &e.work_bytes);
      if (r != CUFFT_SUCCESS) return r;
      it = plans_.emplace(key, e).first;
    }
    *plan = it->second.plan;
    *work_bytes = it->second.work_bytes;
    return CUFFT_SUCCESS;
  }

 private:
  static constexpr size_t kMaxPlans = 32;
  using Key = std::tuple<int, int64_t, int64_t>;
  struct Entry {
    cufftHandle plan;
    size_t work_bytes;
  };
  std::mutex mutex_;
  std::map<Key, Entry> plans_;
};

}  // namespace

const char* log_mel_can_implement(const LogMelProblem& p) {
  if (p.batch * p.frames > INT_MAX) return "more than 2^31 - 1 frames in one call (cuFFT batch)";
  return nullptr;
}

size_t log_mel_workspace_bytes(const LogMelProblem& p) {
  PlanCache& cache = PlanCache::instance();
  std::lock_guard<std::mutex> lock(cache.mutex());
  cufftHandle plan;
  size_t work = 0;
  if (cache.get(p, &plan, &work) != CUFFT_SUCCESS) work = 0;
  return layout(p, work).total;
}

cudaError_t launch_log_mel(const LogMelProblem& p, const float* audio,
                           const float* filters_host, float* out, void* workspace,
                           cudaStream_t stream, const char** what) {
  PlanCache& cache = PlanCache::instance();
  std::lock_guard<std::mutex> lock(cache.mutex());
  cufftHandle plan;
  size_t work = 0;
  if (cache.get(p, &plan, &work) != CUFFT_SUCCESS) {
    *what = "cufftMakePlanMany";
    return cudaErrorUnknown;
  }
  const Layout l = layout(p, work);
  char* base = static_cast<char*>(workspace);
  float* frames = reinterpret_cast<float*>(base + l.frames);
  cufftComplex* spectra = reinterpret_cast<cufftComplex*>(base + l.spectra);
  float* filters = reinterpret_cast<float*>(base + l.filters);
  float* maxima = reinterpret_cast<float*>(base + l.maxima);

  // From pageable memory: the call returns once the bytes are staged, so the caller may free
  // filters_host afterwards.
  cudaError_t err = cudaMemcpyAsync(filters, filters_host,
                                    size_t(p.n_mels) * size_t(p.bins()) * sizeof(float),
                                    cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) {
    *what = "cudaMemcpyAsync (filterbank)";
    return err;
  }
  frame_kernel<<<grid_for(p.batch * p.frames * p.n_fft), kThreads, 0, stream>>>(p, audio, frames);
  if ((err = cudaGetLastError()) != cudaSuccess) {
    *what = "frame kernel launch";
    return err;
  }
  cufftResult r = cufftSetWorkArea(plan, base + l.fft_work);
  if (r == CUFFT_SUCCESS) r = cufftSetStream(plan, stream);
  if (r == CUFFT_SUCCESS) r = cufftExecR2C(plan, frames, spectra);
  if (r != CUFFT_SUCCESS) {
    *what = "cufftExecR2C";
    return cudaErrorUnknown;
  }
  const size_t shared = size_t(p.bins()) * sizeof(float);
  mel_kernel<<<unsigned(p.batch * p.frames), 128, shared, stream>>>(p, spectra, filters, out);
  if ((err = cudaGetLastError()) != cudaSuccess) {
    *what = "mel kernel launch";
    return err;
  }
  item_max_kernel<<<unsigned(p.batch), kThreads, 0, stream>>>(p, out, maxima);
  if ((err = cudaGetLastError()) != cudaSuccess) {
    *what = "item max kernel launch";
    return err;
  }
  scale_kernel<<<grid_for(p.batch * p.n_mels * p.frames), kThreads, 0, stream>>>(p, maxima, out);
  if ((err = cudaGetLastError()) != cudaSuccess) {
    *what = "scale kernel launch";
    return err;
  }
  return cudaSuccess;
}

}  // namespace gk::kernels::asr
