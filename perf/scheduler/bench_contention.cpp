// The scheduler's contention benchmark, side by side in one process on one GPU.
//
// A latency-sensitive request (a chain of small bf16 matmuls, calibrated to about 100 us of
// work, arriving open-loop as a Poisson process) runs beside a throughput hog (bf16
// 8192^3 GEMMs back to back, at most 4 in flight). Latency is measured from each request's
// scheduled arrival to its completion, so queueing behind earlier requests counts.
//
// Scenarios: the request alone on a plain stream (the isolated baseline) and alone in a
// Guaranteed task; the hog alone (its solo throughput); both on plain streams; both on plain
// streams with CUDA stream priorities; both as GPUkit tasks with priorities and pacing but
// no SM partition; and both as GPUkit tasks with an SM partition for the request. Then a
// memory run: a BestEffort task fills the device budget with evictable buffers, a
// Guaranteed task allocates its whole request, and the BestEffort data is checked after.
//
//   bench_contention [--seconds S] [--rate R] [--sms N] [--json FILE]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
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

#define CHECK(call)                                                                      \
  do {                                                                                   \
    gk_status s_ = (call);                                                               \
    if (s_ != GK_OK) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call,      \
                   gk_status_name(s_), gk_last_error());                                 \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

gk_tensor_desc matrix(int64_t rows, int64_t cols) {
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  d.dtype = GK_DTYPE_BF16;
  d.ndim = 2;
  d.shape[0] = rows;
  d.shape[1] = cols;
  return d;
}

uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

gk_tensor* random_matrix(gk_runtime* rt, int device, int64_t rows, int64_t cols, gk_stream* s,
                         uint32_t seed, float scale) {
  gk_tensor_desc d = matrix(rows, cols);
  gk_tensor* t = nullptr;
  CHECK(gk_tensor_create(rt, device, &d, s, &t));
  std::vector<uint16_t> host(size_t(rows * cols));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (auto& v : host) v = to_bf16(u(rng));
  CHECK(gk_copy_from_host(t, host.data(), host.size() * 2, s));
  CHECK(gk_stream_synchronize(s));
  return t;
}

void matmul(gk_runtime* rt, gk_tensor* a, gk_tensor* b, gk_tensor* c, gk_stream* s) {
  gk_tensor* in[2] = {a, b};
  gk_op_args args{};
  args.struct_size = sizeof(args);
  args.inputs = in;
  args.num_inputs = 2;
  args.outputs = &c;
  args.num_outputs = 1;
  args.stream = s;
  CHECK(gk_op_call(rt, "matmul", &args));
}

// The latency-sensitive request: x <- x·W_i for i < depth, [64, 2048]·[2048, 2048] bf16.
struct Request {
  static constexpr int64_t kM = 64, kD = 2048;
  std::vector<gk_tensor*> weights;
  gk_tensor* x[2] = {};
  int depth = 1;

  void launch(gk_runtime* rt, gk_stream* s) {
    for (int i = 0; i < depth; ++i) {
      matmul(rt, x[i % 2], weights[size_t(i) % weights.size()], x[(i + 1) % 2], s);
    }
  }
};

// The hog: C = A·B, bf16 8192^3, back to back with at most 4 in flight.
struct Hog {
  static constexpr int64_t kN = 8192;
  gk_tensor *a = nullptr, *b = nullptr, *c = nullptr;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> launched{0};

  void run(gk_runtime* rt, int device, gk_stream* s) {
    std::vector<gk_event*> ring(4);
    for (auto& e : ring) CHECK(gk_event_create(rt, device, &e));
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      gk_event* e = ring[n % ring.size()];
      if (n >= ring.size()) CHECK(gk_event_synchronize(e));  // bound the queue depth
      matmul(rt, a, b, c, s);
      CHECK(gk_event_record(e, s));
      launched.store(++n, std::memory_order_relaxed);
    }
    CHECK(gk_stream_synchronize(s));
    for (auto& e : ring) gk_event_destroy(e);
  }
};

