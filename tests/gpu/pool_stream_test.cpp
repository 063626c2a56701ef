// Cross-stream reuse in the memory pool on a real CUDA device: a block still being written
// by stream A is freed on A and allocated on stream B. The pool must make B wait for A's
// work before B's own (an event on A and cuStreamWaitEvent, docs/memory.md "Streams"):
// without that wait, A's late writes would land after B's and the data B reads back would
// not be its own. The driver calls the test makes itself (memsets, copies, a foreign stream)
// go through libcuda, opened at run time like the runtime does, so the suite builds without
// the CUDA toolkit.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "gpu_runtime.h"

namespace gk::test {
namespace {

using CUresult = int;
using CUcontext = void*;
using CUstream = void*;
using CUdeviceptr = unsigned long long;

// The few driver entry points the test calls, resolved from libcuda.so.1.
struct Driver {
  CUresult (*cuDeviceGet)(int*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, int);
  CUresult (*cuDevicePrimaryCtxRelease)(int);
  CUresult (*cuCtxPushCurrent)(CUcontext);
  CUresult (*cuCtxPopCurrent)(CUcontext*);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);

  // Empty when every entry point was found, else the first missing name.
  std::string open() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return "libcuda.so.1";
    std::pair<const char*, void**> names[] = {
        {"cuDeviceGet", reinterpret_cast<void**>(&cuDeviceGet)},
        {"cuDevicePrimaryCtxRetain", reinterpret_cast<void**>(&cuDevicePrimaryCtxRetain)},
        {"cuDevicePrimaryCtxRelease_v2", reinterpret_cast<void**>(&cuDevicePrimaryCtxRelease)},
        {"cuCtxPushCurrent_v2", reinterpret_cast<void**>(&cuCtxPushCurrent)},
        {"cuCtxPopCurrent_v2", reinterpret_cast<void**>(&cuCtxPopCurrent)},
        {"cuStreamCreate", reinterpret_cast<void**>(&cuStreamCreate)},
        {"cuStreamDestroy_v2", reinterpret_cast<void**>(&cuStreamDestroy)},
        {"cuStreamSynchronize", reinterpret_cast<void**>(&cuStreamSynchronize)},
        {"cuMemsetD32Async", reinterpret_cast<void**>(&cuMemsetD32Async)},
        {"cuMemcpyDtoHAsync_v2", reinterpret_cast<void**>(&cuMemcpyDtoHAsync)},
    };
    for (auto& [name, slot] : names) {
      *slot = dlsym(lib, name);
      if (!*slot) return name;
    }
    return "";
  }
};

#define CU_OK(call) ASSERT_EQ((call), 0) << #call

constexpr uint32_t kSlowPattern = 0xA5A5A5A5u;  // written by A, slowly
constexpr uint32_t kOwnPattern = 0x5A5A5A5Au;   // written by B after it got the block

uint64_t cross_stream_waits(gk_runtime* rt, int32_t device) {
  gk_memory_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_EQ(gk_memory_stats_get(rt, device, &s), GK_OK) << gk_last_error();
  return s.cross_stream_waits;
}

// Stream A writes kSlowPattern over a 64 MiB block 400 times (several ms of queued work),
// frees it on A, and B allocates the same size at once: the pool hands B the same block
// (there is no other free one of that size), ordered after A's work. B writes kOwnPattern
// over the first half and reads the whole block back on B. With the wait, the first half
// is B's and the second half A's; without it, A's queued memsets would overwrite B's half
// (and B's read could see the second half before A wrote it).
void slow_writer_then_reuse_on_another_stream(const Driver& cu, gk_runtime* rt, int32_t device,
                                              gk_stream* a, gk_stream* b) {
  constexpr uint64_t kBytes = uint64_t(64) << 20;
  constexpr size_t kWords = kBytes / 4;
  void* native_a = nullptr;
  void* native_b = nullptr;
  ASSERT_EQ(gk_stream_native(a, &native_a), GK_OK);
  ASSERT_EQ(gk_stream_native(b, &native_b), GK_OK);

  gk_alloc_args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.size = kBytes;
  args.stream = a;
  gk_buffer* first = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt, &args, &first), GK_OK) << gk_last_error();
  void* pa = nullptr;
  ASSERT_EQ(gk_buffer_map(first, &pa), GK_OK);
  ASSERT_EQ(gk_buffer_unmap(first), GK_OK);
  const auto da = reinterpret_cast<CUdeviceptr>(pa);
  for (int i = 0; i < 400; ++i) CU_OK(cu.cuMemsetD32Async(da, kSlowPattern, kWords, native_a));
  uint64_t waits_before = cross_stream_waits(rt, device);
  ASSERT_EQ(gk_buffer_free(first, a), GK_OK) << gk_last_error();

  args.stream = b;
  gk_buffer* second = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt, &args, &second), GK_OK) << gk_last_error();
  void* pb = nullptr;
  ASSERT_EQ(gk_buffer_map(second, &pb), GK_OK);
  ASSERT_EQ(pb, pa) << "the pool did not give stream B the block freed on A: the test proves "
                       "nothing (was a free block of that size left from an earlier test?)";
  EXPECT_EQ(cross_stream_waits(rt, device), waits_before + 1)
      << "A's memsets are still queued: B must have been made to wait";
  const auto db = reinterpret_cast<CUdeviceptr>(pb);
  CU_OK(cu.cuMemsetD32Async(db, kOwnPattern, kWords / 2, native_b));
  std::vector<uint32_t> back(kWords, 0);
  CU_OK(cu.cuMemcpyDtoHAsync(back.data(), db, kBytes, native_b));
  CU_OK(cu.cuStreamSynchronize(native_b));
  ASSERT_EQ(gk_buffer_unmap(second), GK_OK);

  size_t own_wrong = 0, slow_wrong = 0;
  for (size_t i = 0; i < kWords / 2; ++i) own_wrong += back[i] != kOwnPattern;
  for (size_t i = kWords / 2; i < kWords; ++i) slow_wrong += back[i] != kSlowPattern;
  EXPECT_EQ(own_wrong, 0u) << "words of B's half overwritten after B wrote them (A ran late)";
  EXPECT_EQ(slow_wrong, 0u) << "words of A's half not yet written when B read them";
  std::printf("cross-stream reuse: %zu of %zu words of B's half wrong, %zu of %zu of A's\n",
              own_wrong, kWords / 2, slow_wrong, kWords / 2);
  ASSERT_EQ(gk_buffer_free(second, b), GK_OK);
  CU_OK(cu.cuStreamSynchronize(native_a));
}

