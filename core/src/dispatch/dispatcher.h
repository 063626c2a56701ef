// Picks the plugin that runs a call: the plugins whose manifests list the op for this
// device and dtype, highest priority first; the first whose supports() accepts wins.
// Every rejected candidate keeps its reason, for errors and for gk_explain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dispatch/op_schema.h"
#include "gpukit/gpukit_plugin.h"
#include "plugin/plugin_registry.h"

namespace gk {

struct Device;

struct DispatchCandidate {
  const PluginRecord* plugin;
  bool accepted = false;
  std::string reason;
};

struct DispatchDecision {
  const PluginRecord* chosen = nullptr;
  std::vector<DispatchCandidate> candidates;

  // "no plugin accepts …: cpu: reason; matmul_sm90: reason".
  std::string refusal_text(const std::string& op, const Device& device) const;
};

// Records added beside a registry's plugins while its runtime runs: JIT kernels registered
// to serve ops (gk_jit_op_register, core/src/capi/jit_op.cpp). decide() considers them with
// the plugins, by the same manifest fields. A record stays allocated after it is removed
// (its owner keeps it), since a call may hold it from the dispatch cache; removing one
// empties the runtime's dispatch cache. Any thread.
class RuntimeRecords {
 public:
  static void add(const PluginRegistry& plugins, const PluginRecord* record);
  static void remove(const PluginRegistry& plugins, const PluginRecord* record);
  // Appends the records added beside `plugins` (none, at the cost of one atomic read, in a
  // process that registered none).
  static void append(const PluginRegistry& plugins, std::vector<const PluginRecord*>& out);
};

// With `every_candidate`, keeps asking after the choice (for explain); otherwise stops
// at the first plugin that accepts, and `candidates` then holds only the plugins that
// declined before it (every one of them when none accepts, for refusal_text).
DispatchDecision decide(const PluginRegistry& plugins, const Device& device,
                        const gk_kernel_args& args, bool every_candidate);

// The plugin a runtime chose for each call seen, and the call's normalised attributes
// (NormalAttrs), so that the same call again skips the op's rules and the plugins'
// supports(). Both decide on what a key holds (the op, the device, each tensor's dtype,
// shape, strides, flags and data alignment, the attributes as given), and a runtime's
// plugins and devices do not change once it is made, so an entry never goes stale unless a
// JIT kernel is registered or unregistered (RuntimeRecords), which clears it. Only calls
// that passed both are added. Any thread.
class DispatchCache {
 public:
  // A call's key, built on the stack. Past kCapacity bytes it is marked full and the
  // call is neither looked up nor added.
  class Key {
   public:
    static constexpr size_t kCapacity = 1024;
    void add(const void* data, size_t size) {
      if (size > kCapacity - size_) {
        full_ = true;
        return;
      }
      std::memcpy(bytes_ + size_, data, size);
      size_ += size;
    }
    template <typename T>
    void add(const T& value) {
      add(&value, sizeof(T));
    }
    bool full() const { return full_; }
    std::string_view bytes() const { return {reinterpret_cast<const char*>(bytes_), size_}; }

   private:
    unsigned char bytes_[kCapacity];
    size_t size_ = 0;
    bool full_ = false;
  };

  static constexpr size_t kMaxEntries = 4096;  // past that the cache starts again

  // The plugin chosen for `key` before, or nullptr; with `attrs`, copies the call's
  // normalised attributes there too (a copy: the entry may go while the call runs).
  const PluginRecord* find(const Key& key, NormalAttrs* attrs = nullptr) const;
  void add(const Key& key, const PluginRecord* plugin, const NormalAttrs& attrs);
  size_t size() const;
  // Forgets every choice (a JIT kernel registered or unregistered changes them).
  void clear();

 private:
  struct Entry {
    std::string key;
    const PluginRecord* plugin;
    NormalAttrs attrs;
  };
  mutable std::mutex mutex_;
  std::unordered_multimap<size_t, Entry> entries_;  // by the hash of the key's bytes
};

}  // namespace gk
