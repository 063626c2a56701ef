// Weight sets through the C API: SafeTensors, sharded indexes, folders and GGUF opened and
// listed; tensors mapped without a copy, read-only, cached, loaded and released.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpukit/gpukit_dlpack.h"
#include "test_runtime.h"
#include "weights_writer.h"

namespace gk::test {
namespace {

struct WeightsDeleter {
  void operator()(gk_weights* w) const { gk_weights_close(w); }
};
using WeightsPtr = std::unique_ptr<gk_weights, WeightsDeleter>;

WeightsPtr open_ok(gk_runtime* rt, const std::string& path,
                   const gk_weights_options* options = nullptr) {
  gk_weights* w = nullptr;
  EXPECT_EQ(gk_weights_open(rt, path.c_str(), options, &w), GK_OK) << gk_last_error();
  return WeightsPtr(w);
}

gk_weight_info info_of(gk_weights* w, int64_t index) {
  gk_weight_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(gk_weights_info(w, index, &info), GK_OK) << gk_last_error();
  return info;
}

TensorPtr get_ok(gk_weights* w, const char* name, int32_t dtype = 0, int32_t device = 0) {
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_weights_get(w, name, device, dtype, nullptr, &t), GK_OK) << gk_last_error();
  return TensorPtr(t);
}

Bytes read_bytes(const gk_tensor* t, size_t bytes) {
  Bytes out(bytes);
  EXPECT_EQ(gk_copy_to_host(t, out.data(), bytes, nullptr), GK_OK) << gk_last_error();
  return out;
}

std::string metadata(gk_weights* w) {
  char* text = nullptr;
  EXPECT_EQ(gk_weights_metadata_json(w, &text), GK_OK) << gk_last_error();
  std::string out = text ? text : "";
  gk_string_free(text);
  return out;
}

std::vector<float> iota(size_t n, float start = 0.5f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + float(i);
  return v;
}

// Whether `p` lies in a mapping of `path` (from /proc/self/maps).
bool mapped_from(const void* p, const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  const std::string canonical = std::filesystem::canonical(path).string();
  for (std::string line; std::getline(maps, line);) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) != 2) continue;
    const auto at = reinterpret_cast<uintptr_t>(p);
    if (at >= lo && at < hi) return line.find(canonical) != std::string::npos;
  }
  return false;
}

class Weights : public ::testing::Test {
 protected:
  RuntimePtr rt_ = make_runtime(test_options());
  ScratchDir dir_;
};

