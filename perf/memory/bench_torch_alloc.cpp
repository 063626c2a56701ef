// PyTorch's CUDA caching allocator on the alloc+free hot path: the PyTorch column beside
// section 1 of bench_pool.cpp, measured the same way (per pair, p50/p99 over batches of 64,
// 256 B, 4 KiB, 1 MiB and 64 MiB, 200 untimed pairs before each row), after an untimed
// warm-up of every size so the cache holds each block. It calls c10's allocator from C++
// (raw_alloc_with_stream + raw_delete, what torch.cuda.caching_allocator_alloc/_delete
// call), so no Python call overhead is counted, on a non-blocking stream it creates, as
// bench_pool does. Only libc10 and libc10_cuda are linked, so c10's stream pool is not
// used: without libtorch_cuda it reaches a hook that throws ("Should never been called",
// dummyHasPrimaryContext). Then section 2: bench_pool's replayed trace (pool_trace.h)
// through the same allocator, peak reserved against peak live.
//
// Not built by CMake: torch is no dependency of GPUkit. `perf/run_gpu.sh bench` builds and
// runs it, after bench_pool, where python3 has torch with CUDA. By hand, from the repository
// root, with TORCH=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
// and the ABI flag from python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))':
//   g++ -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=1 perf/memory/bench_torch_alloc.cpp -I$TORCH/include -I/usr/local/cuda/include -L$TORCH/lib -L/usr/local/cuda/lib64 -lc10_cuda -lc10 -lcudart -pthread -Wl,-rpath,$TORCH/lib -o bench_torch_alloc
// (-DGK_TORCH_VERSION='"2.x.y+cuXYZ"' names the torch version in the header line; C++20
// because recent c10 headers need it, torch 2.15's use std::strong_ordering.)
// Run: ./bench_torch_alloc [--device N] [--json FILE]
//
// PYTORCH_CUDA_ALLOC_CONF applies as in PyTorch; the header line names the allocator
// backend in use.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "pair_timing.h"
#include "pool_trace.h"

#ifndef GK_TORCH_VERSION
#define GK_TORCH_VERSION "unknown"
#endif

