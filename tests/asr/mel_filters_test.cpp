// The Slaney mel filterbank that log_mel_spectrogram computes (kernels/asr/mel_params.h)
// against the one openai-whisper ships, fixtures/mel_filters.npz (librosa's, float32): every
// weight within float32 rounding. The npz is a zip of deflated .npy files, read here with
// zlib.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "asr/mel_params.h"

namespace {

uint32_t le32(const unsigned char* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t le16(const unsigned char* p) { return uint16_t(p[0] | p[1] << 8); }

// The members of a zip archive (local headers walked in order; stored or deflated).
std::map<std::string, std::vector<unsigned char>> read_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> zip((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
  std::map<std::string, std::vector<unsigned char>> members;
  size_t at = 0;
  while (at + 30 <= zip.size() && le32(&zip[at]) == 0x04034b50) {
    const uint16_t method = le16(&zip[at + 8]);
    const uint32_t packed = le32(&zip[at + 18]), size = le32(&zip[at + 22]);
    const uint16_t name_len = le16(&zip[at + 26]), extra_len = le16(&zip[at + 28]);
    std::string name(reinterpret_cast<const char*>(&zip[at + 30]), name_len);
    const size_t data = at + 30 + name_len + extra_len;
    EXPECT_LE(data + packed, zip.size()) << name;
    std::vector<unsigned char> out(size);
    if (method == 0) {
      std::memcpy(out.data(), &zip[data], size);
    } else {
      EXPECT_EQ(method, 8) << name;
      z_stream z{};
      EXPECT_EQ(inflateInit2(&z, -MAX_WBITS), Z_OK);
      z.next_in = &zip[data];
      z.avail_in = packed;
      z.next_out = out.data();
      z.avail_out = size;
      EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END) << name;
      inflateEnd(&z);
    }
    members[name] = std::move(out);
    at = data + packed;
  }
  return members;
}

// A little-endian float32 .npy (version 1): its shape and values.
std::vector<float> read_npy_f32(const std::vector<unsigned char>& npy, std::string* header) {
  EXPECT_GE(npy.size(), 10u);
  EXPECT_EQ(std::memcmp(npy.data(), "\x93NUMPY", 6), 0);
  const size_t header_len = le16(&npy[8]);
  *header = std::string(reinterpret_cast<const char*>(&npy[10]), header_len);
  EXPECT_NE(header->find("'<f4'"), std::string::npos) << *header;
  const size_t start = 10 + header_len;
  std::vector<float> values((npy.size() - start) / 4);
  std::memcpy(values.data(), &npy[start], values.size() * 4);
  return values;
}

class MelFilters : public ::testing::TestWithParam<int> {};

TEST_P(MelFilters, slaney_filterbank_matches_whisper_npz) {
  const int n_mels = GetParam();
  auto members = read_zip(GPUKIT_ASR_FIXTURES "/mel_filters.npz");
  const std::string member = "mel_" + std::to_string(n_mels) + ".npy";
  ASSERT_TRUE(members.count(member)) << member;
  std::string header;
  const std::vector<float> want = read_npy_f32(members[member], &header);
  EXPECT_NE(header.find("(" + std::to_string(n_mels) + ", 201)"), std::string::npos) << header;
  gk::asr::MelParams p;
  p.n_mels = n_mels;
  const std::vector<double> got = gk::asr::slaney_mel_filters(p);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0.0;
  int nonzero = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // librosa computes in float64 and rounds to float32: our float64 value rounds the same,
    // give or take one float32 ulp where the float64 paths differ in the last bits.
    const double ulp = std::fabs(double(want[i])) * 1.2e-7 + 1e-12;
    worst = std::max(worst, std::fabs(got[i] - double(want[i])) / ulp);
    nonzero += want[i] != 0.0f;
    EXPECT_EQ(want[i] == 0.0f, float(got[i]) == 0.0f) << "weight " << i;
  }
  EXPECT_LE(worst, 2.0) << "worst difference, in float32 ulps of the weight";
  EXPECT_GT(nonzero, n_mels);  // every filter has weights
}

INSTANTIATE_TEST_SUITE_P(Whisper, MelFilters, ::testing::Values(80, 128));

TEST(MelParams, rules_refuse_out_of_range_attributes) {
  gk::asr::MelParams p;
  EXPECT_TRUE(gk::asr::check_mel(p).attr.empty());
  EXPECT_EQ(p.frames(480000), 3000);
  p.n_fft = 401;
  EXPECT_EQ(gk::asr::check_mel(p).attr, "n_fft");
  p = {};
  p.n_mels = 0;
  EXPECT_EQ(gk::asr::check_mel(p).attr, "n_mels");
  p = {};
  p.hop_length = 0;
  EXPECT_EQ(gk::asr::check_mel(p).attr, "hop_length");
  p = {};
  p.sample_rate = 0;
  EXPECT_EQ(gk::asr::check_mel(p).attr, "sample_rate");
}

TEST(MelParams, hann_window_is_periodic) {
  const std::vector<double> w = gk::asr::hann_window(400);
  EXPECT_DOUBLE_EQ(w[0], 0.0);
  EXPECT_NEAR(w[200], 1.0, 1e-15);
  EXPECT_NEAR(w[100], 0.5, 1e-15);
  EXPECT_NEAR(w[399], w[1], 1e-15);
}

}  // namespace
