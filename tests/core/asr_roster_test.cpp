// White-box test of the ASR search's Roster (asr/search.h): the batch a search keeps on CUDA
// so that its decode graph replays while windows end.
#include <gtest/gtest.h>

#include <map>

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

}  // namespace
}  // namespace gk::asr
