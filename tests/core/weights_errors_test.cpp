// Malformed weight files: each refused at open with INVALID_ARGUMENT naming the file, the
// tensor and the offending bytes, nothing left open; and a bounded mutation fuzz of valid
// SafeTensors and GGUF files that must never crash (it runs under ASan and UBSan in CI).
#include <gtest/gtest.h>

#include <random>

#include "test_runtime.h"
#include "weights_writer.h"

namespace gk::test {
namespace {

struct Bad {
  const char* what;
  Bytes file;
  std::vector<std::string> expected;  // substrings of the message
  gk_status status = GK_INVALID_ARGUMENT;
};

std::string le64(uint64_t v) {
  Bytes b;
  put<uint64_t>(b, v);
  return std::string(b.begin(), b.end());
}

Bytes text(const std::string& s) {
  return Bytes(s.begin(), s.end());
}

// A header of one tensor "t" with this dtype, shape and offsets over `data` bytes.
Bytes st(const std::string& dtype, const std::string& shape, const std::string& offsets,
         size_t data) {
  return safetensors_raw("{\"t\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
                             ",\"data_offsets\":" + offsets + "}}",
                         Bytes(data, 0));
}

std::vector<Bad> bad_safetensors() {
  std::vector<Bad> out;
  out.push_back({"truncated length", Bytes{1, 2, 3}, {"3 bytes", "8-byte header length"}});
  out.push_back({"header past EOF", text(le64(64) + "{}"), {"header length 64", "past the end"}});
  out.push_back(
      {"huge header", text(le64(200'000'000) + "{}"), {"header length 200000000", "limit"}});
  out.push_back(
      {"begin > end", st("F32", "[1]", "[4,0]", 4), {"tensor 't'", "[4, 0]", "begin after"}});
  out.push_back({"offsets out of range",
                 st("F32", "[2]", "[0,8]", 4),
                 {"tensor 't'", "8 bytes at file offset", "outside the data section"}});
  out.push_back(
      {"span != size", st("F32", "[2]", "[0,4]", 8), {"tensor 't'", "span 4 bytes", "need 8"}});
  out.push_back(
      {"unknown dtype", st("F17", "[1]", "[0,4]", 4), {"tensor 't'", "unknown dtype \"F17\""}});
  out.push_back(
      {"ndim 9", st("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]", 4), {"tensor 't'", "9 dimensions"}});
  out.push_back({"negative dim", st("F32", "[-1]", "[0,4]", 4), {"tensor 't'", "dimension 0"}});
  out.push_back({"element overflow",
                 st("U8", "[4294967296,4294967296]", "[0,0]", 0),
                 {"tensor 't'", "2^62"}});
  out.push_back({"empty with overflowing dims",
                 st("U8", "[4294967296,0,4294967296]", "[0,0]", 0),
                 {"tensor 't'", "2^62"}});
  out.push_back(
      {"offset not integer", st("F32", "[1]", "[0,4.5]", 4), {"tensor 't'", "data_offsets"}});
  out.push_back({"overlap",
                 safetensors_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                                 Bytes(12, 0)),
                 {"tensor 'b'", "overlap tensor 'a'"}});
  out.push_back({"duplicate names",
                 safetensors_raw("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                                 "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                                 Bytes(2, 0)),
                 {"tensor 'a'", "twice"}});
  out.push_back(
      {"invalid UTF-8",
       safetensors_raw("{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                       Bytes(1, 0)),
       {"malformed", "UTF-8"}});
  out.push_back({"invalid JSON", safetensors_raw("{\"a\":", Bytes()), {"malformed"}});
  out.push_back({"not an object", safetensors_raw("[1,2]", Bytes()), {"not an object"}});
  out.push_back({"deep nesting",
                 safetensors_raw("{\"__metadata__\":{\"k\":[[[[[[[[1]]]]]]]]}}", Bytes()),
                 {"nests 10 levels"}});
  out.push_back({"metadata not strings",
                 safetensors_raw("{\"__metadata__\":{\"k\":1}}", Bytes()),
                 {"\"__metadata__\" value 'k'"}});
  out.push_back({"NUL in name",
                 safetensors_raw(std::string("{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],") +
                                     "\"data_offsets\":[0,1]}}",
                                 Bytes(1, 0)),
                 {"tensor 'a'", "NUL"}});
  return out;
}

Bytes gguf_header(uint32_t version, uint64_t tensors, uint64_t kvs) {
  Bytes out = {'G', 'G', 'U', 'F'};
  put<uint32_t>(out, version);
  put<uint64_t>(out, tensors);
  put<uint64_t>(out, kvs);
  return out;
}

std::vector<Bad> bad_gguf() {
  std::vector<Bad> out;
  GgufWriter valid;
  valid.kv_string("general.name", "x");
  valid.tensor("w", {2, 32}, kGgmlQ8_0, Bytes(68, 1));
  const Bytes good = valid.bytes();
  out.push_back({"wrong magic",
                 Bytes{'G', 'G', 'M', 'L', 3, 0, 0, 0},
                 {"not the GGUF magic", "47 47 4d 4c"}});
  out.push_back({"version 1", gguf_header(1, 0, 0), {"GGUF version 1"}});
  out.push_back({"version 4", gguf_header(4, 0, 0), {"GGUF version 4"}});
  out.push_back({"big-endian", gguf_header(0x03000000, 0, 0), {"big-endian"}});
  out.push_back({"truncated", Bytes(good.begin(), good.begin() + 40), {"truncated"}});
  out.push_back({"tensor data cut",
                 Bytes(good.begin(), good.end() - 10),
                 {"tensor 'w'", "outside the data section"}});
  {
    Bytes b = gguf_header(3, 0, 1);
    GgufWriter::string(b, "k");
    put<uint32_t>(b, kGgufString);
    put<uint64_t>(b, uint64_t(1) << 60);
    out.push_back({"huge string", b, {"'k'", "1152921504606846976 bytes", "truncated"}});
  }
  {
    Bytes b = gguf_header(3, 0, 1);
    GgufWriter::string(b, "tokens");
    put<uint32_t>(b, kGgufArray);
    put<uint32_t>(b, kGgufString);
    put<uint64_t>(b, uint64_t(1) << 60);
    out.push_back({"2^60 strings", b, {"'tokens'", "array of 1152921504606846976 elements"}});
  }
  {
    Bytes b = gguf_header(3, 0, 1);
    GgufWriter::string(b, "k");
    put<uint32_t>(b, 77);
    put<uint32_t>(b, 0);
    out.push_back({"unknown value type", b, {"'k'", "value type 77"}});
  }
  out.push_back(
      {"huge counts", gguf_header(3, uint64_t(1) << 62, 5), {"4611686018427387904 tensors"}});
  {
    GgufWriter g;
    g.tensor("w", {4}, kGgmlF32, Bytes(16, 0));
    g.set_offset(0, 4);
    out.push_back({"unaligned offset", g.bytes(), {"tensor 'w'", "offset 4", "alignment 32"}});
  }
  {
    GgufWriter g;
    g.tensor("q", {2, 33}, kGgmlQ8_0, Bytes(68, 0));
    out.push_back({"innermost not a block multiple", g.bytes(), {"tensor 'q'", "Q8_0", "33"}});
  }
  {
    GgufWriter g;
    g.tensor("w", {4}, kGgmlF32, Bytes(16, 0));
    g.tensor("w", {4}, kGgmlF32, Bytes(16, 0));
    out.push_back({"duplicate tensor", g.bytes(), {"tensor 'w'", "twice"}});
  }
  {
    GgufWriter g;
    g.tensor("w", {4}, 200, Bytes(16, 0));
    out.push_back({"unknown type", g.bytes(), {"tensor 'w'", "type 200"}});
  }
  {
    GgufWriter g;
    g.tensor("w", {1, 1, 1, 1, 1, 1, 1, 1, 1}, kGgmlF32, Bytes(4, 0));
    out.push_back({"ndim 9", g.bytes(), {"tensor 'w'", "9 dimensions"}});
  }
  {
    GgufWriter g;
    g.tensor("a", {16}, kGgmlF32, Bytes(64, 0));
    g.tensor("b", {16}, kGgmlF32, Bytes(64, 0));
    g.set_offset(1, 32);
    out.push_back({"overlap", g.bytes(), {"tensor 'b'", "overlap tensor 'a'"}});
  }
  {
    GgufWriter g;
    g.tensor("w", {int64_t(1) << 40, int64_t(1) << 40}, kGgmlF32, Bytes());
    out.push_back({"element overflow", g.bytes(), {"tensor 'w'", "2^62"}});
  }
  {
    // Empty, but its other dimensions overflow: it would set strides past 2^63.
    GgufWriter g;
    g.tensor("w", {int64_t(1) << 40, 0, int64_t(1) << 40}, kGgmlF32, Bytes());
    out.push_back({"empty with overflowing dims", g.bytes(), {"tensor 'w'", "2^62"}});
  }
  {
    GgufWriter g;
    g.kv<uint32_t>("general.alignment", kGgufU32, 48);
    out.push_back({"alignment 48", g.bytes(), {"general.alignment", "48"}});
  }
  {
    GgufWriter g;
    g.kv_string("k", "a");
    g.kv_string("k", "b");
    out.push_back({"duplicate key", g.bytes(), {"key 'k' appears twice"}});
  }
  return out;
}

void expect_refused(gk_runtime* rt, const ScratchDir& dir, const Bad& bad, const char* ext) {
  SCOPED_TRACE(bad.what);
  const std::string path = dir.write(std::string("bad") + ext, bad.file);
  gk_weights* w = nullptr;
  EXPECT_EQ(gk_weights_open(rt, path.c_str(), nullptr, &w), bad.status) << gk_last_error();
  EXPECT_EQ(w, nullptr);
  const std::string message = gk_last_error();
  EXPECT_NE(message.find(path), std::string::npos) << message;
  for (const auto& s : bad.expected) EXPECT_NE(message.find(s), std::string::npos) << message;
}

TEST(WeightsErrors, MalformedSafetensorsRefused) {
  RuntimePtr rt = make_runtime(test_options());
  ScratchDir dir;
  for (const Bad& bad : bad_safetensors()) expect_refused(rt.get(), dir, bad, ".safetensors");
}

TEST(WeightsErrors, MalformedGgufRefused) {
  RuntimePtr rt = make_runtime(test_options());
  ScratchDir dir;
  for (const Bad& bad : bad_gguf()) expect_refused(rt.get(), dir, bad, ".gguf");
}

// Seeded byte flips, truncations and insertions of valid files: open must succeed or be
// refused with a status of the documented set, and whatever opens must read without a crash.
TEST(WeightsErrors, MutationFuzz) {
  RuntimePtr rt = make_runtime(test_options());
  ScratchDir dir;
  GgufWriter g;
  g.kv_string("general.architecture", "llama");
  g.kv_strings("tokenizer.ggml.tokens", {"a", "bb", "ccc"});
  g.kv<uint32_t>("n", kGgufU32, 7);
  g.tensor("f", {2, 3}, kGgmlF32, Bytes(24, 0x3f));
  g.tensor("h", {4}, kGgmlF16, Bytes(8, 0x3c));
  g.tensor("q8", {1, 32}, kGgmlQ8_0, Bytes(34, 0x11));
  g.tensor("q4k", {1, 256}, kGgmlQ4_K, Bytes(144, 0x21));
  g.tensor("q6k", {256}, kGgmlQ6_K, Bytes(210, 0x05));
  const Bytes seeds[] = {safetensors_file({{"a", "F32", {2, 2}, Bytes(16, 0x40)},
                                           {"b", "BF16", {3}, Bytes(6, 0x3f)},
                                           {"c", "I8", {2}, Bytes(2, 1)}},
                                          "\"format\":\"pt\""),
                         g.bytes()};
  const char* exts[] = {".safetensors", ".gguf"};
  std::mt19937 rng(20240601);
  int opened = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    const size_t which = size_t(iteration % 2);
    Bytes b = seeds[which];
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits && !b.empty(); ++e) {
      const size_t at = rng() % b.size();
      switch (rng() % 4) {
        case 0:
          b[at] = uint8_t(rng());
          break;
        case 1:
          b[at] ^= uint8_t(1u << (rng() % 8));
          break;
        case 2:
          b.resize(at);
          break;
        default:
          b.insert(b.begin() + long(at), uint8_t(rng()));
          break;
      }
    }
    const std::string path = dir.write(std::string("fuzz") + exts[which], b);
    gk_weights* w = nullptr;
    const gk_status s = gk_weights_open(rt.get(), path.c_str(), nullptr, &w);
    ASSERT_TRUE(s == GK_OK || s == GK_INVALID_ARGUMENT) << s << ": " << gk_last_error();
    if (s != GK_OK) continue;
    ++opened;
    char* json = nullptr;
    ASSERT_EQ(gk_weights_metadata_json(w, &json), GK_OK);
    gk_string_free(json);
    for (int64_t i = 0; i < gk_weights_count(w); ++i) {
      gk_weight_info info{};
      info.struct_size = sizeof(info);
      ASSERT_EQ(gk_weights_info(w, i, &info), GK_OK);
      for (int32_t dtype : {0, int32_t(GK_DTYPE_F32), int32_t(GK_DTYPE_BF16)}) {
        gk_tensor* t = nullptr;
        const gk_status gs = gk_weights_get(w, info.name, 0, dtype, nullptr, &t);
        ASSERT_TRUE(gs == GK_OK || gs == GK_INVALID_ARGUMENT || gs == GK_UNIMPLEMENTED)
            << gs << ": " << gk_last_error();
        gk_tensor_release(t);
      }
    }
    gk_weights_close(w);
  }
  EXPECT_GT(opened, 0);  // some mutations leave a readable file: the read path is exercised
}

}  // namespace
}  // namespace gk::test
