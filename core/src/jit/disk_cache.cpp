#include "jit/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "common/environment.h"
#include "common/error.h"
#include "common/read_file.h"

namespace gk::jit {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'G', 'K', 'J', 'I', 'T', '0', '2', '\n'};
constexpr size_t kChecksumSize = 4;
constexpr const char* kEntrySuffix = ".gkjit";
constexpr const char* kLockSuffix = ".lock";
constexpr const char* kTempMarker = ".gkjit.tmp.";

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += char(uint8_t(v >> (8 * i)));
}
void put_bytes(std::string& out, const void* data, size_t size) {
  put_u64(out, size);
  out.append(static_cast<const char*>(data), size);
}
void put_text(std::string& out, const std::string& s) { put_bytes(out, s.data(), s.size()); }

// CRC-32 of the payload, little-endian: it finds torn and corrupted entries (the key, a
// SHA-256, already names the contents), and costs microseconds on a hit where a SHA-256
// of the entry cost as much as the rest of the lookup.
std::string checksum(const char* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {
    const uInt chunk = uInt(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    size -= chunk;
  }
  std::string out;
  for (size_t i = 0; i < kChecksumSize; ++i) out += char(uint8_t(crc >> (8 * i)));
  return out;
}

// Bounds-checked reading of an entry's payload.
class Reader {
 public:
  Reader(const std::string& bytes, size_t begin, size_t end) : s_(bytes), at_(begin), end_(end) {}
  bool u64(uint64_t& v) {
    if (end_ - at_ < 8) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(uint8_t(s_[at_ + size_t(i)])) << (8 * i);
    at_ += 8;
    return true;
  }
  bool text(std::string& out) {
    uint64_t n = 0;
    if (!u64(n) || n > end_ - at_) return false;
    out.assign(s_, at_, size_t(n));
    at_ += size_t(n);
    return true;
  }
  bool done() const { return at_ == end_; }

 private:
  const std::string& s_;
  size_t at_, end_;
};

std::string home_cache_dir() {
  if (auto xdg = env_value("XDG_CACHE_HOME")) return *xdg + "/gpukit/jit";
  if (auto home = env_value("HOME")) return *home + "/.cache/gpukit/jit";
  return (fs::temp_directory_path() / "gpukit-jit-cache").string();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

CacheSettings cache_settings() {
  CacheSettings s;
  auto dir = env_value("GPUKIT_CACHE_DIR");
  s.dir = dir ? *dir : home_cache_dir();
  s.limit_bytes = kDefaultCacheLimit;
  if (auto limit = env_value("GPUKIT_CACHE_MAX_BYTES")) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(limit->c_str(), &end, 10);
    if (errno || !end || *end || v < 0) {
      fail(GK_INVALID_ARGUMENT, "GPUKIT_CACHE_MAX_BYTES='" + *limit +
                                    "' is not a byte count (a non-negative integer)");
    }
    s.limit_bytes = v;
  }
  return s;
}

std::string encode_entry(const ModuleImage& image) {
  std::string payload;
  put_text(payload, image.key);
  put_u64(payload, uint64_t(uint32_t(image.sm_version)));
  put_u64(payload, uint64_t(uint32_t(image.nvrtc_version)));
  put_bytes(payload, image.cubin.data(), image.cubin.size());
  put_text(payload, image.ptx);
  put_text(payload, image.log);
  put_u64(payload, image.lowered_names.size());
  for (const auto& [expression, lowered] : image.lowered_names) {
    put_text(payload, expression);
    put_text(payload, lowered);
  }
  std::string out(kMagic, sizeof(kMagic));
  put_u64(out, payload.size());
  out += payload;
  out += checksum(payload.data(), payload.size());
  return out;
}

std::optional<ModuleImage> decode_entry(const std::string& bytes, std::string* why) {
  auto refuse = [&](const char* reason) -> std::optional<ModuleImage> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (bytes.size() < sizeof(kMagic) + 8 + kChecksumSize) {
    return refuse("shorter than an entry (torn write)");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return refuse("not a GPUkit JIT entry (bad magic)");
  }
  Reader head(bytes, sizeof(kMagic), sizeof(kMagic) + 8);
  uint64_t payload_size = 0;
  head.u64(payload_size);
  const size_t begin = sizeof(kMagic) + 8;
  if (payload_size != bytes.size() - begin - kChecksumSize) {
    return refuse("its length is wrong (torn write)");
  }
  if (checksum(bytes.data() + begin, size_t(payload_size)) !=
      std::string_view(bytes.data() + begin + payload_size, kChecksumSize)) {
    return refuse("its checksum does not match (corrupt)");
  }
  ModuleImage image;
  Reader r(bytes, begin, begin + size_t(payload_size));
  uint64_t sm = 0, nvrtc = 0, count = 0;
  std::string cubin;
  if (!r.text(image.key) || !r.u64(sm) || !r.u64(nvrtc) || !r.text(cubin) || !r.text(image.ptx) ||
      !r.text(image.log) || !r.u64(count)) {
    return refuse("its fields do not parse");
  }
  image.sm_version = int32_t(sm);
  image.nvrtc_version = int32_t(nvrtc);
  image.cubin.assign(cubin.begin(), cubin.end());
  for (uint64_t i = 0; i < count; ++i) {
    std::string expression, lowered;
    if (!r.text(expression) || !r.text(lowered)) return refuse("its name table does not parse");
    image.lowered_names.emplace_back(std::move(expression), std::move(lowered));
  }
  if (!r.done()) return refuse("it has trailing bytes");
  if (image.cubin.empty()) return refuse("it holds no cubin");
  return image;
}

std::string DiskCache::entry_path(const std::string& key) const {
  return settings_.dir + "/" + key + kEntrySuffix;
}

std::optional<ModuleImage> DiskCache::read(const std::string& key, std::string* why) const {
  const std::string path = entry_path(key);
  std::string bytes;
  if (!read_file(path, bytes)) {
    if (why) why->clear();  // no entry: nothing to report
    return std::nullopt;
  }
  std::string reason;
  auto image = decode_entry(bytes, &reason);
  if (image && image->key != key) {
    image.reset();
    reason = "it holds another key";
  }
  if (!image) {
    if (why) *why = path + ": " + reason;
    return std::nullopt;
  }
  // A hit is a use: the LRU trim goes by modification time (atime is often off).
  utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  return image;
}

void DiskCache::write(const ModuleImage& image) const {
  std::error_code ec;
  fs::create_directories(settings_.dir, ec);
  if (ec) {
    fail(GK_UNAVAILABLE, "cannot create the JIT cache folder " + settings_.dir + ": " +
                             ec.message() + " (set GPUKIT_CACHE_DIR to a writable folder)");
  }
  static std::atomic<uint64_t> counter{0};
  const std::string temp = settings_.dir + "/" + image.key + kTempMarker +
                           std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
  const std::string bytes = encode_entry(image);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      fail(GK_UNAVAILABLE, "cannot write the JIT cache entry " + temp +
                               " (disk full or read-only? set GPUKIT_CACHE_DIR)");
    }
  }
  if (std::rename(temp.c_str(), entry_path(image.key).c_str()) != 0) {
    const int err = errno;
    fs::remove(temp, ec);
    fail(GK_UNAVAILABLE, "cannot rename " + temp + " to " + entry_path(image.key) + ": " +
                             std::strerror(err));
  }
  trim();
}

