// GPUkit transfer engine benchmark on a CUDA device, side by side in one process with what a
// user would write instead:
//
//   case                 plain peer                                 GPUkit
//   H2D / D2H pinned     cudaMemcpyAsync from cudaMallocHost        gk_copy_* from gk_host_alloc
//   H2D / D2H pageable   cudaMemcpy from the same malloc'ed buffer  gk_copy_* (staged)
//   both ways pinned     cudaMemcpyAsync H2D + D2H, two streams     gk_copy_from/to_host, two
//                                                                   streams
//   both ways pageable   cudaMemcpyAsync H2D + D2H, two threads     gk_copy_from/to_host, two
//                                                                   threads and two streams
//
// Each case: fresh random non-zero bytes, warm-up runs, then the median of --runs timed runs
// (steady_clock around issue + synchronize), every run's destination zeroed first (host
// memory with non-temporal stores, see zero_streaming) and checked byte for byte after. GB/s
// is 1e9 bytes per second (both directions count for "both ways").
//
// Build: the CMake target bench_transfer (perf/memory/CMakeLists.txt, CUDA builds only).
// Run:   build-gpu/bin/bench_transfer [--device N] [--runs 10] [--sizes-mib 64,1024]
// Tuning knobs of the engine (read at gk_runtime_create): GPUKIT_TRANSFER_CHUNK_KIB,
// GPUKIT_TRANSFER_CHUNKS, GPUKIT_TRANSFER_HOST_THREADS.
#include <cuda_runtime.h>

#include <algorithm>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gpukit/gpukit.h"

