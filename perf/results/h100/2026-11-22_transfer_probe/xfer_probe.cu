// Probe: host memcpy variants into pinned memory, and pinned D2H / both-ways behaviour.
#include <cuda_runtime.h>
#include <emmintrin.h>
#include <immintrin.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <functional>
using clk = std::chrono::steady_clock;
#define CK(x) do{cudaError_t e=(x); if(e){printf("%s: %s\n",#x,cudaGetErrorString(e)); exit(1);}}while(0)

static void nt_copy_sse(void* d, const void* s, size_t n) {
  char* dst = (char*)d; const char* src = (const char*)s;
  size_t head = (16 - (uintptr_t)dst % 16) % 16; if (head > n) head = n;
  memcpy(dst, src, head); dst += head; src += head; n -= head;
  size_t blocks = n / 64;
  for (size_t i = 0; i < blocks; ++i) {
    __m128i a = _mm_loadu_si128((const __m128i*)src), b = _mm_loadu_si128((const __m128i*)(src+16));
    __m128i c = _mm_loadu_si128((const __m128i*)(src+32)), e = _mm_loadu_si128((const __m128i*)(src+48));
    _mm_stream_si128((__m128i*)dst, a); _mm_stream_si128((__m128i*)(dst+16), b);
    _mm_stream_si128((__m128i*)(dst+32), c); _mm_stream_si128((__m128i*)(dst+48), e);
    src += 64; dst += 64;
  }
  memcpy(dst, src, n % 64);
  _mm_sfence();
}
__attribute__((target("avx2"))) static void nt_copy_avx(void* d, const void* s, size_t n) {
  char* dst = (char*)d; const char* src = (const char*)s;
  size_t head = (32 - (uintptr_t)dst % 32) % 32; if (head > n) head = n;
  memcpy(dst, src, head); dst += head; src += head; n -= head;
  size_t blocks = n / 128;
  for (size_t i = 0; i < blocks; ++i) {
    _mm_prefetch(src + 1024, _MM_HINT_NTA);
    __m256i a = _mm256_loadu_si256((const __m256i*)src), b = _mm256_loadu_si256((const __m256i*)(src+32));
    __m256i c = _mm256_loadu_si256((const __m256i*)(src+64)), e = _mm256_loadu_si256((const __m256i*)(src+96));
    _mm256_stream_si256((__m256i*)dst, a); _mm256_stream_si256((__m256i*)(dst+32), b);
    _mm256_stream_si256((__m256i*)(dst+64), c); _mm256_stream_si256((__m256i*)(dst+96), e);
    src += 128; dst += 128;
  }
  memcpy(dst, src, n % 128);
  _mm_sfence();
}
typedef void (*CopyFn)(void*, const void*, size_t);
static void plain_copy(void* d, const void* s, size_t n) { memcpy(d, s, n); }

// Copy `bytes` split over `threads` (fresh threads each time would cost; use persistent pool-ish: spawn per call is ok for 8MiB? no) -> spawn once
struct Pool {
  int n; std::vector<std::thread> th; std::atomic<int> gen{0}, done{0}; std::atomic<bool> stop{false};
  CopyFn fn; char* d; const char* s; size_t bytes;
  Pool(int n):n(n){ for(int i=1;i<n;i++) th.emplace_back([this,i]{ int g=0; while(true){ while(gen.load()==g) { if(stop) return; _mm_pause(); } g=gen.load(); if(stop) return; piece(i); done++; } }); }
  ~Pool(){ stop=true; gen++; for(auto&t:th) t.join(); }
  void piece(int i){ size_t per=(bytes/n+4095)&~size_t(4095); size_t b=i*per; if(b>=bytes) return; size_t e=std::min(bytes,b+per); fn(d+b,s+b,e-b); }
  void copy(CopyFn f, void* dd, const void* ss, size_t nb){ fn=f; d=(char*)dd; s=(const char*)ss; bytes=nb; done=0; gen++; piece(0); while(done.load()<n-1) _mm_pause(); }
};

static double median(std::vector<double> v){ std::sort(v.begin(),v.end()); return v[v.size()/2]; }

