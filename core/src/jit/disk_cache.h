// The JIT's disk cache: one file per module, <dir>/<key>.gkjit, written to a temporary file
// and renamed into place (readers see a whole entry or none), ending with a CRC-32 of its
// contents (a torn or corrupt entry is ignored and rebuilt). A per-key lock file lets one of
// many processes compile while the others wait for its entry. Past the size limit, the
// least recently used entries (oldest modification time: a hit touches its entry) go.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "jit/module_image.h"

namespace gk::jit {

struct CacheSettings {
  std::string dir;  // $GPUKIT_CACHE_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/gpukit/jit
  int64_t limit_bytes = 0;  // $GPUKIT_CACHE_MAX_BYTES, default kDefaultCacheLimit
};

constexpr int64_t kDefaultCacheLimit = int64_t(1) << 30;

// Read from the environment on every call, so a process (or a test) may change it.
CacheSettings cache_settings();

class DiskCache {
 public:
  explicit DiskCache(CacheSettings settings) : settings_(std::move(settings)) {}

  const CacheSettings& settings() const { return settings_; }
  std::string entry_path(const std::string& key) const;

  // The entry of `key`, or nullopt when there is none or it is unusable (*why says how:
  // torn, checksum mismatch, another key). A hit refreshes the entry's time for the LRU.
  std::optional<ModuleImage> read(const std::string& key, std::string* why) const;
  // Writes the entry atomically, then trims the cache to its limit. Throws gk::Error
  // (UNAVAILABLE) naming the path when the folder cannot be created or written.
  void write(const ModuleImage& image) const;

  // An exclusive lock on `key` for the object's life (flock of <dir>/<key>.lock); a folder
  // that cannot hold the lock file means no lock, not a failure.
  class KeyLock {
   public:
    KeyLock(const DiskCache& cache, const std::string& key);
    ~KeyLock();
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;

   private:
    int fd_ = -1;
  };

  struct Totals {
    int64_t entries = 0;
    int64_t bytes = 0;
  };
  Totals totals() const;
  // Removes entries, temporary and lock files; returns the number of entries removed.
  int64_t clear() const;
  // Removes the least recently used entries until the total is within the limit.
  void trim() const;

 private:
  CacheSettings settings_;
};

// The entry format, exposed for the corrupt-entry tests.
std::string encode_entry(const ModuleImage& image);
std::optional<ModuleImage> decode_entry(const std::string& bytes, std::string* why);

}  // namespace gk::jit
