// GPUkit memory pool benchmark on a CUDA device, side by side with what a user would pick
// instead (cudaMalloc/cudaFree, cudaMallocAsync/cudaFreeAsync, pinned cudaMemcpyAsync).
// On the cpu device (no GPU, or --device 0) it runs the GPUkit rows of sections 1 and 2
// alone: the pool logic is the same, over host memory.
//
// Build: the CMake target bench_pool (perf/memory/CMakeLists.txt; with the CUDA runtime
// columns where CUDA is found, GK_BENCH_CUDART), or from the repository root, with
// libgpukit built in build/:
//   g++ -O2 -std=c++20 -DGK_BENCH_CUDART perf/memory/bench_pool.cpp -Iabi/include -I/usr/local/cuda/include -Lbuild/lib -lgpukit -L/usr/local/cuda/lib64 -lcudart -pthread -Wl,-rpath,$PWD/build/lib -o bench_pool
// Run: ./bench_pool [--device N] [--spill-mib 1024] [--trace-events 4000]
//                   [--sizes 256,4096,1048576,67108864] [--gk-only 1] [--cold-pairs 1000]
//
// Reports:
//   1. alloc+free hot path through the C ABI, per pair: p50/p99 over batches of 64 pairs,
//      for 256 B, 4 KiB, 1 MiB and 64 MiB (--sizes), against cudaMalloc/cudaFree and
//      cudaMallocAsync/cudaFreeAsync on a stream (--gk-only 1: the GPUkit rows alone, with no
//      CUDA runtime call between them). PyTorch's caching allocator, measured the same way,
//      is bench_torch_alloc.cpp (not built by CMake; perf/run_gpu.sh bench runs it). Then the
//      same pair at 4 KiB with the caches cold (8 MiB written before each timed pair, as
//      other work between two allocations would), timed one pair at a time (--cold-pairs of
//      them; 0 leaves the row out).
//   2. a replayed random trace (pool_trace.h: sizes log-uniform 256 B..256 MiB, 2 streams,
//      frees on the other stream 20% of the time): peak live bytes vs peak reserved bytes,
//      for the GPUkit pool and for the CUDA default mempool; and the replay's wall time.
//   3. spill + restore of a 1 GiB evictable buffer (bit-exact check), against a pinned
//      cudaMemcpyAsync of 1 GiB each way.
#ifdef GK_BENCH_CUDART
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpukit/gpukit.h"
#include "pair_timing.h"
#include "pool_trace.h"

namespace {

using gk::perf::Clock;
using gk::perf::per_pair_ns;
using gk::perf::Percentiles;
using gk::perf::seconds;

#ifdef GK_BENCH_CUDART
#define CUDA_OK(call)                                                                    \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_),     \
                   __FILE__, __LINE__);                                                  \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)
#endif

