// The transfer engine on a real CUDA device: bit-exact round trips of pageable and pinned host
// memory (odd sizes, unaligned host pointers), ordering with the caller's stream (work queued
// before a copy is visible to it, work queued after it sees its bytes), the pageable-source
// promise of gk_copy_from_host, and several threads copying at once.
//
// Run: build-gpu/bin/gpu_transfer_tests (skips, saying why, without a CUDA device).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gpu_runtime.h"
#include "transfer_kernels.h"

namespace gk::test {
namespace {

std::string last_error() {
  return gk_last_error();
}

constexpr uint64_t kOddSizes[] = {1, 4097, (uint64_t(37) << 20) + 3};

// Fresh random bytes, never zero (so a byte that was not written shows).
void fill_random(uint8_t* p, uint64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng() | 0x0101010101010101ull;
    std::memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] = uint8_t(rng() | 1);
}

// Host memory of one kind, `offset` bytes into its allocation (1: an unaligned pointer).
class HostBuffer {
 public:
  HostBuffer(gk_runtime* rt, bool pinned, uint64_t bytes, uint64_t offset)
      : rt_(rt), pinned_(pinned) {
    if (pinned) {
      EXPECT_EQ(gk_host_alloc(rt, bytes + offset, &base_), GK_OK) << last_error();
    } else {
      pageable_.resize(bytes + offset);
      base_ = pageable_.data();
    }
    data_ = static_cast<uint8_t*>(base_) + offset;
  }
  ~HostBuffer() {
    if (pinned_) gk_host_free(rt_, base_);
  }
  uint8_t* data() const { return data_; }

 private:
  gk_runtime* rt_;
  bool pinned_;
  std::vector<uint8_t> pageable_;
  void* base_ = nullptr;
  uint8_t* data_ = nullptr;
};

TensorPtr device_bytes(gk_runtime* rt, int32_t dev, uint64_t bytes, gk_stream* s = nullptr) {
  gk_tensor_desc d = desc(GK_DTYPE_U8, {int64_t(bytes)});
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_create(rt, dev, &d, s, &t), GK_OK) << last_error();
  return TensorPtr(t);
}

gk_transfer_stats stats(gk_runtime* rt, int32_t dev) {
  gk_transfer_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_EQ(gk_transfer_stats_get(rt, dev, &s), GK_OK) << last_error();
  return s;
}

void* native(gk_stream* s) {
  void* n = nullptr;
  EXPECT_EQ(gk_stream_native(s, &n), GK_OK);
  return n;
}

void use_cudart_on(gk_runtime* rt, int32_t dev) {
  gk_device_props p{};
  p.struct_size = sizeof(p);
  ASSERT_EQ(gk_device_get_props(rt, dev, &p), GK_OK);
  ASSERT_EQ(cudaSetDevice(p.ordinal), cudaSuccess);
}

TEST(GpuTransfer, round_trips_are_bit_exact_for_pageable_and_pinned_odd_sizes) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  gk_stream* s = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), dev, 0, &s), GK_OK) << last_error();
  for (bool pinned : {false, true}) {
    for (uint64_t bytes : kOddSizes) {
      for (uint64_t offset : {0, 1}) {
        for (gk_stream* stream : {s, static_cast<gk_stream*>(nullptr)}) {
          SCOPED_TRACE(std::string(pinned ? "pinned" : "pageable") + ", " + std::to_string(bytes) +
                       " bytes, host offset " + std::to_string(offset) +
                       (stream ? ", own stream" : ", default stream"));
          HostBuffer in(rt.get(), pinned, bytes, offset), out(rt.get(), pinned, bytes, offset);
          fill_random(in.data(), bytes, uint32_t(bytes + offset));
          std::memset(out.data(), 0, bytes);
          TensorPtr a = device_bytes(rt.get(), dev, bytes, stream);
          TensorPtr b = device_bytes(rt.get(), dev, bytes, stream);
          gk_transfer_stats before = stats(rt.get(), dev);
          ASSERT_EQ(gk_copy_from_host(a.get(), in.data(), bytes, stream), GK_OK) << last_error();
          ASSERT_EQ(gk_copy(b.get(), a.get(), stream), GK_OK) << last_error();
          ASSERT_EQ(gk_copy_to_host(b.get(), out.data(), bytes, stream), GK_OK) << last_error();
          if (stream) ASSERT_EQ(gk_stream_synchronize(stream), GK_OK);
          ASSERT_EQ(std::memcmp(in.data(), out.data(), bytes), 0);
          gk_transfer_stats after = stats(rt.get(), dev);
          EXPECT_EQ(after.to_device_bytes - before.to_device_bytes, bytes);
          EXPECT_EQ(after.to_host_bytes - before.to_host_bytes, bytes);
          EXPECT_EQ(after.device_bytes - before.device_bytes, bytes);
          EXPECT_EQ(after.staged_copies - before.staged_copies, pinned ? 0u : 2u)
              << "pageable memory is staged both ways, pinned memory never";
        }
      }
    }
  }
  gk_transfer_stats s_end = stats(rt.get(), dev);
  std::printf("transfer stats: %llu staged copies, %llu chunks of %llu KiB, %llu MiB staging\n",
              (unsigned long long)s_end.staged_copies, (unsigned long long)s_end.staged_chunks,
              (unsigned long long)(s_end.staging_chunk_bytes >> 10),
              (unsigned long long)(s_end.staging_bytes >> 20));
  EXPECT_EQ(gk_stream_destroy(s), GK_OK);
}