struct GpuPoolStreams : ::testing::Test {
  void SetUp() override {
    rt = make_gpu_runtime();
    device = first_cuda_device(rt.get());
    if (device < 0) GTEST_SKIP() << "no CUDA device: " << cuda_absent_reason(rt.get());
    std::string missing = cu.open();
    ASSERT_TRUE(missing.empty()) << "driver entry point not found: " << missing;
    gk_device_props p{};
    p.struct_size = sizeof(p);
    ASSERT_EQ(gk_device_get_props(rt.get(), device, &p), GK_OK);
    CU_OK(cu.cuDeviceGet(&ordinal, p.ordinal));
    CU_OK(cu.cuDevicePrimaryCtxRetain(&context, ordinal));
    CU_OK(cu.cuCtxPushCurrent(context));
    pushed = true;
  }
  void TearDown() override {
    if (pushed) {
      CUcontext popped = nullptr;
      cu.cuCtxPopCurrent(&popped);
      cu.cuDevicePrimaryCtxRelease(ordinal);
    }
  }
  Driver cu{};
  RuntimePtr rt;
  int32_t device = -1;
  int ordinal = 0;
  CUcontext context = nullptr;
  bool pushed = false;
};

// A stream made by gk_stream_create: free records nothing; the event on A is recorded when
// B asks for the block.
TEST_F(GpuPoolStreams, pool_orders_reuse_on_another_stream_after_a_created_streams_late_writes) {
  gk_stream *a = nullptr, *b = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), device, 0, &a), GK_OK) << gk_last_error();
  ASSERT_EQ(gk_stream_create(rt.get(), device, 0, &b), GK_OK) << gk_last_error();
  slow_writer_then_reuse_on_another_stream(cu, rt.get(), device, a, b);
  EXPECT_EQ(gk_stream_destroy(a), GK_OK);
  EXPECT_EQ(gk_stream_destroy(b), GK_OK);
}

// A wrapped foreign stream: the pool records the event at free, since the stream may be
// destroyed without telling it.
TEST_F(GpuPoolStreams, pool_orders_reuse_on_another_stream_after_a_wrapped_streams_late_writes) {
  CUstream foreign = nullptr;
  CU_OK(cu.cuStreamCreate(&foreign, 0x1 /* non-blocking */));
  gk_stream *a = nullptr, *b = nullptr;
  ASSERT_EQ(gk_stream_wrap(rt.get(), device, foreign, &a), GK_OK) << gk_last_error();
  ASSERT_EQ(gk_stream_create(rt.get(), device, 0, &b), GK_OK) << gk_last_error();
  slow_writer_then_reuse_on_another_stream(cu, rt.get(), device, a, b);
  EXPECT_EQ(gk_stream_destroy(a), GK_OK);
  EXPECT_EQ(gk_stream_destroy(b), GK_OK);
  CU_OK(cu.cuStreamDestroy(foreign));
}