struct Result {
  std::string name;
  size_t requests = 0;
  double p50 = 0, p99 = 0, p999 = 0, mean = 0;  // microseconds
  double hog_tflops = 0;                        // 0: no hog in this scenario
  uint64_t throttles = 0;
  std::string notes;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = size_t(std::ceil(p * double(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

// Poisson arrivals at `rate` per second for `seconds`; latency of each from arrival to done.
std::vector<double> serve(gk_runtime* rt, Request& req, gk_stream* s, double rate, double seconds,
                          uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<double> latencies;
  auto t0 = Clock::now();
  double arrival = gap(rng);
  while (arrival < seconds) {
    while (seconds_since(t0) < arrival) {
    }
    req.launch(rt, s);
    CHECK(gk_stream_synchronize(s));
    latencies.push_back((seconds_since(t0) - arrival) * 1e6);
    arrival += gap(rng);
    // Requests that arrived meanwhile are served at once: their wait is counted.
  }
  return latencies;
}

Result summarise(const std::string& name, const std::vector<double>& lat) {
  Result r;
  r.name = name;
  r.requests = lat.size();
  r.p50 = percentile(lat, 0.50);
  r.p99 = percentile(lat, 0.99);
  r.p999 = percentile(lat, 0.999);
  double sum = 0;
  for (double v : lat) sum += v;
  r.mean = lat.empty() ? 0 : sum / double(lat.size());
  return r;
}

double hog_tflops(uint64_t gemms, double seconds) {
  double flops = 2.0 * double(Hog::kN) * double(Hog::kN) * double(Hog::kN);
  return double(gemms) * flops / seconds / 1e12;
}

gk_task* make_task(gk_runtime* rt, int device, const char* name, int qos, uint64_t memory,
                   int sms) {
  gk_task_spec s{};
  s.struct_size = sizeof(s);
  s.name = name;
  s.device = device;
  s.qos = qos;
  s.memory_request = memory;
  s.sm_request = sms;
  gk_task* t = nullptr;
  CHECK(gk_task_create(rt, &s, &t));
  int32_t state = 0;
  CHECK(gk_task_wait(t, 10000, &state));
  return t;
}

std::string partition_of(gk_task* t) {
  gk_task_info i{};
  i.struct_size = sizeof(i);
  CHECK(gk_task_get_info(t, &i));
  return "partition " + std::to_string(i.sm_partition) + " SMs, stream priority " +
         std::to_string(i.stream_priority);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 5, rate = 200;
  int g_sms = 32;
  const char* json_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--rate" && i + 1 < argc) rate = std::atof(argv[++i]);
    else if (a == "--sms" && i + 1 < argc) g_sms = std::atoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--rate R] [--sms N] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress survives a killed run
  gk_runtime* rt = nullptr;
  CHECK(gk_runtime_create(nullptr, &rt));
  int device = gk_device_default(rt);
  gk_device_props props{};
  props.struct_size = sizeof(props);
  CHECK(gk_device_get_props(rt, device, &props));
  if (props.kind != GK_DEVICE_KIND_CUDA) {
    std::printf("bench_contention: skipped: no CUDA device (the default device is %s)\n",
                props.name);
    return 0;
  }
  std::printf("device %d: %s, %d SMs; %.1f s per scenario, %.0f requests/s (Poisson)\n", device,
              props.name, props.sm_count, seconds, rate);

  gk_stream* setup = nullptr;
  CHECK(gk_stream_create(rt, device, 0, &setup));
  Request req;
  for (int i = 0; i < 8; ++i) {
    req.weights.push_back(random_matrix(rt, device, Request::kD, Request::kD, setup, 100 + i,
                                        1.0f / 45.0f));  // ~unit gain per layer
  }
  req.x[0] = random_matrix(rt, device, Request::kM, Request::kD, setup, 1, 1.0f);
  req.x[1] = random_matrix(rt, device, Request::kM, Request::kD, setup, 2, 1.0f);
  Hog hog;
  hog.a = random_matrix(rt, device, Hog::kN, Hog::kN, setup, 3, 1.0f);
  hog.b = random_matrix(rt, device, Hog::kN, Hog::kN, setup, 4, 1.0f);
  gk_tensor_desc cd = matrix(Hog::kN, Hog::kN);
  CHECK(gk_tensor_create(rt, device, &cd, setup, &hog.c));

  // Calibrate the chain to about 100 us alone.
  gk_stream* plain_g = nullptr;
  CHECK(gk_stream_create(rt, device, 0, &plain_g));
  auto time_chain = [&](gk_stream* s) {
    std::vector<double> t;
    for (int i = 0; i < 60; ++i) {
      auto t0 = Clock::now();
      req.launch(rt, s);
      CHECK(gk_stream_synchronize(s));
      if (i >= 10) t.push_back(seconds_since(t0) * 1e6);
    }
    return percentile(t, 0.5);
  };
  req.depth = 1;
  double one = time_chain(plain_g);
  double chain = one;
  while (chain < 95.0 && req.depth < 64) {  // about 100 us of work per request
    ++req.depth;
    chain = time_chain(plain_g);
  }
  std::printf("request: %d x bf16 [64,2048]x[2048,2048] matmuls, %.1f us alone (one: %.1f us)\n",
              req.depth, chain, one);

  std::vector<Result> results;
  uint32_t seed = 7;  // the same arrival sequence in every scenario

  // 1. Alone on a plain stream: the isolated baseline.
  results.push_back(summarise("request alone, plain stream", serve(rt, req, plain_g, rate, seconds, seed)));

  // 2. The hog alone: its solo throughput.
  gk_stream* plain_hog = nullptr;
  CHECK(gk_stream_create(rt, device, 0, &plain_hog));
  double solo_tflops = 0;
  {
    hog.stop = false;
    hog.launched = 0;
    auto t0 = Clock::now();
    std::thread th([&] { hog.run(rt, device, plain_hog); });
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    hog.stop = true;
    th.join();
    solo_tflops = hog_tflops(hog.launched.load(), seconds_since(t0));
    Result r;
    r.name = "hog alone, plain stream";
    r.hog_tflops = solo_tflops;
    results.push_back(r);
  }

  auto contended = [&](const std::string& name, gk_stream* g_stream, gk_stream* h_stream,
                       gk_task* hog_task, const std::string& notes) {
    hog.stop = false;
    hog.launched = 0;
    auto t0 = Clock::now();
    std::thread th([&] { hog.run(rt, device, h_stream); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the hog is running
    uint64_t before = hog.launched.load();
    auto t1 = Clock::now();
    Result r = summarise(name, serve(rt, req, g_stream, rate, seconds, seed));
    uint64_t during = hog.launched.load() - before;
    double elapsed = seconds_since(t1);
    hog.stop = true;
    th.join();
    (void)t0;
    r.hog_tflops = hog_tflops(during, elapsed);
    if (hog_task) {
      gk_task_info i{};
      i.struct_size = sizeof(i);
      CHECK(gk_task_get_info(hog_task, &i));
      r.throttles = i.throttle_count;
    }
    r.notes = notes;
    results.push_back(r);
  };

  // 3. Both on plain streams, default priority.
  contended("with hog, plain streams", plain_g, plain_hog, nullptr, "no scheduling");

  // 4. Both on plain streams with CUDA stream priorities (what a CUDA user can do alone).
  gk_stream *high = nullptr, *low = nullptr;
  CHECK(gk_stream_create(rt, device, -100, &high));  // clamped to the greatest priority
  CHECK(gk_stream_create(rt, device, 100, &low));    // clamped to the least
  contended("with hog, plain streams + priorities", high, low, nullptr, "stream priorities only");

  // 5. GPUkit tasks: Guaranteed request, BestEffort hog; priorities and pacing, no partition.
  {
    gk_task* g = make_task(rt, device, "request", GK_QOS_GUARANTEED, 64 << 20, 0);
    gk_task* h = make_task(rt, device, "hog", GK_QOS_BEST_EFFORT, 0, 0);
    gk_stream *gs = nullptr, *hs = nullptr;
    CHECK(gk_task_stream_create(g, &gs));
    CHECK(gk_task_stream_create(h, &hs));
    contended("with hog, GPUkit tasks (priorities + pacing)", gs, hs, h,
              "request: " + partition_of(g) + "; hog: " + partition_of(h));
    gk_stream_destroy(gs);
    gk_stream_destroy(hs);
    gk_task_destroy(g);
    gk_task_destroy(h);
  }

  // 6. GPUkit tasks with an SM partition for the request (the hog is confined to the rest).
  {
    gk_task* g = make_task(rt, device, "request", GK_QOS_GUARANTEED, 64 << 20, g_sms);
    gk_task* h = make_task(rt, device, "hog", GK_QOS_BEST_EFFORT, 0, 0);
    gk_stream *gs = nullptr, *hs = nullptr;
    CHECK(gk_task_stream_create(g, &gs));
    CHECK(gk_task_stream_create(h, &hs));
    std::string notes = "request: " + partition_of(g) + "; hog: " + partition_of(h);
    for (gk_task* t : {g, h}) {
      char* events = nullptr;
      CHECK(gk_task_events_json(t, &events));
      std::string text = events;
      gk_string_free(events);
      for (size_t at = text.find("\"partition\""); at != std::string::npos;
           at = text.find("\"partition\"", at + 1)) {
        size_t end = text.find('}', at);
        std::printf("event: %s\n", text.substr(at, end - at).c_str());
      }
    }
    results.push_back(summarise("request alone, GPUkit task with partition",
                                serve(rt, req, gs, rate, seconds, seed)));
    results.back().notes = notes;
    contended("with hog, GPUkit tasks (partition + priorities + pacing)", gs, hs, h, notes);
    char* json = nullptr;
    CHECK(gk_scheduler_json(rt, &json));
    std::printf("scheduler: %s\n", json);
    gk_string_free(json);
    gk_stream_destroy(gs);
    gk_stream_destroy(hs);
    gk_task_destroy(g);
    gk_task_destroy(h);
  }

  const double iso_p99 = results[0].p99;
  std::printf("\n| scenario | requests | p50 us | p99 us | p99.9 us | p99 / isolated | hog TFLOP/s | hog / solo | BestEffort throttles | notes |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Result& r : results) {
    std::string lat = r.requests ? "" : "-";
    if (r.requests) {
      std::printf("| %s | %zu | %.1f | %.1f | %.1f | %.2f | ", r.name.c_str(), r.requests, r.p50,
                  r.p99, r.p999, r.p99 / iso_p99);
    } else {
      std::printf("| %s | - | - | - | - | - | ", r.name.c_str());
    }
    if (r.hog_tflops > 0) {
      std::printf("%.0f | %.2f | %" PRIu64 " | %s |\n", r.hog_tflops, r.hog_tflops / solo_tflops,
                  r.throttles, r.notes.c_str());
    } else {
      std::printf("- | - | - | %s |\n", r.notes.c_str());
    }
  }

  // ---- memory: BestEffort fills the budget, Guaranteed takes its request ------------------
  const uint64_t MiB = uint64_t(1) << 20, budget = uint64_t(8) << 30, chunk = 64 * MiB;
  CHECK(gk_memory_set_budget(rt, device, budget));
  gk_task* filler = make_task(rt, device, "filler", GK_QOS_BEST_EFFORT, 0, 0);
  gk_memory_owner* filler_owner = nullptr;
  CHECK(gk_task_memory_owner(filler, &filler_owner));
  std::vector<uint8_t> pattern(chunk);
  std::mt19937 rng(11);
  for (auto& b : pattern) b = uint8_t(rng());
  std::vector<gk_buffer*> filled;
  // Evictable allocations spill older ones rather than fail: stop at a full budget.
  for (uint64_t used = 0; used + chunk <= budget; used += chunk) {
    gk_alloc_args a{};
    a.struct_size = sizeof(a);
    a.device = device;
    a.size = chunk;
    a.flags = GK_BUFFER_EVICTABLE;
    a.owner = filler_owner;
    gk_buffer* b = nullptr;
    CHECK(gk_buffer_alloc(rt, &a, &b));
    void* p = nullptr;
    CHECK(gk_buffer_map(b, &p));
    uint64_t tag = filled.size();
    std::memcpy(pattern.data(), &tag, sizeof(tag));
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    d.dtype = GK_DTYPE_U8;
    d.ndim = 1;
    d.shape[0] = int64_t(chunk);
    gk_tensor* t = nullptr;
    CHECK(gk_tensor_from_buffer(b, 0, &d, &t));
    CHECK(gk_copy_from_host(t, pattern.data(), chunk, nullptr));
    gk_tensor_release(t);
    CHECK(gk_buffer_unmap(b));
    filled.push_back(b);
  }
  // Admitted against the unreserved budget although the BestEffort task uses all of it.
  gk_task* gold = make_task(rt, device, "gold", GK_QOS_GUARANTEED, budget / 2, 0);
  gk_memory_owner* gold_owner = nullptr;
  CHECK(gk_task_memory_owner(gold, &gold_owner));
  int failures = 0, allocated = 0;
  std::vector<gk_buffer*> gold_buffers;
  for (uint64_t used = 0; used + chunk <= budget / 2; used += chunk) {
    gk_alloc_args a{};
    a.struct_size = sizeof(a);
    a.device = device;
    a.size = chunk;
    a.owner = gold_owner;
    gk_buffer* b = nullptr;
    if (gk_buffer_alloc(rt, &a, &b) != GK_OK) {
      ++failures;
      std::printf("Guaranteed allocation failed: %s\n", gk_last_error());
    } else {
      ++allocated;
      gold_buffers.push_back(b);
    }
  }
  gk_memory_stats st{};
  st.struct_size = sizeof(st);
  CHECK(gk_memory_stats_get(rt, device, &st));
  uint64_t spilled = st.bytes_spilled;
  CHECK(gk_task_cancel(gold));  // frees gold's buffers and its reservation
  int intact = 0;
  std::vector<uint8_t> back(chunk);
  for (size_t k = 0; k < filled.size(); ++k) {
    void* p = nullptr;
    CHECK(gk_buffer_map(filled[k], &p));  // restores a spilled buffer
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    d.dtype = GK_DTYPE_U8;
    d.ndim = 1;
    d.shape[0] = int64_t(chunk);
    gk_tensor* t = nullptr;
    CHECK(gk_tensor_from_buffer(filled[k], 0, &d, &t));
    CHECK(gk_copy_to_host(t, back.data(), chunk, nullptr));
    gk_tensor_release(t);
    CHECK(gk_buffer_unmap(filled[k]));
    uint64_t tag = k;
    std::memcpy(pattern.data(), &tag, sizeof(tag));
    intact += back == pattern;
  }
  std::printf("\nmemory: budget %.1f GiB; BestEffort filled %zu x 64 MiB evictable buffers; "
              "Guaranteed (request %.1f GiB) allocated %d x 64 MiB with %d failures; %.2f GiB "
              "of BestEffort data spilled meanwhile; afterwards %d of %zu BestEffort buffers "
              "intact (bit-exact)\n",
              double(budget) / double(1 << 30), filled.size(), double(budget / 2) / double(1 << 30),
              allocated, failures, double(spilled) / double(1 << 30), intact, filled.size());
  char* events = nullptr;
  CHECK(gk_task_events_json(filler, &events));
  std::printf("filler events: %.600s\n", events);
  gk_string_free(events);
  for (gk_buffer* b : filled) gk_buffer_free(b, nullptr);
  gk_task_destroy(gold);
  gk_task_destroy(filler);

  if (json_path) {
    FILE* f = std::fopen(json_path, "w");
    if (f) {
      std::fprintf(f, "{\"device\":\"%s\",\"request_us_alone\":%.2f,\"depth\":%d,\"rate\":%.0f,"
                      "\"seconds\":%.1f,\"solo_tflops\":%.1f,\"scenarios\":[",
                   props.name, chain, req.depth, rate, seconds, solo_tflops);
      for (size_t i = 0; i < results.size(); ++i) {
        const Result& r = results[i];
        std::fprintf(f, "%s{\"name\":\"%s\",\"requests\":%zu,\"p50_us\":%.2f,\"p99_us\":%.2f,"
                        "\"p999_us\":%.2f,\"mean_us\":%.2f,\"hog_tflops\":%.1f,\"throttles\":%" PRIu64
                        ",\"notes\":\"%s\"}",
                     i ? "," : "", r.name.c_str(), r.requests, r.p50, r.p99, r.p999, r.mean,
                     r.hog_tflops, r.throttles, r.notes.c_str());
      }
      std::fprintf(f, "],\"memory\":{\"filled\":%zu,\"guaranteed_allocated\":%d,"
                      "\"guaranteed_failures\":%d,\"spilled_bytes\":%" PRIu64 ",\"intact\":%d}}\n",
                   filled.size(), allocated, failures, spilled, intact);
      std::fclose(f);
    }
  }
  for (gk_tensor* w : req.weights) gk_tensor_release(w);
  gk_tensor_release(req.x[0]);
  gk_tensor_release(req.x[1]);
  gk_tensor_release(hog.a);
  gk_tensor_release(hog.b);
  gk_tensor_release(hog.c);
  gk_stream_destroy(plain_g);
  gk_stream_destroy(plain_hog);
  gk_stream_destroy(high);
  gk_stream_destroy(low);
  gk_stream_destroy(setup);
  gk_runtime_destroy(rt);
  return failures == 0 && intact == int(filled.size()) ? 0 : 1;
}
