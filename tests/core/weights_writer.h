// Writers of small SafeTensors and GGUF files for the weights tests, written from the
// formats' specs (not through the library), plus a scratch folder per test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace gk::test {

using Bytes = std::vector<uint8_t>;

// A fresh folder under the test temp dir, removed with the object.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("gk_weights_") + std::to_string(::getpid()) + "_" +
                       (info ? std::string(info->test_suite_name()) + "_" + info->name() : "x");
    // Memory-backed where there is one: rewriting a file on a disk file system flushes it,
    // and the fuzz test rewrites thousands.
    std::error_code ec;
    const bool shm =
        std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0;
    path_ = std::filesystem::path(shm ? "/dev/shm" : ::testing::TempDir()) / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string write(const std::string& name, const Bytes& bytes) const {
    std::string p = file(name);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return p;
  }
  std::string write(const std::string& name, const std::string& text) const {
    return write(name, Bytes(text.begin(), text.end()));
  }

 private:
  std::filesystem::path path_;
};

template <typename T>
void put(Bytes& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // little-endian hosts, as the formats
  out.insert(out.end(), b, b + sizeof(T));
}

template <typename T>
Bytes bytes_of(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// ---- SafeTensors ----

struct StTensor {
  std::string name;
  std::string dtype;  // "F32", "BF16", …
  std::vector<int64_t> shape;
  Bytes data;
};

// A SafeTensors file around `header` (JSON text) and `data`, the header padded with spaces
// to a multiple of 8 bytes, as the reference writer does.
inline Bytes safetensors_raw(std::string header, const Bytes& data) {
  while ((8 + header.size()) % 8) header += ' ';
  Bytes out;
  put<uint64_t>(out, header.size());
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A valid file of `tensors`, their data laid out in order; `metadata` is the body of
// "__metadata__" (e.g. "\"format\":\"pt\""), empty for none.
inline Bytes safetensors_file(const std::vector<StTensor>& tensors,
                              const std::string& metadata = "") {
  std::string header = "{";
  if (!metadata.empty()) header += "\"__metadata__\":{" + metadata + "}";
  Bytes data;
  for (const StTensor& t : tensors) {
    if (header.size() > 1) header += ",";
    std::string shape;
    for (size_t k = 0; k < t.shape.size(); ++k)
      shape += (k ? "," : "") + std::to_string(t.shape[k]);
    header += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" + shape +
              "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + t.data.size()) + "]}";
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  return safetensors_raw(header + "}", data);
}

// ---- GGUF ----

enum GgufValue : uint32_t {
  kGgufU8 = 0,
  kGgufI8,
  kGgufU16,
  kGgufI16,
  kGgufU32,
  kGgufI32,
  kGgufF32,
  kGgufBool,
  kGgufString,
  kGgufArray,
  kGgufU64,
  kGgufI64,
  kGgufF64,
};

// GGML type ids used by the tests.
enum GgmlTypeId : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ4_1 = 3,
  kGgmlQ5_0 = 6,
  kGgmlQ8_0 = 8,
  kGgmlQ4_K = 12,
  kGgmlQ5_K = 13,
  kGgmlQ6_K = 14,
  kGgmlI8 = 24,
  kGgmlI16 = 25,
  kGgmlI32 = 26,
  kGgmlI64 = 27,
  kGgmlF64 = 28,
  kGgmlBF16 = 30,
};

class GgufWriter {
 public:
  uint32_t version = 3;
  uint32_t alignment = 32;  // for laying out the data; write general.alignment to change it

  static void string(Bytes& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  // A key and its value type; the caller appends the value to kv_bytes() right after.
  Bytes& key(const std::string& name, uint32_t type) {
    ++kv_count_;
    string(kv_, name);
    put<uint32_t>(kv_, type);
    return kv_;
  }
  template <typename T>
  void kv(const std::string& name, uint32_t type, T value) {
    put<T>(key(name, type), value);
  }
  void kv_string(const std::string& name, const std::string& value) {
    string(key(name, kGgufString), value);
  }
  void kv_strings(const std::string& name, const std::vector<std::string>& values) {
    Bytes& out = key(name, kGgufArray);
    put<uint32_t>(out, kGgufString);
    put<uint64_t>(out, values.size());
    for (const auto& v : values) string(out, v);
  }
  // A tensor of gk shape `shape` (row-major, innermost last; GGUF's dims are written
  // reversed) with its bytes.
  void tensor(const std::string& name, std::vector<int64_t> shape, uint32_t type,
              const Bytes& data) {
    Info t{name, std::move(shape), type, 0, data};
    while (data_.size() % alignment) data_.push_back(0);
    t.offset = data_.size();
    data_.insert(data_.end(), data.begin(), data.end());
    tensors_.push_back(std::move(t));
  }
  // The tensor infos' offsets may be forged after the fact.
  void set_offset(size_t index, uint64_t offset) { tensors_[index].offset = offset; }

  Bytes bytes() const {
    Bytes out = {'G', 'G', 'U', 'F'};
    put<uint32_t>(out, version);
    put<uint64_t>(out, tensors_.size());
    put<uint64_t>(out, kv_count_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    for (const Info& t : tensors_) {
      string(out, t.name);
      put<uint32_t>(out, uint32_t(t.shape.size()));
      for (size_t k = t.shape.size(); k-- > 0;) put<uint64_t>(out, uint64_t(t.shape[k]));
      put<uint32_t>(out, t.type);
      put<uint64_t>(out, t.offset);
    }
    while (out.size() % alignment) out.push_back(0);
    out.insert(out.end(), data_.begin(), data_.end());
    return out;
  }

 private:
  struct Info {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t type;
    uint64_t offset;
    Bytes data;
  };
  uint64_t kv_count_ = 0;
  Bytes kv_;
  std::vector<Info> tensors_;
  Bytes data_;
};

}  // namespace gk::test
