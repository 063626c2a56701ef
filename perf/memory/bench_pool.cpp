// GPUkit memory pool benchmark on a CUDA device, side by side with what a user would pick
// instead (cudaMalloc/cudaFree, cudaMallocAsync/cudaFreeAsync, pinned cudaMemcpyAsync).
//
// Build (from the repository root, with libgpukit built in build/):
//   g++ -O2 -std=c++20 perf/memory/bench_pool.cpp -Iabi/include -I/usr/local/cuda/include -Lbuild/lib -lgpukit -L/usr/local/cuda/lib64 -lcudart -pthread -Wl,-rpath,$PWD/build/lib -o bench_pool
// or the CMake target bench_pool (perf/memory/CMakeLists.txt, CUDA builds only).
// Run: ./bench_pool [--device N] [--spill-mib 1024] [--trace-events 4000]
//
// Reports:
//   1. alloc+free hot path through the C ABI, per pair: p50/p99 over batches of 64 pairs,
//      for 256 B, 4 KiB, 1 MiB and 64 MiB, against cudaMalloc/cudaFree and
//      cudaMallocAsync/cudaFreeAsync on a stream.
//   2. a replayed random trace (sizes log-uniform 256 B..256 MiB, 2 streams, frees on the
//      other stream 20% of the time): peak live bytes vs peak reserved bytes, for the
//      GPUkit pool and for the CUDA default mempool; and the replay's wall time.
//   3. spill + restore of a 1 GiB evictable buffer (bit-exact check), against a pinned
//      cudaMemcpyAsync of 1 GiB each way.
#include <cuda_runtime.h>

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

namespace {

using Clock = std::chrono::steady_clock;

#define CUDA_OK(call)                                                                    \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_),     \
                   __FILE__, __LINE__);                                                  \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

#define GK_OK_(call)                                                                         \
  do {                                                                                       \
    gk_status s_ = (call);                                                                   \
    if (s_ != GK_OK) {                                                                       \
      std::fprintf(stderr, "%s failed: %s: %s (%s:%d)\n", #call, gk_status_name(s_),         \
                   gk_last_error(), __FILE__, __LINE__);                                     \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Percentiles {
  double p50, p99;
};

template <typename Fn>
Percentiles per_pair_ns(Fn&& pair, int batches = 300, int per_batch = 64) {
  for (int i = 0; i < 200; ++i) pair();  // warm: segments, events, module load
  std::vector<double> ns;
  for (int b = 0; b < batches; ++b) {
    auto t0 = Clock::now();
    for (int k = 0; k < per_batch; ++k) pair();
    auto t1 = Clock::now();
    ns.push_back(seconds(t0, t1) * 1e9 / per_batch);
  }
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], ns[ns.size() * 99 / 100]};
}

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

}  // namespace