DiskCache::KeyLock::KeyLock(const DiskCache& cache, const std::string& key) {
  std::error_code ec;
  fs::create_directories(cache.settings_.dir, ec);
  const std::string path = cache.settings_.dir + "/" + key + kLockSuffix;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  while (flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
  }
}

DiskCache::KeyLock::~KeyLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

DiskCache::Totals DiskCache::totals() const {
  Totals t;
  std::error_code ec;
  for (fs::directory_iterator it(settings_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!ends_with(name, kEntrySuffix)) continue;
    std::error_code size_ec;
    const auto size = it->file_size(size_ec);
    if (size_ec) continue;
    ++t.entries;
    t.bytes += int64_t(size);
  }
  return t;
}

int64_t DiskCache::clear() const {
  int64_t removed = 0;
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (fs::directory_iterator it(settings_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    // nvrtc.facts (nvrtc.h) and its temporary files go too: an empty cache remembers nothing.
    if (ends_with(name, kEntrySuffix) || ends_with(name, kLockSuffix) ||
        name.find(kTempMarker) != std::string::npos || name.rfind("nvrtc.facts", 0) == 0) {
      doomed.push_back(it->path());
    }
  }
  for (const fs::path& p : doomed) {
    std::error_code remove_ec;
    if (fs::remove(p, remove_ec) && ends_with(p.filename().string(), kEntrySuffix)) ++removed;
  }
  return removed;
}

void DiskCache::trim() const {
  struct Entry {
    fs::path path;
    int64_t size;
    struct timespec mtime;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(settings_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!ends_with(name, kEntrySuffix)) continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) continue;
    entries.push_back({it->path(), int64_t(st.st_size), st.st_mtim});
    total += int64_t(st.st_size);
  }
  if (total <= settings_.limit_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
    return a.mtime.tv_nsec < b.mtime.tv_nsec;
  });
  // The newest entry stays even when it alone is over the limit: it was just written for use.
  for (size_t i = 0; i + 1 < entries.size() && total > settings_.limit_bytes; ++i) {
    std::error_code remove_ec;
    if (fs::remove(entries[i].path, remove_ec)) total -= entries[i].size;
  }
}

}  // namespace gk::jit
