// White-box tests of the ASR search (asr/search.h): the Roster, the batch a search keeps on
// CUDA so that its decode graph replays while windows end; and log_sum, the log-sum-exp and
// argmax of a logits row.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "asr/search.h"

namespace gk::asr {
namespace {

gk_session* session(uintptr_t id) {
  return reinterpret_cast<gk_session*>(id);
}

TEST(AsrRoster, ended_sessions_keep_their_rows_on_the_filler_until_they_have_no_room) {
  gk_session *a = session(0x10), *b = session(0x20), *c = session(0x30), *d = session(0x40);
  std::map<gk_session*, bool> room = {{a, true}, {b, true}, {c, true}, {d, true}};
  auto has_room = [&](gk_session* s) { return room[s]; };
  const int32_t eot = 99;
  Roster r;
  r.step({a, b, c}, {1, 2, 3}, eot, has_room);
  EXPECT_EQ(r.sessions, (std::vector<gk_session*>{a, b, c}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.row_of, (std::vector<size_t>{0, 1, 2}));
  // b ended: it keeps row 1 on the filler; the live rows keep theirs.
  r.step({a, c}, {4, 5}, eot, has_room);
  EXPECT_EQ(r.sessions, (std::vector<gk_session*>{a, b, c}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, eot, 5}));
  EXPECT_EQ(r.row_of, (std::vector<size_t>{0, 2}));
  // A new live session (a beam forked into d), listed first, joins at the end.
  r.step({d, c}, {6, 7}, eot, has_room);
  EXPECT_EQ(r.sessions, (std::vector<gk_session*>{a, b, c, d}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{eot, eot, 7, 6}));
  EXPECT_EQ(r.row_of, (std::vector<size_t>{3, 2}));
  // An ended session without room leaves; a live one stays whatever has_room says.
  room[b] = false;
  room[c] = false;
  r.step({c}, {8}, eot, has_room);
  EXPECT_EQ(r.sessions, (std::vector<gk_session*>{a, c, d}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{eot, 8, eot}));
  EXPECT_EQ(r.row_of, (std::vector<size_t>{1}));
}

// log_sum against a double-precision reference: rows of every length mod the vector width,
// masked (-inf) entries, a maximum that repeats (the first one is the argmax), logits far
// apart (terms below float's range), a range inside a row, and rows with nothing to sum.
TEST(AsrLogSum, matches_a_double_reference_and_finds_the_first_maximum) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  std::mt19937 gen(29);
  std::normal_distribution<float> logit(0.0f, 6.0f);
  auto reference = [](const std::vector<float>& x, int64_t from, int64_t to) {
    LogSum r;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = from; i < to; ++i) {
      if (x[size_t(i)] > m) {
        m = x[size_t(i)];
        r.argmax = i;
      }
    }
    if (r.argmax < 0) return r;
    double s = 0;
    for (int64_t i = from; i < to; ++i) s += std::exp(double(x[size_t(i)]) - m);
    r.value = m + std::log(s);
    return r;
  };
  auto near = [](double got, double want) {
    return std::fabs(got - want) <= 2e-6 * std::fabs(want) + 1e-6;
  };
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 1023, 1024, 1025, 4099, 51864}) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = logit(gen);
      if (variant == 1) {
        for (size_t i = 0; i < x.size(); i += 3) x[i] = kMasked;
      } else if (variant == 2 && n > 2) {
        x[size_t(n / 3)] = x[size_t(n - 1)] = 40.0f;  // the maximum twice
      } else if (variant == 3) {
        x[0] = 200.0f;  // every other term below e^-87
      }
      SCOPED_TRACE("n " + std::to_string(n) + ", variant " + std::to_string(variant));
      const LogSum got = log_sum(x.data(), 0, n), want = reference(x, 0, n);
      EXPECT_EQ(got.argmax, want.argmax);
      if (want.argmax >= 0) EXPECT_PRED2(near, got.value, want.value);
      if (n > 10) {
        const LogSum part = log_sum(x.data(), 3, n - 2), part_want = reference(x, 3, n - 2);
        EXPECT_EQ(part.argmax, part_want.argmax);
        EXPECT_PRED2(near, part.value, part_want.value);
      }
    }
  }
  const std::vector<float> masked(13, kMasked);
  EXPECT_EQ(log_sum(masked.data(), 0, 13).argmax, -1);
  EXPECT_EQ(log_sum(masked.data(), 0, 13).value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(log_sum(masked.data(), 5, 5).argmax, -1);  // an empty range
}

}  // namespace
}  // namespace gk::asr