// gk_stream_destroy settles the frees pending on the stream: the block is then reused on
// another stream with no wait, and its contents are A's final ones.
TEST_F(GpuPoolStreams, destroying_a_stream_settles_its_pending_frees) {
  gk_stream *a = nullptr, *b = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), device, 0, &a), GK_OK);
  ASSERT_EQ(gk_stream_create(rt.get(), device, 0, &b), GK_OK);
  void* native_a = nullptr;
  ASSERT_EQ(gk_stream_native(a, &native_a), GK_OK);
  constexpr uint64_t kBytes = uint64_t(32) << 20;
  gk_alloc_args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.size = kBytes;
  args.stream = a;
  gk_buffer* first = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt.get(), &args, &first), GK_OK);
  void* pa = nullptr;
  ASSERT_EQ(gk_buffer_map(first, &pa), GK_OK);
  ASSERT_EQ(gk_buffer_unmap(first), GK_OK);
  for (int i = 0; i < 100; ++i) {
    CU_OK(cu.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(pa), kSlowPattern, kBytes / 4,
                              native_a));
  }
  ASSERT_EQ(gk_buffer_free(first, a), GK_OK);
  EXPECT_EQ(gk_stream_destroy(a), GK_OK);  // waits for A, then the pool forgets it
  uint64_t waits_before = cross_stream_waits(rt.get(), device);
  args.stream = b;
  gk_buffer* second = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt.get(), &args, &second), GK_OK);
  void* pb = nullptr;
  ASSERT_EQ(gk_buffer_map(second, &pb), GK_OK);
  EXPECT_EQ(pb, pa);
  EXPECT_EQ(cross_stream_waits(rt.get(), device), waits_before) << "A's work was complete";
  void* native_b = nullptr;
  ASSERT_EQ(gk_stream_native(b, &native_b), GK_OK);
  std::vector<uint32_t> back(kBytes / 4, 0);
  CU_OK(cu.cuMemcpyDtoHAsync(back.data(), reinterpret_cast<CUdeviceptr>(pb), kBytes, native_b));
  CU_OK(cu.cuStreamSynchronize(native_b));
  size_t wrong = 0;
  for (uint32_t v : back) wrong += v != kSlowPattern;
  EXPECT_EQ(wrong, 0u);
  ASSERT_EQ(gk_buffer_unmap(second), GK_OK);
  ASSERT_EQ(gk_buffer_free(second, b), GK_OK);
  EXPECT_EQ(gk_stream_destroy(b), GK_OK);
}

// Buffers and tensors may outlive the stream they were allocated on (the runtime's handle
// too). Freeing them afterwards must not touch the destroyed stream's handle, even once the
// driver has handed it to a new stream; compute-sanitizer runs this suite as well.
TEST_F(GpuPoolStreams, memory_allocated_on_a_destroyed_stream_is_freed_safely_later) {
  constexpr int kRounds = 8;
  for (int round = 0; round < kRounds; ++round) {
    gk_stream* s = nullptr;
    ASSERT_EQ(gk_stream_create(rt.get(), device, 0, &s), GK_OK);
    gk_alloc_args args{};
    args.struct_size = sizeof(args);
    args.device = device;
    args.size = 4096 << round;  // small, then medium blocks
    args.stream = s;
    gk_buffer* buffer = nullptr;
    ASSERT_EQ(gk_buffer_alloc(rt.get(), &args, &buffer), GK_OK);
    args.flags = GK_BUFFER_EVICTABLE;
    gk_buffer* evictable = nullptr;
    ASSERT_EQ(gk_buffer_alloc(rt.get(), &args, &evictable), GK_OK);
    const gk_tensor_desc d = desc(GK_DTYPE_F32, {1024});
    gk_tensor* tensor = nullptr;
    ASSERT_EQ(gk_tensor_create(rt.get(), device, &d, s, &tensor), GK_OK);
    gk_tensor* view = nullptr;
    ASSERT_EQ(gk_tensor_from_buffer(buffer, 0, &d, &view), GK_OK);
    ASSERT_EQ(gk_stream_destroy(s), GK_OK);
    // New streams may now get the old handle.
    gk_stream* others[4] = {};
    for (auto& o : others) ASSERT_EQ(gk_stream_create(rt.get(), device, 0, &o), GK_OK);
    ASSERT_EQ(gk_buffer_free(buffer, nullptr), GK_OK) << gk_last_error();  // the view holds it
    void* p = nullptr;
    ASSERT_EQ(gk_buffer_map(evictable, &p), GK_OK) << gk_last_error();
    ASSERT_EQ(gk_buffer_unmap(evictable), GK_OK);
    ASSERT_EQ(gk_buffer_free(evictable, nullptr), GK_OK) << gk_last_error();
    gk_tensor_release(tensor);
    gk_tensor_release(view);
    // The memory is reusable on the new streams, and they still work.
    args.flags = 0;
    args.stream = others[0];
    gk_buffer* again = nullptr;
    ASSERT_EQ(gk_buffer_alloc(rt.get(), &args, &again), GK_OK);
    ASSERT_EQ(gk_buffer_free(again, others[1]), GK_OK);
    for (auto& o : others) {
      EXPECT_EQ(gk_stream_synchronize(o), GK_OK) << gk_last_error();
      EXPECT_EQ(gk_stream_destroy(o), GK_OK);
    }
  }
}

}  // namespace
}  // namespace gk::test