TEST_F(Weights, SafetensorsOpensListsAndReads) {
  const auto a = iota(6);
  const std::vector<int64_t> ids = {7, -3};
  const std::string path =
      dir_.write("model.safetensors", safetensors_file({{"a", "F32", {2, 3}, bytes_of(a)},
                                                        {"ids", "I64", {2}, bytes_of(ids)},
                                                        {"mask", "BOOL", {3}, Bytes{1, 0, 1}},
                                                        {"u", "U16", {2}, Bytes{1, 0, 2, 0}},
                                                        {"fp8", "F8_E4M3", {4}, Bytes{1, 2, 3, 4}}},
                                                       "\"format\":\"pt\",\"note\":\"x\""));
  WeightsPtr w = open_ok(rt_.get(), path);
  EXPECT_STREQ(gk_weights_format(w.get()), "safetensors");
  ASSERT_EQ(gk_weights_count(w.get()), 5);
  gk_weight_info info = info_of(w.get(), 0);
  EXPECT_STREQ(info.name, "a");
  EXPECT_EQ(info.dtype, GK_DTYPE_F32);
  EXPECT_EQ(info.ndim, 2);
  EXPECT_EQ(info.shape[0], 2);
  EXPECT_EQ(info.shape[1], 3);
  EXPECT_EQ(info.bytes, 24u);
  EXPECT_EQ(std::string(info.file), path);
  EXPECT_EQ(info.file_offset % 8, 0u);
  EXPECT_EQ(info_of(w.get(), 1).dtype, GK_DTYPE_I64);
  EXPECT_EQ(info_of(w.get(), 2).dtype, GK_DTYPE_BOOL);
  EXPECT_EQ(info_of(w.get(), 3).dtype, 0);  // U16: listed, no gk dtype
  EXPECT_EQ(info_of(w.get(), 4).dtype, 0);
  gk_weight_info out_of_range{};
  out_of_range.struct_size = sizeof(out_of_range);
  EXPECT_EQ(gk_weights_info(w.get(), 5, &out_of_range), GK_OUT_OF_RANGE);

  auto meta = nlohmann::json::parse(metadata(w.get()));
  EXPECT_EQ(meta["format"], "pt");
  EXPECT_EQ(meta["note"], "x");

  int64_t index = -1;
  EXPECT_EQ(gk_weights_find(w.get(), "ids", &index), GK_OK);
  EXPECT_EQ(index, 1);
  EXPECT_EQ(gk_weights_find(w.get(), "idz", &index), GK_NOT_FOUND);
  EXPECT_NE(std::string(gk_last_error()).find("did you mean 'ids'"), std::string::npos)
      << gk_last_error();

  TensorPtr t = get_ok(w.get(), "a");
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  ASSERT_EQ(gk_tensor_get_desc(t.get(), &d), GK_OK);
  EXPECT_EQ(d.dtype, GK_DTYPE_F32);
  EXPECT_TRUE(d.flags & GK_TENSOR_READ_ONLY);
  EXPECT_EQ(read_f32(t.get(), 6), a);
  TensorPtr i = get_ok(w.get(), "ids");
  EXPECT_EQ(read_bytes(i.get(), 16), bytes_of(ids));

  gk_tensor* refused = nullptr;
  EXPECT_EQ(gk_weights_get(w.get(), "u", 0, 0, nullptr, &refused), GK_UNIMPLEMENTED);
  EXPECT_NE(std::string(gk_last_error()).find("U16"), std::string::npos) << gk_last_error();
  EXPECT_EQ(gk_weights_get(w.get(), "fp8", 0, 0, nullptr, &refused), GK_UNIMPLEMENTED);
  EXPECT_NE(std::string(gk_last_error()).find("F8_E4M3"), std::string::npos);
  EXPECT_EQ(gk_weights_get(w.get(), "ids", 0, GK_DTYPE_F32, nullptr, &refused),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("tensor 'ids'"), std::string::npos);
  EXPECT_EQ(gk_weights_get(w.get(), "a", 0, 99, nullptr, &refused), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_weights_get(w.get(), "a", 7, 0, nullptr, &refused), GK_OUT_OF_RANGE);
  EXPECT_EQ(gk_weights_get(w.get(), "nope", 0, 0, nullptr, &refused), GK_NOT_FOUND);
  EXPECT_EQ(refused, nullptr);
}