namespace {

using Clock = std::chrono::steady_clock;

#define CUDA_OK(call)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                                  \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

#define GK_OK_(call)                                                                 \
  do {                                                                               \
    gk_status s_ = (call);                                                           \
    if (s_ != GK_OK) {                                                               \
      std::fprintf(stderr, "%s failed: %s: %s (%s:%d)\n", #call, gk_status_name(s_), \
                   gk_last_error(), __FILE__, __LINE__);                             \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// Fresh non-zero bytes (xorshift64*, with the low bit of every byte set): a byte the copy
// skipped stays zero in the zeroed destination.
void fill_random(void* p, uint64_t bytes, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto* out = static_cast<uint8_t*>(p);
  uint64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    uint64_t v = (x * 0x2545F4914F6CDD1Dull) | 0x0101010101010101ull;
    std::memcpy(out + i, &v, 8);
  }
  for (; i < bytes; ++i) out[i] = uint8_t(0x5b);
}

// Zeroes [p, p + bytes) with non-temporal stores where the CPU has them: the lines go to
// memory, not into the zeroing core's cache. A plain memset left them dirty in 8 cores'
// caches, and a DMA writing there had to snoop them: pinned D2H at 64 MiB fell from 53-55
// to 38-47 GB/s and both ways from 97-100 to 86-87 on the H100 host, for plain
// cudaMemcpyAsync as much as for GPUkit.
void zero_streaming(char* p, uint64_t bytes) {
#if defined(__SSE2__)
  uint64_t head = std::min<uint64_t>(bytes, (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16);
  std::memset(p, 0, head);
  const __m128i z = _mm_setzero_si128();
  uint64_t i = head;
  for (; i + 16 <= bytes; i += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(p + i), z);
  std::memset(p + i, 0, bytes - i);
  _mm_sfence();
#else
  std::memset(p, 0, bytes);
#endif
}

// Zeroes host memory with several threads (a 1 GiB memset is slow on one core).
void parallel_memset_zero(void* p, uint64_t bytes) {
  unsigned n = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  uint64_t piece = (bytes + n - 1) / n;
  for (unsigned t = 0; t < n; ++t) {
    uint64_t begin = std::min(bytes, t * piece), end = std::min(bytes, begin + piece);
    threads.emplace_back([=] { zero_streaming(static_cast<char*>(p) + begin, end - begin); });
  }
  for (auto& t : threads) t.join();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Options {
  int32_t device = -1;
  int runs = 10;
  int warmup = 2;
  std::vector<uint64_t> sizes_mib = {64, 1024};
};

struct Result {
  double gbps = 0;
  bool verified = true;
};

// Runs `copy` warmup + runs times; before each run `prepare` zeroes the destination, after it
// `verify` checks it. Returns the median rate for `bytes_moved` per run.
Result measure(const Options& o, uint64_t bytes_moved, const std::function<void()>& prepare,
               const std::function<void()>& copy, const std::function<bool()>& verify) {
  Result r;
  std::vector<double> seconds;
  for (int i = 0; i < o.warmup + o.runs; ++i) {
    prepare();
    auto t0 = Clock::now();
    copy();
    auto t1 = Clock::now();
    if (!verify()) r.verified = false;
    if (i >= o.warmup) seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  r.gbps = double(bytes_moved) / median(seconds) / 1e9;
  return r;
}

struct Row {
  std::string size, name;
  Result plain, gpukit;
};

void print_row(const Row& row) {
  std::printf("%-9s %-26s %10.2f %10.2f %8.3f   %s\n", row.size.c_str(), row.name.c_str(),
              row.plain.gbps, row.gpukit.gbps, row.gpukit.gbps / row.plain.gbps,
              row.plain.verified && row.gpukit.verified ? "ok" : "MISMATCH");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--device") o.device = std::atoi(argv[i + 1]);
    if (a == "--runs") o.runs = std::max(1, std::atoi(argv[i + 1]));
    if (a == "--sizes-mib") {
      o.sizes_mib.clear();
      for (const char* p = argv[i + 1]; *p;) {
        o.sizes_mib.push_back(std::strtoull(p, const_cast<char**>(&p), 10));
        if (*p == ',') ++p;
      }
    }
  }
  gk_runtime_options ro = GK_RUNTIME_OPTIONS_INIT;
  ro.flags = GK_RUNTIME_NO_DEFAULT_PLUGINS;  // the environment's GPUKIT_TRANSFER_* apply
  ro.devices = "all";
  ro.log_level = GK_LOG_WARNING;
  gk_runtime* rt = nullptr;
  GK_OK_(gk_runtime_create(&ro, &rt));
  int32_t device = o.device >= 0 ? o.device : gk_device_default(rt);
  gk_device_props props{};
  props.struct_size = sizeof(props);
  GK_OK_(gk_device_get_props(rt, device, &props));
  if (props.kind != GK_DEVICE_KIND_CUDA) {
    std::fprintf(stderr, "no CUDA device: this benchmark needs one\n");
    return 2;
  }
  CUDA_OK(cudaSetDevice(props.ordinal));
  std::printf("device %d: %s, driver %d; %d timed runs (median) after %d warm-up, %u host cores\n",
              device, props.name, props.driver_version, o.runs, o.warmup,
              std::thread::hardware_concurrency());
  for (const char* knob :
       {"GPUKIT_TRANSFER_CHUNK_KIB", "GPUKIT_TRANSFER_CHUNKS", "GPUKIT_TRANSFER_HOST_THREADS"}) {
    if (const char* v = std::getenv(knob)) std::printf("  %s=%s\n", knob, v);
  }

  gk_stream *gs_up = nullptr, *gs_down = nullptr;
  GK_OK_(gk_stream_create(rt, device, 0, &gs_up));
  GK_OK_(gk_stream_create(rt, device, 0, &gs_down));
  cudaStream_t cs_up, cs_down;
  CUDA_OK(cudaStreamCreateWithFlags(&cs_up, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&cs_down, cudaStreamNonBlocking));

  std::printf("\n%-9s %-26s %10s %10s %8s   %s\n", "size", "case", "plain GB/s", "GPUkit GB/s",
              "ratio", "data");
  std::vector<Row> rows;
  uint64_t seed = 1;
  for (uint64_t mib : o.sizes_mib) {
    const uint64_t bytes = mib << 20;
    const std::string size = std::to_string(mib) + " MiB";
    // Device memory: one tensor per direction, shared by the plain peer and GPUkit.
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    d.dtype = GK_DTYPE_U8;
    d.ndim = 1;
    d.shape[0] = int64_t(bytes);
    gk_tensor *t_up = nullptr, *t_down = nullptr;
    GK_OK_(gk_tensor_create(rt, device, &d, nullptr, &t_up));
    GK_OK_(gk_tensor_create(rt, device, &d, nullptr, &t_down));
    void* dev_up = gk_tensor_data(t_up);
    void* dev_down = gk_tensor_data(t_down);
    // Host memory: pinned for each side, pageable shared by both.
    void *plain_src = nullptr, *plain_dst = nullptr, *gk_src = nullptr, *gk_dst = nullptr;
    CUDA_OK(cudaMallocHost(&plain_src, bytes));
    CUDA_OK(cudaMallocHost(&plain_dst, bytes));
    GK_OK_(gk_host_alloc(rt, bytes, &gk_src));
    GK_OK_(gk_host_alloc(rt, bytes, &gk_dst));
    auto* page_src = static_cast<uint8_t*>(std::malloc(bytes));
    auto* page_dst = static_cast<uint8_t*>(std::malloc(bytes));
    std::vector<uint8_t> check(bytes);  // what the device should hold
    void* check_pinned = nullptr;       // device bytes read back for H2D checks
    CUDA_OK(cudaMallocHost(&check_pinned, bytes));

    // The device-side source of D2H copies: fresh bytes, kept in `check`.
    auto fill_device_down = [&] {
      fill_random(check.data(), bytes, ++seed);
      CUDA_OK(cudaMemcpy(dev_down, check.data(), bytes, cudaMemcpyHostToDevice));
    };
    auto zero_device_up = [&] {
      CUDA_OK(cudaMemsetAsync(dev_up, 0, bytes, cs_up));
      CUDA_OK(cudaStreamSynchronize(cs_up));
    };
    auto device_up_equals = [&](const void* src) {
      CUDA_OK(cudaMemcpy(check_pinned, dev_up, bytes, cudaMemcpyDeviceToHost));
      return std::memcmp(check_pinned, src, bytes) == 0;
    };
    auto zero = [&](void* p) { return [=] { parallel_memset_zero(p, bytes); }; };
    auto equals_check = [&](const void* p) {
      return [&, p] { return std::memcmp(p, check.data(), bytes) == 0; };
    };

    // ---- H2D pinned --------------------------------------------------------------------
    {
      Row row{size, "H2D pinned"};
      fill_random(plain_src, bytes, ++seed);
      row.plain = measure(
          o, bytes, zero_device_up,
          [&] {
            CUDA_OK(cudaMemcpyAsync(dev_up, plain_src, bytes, cudaMemcpyHostToDevice, cs_up));
            CUDA_OK(cudaStreamSynchronize(cs_up));
          },
          [&] { return device_up_equals(plain_src); });
      fill_random(gk_src, bytes, ++seed);
      row.gpukit = measure(
          o, bytes, zero_device_up,
          [&] {
            GK_OK_(gk_copy_from_host(t_up, gk_src, bytes, gs_up));
            GK_OK_(gk_stream_synchronize(gs_up));
          },
          [&] { return device_up_equals(gk_src); });
      print_row(row);
      rows.push_back(row);
    }
    // ---- D2H pinned --------------------------------------------------------------------
    {
      Row row{size, "D2H pinned"};
      fill_device_down();
      row.plain = measure(
          o, bytes, zero(plain_dst),
          [&] {
            CUDA_OK(cudaMemcpyAsync(plain_dst, dev_down, bytes, cudaMemcpyDeviceToHost, cs_down));
            CUDA_OK(cudaStreamSynchronize(cs_down));
          },
          equals_check(plain_dst));
      fill_device_down();
      row.gpukit = measure(
          o, bytes, zero(gk_dst),
          [&] {
            GK_OK_(gk_copy_to_host(t_down, gk_dst, bytes, gs_down));
            GK_OK_(gk_stream_synchronize(gs_down));
          },
          equals_check(gk_dst));
      print_row(row);
      rows.push_back(row);
    }
    // ---- H2D pageable (the same buffer for both) ---------------------------------------
    {
      Row row{size, "H2D pageable"};
      fill_random(page_src, bytes, ++seed);
      row.plain = measure(
          o, bytes, zero_device_up,
          [&] { CUDA_OK(cudaMemcpy(dev_up, page_src, bytes, cudaMemcpyHostToDevice)); },
          [&] { return device_up_equals(page_src); });
      fill_random(page_src, bytes, ++seed);
      row.gpukit = measure(
          o, bytes, zero_device_up,
          [&] {
            GK_OK_(gk_copy_from_host(t_up, page_src, bytes, gs_up));
            GK_OK_(gk_stream_synchronize(gs_up));
          },
          [&] { return device_up_equals(page_src); });
      print_row(row);
      rows.push_back(row);
    }
    // ---- D2H pageable ------------------------------------------------------------------
    {
      Row row{size, "D2H pageable"};
      fill_device_down();
      row.plain = measure(
          o, bytes, zero(page_dst),
          [&] { CUDA_OK(cudaMemcpy(page_dst, dev_down, bytes, cudaMemcpyDeviceToHost)); },
          equals_check(page_dst));
      fill_device_down();
      row.gpukit = measure(
          o, bytes, zero(page_dst),
          [&] {
            GK_OK_(gk_copy_to_host(t_down, page_dst, bytes, gs_down));
            GK_OK_(gk_stream_synchronize(gs_down));
          },
          equals_check(page_dst));
      print_row(row);
      rows.push_back(row);
    }
    // ---- both ways at once, pinned: H2D on one stream, D2H on another ------------------
    {
      Row row{size, "both ways pinned"};
      fill_device_down();
      fill_random(plain_src, bytes, ++seed);
      auto prepare_plain = [&] {
        zero_device_up();
        parallel_memset_zero(plain_dst, bytes);
      };
      row.plain = measure(
          o, 2 * bytes, prepare_plain,
          [&] {
            CUDA_OK(cudaMemcpyAsync(dev_up, plain_src, bytes, cudaMemcpyHostToDevice, cs_up));
            CUDA_OK(cudaMemcpyAsync(plain_dst, dev_down, bytes, cudaMemcpyDeviceToHost, cs_down));
            CUDA_OK(cudaStreamSynchronize(cs_up));
            CUDA_OK(cudaStreamSynchronize(cs_down));
          },
          [&] {
            return device_up_equals(plain_src) && std::memcmp(plain_dst, check.data(), bytes) == 0;
          });
      fill_device_down();
      fill_random(gk_src, bytes, ++seed);
      auto prepare_gk = [&] {
        zero_device_up();
        parallel_memset_zero(gk_dst, bytes);
      };
      row.gpukit = measure(
          o, 2 * bytes, prepare_gk,
          [&] {
            GK_OK_(gk_copy_from_host(t_up, gk_src, bytes, gs_up));
            GK_OK_(gk_copy_to_host(t_down, gk_dst, bytes, gs_down));
            GK_OK_(gk_stream_synchronize(gs_up));
            GK_OK_(gk_stream_synchronize(gs_down));
          },
          [&] {
            return device_up_equals(gk_src) && std::memcmp(gk_dst, check.data(), bytes) == 0;
          });
      print_row(row);
      rows.push_back(row);
    }
    // ---- both ways at once, pageable: one thread per direction -------------------------
    {
      Row row{size, "both ways pageable"};
      auto two_threads = [](const std::function<void()>& up, const std::function<void()>& down) {
        std::thread t(up);
        down();
        t.join();
      };
      auto prepare = [&] {
        zero_device_up();
        parallel_memset_zero(page_dst, bytes);
      };
      auto verify = [&] {
        return device_up_equals(page_src) && std::memcmp(page_dst, check.data(), bytes) == 0;
      };
      fill_device_down();
      fill_random(page_src, bytes, ++seed);
      row.plain = measure(
          o, 2 * bytes, prepare,
          [&] {
            // Two streams: plain cudaMemcpy from two threads would share the legacy default stream.
            two_threads(
                [&] {
                  CUDA_OK(cudaMemcpyAsync(dev_up, page_src, bytes, cudaMemcpyHostToDevice, cs_up));
                  CUDA_OK(cudaStreamSynchronize(cs_up));
                },
                [&] {
                  CUDA_OK(
                      cudaMemcpyAsync(page_dst, dev_down, bytes, cudaMemcpyDeviceToHost, cs_down));
                  CUDA_OK(cudaStreamSynchronize(cs_down));
                });
          },
          verify);
      fill_device_down();
      fill_random(page_src, bytes, ++seed);
      row.gpukit = measure(
          o, 2 * bytes, prepare,
          [&] {
            two_threads(
                [&] {
                  GK_OK_(gk_copy_from_host(t_up, page_src, bytes, gs_up));
                  GK_OK_(gk_stream_synchronize(gs_up));
                },
                [&] {
                  GK_OK_(gk_copy_to_host(t_down, page_dst, bytes, gs_down));
                  GK_OK_(gk_stream_synchronize(gs_down));
                });
          },
          verify);
      print_row(row);
      rows.push_back(row);
    }

    gk_tensor_release(t_up);
    gk_tensor_release(t_down);
    CUDA_OK(cudaFreeHost(plain_src));
    CUDA_OK(cudaFreeHost(plain_dst));
    CUDA_OK(cudaFreeHost(check_pinned));
    GK_OK_(gk_host_free(rt, gk_src));
    GK_OK_(gk_host_free(rt, gk_dst));
    std::free(page_src);
    std::free(page_dst);
  }

  gk_transfer_stats ts{};
  ts.struct_size = sizeof(ts);
  GK_OK_(gk_transfer_stats_get(rt, device, &ts));
  std::printf(
      "\nGPUkit staging: %llu KiB chunks, %llu MiB pinned; %llu staged copies in %llu "
      "chunks (%.1f GiB); gk_host_alloc %.1f MiB in use, %.1f MiB cached\n",
      (unsigned long long)(ts.staging_chunk_bytes >> 10),
      (unsigned long long)(ts.staging_bytes >> 20), (unsigned long long)ts.staged_copies,
      (unsigned long long)ts.staged_chunks, double(ts.staged_bytes) / (1 << 30),
      double(ts.host_bytes_in_use) / (1 << 20), double(ts.host_bytes_cached) / (1 << 20));

  // The evidence, per size: pinned >= 95% of the plain pinned copy, pageable H2D
  // >= 2x plain cudaMemcpy (target 40 GB/s), both ways pinned >= 85 GB/s.
  std::printf("\n");
  bool all_ok = true;
  auto check_line = [&](const Row& r, const char* what, bool ok) {
    std::printf("check %-9s %-20s %s: %s\n", r.size.c_str(), r.name.c_str(), what,
                ok ? "PASS" : "FAIL");
    all_ok = all_ok && ok;
  };
  for (const Row& r : rows) {
    bool data = r.plain.verified && r.gpukit.verified;
    double ratio = r.gpukit.gbps / r.plain.gbps;
    char what[96];
    if (r.name == "H2D pinned" || r.name == "D2H pinned") {
      std::snprintf(what, sizeof(what), "%.3f of plain (>= 0.95)", ratio);
      check_line(r, what, data && ratio >= 0.95);
    } else if (r.name == "H2D pageable") {
      std::snprintf(what, sizeof(what), "%.2fx plain (>= 2), %.1f GB/s (target 40)", ratio,
                    r.gpukit.gbps);
      check_line(r, what, data && ratio >= 2.0);
    } else if (r.name == "both ways pinned") {
      std::snprintf(what, sizeof(what), "%.1f GB/s (>= 85)", r.gpukit.gbps);
      check_line(r, what, data && r.gpukit.gbps >= 85.0);
    } else {
      std::snprintf(what, sizeof(what), "%.2fx plain, data verified", ratio);
      check_line(r, what, data);
    }
  }
  std::printf("bench_transfer: %s\n", all_ok ? "all checks PASS" : "some checks FAIL");

  gk_stream_destroy(gs_up);
  gk_stream_destroy(gs_down);
  CUDA_OK(cudaStreamDestroy(cs_up));
  CUDA_OK(cudaStreamDestroy(cs_down));
  gk_runtime_destroy(rt);
  return all_ok ? 0 : 1;
}