TEST(GpuTransfer, copy_to_host_sees_work_queued_before_it_on_the_callers_stream) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  use_cudart_on(rt.get(), dev);
  gk_stream* s = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), dev, 0, &s), GK_OK);
  const uint64_t bytes = (uint64_t(37) << 20) + 3;
  for (bool pinned : {false, true}) {
    SCOPED_TRACE(pinned ? "pinned" : "pageable");
    TensorPtr t = device_bytes(rt.get(), dev, bytes, s);
    HostBuffer out(rt.get(), pinned, bytes, 1);
    std::memset(out.data(), 0, bytes);
    // Busy the stream for 50 ms, then a memset: a copy not ordered after both reads zeros or
    // garbage instead of 0xab.
    ASSERT_EQ(launch_spin_then_copy(nullptr, nullptr, 0, 50, native(s)), 0);
    ASSERT_EQ(
        cudaMemsetAsync(gk_tensor_data(t.get()), 0xab, bytes, static_cast<cudaStream_t>(native(s))),
        cudaSuccess);
    ASSERT_EQ(gk_copy_to_host(t.get(), out.data(), bytes, s), GK_OK) << last_error();
    ASSERT_EQ(gk_stream_synchronize(s), GK_OK);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < bytes; ++i) wrong += out.data()[i] != 0xab;
    EXPECT_EQ(wrong, 0u) << "bytes the copy read before the caller's memset";
  }
  gk_stream_destroy(s);
}

TEST(GpuTransfer, copy_from_host_waits_for_readers_before_it_and_later_work_sees_it) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  use_cudart_on(rt.get(), dev);
  gk_stream* s = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), dev, 0, &s), GK_OK);
  const uint64_t bytes = (uint64_t(37) << 20) + 3;
  for (bool pinned : {false, true}) {
    SCOPED_TRACE(pinned ? "pinned" : "pageable");
    HostBuffer old_bytes(rt.get(), pinned, bytes, 0), new_bytes(rt.get(), pinned, bytes, 1);
    HostBuffer snapshot_out(rt.get(), true, bytes, 0), after_out(rt.get(), true, bytes, 0);
    fill_random(old_bytes.data(), bytes, 1);
    fill_random(new_bytes.data(), bytes, 2);
    TensorPtr dst = device_bytes(rt.get(), dev, bytes, s);
    TensorPtr snapshot = device_bytes(rt.get(), dev, bytes, s);
    TensorPtr after = device_bytes(rt.get(), dev, bytes, s);
    ASSERT_EQ(gk_copy_from_host(dst.get(), old_bytes.data(), bytes, s), GK_OK);
    // A slow reader of dst queued before the copy must still read the old bytes…
    ASSERT_EQ(launch_spin_then_copy(gk_tensor_data(dst.get()), gk_tensor_data(snapshot.get()),
                                    bytes, 50, native(s)),
              0);
    ASSERT_EQ(gk_copy_from_host(dst.get(), new_bytes.data(), bytes, s), GK_OK) << last_error();
    // …and work queued after the copy on the same stream must read the new ones.
    ASSERT_EQ(gk_copy(after.get(), dst.get(), s), GK_OK);
    ASSERT_EQ(gk_copy_to_host(snapshot.get(), snapshot_out.data(), bytes, s), GK_OK);
    ASSERT_EQ(gk_copy_to_host(after.get(), after_out.data(), bytes, s), GK_OK);
    ASSERT_EQ(gk_stream_synchronize(s), GK_OK);
    EXPECT_EQ(std::memcmp(snapshot_out.data(), old_bytes.data(), bytes), 0)
        << "the copy overwrote dst before the reader queued ahead of it";
    EXPECT_EQ(std::memcmp(after_out.data(), new_bytes.data(), bytes), 0)
        << "work queued after the copy did not see its bytes";
  }
  gk_stream_destroy(s);
}