#define GK_OK_(call)                                                                         \
  do {                                                                                       \
    gk_status s_ = (call);                                                                   \
    if (s_ != GK_OK) {                                                                       \
      std::fprintf(stderr, "%s failed: %s: %s (%s:%d)\n", #call, gk_status_name(s_),         \
                   gk_last_error(), __FILE__, __LINE__);                                     \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

gk_memory_stats stats(gk_runtime* rt, int32_t device) {
  gk_memory_stats s{};
  s.struct_size = sizeof(s);
  GK_OK_(gk_memory_stats_get(rt, device, &s));
  return s;
}

std::string mib(double bytes) {
  char t[32];
  if (bytes < (1 << 20)) {
    std::snprintf(t, sizeof(t), "%.0f B", bytes);
  } else {
    std::snprintf(t, sizeof(t), "%.1f MiB", bytes / (1 << 20));
  }
  return t;
}

#ifdef GK_BENCH_CUDART
// Section 3: spill + restore of a `spill_mib` evictable buffer (bit-exact check) against a
// pinned cudaMemcpyAsync each way. Returns whether both round trips were bit-exact.
bool spill_section(gk_runtime* rt, int32_t device, uint64_t spill_mib, gk_stream* gs0,
                   cudaStream_t cs0) {
  uint64_t trimmed = 0;
  const uint64_t n = spill_mib << 20;
  std::vector<uint8_t> host(n), back(n);
  std::mt19937 fill_rng(7);
  for (uint64_t i = 0; i < n; i += 4) {
    uint32_t v = fill_rng();
    std::memcpy(&host[i], &v, std::min<uint64_t>(4, n - i));
  }
  GK_OK_(gk_memory_trim(rt, device, &trimmed));
  gk_alloc_args a{};
  a.struct_size = sizeof(a);
  a.device = device;
  a.size = n;
  a.flags = GK_BUFFER_EVICTABLE;
  a.stream = gs0;
  gk_buffer* big = nullptr;
  GK_OK_(gk_buffer_alloc(rt, &a, &big));
  void* p = nullptr;
  GK_OK_(gk_buffer_map(big, &p));
  CUDA_OK(cudaMemcpy(p, host.data(), n, cudaMemcpyHostToDevice));
  GK_OK_(gk_buffer_unmap(big));
  // Round 1 pins fresh host memory for the spill; round 2 reuses the pool's pinned cache.
  double spill_s[2], restore_s[2];
  int32_t spilled = 0;
  bool exact = true;
  gk_buffer* small = nullptr;
  for (int round = 0; round < 2; ++round) {
    GK_OK_(gk_memory_set_budget(rt, device, stats(rt, device).bytes_in_use));
    a.size = 4096;
    a.flags = 0;
    auto s0 = Clock::now();
    GK_OK_(gk_buffer_alloc(rt, &a, &small));  // spills `big`
    auto s1 = Clock::now();
    GK_OK_(gk_buffer_is_spilled(big, &spilled));
    GK_OK_(gk_memory_set_budget(rt, device, 0));
    GK_OK_(gk_buffer_free(small, nullptr));
    auto r0 = Clock::now();
    GK_OK_(gk_buffer_map(big, &p));  // restores it
    auto r1 = Clock::now();
    std::memset(back.data(), 0, n);
    CUDA_OK(cudaMemcpy(back.data(), p, n, cudaMemcpyDeviceToHost));
    GK_OK_(gk_buffer_unmap(big));
    exact = exact && spilled && std::memcmp(back.data(), host.data(), n) == 0;
    spill_s[round] = seconds(s0, s1);
    restore_s[round] = seconds(r0, r1);
  }
  // Pinned cudaMemcpyAsync, each way.
  void* pinned = nullptr;
  void* dev = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, n));
  CUDA_OK(cudaMalloc(&dev, n));
  cudaEvent_t e0, e1, e2;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  CUDA_OK(cudaEventCreate(&e2));
  CUDA_OK(cudaMemcpyAsync(pinned, dev, n, cudaMemcpyDeviceToHost, cs0));  // warm
  CUDA_OK(cudaEventRecord(e0, cs0));
  CUDA_OK(cudaMemcpyAsync(pinned, dev, n, cudaMemcpyDeviceToHost, cs0));
  CUDA_OK(cudaEventRecord(e1, cs0));
  CUDA_OK(cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, cs0));
  CUDA_OK(cudaEventRecord(e2, cs0));
  CUDA_OK(cudaEventSynchronize(e2));
  float d2h_ms = 0, h2d_ms = 0;
  CUDA_OK(cudaEventElapsedTime(&d2h_ms, e0, e1));
  CUDA_OK(cudaEventElapsedTime(&h2d_ms, e1, e2));
  double gb = double(n) / 1e9;
  std::printf("\n3. spill + restore of %s (round trips %s)\n", mib(double(n)).c_str(),
              exact ? "bit-exact" : "MISMATCH");
  std::printf("%-40s %10s %10s\n", "", "ms", "GB/s");
  const char* names[2] = {"first (pins host memory)", "second (pinned cache)"};
  for (int round = 0; round < 2; ++round) {
    std::printf("GPUkit spill, %-26s %10.1f %10.2f\n", names[round], spill_s[round] * 1e3,
                gb / spill_s[round]);
    std::printf("GPUkit restore, %-24s %10.1f %10.2f\n", names[round], restore_s[round] * 1e3,
                gb / restore_s[round]);
  }
  std::printf("%-40s %10.1f %10.2f\n", "pinned cudaMemcpyAsync D2H", d2h_ms, gb / (d2h_ms / 1e3));
  std::printf("%-40s %10.1f %10.2f\n", "pinned cudaMemcpyAsync H2D", h2d_ms, gb / (h2d_ms / 1e3));

  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaFree(dev));
  GK_OK_(gk_buffer_free(big, nullptr));
  return exact;
}
#endif