TEST_F(Weights, GgufOpensListsMetadataOfEveryValueType) {
  GgufWriter g;
  g.alignment = 64;
  g.kv<uint32_t>("general.alignment", kGgufU32, 64);
  g.kv_string("general.architecture", "llama");
  g.kv<uint8_t>("t.u8", kGgufU8, 200);
  g.kv<int8_t>("t.i8", kGgufI8, -5);
  g.kv<uint16_t>("t.u16", kGgufU16, 60000);
  g.kv<int16_t>("t.i16", kGgufI16, -300);
  g.kv<int32_t>("t.i32", kGgufI32, -70000);
  g.kv<float>("t.f32", kGgufF32, 0.25f);
  g.kv<uint8_t>("t.bool", kGgufBool, 1);
  g.kv<uint64_t>("t.u64", kGgufU64, 1ull << 40);
  g.kv<int64_t>("t.i64", kGgufI64, -(1ll << 40));
  g.kv<double>("t.f64", kGgufF64, 1.5);
  g.kv_strings("tokenizer.ggml.tokens", {"<s>", "hello", "w\xc3\xb6rld"});
  {
    Bytes& out = g.key("t.nested", kGgufArray);  // [[1, 2], [3]] of i32
    put<uint32_t>(out, kGgufArray);
    put<uint64_t>(out, 2);
    put<uint32_t>(out, kGgufI32);
    put<uint64_t>(out, 2);
    put<int32_t>(out, 1);
    put<int32_t>(out, 2);
    put<uint32_t>(out, kGgufI32);
    put<uint64_t>(out, 1);
    put<int32_t>(out, 3);
  }
  const auto w32 = iota(12);
  g.tensor("w", {3, 4}, kGgmlF32, bytes_of(w32));
  Bytes q5(22, 0);
  g.tensor("q5", {32}, kGgmlQ5_0, q5);
  const std::vector<int32_t> i32 = {1, -2, 3};
  g.tensor("i", {3}, kGgmlI32, bytes_of(i32));
  for (uint32_t version : {2u, 3u}) {
    g.version = version;
    const std::string path = dir_.write("m" + std::to_string(version) + ".gguf", g.bytes());
    WeightsPtr w = open_ok(rt_.get(), path);
    EXPECT_STREQ(gk_weights_format(w.get()), "gguf");
    ASSERT_EQ(gk_weights_count(w.get()), 3);
    gk_weight_info info = info_of(w.get(), 0);
    EXPECT_STREQ(info.name, "w");
    EXPECT_EQ(info.ndim, 2);
    EXPECT_EQ(info.shape[0], 3);  // GGUF's dims [4, 3] reversed
    EXPECT_EQ(info.shape[1], 4);
    EXPECT_EQ(info.file_offset % 64, 0u);
    EXPECT_EQ(info_of(w.get(), 1).dtype, 0);  // Q5_0
    EXPECT_EQ(info_of(w.get(), 1).bytes, 22u);
    auto meta = nlohmann::json::parse(metadata(w.get()));
    EXPECT_EQ(meta["general.architecture"], "llama");
    EXPECT_EQ(meta["t.u8"], 200);
    EXPECT_EQ(meta["t.i8"], -5);
    EXPECT_EQ(meta["t.u16"], 60000);
    EXPECT_EQ(meta["t.i16"], -300);
    EXPECT_EQ(meta["t.i32"], -70000);
    EXPECT_EQ(meta["t.f32"], 0.25);
    EXPECT_EQ(meta["t.bool"], true);
    EXPECT_EQ(meta["t.u64"], 1ull << 40);
    EXPECT_EQ(meta["t.i64"], -(1ll << 40));
    EXPECT_EQ(meta["t.f64"], 1.5);
    EXPECT_EQ(meta["tokenizer.ggml.tokens"][2], "w\xc3\xb6rld");
    EXPECT_EQ(meta["t.nested"], nlohmann::json::parse("[[1,2],[3]]"));
    EXPECT_EQ(meta["general.alignment"], 64);
    TensorPtr t = get_ok(w.get(), "w");
    EXPECT_EQ(read_f32(t.get(), 12), w32);
    TensorPtr it = get_ok(w.get(), "i");
    EXPECT_EQ(read_bytes(it.get(), 12), bytes_of(i32));
    gk_tensor* refused = nullptr;
    EXPECT_EQ(gk_weights_get(w.get(), "q5", 0, GK_DTYPE_F32, nullptr, &refused), GK_UNIMPLEMENTED);
    EXPECT_NE(std::string(gk_last_error()).find("Q5_0"), std::string::npos) << gk_last_error();
  }
}