static void parallel_memset_zero(void* p, uint64_t bytes) {
  unsigned n = 8; std::vector<std::thread> threads; uint64_t piece = (bytes + n - 1) / n;
  for (unsigned t = 0; t < n; ++t) { uint64_t b = std::min(bytes, t * piece), e = std::min(bytes, b + piece);
    threads.emplace_back([=] { memset((char*)p + b, 0, e - b); }); }
  for (auto& t : threads) t.join();
}
static int poison_mode(); 
int main(int argc, char** argv) {
  if (argc > 1 && !strcmp(argv[1], "poison")) return poison_mode();
  printf("host cores %u, avx2 %d, avx512f %d\n", std::thread::hardware_concurrency(), __builtin_cpu_supports("avx2"), __builtin_cpu_supports("avx512f"));
  const size_t total = 256u << 20, chunk = 8u << 20;
  char* src = (char*)malloc(total); for (size_t i=0;i<total;i+=8) *(uint64_t*)(src+i)=i*0x9E3779B97F4A7C15ull;
  char* pin; CK(cudaMallocHost(&pin, 3*chunk)); memset(pin, 1, 3*chunk);
  // 1. host copy rate: 256 MiB source walked in 8 MiB chunks into 3 rotating pinned chunks
  struct V { const char* name; CopyFn f; } vs[] = {{"memcpy", plain_copy}, {"nt-sse2", nt_copy_sse}, {"nt-avx2", nt_copy_avx}};
  for (int threads : {4, 8, 12}) {
    Pool p(threads);
    for (auto& v : vs) {
      std::vector<double> t;
      for (int r = 0; r < 7; ++r) {
        auto t0 = clk::now();
        for (size_t off = 0, k = 0; off < total; off += chunk, ++k) p.copy(v.f, pin + (k%3)*chunk, src + off, chunk);
        t.push_back(std::chrono::duration<double>(clk::now()-t0).count());
      }
      printf("hostcopy threads %d %-8s %6.1f GB/s\n", threads, v.name, total / median(t) / 1e9);
    }
  }
  // 2. D2H 64 MiB pinned: destination cached-dirty (memset) vs flushed (NT memset) ; 1 vs 4 streams
  const size_t B = 64u << 20;
  char *hd, *hs; void* dd; void* ds;
  CK(cudaMallocHost(&hd, B)); CK(cudaMallocHost(&hs, B)); CK(cudaMalloc(&dd, B)); CK(cudaMalloc(&ds, B));
  memset(hs, 3, B); CK(cudaMemset(ds, 7, B));
  cudaStream_t st[8]; for (auto& s : st) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto poison_cached = [&]{ memset(hd, 0, B); };
  auto poison_nt = [&]{ static char zeros[64]={0}; (void)zeros; __m128i z=_mm_setzero_si128(); for (size_t i=0;i<B;i+=16) _mm_stream_si128((__m128i*)(hd+i), z); _mm_sfence(); };
  auto timeit = [&](std::function<void()> prep, std::function<void()> body){ std::vector<double> t; for(int r=0;r<12;r++){ prep(); CK(cudaDeviceSynchronize()); auto t0=clk::now(); body(); CK(cudaDeviceSynchronize()); t.push_back(std::chrono::duration<double>(clk::now()-t0).count()); } return median(t); };
  auto d2h_split = [&](int parts){ return [&,parts]{ size_t per=B/parts; for(int i=0;i<parts;i++) CK(cudaMemcpyAsync(hd+i*per,(char*)ds+i*per,per,cudaMemcpyDeviceToHost,st[i])); }; };
  auto h2d_split = [&](int parts, int s0){ return [&,parts,s0]{ size_t per=B/parts; for(int i=0;i<parts;i++) CK(cudaMemcpyAsync((char*)dd+i*per,hs+i*per,per,cudaMemcpyHostToDevice,st[s0+i])); }; };
  for (int parts : {1, 2, 4}) {
    printf("D2H 64MiB %d streams: dirty-cached dst %6.1f GB/s, NT-poisoned dst %6.1f GB/s\n", parts,
      B/timeit(poison_cached, d2h_split(parts))/1e9, B/timeit(poison_nt, d2h_split(parts))/1e9);
    printf("H2D 64MiB %d streams: %6.1f GB/s\n", parts, B/timeit([]{}, h2d_split(parts,0))/1e9);
  }
  for (int parts : {1, 2, 4}) {
    auto both = [&]{ h2d_split(parts,4)(); d2h_split(parts)(); };
    auto both_il = [&]{ size_t per=B/parts; for(int i=0;i<parts;i++){ CK(cudaMemcpyAsync((char*)dd+i*per,hs+i*per,per,cudaMemcpyHostToDevice,st[4+i])); CK(cudaMemcpyAsync(hd+i*per,(char*)ds+i*per,per,cudaMemcpyDeviceToHost,st[i])); } };
    printf("both 64MiB %d streams/dir: dirty %6.1f  nt %6.1f  interleaved-dirty %6.1f GB/s\n", parts,
      2*B/timeit(poison_cached, both)/1e9, 2*B/timeit(poison_nt, both)/1e9, 2*B/timeit(poison_cached, both_il)/1e9);
  }

  // 3. idle effect: D2H and both-ways 64 MiB after 20 ms CPU work / sleep
  std::vector<char> big(64u<<20, 1), big2(64u<<20, 1);
  auto cpu_work = [&]{ poison_cached(); volatile int x = memcmp(big.data(), big2.data(), big.size()); (void)x; };
  auto sleepy = [&]{ poison_cached(); std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  auto both1 = [&]{ h2d_split(1,4)(); d2h_split(1)(); };
  printf("D2H 64MiB after: back-to-back %6.1f, cpu-work %6.1f, sleep20ms %6.1f GB/s\n",
    B/timeit(poison_cached, d2h_split(1))/1e9, B/timeit(cpu_work, d2h_split(1))/1e9, B/timeit(sleepy, d2h_split(1))/1e9);
  printf("both 64MiB after: back-to-back %6.1f, cpu-work %6.1f, sleep20ms %6.1f GB/s\n",
    2*B/timeit(poison_cached, both1)/1e9, 2*B/timeit(cpu_work, both1)/1e9, 2*B/timeit(sleepy, both1)/1e9);
  // 4. staged pageable H2D pipeline emulation: N threads memcpy into 3 pinned 8 MiB slots, DMA each
  {
    const size_t TB = 1024u << 20; char* psrc = (char*)malloc(TB); for (size_t i=0;i<TB;i+=4096) psrc[i]=(char)i; memset(psrc, 5, TB);
    void* dbig; CK(cudaMalloc(&dbig, TB));
    for (size_t ch : {size_t(8)<<20, size_t(16)<<20, size_t(4)<<20}) {
      char* slots; CK(cudaMallocHost(&slots, 4*ch)); memset(slots, 0, 4*ch);
      cudaEvent_t ev[4]; for (auto& evt: ev) CK(cudaEventCreateWithFlags(&evt, cudaEventDisableTiming));
      for (int threads : {4, 6, 8, 10, 12}) {
        Pool p(threads);
        for (int nslots : {3, 4}) {
        for (size_t total : {size_t(64)<<20, TB}) {
          std::vector<double> t;
          for (int r = 0; r < 7; ++r) {
            CK(cudaDeviceSynchronize());
            auto t0 = clk::now();
            for (size_t off = 0, k = 0; off < total; off += ch, ++k) {
              int s = k % nslots; if (k >= (size_t)nslots) CK(cudaEventSynchronize(ev[s]));
              p.copy(plain_copy, slots + s*ch, psrc + off, ch);
              CK(cudaMemcpyAsync((char*)dbig + off, slots + s*ch, ch, cudaMemcpyHostToDevice, st[0]));
              CK(cudaEventRecord(ev[s], st[0]));
            }
            CK(cudaStreamSynchronize(st[0]));
            t.push_back(std::chrono::duration<double>(clk::now()-t0).count());
          }
          printf("staged H2D emu: chunk %2zu MiB x%d, threads %2d, %4zu MiB: %6.1f GB/s\n", ch>>20, nslots, threads, total>>20, total/median(t)/1e9);
        }}
      }
      CK(cudaFreeHost(slots));
    }
  }
  return 0;
}

static int poison_mode() {
  const size_t B = 64u << 20;
  char *hd, *hs; void* dd; void* ds;
  CK(cudaMallocHost(&hd, B)); CK(cudaMallocHost(&hs, B)); CK(cudaMalloc(&dd, B)); CK(cudaMalloc(&ds, B));
  memset(hs, 3, B); CK(cudaMemset(ds, 7, B));
  cudaStream_t up, down; CK(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking));
  std::vector<char> check(B, 7);
  auto run = [&](const char* name, std::function<void()> prep, bool both, bool verify) {
    std::vector<double> t;
    for (int r = 0; r < 22; ++r) {
      prep();
      auto t0 = clk::now();
      if (both) CK(cudaMemcpyAsync(dd, hs, B, cudaMemcpyHostToDevice, up));
      CK(cudaMemcpyAsync(hd, ds, B, cudaMemcpyDeviceToHost, down));
      if (both) CK(cudaStreamSynchronize(up));
      CK(cudaStreamSynchronize(down));
      double s = std::chrono::duration<double>(clk::now() - t0).count();
      if (verify && memcmp(hd, check.data(), B)) printf("MISMATCH\n");
      if (r >= 2) t.push_back(s);
    }
    printf("%-5s 64MiB poison %-22s verify %d: %6.1f GB/s\n", both ? "both" : "D2H", name, verify, (both ? 2 : 1) * B / median(t) / 1e9);
  };
  auto none = []{};
  auto single = [&]{ memset(hd, 0, B); };
  auto par = [&]{ parallel_memset_zero(hd, B); };
  auto par_dev = [&]{ CK(cudaMemsetAsync(dd, 0, B, up)); CK(cudaStreamSynchronize(up)); parallel_memset_zero(hd, B); };
  for (bool both : {false, true}) for (bool verify : {false, true}) {
    run("none", none, both, verify); run("memset 1 thread", single, both, verify);
    run("memset 8 threads", par, both, verify); run("dev memset + 8 threads", par_dev, both, verify);
  }
  return 0;
}