// One GPUkit alloc+free pair through the C ABI on `stream`.
Percentiles gk_pair(gk_runtime* rt, int32_t device, uint64_t size, gk_stream* stream) {
  gk_alloc_args a{};
  a.struct_size = sizeof(a);
  a.device = device;
  a.size = size;
  a.stream = stream;
  return per_pair_ns([&] {
    gk_buffer* b = nullptr;
    if (gk_buffer_alloc(rt, &a, &b) != GK_OK) std::exit(1);
    gk_buffer_free(b, stream);
  });
}

// The same pair, timed one at a time with the caches cold (pair_timing.h).
Percentiles gk_pair_cold(gk_runtime* rt, int32_t device, uint64_t size, gk_stream* stream,
                         int pairs) {
  gk_alloc_args a{};
  a.struct_size = sizeof(a);
  a.device = device;
  a.size = size;
  a.stream = stream;
  return gk::perf::cold_pair_ns(
      [&] {
        gk_buffer* b = nullptr;
        if (gk_buffer_alloc(rt, &a, &b) != GK_OK) std::exit(1);
        gk_buffer_free(b, stream);
      },
      pairs);
}

std::vector<uint64_t> parse_sizes(const char* text) {
  std::vector<uint64_t> sizes;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    sizes.push_back(std::strtoull(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  int32_t device = -1;
  uint64_t spill_mib = 1024;
  int trace_events = gk::perf::kTraceEvents;
  std::vector<uint64_t> sizes = {256, 4096, uint64_t(1) << 20, uint64_t(64) << 20};
  bool gk_only = false;
  int cold_pairs = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--device") device = std::atoi(argv[i + 1]);
    if (a == "--spill-mib") spill_mib = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--trace-events") trace_events = std::atoi(argv[i + 1]);
    if (a == "--sizes") sizes = parse_sizes(argv[i + 1]);
    if (a == "--gk-only") gk_only = std::atoi(argv[i + 1]) != 0;
    if (a == "--cold-pairs") cold_pairs = std::atoi(argv[i + 1]);
  }
  gk_runtime_options o = GK_RUNTIME_OPTIONS_INIT;
  o.flags = GK_RUNTIME_IGNORE_ENVIRONMENT | GK_RUNTIME_NO_DEFAULT_PLUGINS;
  o.devices = "all";
  o.log_level = GK_LOG_WARNING;
  gk_runtime* rt = nullptr;
  GK_OK_(gk_runtime_create(&o, &rt));
  if (device < 0) device = gk_device_default(rt);
  gk_device_props props{};
  props.struct_size = sizeof(props);
  GK_OK_(gk_device_get_props(rt, device, &props));
  // The CUDA columns need a CUDA device and a build with the CUDA runtime.
  bool cuda = props.kind == GK_DEVICE_KIND_CUDA;
#ifdef GK_BENCH_CUDART
  if (cuda) CUDA_OK(cudaSetDevice(props.ordinal));
#else
  cuda = false;
#endif
  // The CUDA runtime rows and sections: not with --gk-only.
  const bool cuda_rows = cuda && !gk_only;
  std::printf("device %d: %s, %s total, driver %d\n", device, props.name,
              mib(double(props.total_memory)).c_str(), props.driver_version);
  if (!cuda) {
    std::printf("(no CUDA runtime columns: %s; GPUkit rows only)\n",
                props.kind == GK_DEVICE_KIND_CUDA ? "built without the CUDA runtime"
                                                  : "the cpu device");
  }

  gk_stream* gs[2];
  for (auto& s : gs) GK_OK_(gk_stream_create(rt, device, 0, &s));
#ifdef GK_BENCH_CUDART
  cudaStream_t cs[2] = {};
  if (cuda) {
    for (auto& s : cs) CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
#endif

  // ---- 1. hot path --------------------------------------------------------------------
  std::printf("\n1. alloc+free per pair (ns, p50 / p99 over batches of 64)\n");
  if (cuda) std::printf("(PyTorch's caching allocator, same method: bench_torch_alloc.log)\n");
  std::printf("%-10s %22s %22s %22s\n", "size", "gk_buffer (C ABI)", "cudaMalloc/Free",
              "cudaMallocAsync/Free");
  for (uint64_t size : sizes) {
    Percentiles g = gk_pair(rt, device, size, gs[0]);
    Percentiles m{}, ma{};
#ifdef GK_BENCH_CUDART
    if (cuda_rows) {
      m = per_pair_ns(
          [&] {
            void* p = nullptr;
            CUDA_OK(cudaMalloc(&p, size));
            CUDA_OK(cudaFree(p));
          },
          30, 16);
      ma = per_pair_ns([&] {
        void* p = nullptr;
        CUDA_OK(cudaMallocAsync(&p, size, cs[0]));
        CUDA_OK(cudaFreeAsync(p, cs[0]));
      });
    }
#endif
    if (cuda_rows) {
      std::printf("%-10s %10.0f / %-9.0f %10.0f / %-9.0f %10.0f / %-9.0f\n",
                  mib(double(size)).c_str(), g.p50, g.p99, m.p50, m.p99, ma.p50, ma.p99);
    } else {
      std::printf("%-10s %10.0f / %-9.0f %22s %22s\n", mib(double(size)).c_str(), g.p50, g.p99,
                  "n/a", "n/a");
    }
  }
  if (cold_pairs > 0) {
    Percentiles g = gk_pair_cold(rt, device, 4096, gs[0], cold_pairs);
    std::printf("%-10s %10.0f / %-9.0f (gk_buffer, caches cold: one pair at a time, clock "
                "reads included)\n",
                "4096 B", g.p50, g.p99);
  }
  if (cuda_rows) {
    // A thread that never touched cudart has no current context: the pool must not need
    // one on this path (it pushes the device's context only around driver calls).
    Percentiles g{};
    std::thread t([&] { g = gk_pair(rt, device, 4096, gs[0]); });
    t.join();
    std::printf("%-10s %10.0f / %-9.0f (gk_buffer, thread without a current CUDA context)\n",
                "4096 B", g.p50, g.p99);
  }
#ifdef GK_BENCH_CUDART
  if (cuda_rows) {
    // A stream GPUkit did not create (gk_stream_wrap): it may be destroyed without telling
    // the pool, so each free there still records an event at once.
    gk_stream* wrapped = nullptr;
    GK_OK_(gk_stream_wrap(rt, device, cs[1], &wrapped));
    Percentiles g = gk_pair(rt, device, 4096, wrapped);
    std::printf("%-10s %10.0f / %-9.0f (gk_buffer, on a wrapped foreign stream)\n", "4096 B",
                g.p50, g.p99);
    GK_OK_(gk_stream_destroy(wrapped));
  }
#endif
#ifdef GK_BENCH_CUDART
  if (cuda) CUDA_OK(cudaDeviceSynchronize());
#endif

  // ---- 2. replayed trace --------------------------------------------------------------
  // The live cap bench_pool has always used; it does not bind for the default seed, so the
  // cpu device replays the same events as an 80 GB GPU.
  const uint64_t live_cap = cuda ? std::min<uint64_t>(props.total_memory / 4, uint64_t(16) << 30)
                                 : gk::perf::kTraceLiveCap;
  std::vector<gk::perf::TraceEvent> trace =
      gk::perf::make_pool_trace(gk::perf::kTraceSeed, trace_events, live_cap);
  size_t slots = gk::perf::trace_slots(trace);
  uint64_t peak_live = gk::perf::trace_peak_live(trace);
  // GPUkit.
  uint64_t trimmed = 0;
  GK_OK_(gk_memory_trim(rt, device, &trimmed));
  gk_memory_stats before = stats(rt, device);
  std::vector<gk_buffer*> gbuf(slots, nullptr);
  std::vector<int> gstream(slots, 0);
  auto t0 = Clock::now();
  for (auto& e : trace) {
    if (e.alloc) {
      gk_alloc_args a{};
      a.struct_size = sizeof(a);
      a.device = device;
      a.size = e.size;
      a.stream = gs[e.stream];
      GK_OK_(gk_buffer_alloc(rt, &a, &gbuf[e.slot]));
      gstream[e.slot] = e.stream;
    } else {
      int s = e.free_stream ? 1 - gstream[e.slot] : gstream[e.slot];
      GK_OK_(gk_buffer_free(gbuf[e.slot], gs[s]));
    }
  }
  for (auto* s : gs) GK_OK_(gk_stream_synchronize(s));
  auto t1 = Clock::now();
  gk_memory_stats after = stats(rt, device);
  std::printf("\n2. replayed trace: %zu events, 256 B..256 MiB, 2 streams; peak live %s\n",
              trace.size(), mib(double(peak_live)).c_str());
  std::printf("%-22s %16s %16s %12s %12s\n", "", "peak in use", "peak reserved",
              "res/live", "replay ms");
  std::printf("%-22s %16s %16s %12.3f %12.1f\n", "GPUkit pool",
              mib(double(after.peak_bytes_in_use)).c_str(),
              mib(double(after.peak_bytes_reserved)).c_str(),
              double(after.peak_bytes_reserved) / double(peak_live), seconds(t0, t1) * 1e3);
#ifdef GK_BENCH_CUDART
  if (cuda) {
    // CUDA's default mempool, same trace.
    cudaMemPool_t pool;
    CUDA_OK(cudaDeviceGetDefaultMemPool(&pool, props.ordinal));
    uint64_t zero = 0;
    CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
    CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
    std::vector<void*> cbuf(slots, nullptr);
    std::vector<int> cstream(slots, 0);
    auto t2 = Clock::now();
    for (auto& e : trace) {
      if (e.alloc) {
        CUDA_OK(cudaMallocAsync(&cbuf[e.slot], e.size, cs[e.stream]));
        cstream[e.slot] = e.stream;
      } else {
        int s = e.free_stream ? 1 - cstream[e.slot] : cstream[e.slot];
        CUDA_OK(cudaFreeAsync(cbuf[e.slot], cs[s]));
      }
    }
    for (auto s : cs) CUDA_OK(cudaStreamSynchronize(s));
    auto t3 = Clock::now();
    uint64_t cuda_reserved_high = 0, cuda_used_high = 0;
    CUDA_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &cuda_reserved_high));
    CUDA_OK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &cuda_used_high));
    std::printf("%-22s %16s %16s %12.3f %12.1f\n", "cudaMallocAsync pool",
                mib(double(cuda_used_high)).c_str(), mib(double(cuda_reserved_high)).c_str(),
                double(cuda_reserved_high) / double(peak_live), seconds(t2, t3) * 1e3);
  }
#endif
  std::printf("GPUkit: %llu cross-stream waits, %llu segments at the end; fragmentation at end "
              "%.3f\n",
              (unsigned long long)(after.cross_stream_waits - before.cross_stream_waits),
              (unsigned long long)after.segment_count, after.fragmentation);

  // ---- 3. spill + restore -------------------------------------------------------------
  bool exact = true;
#ifdef GK_BENCH_CUDART
  if (cuda) exact = spill_section(rt, device, spill_mib, gs[0], cs[0]);
  if (cuda) {
    for (auto s : cs) CUDA_OK(cudaStreamDestroy(s));
  }
#endif
  if (!cuda) {
    (void)spill_mib;
    std::printf("\n3. spill + restore: needs a CUDA device (pinned host memory, copies)\n");
  }
  for (auto* s : gs) GK_OK_(gk_stream_destroy(s));
  gk_runtime_destroy(rt);
  return exact ? 0 : 1;
}