TEST_F(Weights, ShardedIndexAndFolders) {
  const auto a = iota(4), b = iota(2, 10.0f);
  dir_.write("model-00001-of-00002.safetensors",
             safetensors_file({{"a", "F32", {4}, bytes_of(a)}}, "\"format\":\"pt\""));
  dir_.write("model-00002-of-00002.safetensors",
             safetensors_file({{"b", "F32", {2}, bytes_of(b)}}));
  const std::string index =
      dir_.write("model.safetensors.index.json",
                 std::string("{\"metadata\":{\"total_size\":24},\"weight_map\":{") +
                     "\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00002-of-00002."
                     "safetensors\"}}");
  for (const std::string& path : {index, dir_.path()}) {
    WeightsPtr w = open_ok(rt_.get(), path);
    ASSERT_EQ(gk_weights_count(w.get()), 2);
    EXPECT_STREQ(info_of(w.get(), 0).name, "a");
    EXPECT_STREQ(info_of(w.get(), 1).name, "b");
    EXPECT_NE(std::string(info_of(w.get(), 1).file).find("00002"), std::string::npos);
    EXPECT_EQ(read_f32(get_ok(w.get(), "b").get(), 2), b);
    EXPECT_EQ(nlohmann::json::parse(metadata(w.get()))["format"], "pt");
  }
  // A shard the index names is missing.
  const std::string broken =
      dir_.write("broken.safetensors.index.json",
                 std::string("{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",") +
                     "\"c\":\"model-00003-of-00003.safetensors\"}}");
  gk_weights* w = nullptr;
  EXPECT_EQ(gk_weights_open(rt_.get(), broken.c_str(), nullptr, &w), GK_NOT_FOUND);
  EXPECT_NE(std::string(gk_last_error()).find("model-00003-of-00003.safetensors"),
            std::string::npos)
      << gk_last_error();
  EXPECT_EQ(w, nullptr);
  // The index places a tensor in a shard that does not hold it.
  const std::string wrong =
      dir_.write("wrong.safetensors.index.json",
                 std::string("{\"weight_map\":{\"a\":\"model-00002-of-00002.safetensors\"}}"));
  EXPECT_EQ(gk_weights_open(rt_.get(), wrong.c_str(), nullptr, &w), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("tensor 'a'"), std::string::npos);
}

TEST_F(Weights, FolderChoosesItsFiles) {
  ScratchDir& d = dir_;
  std::filesystem::create_directories(d.file("two"));
  std::filesystem::create_directories(d.file("gguf"));
  std::filesystem::create_directories(d.file("empty"));
  d.write("two/b.safetensors", safetensors_file({{"y", "F32", {1}, bytes_of(iota(1))}}));
  d.write("two/a.safetensors", safetensors_file({{"x", "F32", {1}, bytes_of(iota(1))}}));
  WeightsPtr two = open_ok(rt_.get(), d.file("two"));
  ASSERT_EQ(gk_weights_count(two.get()), 2);
  EXPECT_STREQ(info_of(two.get(), 0).name, "x");  // a.safetensors first: name order
  GgufWriter g;
  g.tensor("t", {2}, kGgmlF32, bytes_of(iota(2)));
  d.write("gguf/model.gguf", g.bytes());
  WeightsPtr one = open_ok(rt_.get(), d.file("gguf"));
  EXPECT_STREQ(gk_weights_format(one.get()), "gguf");
  gk_weights* w = nullptr;
  EXPECT_EQ(gk_weights_open(rt_.get(), d.file("empty").c_str(), nullptr, &w), GK_NOT_FOUND);
  d.write("gguf/other.gguf", g.bytes());
  EXPECT_EQ(gk_weights_open(rt_.get(), d.file("gguf").c_str(), nullptr, &w), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("other.gguf"), std::string::npos);
  EXPECT_EQ(gk_weights_open(rt_.get(), d.file("missing.safetensors").c_str(), nullptr, &w),
            GK_NOT_FOUND);
  // Two files holding one name.
  d.write("two/c.safetensors", safetensors_file({{"x", "F32", {1}, bytes_of(iota(1))}}));
  EXPECT_EQ(gk_weights_open(rt_.get(), d.file("two").c_str(), nullptr, &w), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("tensor 'x'"), std::string::npos);
  EXPECT_NE(std::string(gk_last_error()).find("a.safetensors"), std::string::npos);
}

TEST_F(Weights, CpuTensorsMapTheFileAndOutliveTheWeights) {
  const auto a = iota(64);
  const std::string path =
      dir_.write("m.safetensors", safetensors_file({{"a", "F32", {8, 8}, bytes_of(a)}}));
  TensorPtr t;
  {
    WeightsPtr w = open_ok(rt_.get(), path);
    t = get_ok(w.get(), "a");
    TensorPtr again = get_ok(w.get(), "a");
    EXPECT_EQ(t.get(), again.get());  // cached: the same tensor
    void* data = gk_tensor_data(t.get());
    EXPECT_TRUE(mapped_from(data, path)) << "the tensor's data is not the file's mapping";
    EXPECT_EQ(std::memcmp(data, a.data(), 256), 0);
  }
  // The weights are closed; the tensor keeps the mapping.
  EXPECT_TRUE(mapped_from(gk_tensor_data(t.get()), path));
  EXPECT_EQ(read_f32(t.get(), 64), a);
  void* data = gk_tensor_data(t.get());
  t.reset();
  EXPECT_FALSE(mapped_from(data, path)) << "the mapping outlived its last tensor";
}

TEST_F(Weights, TensorsAreReadOnly) {
  const std::string path =
      dir_.write("m.safetensors", safetensors_file({{"a", "F32", {4}, bytes_of(iota(4))}}));
  WeightsPtr w = open_ok(rt_.get(), path);
  TensorPtr t = get_ok(w.get(), "a");
  TensorPtr converted = get_ok(w.get(), "a", GK_DTYPE_F16);
  TensorPtr x = tensor_from(rt_.get(), {1, 2, 3, 4}, {4});
  float host[4] = {};
  EXPECT_EQ(gk_copy_from_host(t.get(), host, sizeof(host), nullptr), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_copy(t.get(), x.get(), nullptr), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("read-only"), std::string::npos);
  gk_tensor* inputs[] = {x.get(), x.get()};
  gk_tensor* outputs[] = {t.get()};
  gk_op_args args{};
  args.struct_size = sizeof(args);
  args.inputs = inputs;
  args.num_inputs = 2;
  args.outputs = outputs;
  args.num_outputs = 1;
  EXPECT_EQ(gk_op_call(rt_.get(), "add", &args), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("read-only"), std::string::npos) << gk_last_error();
  gk_tensor* half_out[] = {converted.get()};
  gk_tensor* half_in[] = {converted.get(), converted.get()};
  args.inputs = half_in;
  args.outputs = half_out;
  EXPECT_EQ(gk_op_call(rt_.get(), "add", &args), GK_INVALID_ARGUMENT);
  // As an input it is fine.
  TensorPtr y = make_tensor(rt_.get(), GK_DTYPE_F32, {4});
  gk_tensor* ok_in[] = {t.get(), x.get()};
  gk_tensor* ok_out[] = {y.get()};
  args.inputs = ok_in;
  args.outputs = ok_out;
  EXPECT_EQ(gk_op_call(rt_.get(), "add", &args), GK_OK) << gk_last_error();
  EXPECT_EQ(read_f32(y.get(), 4), (std::vector<float>{1.5f, 3.5f, 5.5f, 7.5f}));
}

TEST_F(Weights, ConcurrentGetsShareOneTensor) {
  const std::string path =
      dir_.write("m.safetensors", safetensors_file({{"a", "F32", {1024}, bytes_of(iota(1024))}}));
  WeightsPtr w = open_ok(rt_.get(), path);
  std::vector<gk_tensor*> got(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < got.size(); ++k) {
    threads.emplace_back([&, k] {
      gk_weights_get(w.get(), "a", 0, k % 2 ? GK_DTYPE_BF16 : GK_DTYPE_F16, nullptr, &got[k]);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_NE(got[k], nullptr);
    EXPECT_EQ(got[k], got[k % 2]);
  }
  EXPECT_NE(got[0], got[1]);
  for (gk_tensor* t : got) gk_tensor_release(t);
}

struct Progress {
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  std::thread::id thread;
  bool other_thread = false;
  static void report(void* user, uint64_t done, uint64_t total) {
    auto* p = static_cast<Progress*>(user);
    p->calls.emplace_back(done, total);
    p->other_thread |= std::this_thread::get_id() != p->thread;
  }
};

TEST_F(Weights, LoadReleaseAndCharges) {
  for (int k = 0; k < 3; ++k) {
    dir_.write("s" + std::to_string(k) + ".safetensors",
               safetensors_file({{"t" + std::to_string(k), "F32", {256}, bytes_of(iota(256))},
                                 {"i" + std::to_string(k), "I32", {2}, Bytes(8, 1)}}));
  }
  Progress progress;
  progress.thread = std::this_thread::get_id();
  gk_memory_owner* owner = nullptr;
  ASSERT_EQ(gk_memory_owner_create(rt_.get(), 0, "mine", 0, &owner), GK_OK);
  gk_weights_options options{};
  options.struct_size = sizeof(options);
  options.owner = owner;
  options.progress = &Progress::report;
  options.progress_user_data = &progress;
  WeightsPtr w = open_ok(rt_.get(), dir_.path(), &options);
  ASSERT_EQ(gk_weights_load(w.get(), 0, GK_DTYPE_F16, nullptr), GK_OK) << gk_last_error();
  ASSERT_FALSE(progress.calls.empty());
  EXPECT_EQ(progress.calls.back().first, 3u * (1024 + 8));
  EXPECT_EQ(progress.calls.back().second, 3u * (1024 + 8));
  EXPECT_FALSE(progress.other_thread);
  uint64_t in_use = 0;
  ASSERT_EQ(gk_memory_owner_usage(owner, &in_use, nullptr), GK_OK);
  EXPECT_GE(in_use, 3u * 512);  // the f16 copies, charged to the owner
  // Loaded: get returns the cached tensors; the integers came as stored.
  TensorPtr t0 = get_ok(w.get(), "t0", GK_DTYPE_F16);
  TensorPtr i0 = get_ok(w.get(), "i0");
  EXPECT_EQ(get_ok(w.get(), "t0", GK_DTYPE_F16).get(), t0.get());
  ASSERT_EQ(gk_weights_release(w.get(), 0), GK_OK);
  TensorPtr t1 = get_ok(w.get(), "t0", GK_DTYPE_F16);
  EXPECT_NE(t1.get(), t0.get());  // released: made anew; the old one still reads
  EXPECT_EQ(read_bytes(t0.get(), 512), read_bytes(t1.get(), 512));
  EXPECT_EQ(gk_weights_release(w.get(), 5), GK_OUT_OF_RANGE);
  EXPECT_EQ(gk_weights_release(w.get(), -1), GK_OK);
  w.reset();
  t0.reset();
  t1.reset();
  i0.reset();
  gk_memory_owner_destroy(owner);

  // Without an owner, the weight set charges its own, named after the file.
  WeightsPtr w2 = open_ok(rt_.get(), dir_.file("s1.safetensors"));
  TensorPtr c = get_ok(w2.get(), "t1", GK_DTYPE_BF16);
  char* snapshot = nullptr;
  ASSERT_EQ(gk_memory_snapshot_json(rt_.get(), 0, &snapshot), GK_OK);
  EXPECT_NE(std::string(snapshot).find("weights s1.safetensors"), std::string::npos) << snapshot;
  gk_string_free(snapshot);
}

TEST_F(Weights, PackedTensorsInTheCore) {
  uint32_t bytes = 0;
  EXPECT_EQ(gk_dtype_block(GK_DTYPE_Q8_0, &bytes), 32u);
  EXPECT_EQ(bytes, 34u);
  EXPECT_EQ(gk_dtype_block(GK_DTYPE_Q4_0, &bytes), 32u);
  EXPECT_EQ(bytes, 18u);
  EXPECT_EQ(gk_dtype_block(GK_DTYPE_Q4_1, &bytes), 32u);
  EXPECT_EQ(bytes, 20u);
  EXPECT_EQ(gk_dtype_block(GK_DTYPE_Q4_K, &bytes), 256u);
  EXPECT_EQ(bytes, 144u);
  EXPECT_EQ(gk_dtype_block(GK_DTYPE_Q5_K, &bytes), 256u);
  EXPECT_EQ(bytes, 176u);
  EXPECT_EQ(gk_dtype_block(GK_DTYPE_Q6_K, nullptr), 256u);
  EXPECT_EQ(gk_dtype_block(GK_DTYPE_F16, &bytes), 1u);
  EXPECT_EQ(bytes, 2u);
  EXPECT_EQ(gk_dtype_block(99, &bytes), 0u);
  EXPECT_EQ(gk_dtype_size(GK_DTYPE_Q4_K), 0u);
  EXPECT_STREQ(gk_dtype_name(GK_DTYPE_Q6_K), "q6_k");

  TensorPtr q = make_tensor(rt_.get(), GK_DTYPE_Q4_K, {2, 256});
  ASSERT_TRUE(q);
  Bytes blocks(2 * 144);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = uint8_t(i * 7 + 3);
  ASSERT_EQ(gk_copy_from_host(q.get(), blocks.data(), blocks.size(), nullptr), GK_OK)
      << gk_last_error();
  EXPECT_EQ(read_bytes(q.get(), blocks.size()), blocks);
  EXPECT_EQ(gk_copy_from_host(q.get(), blocks.data(), 2 * 256, nullptr), GK_INVALID_ARGUMENT);
  gk_tensor_desc bad = desc(GK_DTYPE_Q8_0, {4, 48});
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_create(rt_.get(), 0, &bad, nullptr, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("multiple of 32"), std::string::npos)
      << gk_last_error();
  gk_tensor_desc strided = desc(GK_DTYPE_Q8_0, {2, 32});
  strided.has_strides = 1;
  strided.strides[0] = 64;
  strided.strides[1] = 1;
  EXPECT_EQ(gk_tensor_create(rt_.get(), 0, &strided, nullptr, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("contiguous"), std::string::npos);
  TensorPtr copy = make_tensor(rt_.get(), GK_DTYPE_Q4_K, {2, 256});
  ASSERT_EQ(gk_copy(copy.get(), q.get(), nullptr), GK_OK) << gk_last_error();
  EXPECT_EQ(read_bytes(copy.get(), blocks.size()), blocks);
  DLManagedTensor* dl = nullptr;
  EXPECT_EQ(gk_tensor_to_dlpack(q.get(), &dl), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("block-quantized"), std::string::npos)
      << gk_last_error();
  TensorPtr y = make_tensor(rt_.get(), GK_DTYPE_F32, {2, 256});
  gk_tensor* inputs[] = {q.get(), q.get()};
  gk_tensor* outputs[] = {y.get()};
  gk_op_args args{};
  args.struct_size = sizeof(args);
  args.inputs = inputs;
  args.num_inputs = 2;
  args.outputs = outputs;
  args.num_outputs = 1;
  EXPECT_EQ(gk_op_call(rt_.get(), "add", &args), GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("block-quantized"), std::string::npos)
      << gk_last_error();
}

}  // namespace
}  // namespace gk::test
