// log_mel_spectrogram on a CUDA device (asr_cuda, cuFFT in f32) against the cpu reference
// (FFTW in f64) on the same audio: speech-like noise bursts with silence between them (the
// floor at 8 below the maximum is reached), 1-D and batched, n_mels 80 and 128, one 30 s
// window. GPU outputs are poisoned (NaN) first. Skips, saying why, without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gpu_runtime.h"

namespace gk::test {
namespace {

// Whisper's features in f32 against f64: the spectra's rounding moves log10 by at most
// ~1e-5 where a mel band holds energy; bands near the floor move more in log10 but the floor
// at max - 8 caps them. docs/asr.md, "Features".
constexpr double kTolerance = 1e-4;

class AsrGpu : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    rt_ = make_gpu_runtime();
    dev_ = first_cuda_device(rt_.get());
    if (dev_ < 0) GTEST_SKIP() << "no CUDA device: " << cuda_absent_reason(rt_.get());
  }

  // Noise bursts of random loudness with 0.2 s of silence between them.
  std::vector<float> audio(int64_t samples, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    std::uniform_real_distribution<float> loudness(0.001f, 0.5f);
    std::vector<float> x(static_cast<size_t>(samples), 0.0f);
    float level = loudness(rng);
    for (int64_t i = 0; i < samples; ++i) {
      if (i % 8000 == 0) level = loudness(rng);
      if (i % 8000 < 4800) x[size_t(i)] = level * noise(rng);
    }
    return x;
  }

  // Runs the op on `device` over `x` ([batch, samples] or [samples]) and returns the output.
  std::vector<float> run(int32_t device, const std::vector<float>& x,
                         const std::vector<int64_t>& shape, int64_t n_mels, bool poison) {
    TensorPtr in = make_tensor(rt_.get(), GK_DTYPE_F32, shape, device);
    EXPECT_EQ(gk_copy_from_host(in.get(), x.data(), x.size() * 4, nullptr), GK_OK)
        << gk_last_error();
    std::vector<int64_t> out_shape;
    if (shape.size() == 2) out_shape.push_back(shape[0]);
    out_shape.push_back(n_mels);
    out_shape.push_back(shape.back() / 160);
    TensorPtr out = make_tensor(rt_.get(), GK_DTYPE_F32, out_shape, device);
    size_t n = 1;
    for (int64_t d : out_shape) n *= size_t(d);
    std::vector<float> result(n, NAN);
    if (poison) {
      EXPECT_EQ(gk_copy_from_host(out.get(), result.data(), n * 4, nullptr), GK_OK);
    }
    gk_attr attr{};
    attr.name = "n_mels";
    attr.type = GK_ATTR_INT;
    attr.value.i = n_mels;
    gk_tensor* ins[] = {in.get()};
    gk_tensor* outs[] = {out.get()};
    gk_op_args args{};
    args.struct_size = sizeof(args);
    args.inputs = ins;
    args.num_inputs = 1;
    args.outputs = outs;
    args.num_outputs = 1;
    args.attrs = &attr;
    args.num_attrs = 1;
    EXPECT_EQ(gk_op_call(rt_.get(), "log_mel_spectrogram", &args), GK_OK) << gk_last_error();
    EXPECT_EQ(gk_copy_to_host(out.get(), result.data(), n * 4, nullptr), GK_OK)
        << gk_last_error();
    return result;
  }

  void compare(const std::vector<int64_t>& shape, int64_t n_mels, unsigned seed) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const std::vector<float> x = audio(count, seed);
    const std::vector<float> want = run(0, x, shape, n_mels, false);
    const std::vector<float> got = run(dev_, x, shape, n_mels, true);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "element " << i << " not written";
      worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
    }
    std::printf("[ asr_cuda ] n_mels %lld, %zu values: max |cuda - cpu| = %.3g\n",
                static_cast<long long>(n_mels), got.size(), worst);
    EXPECT_LE(worst, kTolerance);
  }

  RuntimePtr rt_;
  int32_t dev_ = -1;
};

TEST_P(AsrGpu, log_mel_one_row_matches_cpu) { compare({16000 * 7 + 123}, GetParam(), 1); }

TEST_P(AsrGpu, log_mel_batched_rows_match_cpu) { compare({3, 16000 * 2}, GetParam(), 2); }

TEST_P(AsrGpu, log_mel_thirty_second_window_matches_cpu) {
  compare({480000}, GetParam(), 3);
}

INSTANTIATE_TEST_SUITE_P(Whisper, AsrGpu, ::testing::Values(80, 128));

}  // namespace
}  // namespace gk::test