namespace {

using gk::perf::per_pair_ns;
using gk::perf::Percentiles;
namespace alloc = c10::cuda::CUDACachingAllocator;

// bench_pool's section-1 sizes.
constexpr uint64_t kSizes[] = {256, 4096, uint64_t(1) << 20, uint64_t(64) << 20};

// One caching-allocator alloc+free pair on `stream`, for the current device.
Percentiles torch_pair(uint64_t size, cudaStream_t stream) {
  return per_pair_ns([&] { alloc::raw_delete(alloc::raw_alloc_with_stream(size, stream)); });
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

struct Row {
  uint64_t size;
  Percentiles ns;
};

int run(int device, const char* json_path) {
  int count = c10::cuda::device_count();
  if (count == 0) {
    std::fprintf(stderr, "no CUDA device visible to torch\n");
    return 1;
  }
  if (device < 0 || device >= count) {
    std::fprintf(stderr, "--device %d: torch sees %d CUDA devices\n", device, count);
    return 2;
  }
  // What torch's lazy CUDA init does for the allocator; raw_alloc fails without it.
  alloc::init(count);
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  cudaDeviceProp props{};
  int driver = 0;
  C10_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  C10_CUDA_CHECK(cudaDriverGetVersion(&driver));
  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  std::printf("device %d: %s, %s total, driver %d; torch %s, allocator \"%s\"%s%s\n", device,
              props.name, mib(double(props.totalGlobalMem)).c_str(), driver, GK_TORCH_VERSION,
              alloc::name().c_str(), conf ? ", PYTORCH_CUDA_ALLOC_CONF=" : "", conf ? conf : "");
  cudaStream_t stream = nullptr;
  C10_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // ---- 1. hot path (the PyTorch column of bench_pool's section 1) ----------------------
  std::printf("\n1. alloc+free per pair (ns, p50 / p99 over batches of 64)\n");
  std::printf("%-10s %22s\n", "size", "PyTorch caching alloc");
  // Untimed warm-up: a block of each size in the cache and the process past its first-touch
  // costs before any row (per_pair_ns warms each row again).
  for (uint64_t size : kSizes) {
    for (int i = 0; i < 1000; ++i) alloc::raw_delete(alloc::raw_alloc_with_stream(size, stream));
  }
  std::vector<Row> rows;
  for (uint64_t size : kSizes) {
    Percentiles t = torch_pair(size, stream);
    rows.push_back({size, t});
    std::printf("%-10s %10.0f / %-9.0f\n", mib(double(size)).c_str(), t.p50, t.p99);
  }
  // A thread that never touched CUDA: torch finds the device through cudaGetDevice, which
  // is 0 on a fresh thread, so the row is measured on device 0 only.
  Percentiles fresh{};
  bool have_fresh = device == 0;
  if (have_fresh) {
    std::thread t([&] { fresh = torch_pair(4096, stream); });
    t.join();
    std::printf("%-10s %10.0f / %-9.0f (PyTorch, thread that had not touched CUDA)\n", "4096 B",
                fresh.p50, fresh.p99);
  } else {
    std::printf("(no fresh-thread row: a fresh thread allocates on device 0, not on %d)\n", device);
  }
  C10_CUDA_CHECK(cudaStreamSynchronize(stream));
  alloc::emptyCache();
  C10_CUDA_CHECK(cudaStreamDestroy(stream));

  // ---- 2. the replayed trace (bench_pool's section 2: pool_trace.h, the same seed, event
  // count and live cap) --------------------------------------------------------------------
  // A free "on the other stream" is a plain raw_delete here, returned to the allocation's
  // stream: a PyTorch user would call record_stream for the other stream first, which holds
  // the block until an event completes, so the reserved peak below is a lower bound for
  // PyTorch on this trace.
  const uint64_t live_cap = std::min<uint64_t>(props.totalGlobalMem / 4, uint64_t(16) << 30);
  const std::vector<gk::perf::TraceEvent> trace =
      gk::perf::make_pool_trace(gk::perf::kTraceSeed, gk::perf::kTraceEvents, live_cap);
  const double peak_live = double(gk::perf::trace_peak_live(trace));
  cudaStream_t streams[2] = {nullptr, nullptr};
  for (cudaStream_t& s : streams) {
    C10_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  alloc::resetPeakStats(static_cast<c10::DeviceIndex>(device));
  std::vector<void*> ptrs(gk::perf::trace_slots(trace), nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  for (const gk::perf::TraceEvent& e : trace) {
    if (e.alloc) {
      ptrs[e.slot] = alloc::raw_alloc_with_stream(e.size, streams[e.stream]);
    } else {
      alloc::raw_delete(ptrs[e.slot]);
    }
  }
  for (cudaStream_t s : streams) C10_CUDA_CHECK(cudaStreamSynchronize(s));
  const double replay_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Index 0 of each stat array is the aggregate over pool kinds.
  const auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  const double peak_in_use = double(stats.allocated_bytes[0].peak);
  const double peak_reserved = double(stats.reserved_bytes[0].peak);
  std::printf("\n2. replayed trace: %zu events, 256 B..256 MiB, 2 streams; peak live %s\n",
              trace.size(), mib(peak_live).c_str());
  std::printf("%-28s %14s %16s %10s %12s\n", "", "peak in use", "peak reserved", "res/live",
              "replay ms");
  std::printf("%-28s %14s %16s %10.3f %12.1f\n", "PyTorch caching allocator",
              mib(peak_in_use).c_str(), mib(peak_reserved).c_str(), peak_reserved / peak_live,
              replay_ms);
  std::printf("(frees on the other stream without record_stream: a lower bound for PyTorch)\n");
  alloc::emptyCache();
  for (cudaStream_t s : streams) C10_CUDA_CHECK(cudaStreamDestroy(s));

  if (json_path) {
    FILE* f = std::fopen(json_path, "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path);
      return 1;
    }
    std::fprintf(f, "{\"device\":\"%s\",\"torch\":\"%s\",\"allocator\":\"%s\",\"rows\":[",
                 props.name, GK_TORCH_VERSION, alloc::name().c_str());
    for (size_t i = 0; i < rows.size(); ++i) {
      std::fprintf(f, "%s{\"size\":%llu,\"p50_ns\":%.1f,\"p99_ns\":%.1f}", i ? "," : "",
                   (unsigned long long)rows[i].size, rows[i].ns.p50, rows[i].ns.p99);
    }
    std::fprintf(f, "]");
    if (have_fresh) {
      std::fprintf(f, ",\"fresh_thread_4096\":{\"p50_ns\":%.1f,\"p99_ns\":%.1f}", fresh.p50,
                   fresh.p99);
    }
    std::fprintf(f,
                 ",\"trace\":{\"events\":%zu,\"peak_live\":%.0f,\"peak_in_use\":%.0f,"
                 "\"peak_reserved\":%.0f,\"reserved_over_live\":%.4f,\"replay_ms\":%.2f}",
                 trace.size(), peak_live, peak_in_use, peak_reserved, peak_reserved / peak_live,
                 replay_ms);
    std::fprintf(f, "}\n");
    std::fclose(f);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  const char* json_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--device N] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  try {
    return run(device, json_path);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%s\n", e.what_without_backtrace());
    return 1;
  }
}