int main(int argc, char** argv) {
  int32_t device = -1;
  uint64_t spill_mib = 1024;
  int trace_events = 4000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--device") device = std::atoi(argv[i + 1]);
    if (a == "--spill-mib") spill_mib = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--trace-events") trace_events = std::atoi(argv[i + 1]);
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
  if (props.kind != GK_DEVICE_KIND_CUDA) {
    std::fprintf(stderr, "no CUDA device: this benchmark needs one\n");
    return 2;
  }
  CUDA_OK(cudaSetDevice(props.ordinal));
  std::printf("device %d: %s, %s total, driver %d\n", device, props.name,
              mib(double(props.total_memory)).c_str(), props.driver_version);

  gk_stream* gs[2];
  for (auto& s : gs) GK_OK_(gk_stream_create(rt, device, 0, &s));
  cudaStream_t cs[2];
  for (auto& s : cs) CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  // ---- 1. hot path --------------------------------------------------------------------
  std::printf("\n1. alloc+free per pair (ns, p50 / p99 over batches of 64)\n");
  std::printf("%-10s %22s %22s %22s\n", "size", "gk_buffer (C ABI)", "cudaMalloc/Free",
              "cudaMallocAsync/Free");
  for (uint64_t size : {uint64_t(256), uint64_t(4096), uint64_t(1) << 20, uint64_t(64) << 20}) {
    gk_alloc_args a{};
    a.struct_size = sizeof(a);
    a.device = device;
    a.size = size;
    a.stream = gs[0];
    Percentiles g = per_pair_ns([&] {
      gk_buffer* b = nullptr;
      if (gk_buffer_alloc(rt, &a, &b) != GK_OK) std::exit(1);
      gk_buffer_free(b, gs[0]);
    });
    Percentiles m = per_pair_ns(
        [&] {
          void* p = nullptr;
          CUDA_OK(cudaMalloc(&p, size));
          CUDA_OK(cudaFree(p));
        },
        30, 16);
    Percentiles ma = per_pair_ns([&] {
      void* p = nullptr;
      CUDA_OK(cudaMallocAsync(&p, size, cs[0]));
      CUDA_OK(cudaFreeAsync(p, cs[0]));
    });
    std::printf("%-10s %10.0f / %-9.0f %10.0f / %-9.0f %10.0f / %-9.0f\n", mib(double(size)).c_str(),
                g.p50, g.p99, m.p50, m.p99, ma.p50, ma.p99);
  }
  {
    // A thread that never touched cudart has no current context: the pool pushes its own.
    gk_alloc_args a{};
    a.struct_size = sizeof(a);
    a.device = device;
    a.size = 4096;
    a.stream = gs[0];
    Percentiles g{};
    std::thread t([&] {
      g = per_pair_ns([&] {
        gk_buffer* b = nullptr;
        if (gk_buffer_alloc(rt, &a, &b) != GK_OK) std::exit(1);
        gk_buffer_free(b, gs[0]);
      });
    });
    t.join();
    std::printf("%-10s %10.0f / %-9.0f (gk_buffer, thread without a current CUDA context)\n",
                "4096 B", g.p50, g.p99);
  }
  CUDA_OK(cudaDeviceSynchronize());

  // ---- 2. replayed trace --------------------------------------------------------------
  struct Event {
    bool alloc;
    uint64_t size;
    int stream;
    int free_stream;
    size_t slot;
  };
  std::mt19937_64 rng(20261122);
  std::vector<Event> trace;
  {
    const uint64_t live_cap = std::min<uint64_t>(props.total_memory / 4, uint64_t(16) << 30);
    std::vector<std::pair<size_t, uint64_t>> live;  // slot, size
    uint64_t live_bytes = 0;
    size_t next_slot = 0;
    std::uniform_real_distribution<double> logu(std::log(256.0), std::log(256.0 * 1024 * 1024));
    for (int i = 0; i < trace_events; ++i) {
      bool do_alloc = live.empty() || rng() % 100 < 55;
      uint64_t size = uint64_t(std::exp(logu(rng)));
      if (do_alloc && live_bytes + size <= live_cap) {
        int s = int(rng() % 2);
        trace.push_back({true, size, s, s, next_slot});
        live.emplace_back(next_slot++, size);
        live_bytes += size;
      } else if (!live.empty()) {
        size_t k = rng() % live.size();
        int fs = rng() % 100 < 20 ? 1 : 0;  // relative: 1 = the other stream
        trace.push_back({false, live[k].second, 0, fs, live[k].first});
        live_bytes -= live[k].second;
        live.erase(live.begin() + long(k));
      }
    }
    for (auto& [slot, size] : live) trace.push_back({false, size, 0, 0, slot});
    (void)next_slot;
  }
  size_t slots = 0;
  for (auto& e : trace) slots = std::max(slots, e.slot + 1);
  uint64_t peak_live = 0;
  {
    uint64_t live = 0;
    for (auto& e : trace) {
      live = e.alloc ? live + e.size : live - e.size;
      peak_live = std::max(peak_live, live);
    }
  }
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
  std::printf("\n2. replayed trace: %zu events, 256 B..256 MiB, 2 streams; peak live %s\n",
              trace.size(), mib(double(peak_live)).c_str());
  std::printf("%-22s %16s %16s %12s %12s\n", "", "peak in use", "peak reserved",
              "res/live", "replay ms");
  std::printf("%-22s %16s %16s %12.3f %12.1f\n", "GPUkit pool",
              mib(double(after.peak_bytes_in_use)).c_str(),
              mib(double(after.peak_bytes_reserved)).c_str(),
              double(after.peak_bytes_reserved) / double(peak_live), seconds(t0, t1) * 1e3);
  std::printf("%-22s %16s %16s %12.3f %12.1f\n", "cudaMallocAsync pool",
              mib(double(cuda_used_high)).c_str(), mib(double(cuda_reserved_high)).c_str(),
              double(cuda_reserved_high) / double(peak_live), seconds(t2, t3) * 1e3);
  std::printf("GPUkit: %llu cross-stream waits, %llu segments at the end; fragmentation at end "
              "%.3f\n",
              (unsigned long long)(after.cross_stream_waits - before.cross_stream_waits),
              (unsigned long long)after.segment_count, after.fragmentation);
  (void)before;

  // ---- 3. spill + restore -------------------------------------------------------------
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
  a.stream = gs[0];
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
  CUDA_OK(cudaMemcpyAsync(pinned, dev, n, cudaMemcpyDeviceToHost, cs[0]));  // warm
  CUDA_OK(cudaEventRecord(e0, cs[0]));
  CUDA_OK(cudaMemcpyAsync(pinned, dev, n, cudaMemcpyDeviceToHost, cs[0]));
  CUDA_OK(cudaEventRecord(e1, cs[0]));
  CUDA_OK(cudaMemcpyAsync(dev, pinned, n, cudaMemcpyHostToDevice, cs[0]));
  CUDA_OK(cudaEventRecord(e2, cs[0]));
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
  for (auto* s : gs) GK_OK_(gk_stream_destroy(s));
  gk_runtime_destroy(rt);
  return exact ? 0 : 1;
}
