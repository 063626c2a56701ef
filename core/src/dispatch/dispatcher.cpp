#include "dispatch/dispatcher.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "common/dtype.h"
#include "device/device.h"

namespace gk {

std::string DispatchDecision::refusal_text(const std::string& op, const Device& device) const {
  std::string text = op + " on " + device.label() + ": no plugin accepts the call";
  if (candidates.empty()) return text + " (no plugin lists the op for this device)";
  text += ":";
  for (const auto& c : candidates) text += " [" + c.plugin->name + "] " + c.reason + ";";
  text.pop_back();
  return text;
}

namespace {

struct RuntimeRecordTable {
  std::atomic<int64_t> count{0};
  std::mutex mutex;
  std::unordered_map<const PluginRegistry*, std::vector<const PluginRecord*>> by_registry;
};

RuntimeRecordTable& runtime_records() {
  static RuntimeRecordTable* table = new RuntimeRecordTable();  // used until exit
  return *table;
}

}  // namespace

void RuntimeRecords::add(const PluginRegistry& plugins, const PluginRecord* record) {
  RuntimeRecordTable& t = runtime_records();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.by_registry[&plugins].push_back(record);
  t.count.fetch_add(1, std::memory_order_release);
}

void RuntimeRecords::remove(const PluginRegistry& plugins, const PluginRecord* record) {
  RuntimeRecordTable& t = runtime_records();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.by_registry.find(&plugins);
  if (it == t.by_registry.end()) return;
  auto& list = it->second;
  auto at = std::find(list.begin(), list.end(), record);
  if (at == list.end()) return;
  list.erase(at);
  t.count.fetch_sub(1, std::memory_order_release);
  if (list.empty()) t.by_registry.erase(it);
}

void RuntimeRecords::append(const PluginRegistry& plugins, std::vector<const PluginRecord*>& out) {
  RuntimeRecordTable& t = runtime_records();
  if (t.count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.by_registry.find(&plugins);
  if (it != t.by_registry.end()) out.insert(out.end(), it->second.begin(), it->second.end());
}

DispatchDecision decide(const PluginRegistry& plugins, const Device& device,
                        const gk_kernel_args& args, bool every_candidate) {
  // The listing plugins, highest priority first, in the order found among equals. On the
  // stack for the usual handful of plugins, so a call allocates nothing here; sorted by
  // insertion (stable, and std::stable_sort would allocate a buffer).
  const std::string op_name = args.op;
  constexpr size_t kInline = 32;
  const PluginRecord* inline_listed[kInline];
  std::vector<const PluginRecord*> heap_listed;
  std::vector<const PluginRecord*> added;  // JIT kernels serving ops; usually none
  RuntimeRecords::append(plugins, added);
  const size_t records = plugins.records().size() + added.size();
  if (records > kInline) heap_listed.resize(records);
  const PluginRecord** listed = records > kInline ? heap_listed.data() : inline_listed;
  size_t num_listed = 0;
  auto consider = [&](const PluginRecord* r) {
    if (!r->manifest_ok || !r->manifest.find_op(op_name)) return;
    size_t k = num_listed++;
    while (k > 0 && listed[k - 1]->manifest.priority < r->manifest.priority) {
      listed[k] = listed[k - 1];
      --k;
    }
    listed[k] = r;
  };
  for (const auto& r : plugins.records()) consider(r.get());
  for (const PluginRecord* r : added) consider(r);

  DispatchDecision decision;
  int32_t dtype = args.num_inputs > 0 ? args.inputs[0].dtype : 0;
  for (size_t i = 0; i < num_listed; ++i) {
    const PluginRecord* r = listed[i];
    DispatchCandidate c{r, false, ""};
    const Manifest& m = r->manifest;
    if (m.device != device.kind) {
      c.reason = std::string("serves ") + (m.device == GK_DEVICE_KIND_CUDA ? "cuda" : "cpu") +
                 " devices, not " + device.label();
    } else if (device.is_cuda() && !device.plugins_eligible) {
      c.reason = device.note;
    } else if (device.is_cuda() && !m.matches_sm(device.sm_version)) {
      c.reason = "serves " + m.sm_text() + "; " + device.label() + " is SM " +
                 std::to_string(device.sm_version);
    } else if (!r->loaded) {
      c.reason = "not loaded: " + r->reason;
    } else {
      const ManifestOp* op = m.find_op(op_name);
      // A block-quantized input (matmul's packed weight) goes only to plugins that list its
      // dtype too: the others were written before packed tensors and would misread it.
      int32_t packed = 0;
      for (int32_t i = 1; i < args.num_inputs && !packed; ++i) {
        const int32_t d = args.inputs[i].dtype;
        if (dtype_is_packed(d) &&
            std::find(op->dtypes.begin(), op->dtypes.end(), d) == op->dtypes.end()) {
          packed = d;
        }
      }
      if (packed) {
        c.reason = std::string("manifest does not list ") + dtype_name(packed) + " for " +
                   args.op + " (a block-quantized input)";
      } else if (std::find(op->dtypes.begin(), op->dtypes.end(), dtype) == op->dtypes.end()) {
        std::string listed_dtypes;
        for (int32_t d : op->dtypes) listed_dtypes += (listed_dtypes.empty() ? "" : ", ") + std::string(dtype_name(d));
        c.reason = std::string("manifest lists ") + listed_dtypes + " for " + args.op + ", not " +
                   dtype_name(dtype);
      } else if (decision.chosen && !every_candidate) {
        break;
      } else {
        char reason[512] = {};
        gk_status s = r->api->supports(r->state, &args, reason, sizeof(reason));
        reason[sizeof(reason) - 1] = '\0';
        if (s == GK_OK) {
          c.accepted = true;
          // An accepting plugin may say how it will serve the call (an algorithm it chose).
          c.reason = decision.chosen ? "accepts, but a higher-priority plugin was chosen"
                     : reason[0]     ? std::string("chosen: ") + reason
                                     : "chosen";
          if (!decision.chosen) decision.chosen = r;
          // A call (not an explanation) reads only the choice: no candidate list to grow.
          if (!every_candidate) break;
        } else {
          c.reason = std::string("declined: ") + (reason[0] ? reason : gk_status_name(s));
        }
      }
    }
    decision.candidates.push_back(std::move(c));
    if (decision.chosen && !every_candidate) break;
  }
  return decision;
}

const PluginRecord* DispatchCache::find(const Key& key, NormalAttrs* attrs) const {
  const std::string_view bytes = key.bytes();
  const size_t hash = std::hash<std::string_view>{}(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [first, last] = entries_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (it->second.key == bytes) {
      if (attrs) *attrs = it->second.attrs;
      return it->second.plugin;
    }
  }
  return nullptr;
}

void DispatchCache::add(const Key& key, const PluginRecord* plugin, const NormalAttrs& attrs) {
  const std::string_view bytes = key.bytes();
  const size_t hash = std::hash<std::string_view>{}(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [first, last] = entries_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (it->second.key == bytes) return;  // another thread added it first
  }
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_.emplace(hash, Entry{std::string(bytes), plugin, attrs});
}

void DispatchCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

size_t DispatchCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace gk