TEST(GpuTransfer, a_pageable_source_may_be_reused_when_copy_from_host_returns) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  gk_stream* s = nullptr;
  ASSERT_EQ(gk_stream_create(rt.get(), dev, 0, &s), GK_OK);
  const uint64_t bytes = (uint64_t(37) << 20) + 3;
  std::vector<uint8_t> src(bytes), expected(bytes), out(bytes, 0);
  fill_random(src.data(), bytes, 3);
  expected = src;
  TensorPtr t = device_bytes(rt.get(), dev, bytes, s);
  // The stream is busy, so the DMAs of the copy are still queued when the call returns.
  ASSERT_EQ(launch_spin_then_copy(nullptr, nullptr, 0, 30, native(s)), 0);
  ASSERT_EQ(gk_copy_from_host(t.get(), src.data(), bytes, s), GK_OK) << last_error();
  std::fill(src.begin(), src.end(), uint8_t(0));
  ASSERT_EQ(gk_copy_to_host(t.get(), out.data(), bytes, s), GK_OK);
  EXPECT_EQ(out, expected) << "the device received bytes written after the call returned";
  t.reset();  // freed in s's order: before s is destroyed, never on a dead stream handle
  gk_stream_destroy(s);
}

TEST(GpuTransfer, threads_copying_at_once_each_get_their_bytes) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      gk_stream* s = nullptr;
      if (gk_stream_create(rt.get(), dev, 0, &s) != GK_OK) {
        failures[i] = last_error();
        return;
      }
      std::mt19937 rng(i);
      for (int round = 0; round < 8; ++round) {
        bool pinned = (i + round) % 3 == 0;
        uint64_t bytes = 1 + rng() % (uint64_t(24) << 20);
        HostBuffer in(rt.get(), pinned, bytes, round % 2), out(rt.get(), pinned, bytes, 0);
        fill_random(in.data(), bytes, rng());
        TensorPtr t = device_bytes(rt.get(), dev, bytes, s);
        if (gk_copy_from_host(t.get(), in.data(), bytes, s) != GK_OK ||
            gk_copy_to_host(t.get(), out.data(), bytes, s) != GK_OK ||
            gk_stream_synchronize(s) != GK_OK) {
          failures[i] = last_error();
          break;
        }
        if (std::memcmp(in.data(), out.data(), bytes) != 0) {
          failures[i] = "round " + std::to_string(round) + ": " + std::to_string(bytes) +
                        (pinned ? " pinned" : " pageable") + " bytes differ";
          break;
        }
      }
      gk_stream_destroy(s);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(failures[i], "") << "thread " << i;
}

TEST(GpuTransfer, host_alloc_memory_is_pinned_and_reused) {
  RuntimePtr rt = make_gpu_runtime();
  GK_REQUIRE_CUDA_DEVICE(rt.get(), dev);
  void* p = nullptr;
  ASSERT_EQ(gk_host_alloc(rt.get(), 64 << 20, &p), GK_OK) << last_error();
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "gk_host_alloc memory is not pinned";
  ASSERT_EQ(gk_host_free(rt.get(), p), GK_OK);
  void* again = nullptr;
  ASSERT_EQ(gk_host_alloc(rt.get(), 64 << 20, &again), GK_OK);
  EXPECT_EQ(again, p) << "the freed pinned block was not reused";
  ASSERT_EQ(gk_host_free(rt.get(), again), GK_OK);
  uint64_t released = 0;
  ASSERT_EQ(gk_host_trim(rt.get(), &released), GK_OK);
  EXPECT_EQ(released, uint64_t(64) << 20);
}

}  // namespace
}  // namespace gk::test
