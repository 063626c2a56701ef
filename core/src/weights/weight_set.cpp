// Opening a weight set: which files a path names (a file, a sharded index, a folder), their
// parsing, and the checks across files (duplicate names, the index against its shards).
#include "weights/weight_set.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/edit_distance.h"
#include "common/error.h"
#include "common/json_text.h"

namespace gk::weights {

namespace {

constexpr uint64_t kMaxIndexBytes = 100'000'000;
constexpr int kMaxIndexDepth = 8;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

bool is_gguf(const MappedFile& file) {
  return ends_with(file.path(), ".gguf") ||
         (file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0);
}

}  // namespace

WeightSet::WeightSet(std::string path) : path_(std::move(path)) {
  open_path();
}

void WeightSet::open_path() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    const int error = errno;
    fail(error == ENOENT ? GK_NOT_FOUND : GK_INVALID_ARGUMENT,
         path_ + ": cannot open: " + std::strerror(error));
  }
  if (!S_ISDIR(st.st_mode)) {
    if (ends_with(path_, ".json")) {
      open_index(path_);
    } else {
      add_file(path_, nullptr);
    }
    return;
  }
  namespace fs = std::filesystem;
  std::vector<std::string> indexes, safetensors, ggufs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    std::error_code type_ec;
    if (!entry.is_regular_file(type_ec)) continue;
    const std::string name = entry.path().filename().string();
    if (ends_with(name, ".safetensors.index.json")) indexes.push_back(name);
    if (ends_with(name, ".safetensors")) safetensors.push_back(name);
    if (ends_with(name, ".gguf")) ggufs.push_back(name);
  }
  if (ec) fail(GK_INVALID_ARGUMENT, path_ + ": cannot list the folder: " + ec.message());
  std::sort(indexes.begin(), indexes.end());
  std::sort(safetensors.begin(), safetensors.end());
  std::sort(ggufs.begin(), ggufs.end());
  const std::string folder = (fs::path(path_) / "").string();
  if (!indexes.empty()) {
    auto model = std::find(indexes.begin(), indexes.end(), "model.safetensors.index.json");
    if (model != indexes.end()) return open_index(folder + *model);
    if (indexes.size() == 1) return open_index(folder + indexes[0]);
    fail(GK_INVALID_ARGUMENT, path_ + ": holds several SafeTensors indexes (" +
                                  join_names(indexes) + ") and no model.safetensors.index.json; " +
                                  "open one of them");
  }
  if (!safetensors.empty()) {
    for (const auto& name : safetensors) add_file(folder + name, "safetensors");
    return;
  }
  if (ggufs.size() == 1) return add_file(folder + ggufs[0], "gguf");
  if (ggufs.size() > 1) {
    fail(GK_INVALID_ARGUMENT,
         path_ + ": holds several GGUF files (" + join_names(ggufs) + "); open one of them");
  }
  fail(GK_NOT_FOUND, path_ + ": the folder holds no model.safetensors.index.json, " +
                         ".safetensors or .gguf file");
}

void WeightSet::add_file(const std::string& path, const char* format) {
  auto file = std::make_shared<MappedFile>(path);
  if (!format) format = is_gguf(*file) ? "gguf" : "safetensors";
  if (*format_ && std::strcmp(format_, format) != 0) {
    fail(GK_INVALID_ARGUMENT, path + ": is " + format + " but the weight set is " + format_);
  }
  format_ = std::strcmp(format, "gguf") == 0 ? "gguf" : "safetensors";
  const uint32_t index = uint32_t(files_.size());
  FileContents contents = std::strcmp(format_, "gguf") == 0 ? parse_gguf(*file, index)
                                                            : parse_safetensors(*file, index);
  for (TensorEntry& e : contents.tensors) {
    auto [it, added] = by_name_.emplace(e.name, tensors_.size());
    if (!added) {
      fail(GK_INVALID_ARGUMENT,
           tensor_context(*file, e.name) + ": also in " + file_path(tensors_[it->second].file));
    }
    tensors_.push_back(std::move(e));
  }
  // Several files' metadata merge; the first file's value of a key stands.
  for (auto it = contents.metadata.begin(); it != contents.metadata.end(); ++it) {
    if (!metadata_.contains(it.key())) metadata_[it.key()] = std::move(*it);
  }
  files_.push_back(std::move(file));
}

void WeightSet::open_index(const std::string& index_path) {
  const MappedFile index(index_path);
  if (index.size() > kMaxIndexBytes) {
    fail(GK_INVALID_ARGUMENT, index_path + ": " + std::to_string(index.size()) +
                                  " bytes, past the 100 MB limit for an index");
  }
  const std::string_view text(reinterpret_cast<const char*>(index.data()), size_t(index.size()));
  if (json_depth(text) > kMaxIndexDepth) {
    fail(GK_INVALID_ARGUMENT,
         index_path + ": the JSON nests deeper than " + std::to_string(kMaxIndexDepth) + " levels");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail(GK_INVALID_ARGUMENT, index_path + ": malformed JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    fail(GK_INVALID_ARGUMENT,
         index_path + ": has no \"weight_map\" object (tensor name to " + "shard file)");
  }
  const std::string folder = std::filesystem::path(index_path).parent_path().string();
  std::map<std::string, std::string> shard_of;  // tensor name → shard
  std::set<std::string> shards;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it->is_string()) {
      fail(GK_INVALID_ARGUMENT, index_path + ": weight_map['" + it.key() + "'] is " +
                                    json_text(*it) + ", not a file name");
    }
    const std::string shard = it->get<std::string>();
    if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
        shard.find('\0') != std::string::npos) {
      fail(GK_INVALID_ARGUMENT, index_path + ": weight_map['" + it.key() + "'] is '" + shard +
                                    "'; a shard is a file beside the index");
    }
    shard_of[it.key()] = shard;
    shards.insert(shard);
  }
  format_ = "safetensors";
  for (const std::string& shard : shards) {
    const std::string shard_path = folder.empty() ? shard : folder + "/" + shard;
    struct stat st {};
    if (::stat(shard_path.c_str(), &st) != 0) {
      std::string holder;
      for (const auto& [name, s] : shard_of) {
        if (s == shard) {
          holder = name;
          break;
        }
      }
      fail(GK_NOT_FOUND, index_path + ": shard '" + shard + "' (holding tensor '" + holder +
                             "') is missing: " + shard_path);
    }
    add_file(shard_path, "safetensors");
  }
  for (const auto& [name, shard] : shard_of) {
    auto it = by_name_.find(name);
    const std::string held_by =
        it == by_name_.end() ? std::string() : file_path(tensors_[it->second].file);
    if (it == by_name_.end() || std::filesystem::path(held_by).filename().string() != shard) {
      fail(GK_INVALID_ARGUMENT,
           index_path + ": names tensor '" + name + "' in shard '" + shard + "', which " +
               (it == by_name_.end() ? "does not hold it"
                                     : "does not hold it (" + held_by + " does)"));
    }
  }
}

int64_t WeightSet::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? -1 : int64_t(it->second);
}

void WeightSet::fail_not_found(std::string_view name) const {
  const TensorEntry* closest = nullptr;
  size_t best = std::max<size_t>(3, name.size() / 4);  // suggest only near misses
  for (const TensorEntry& e : tensors_) {
    const size_t gap =
        e.name.size() > name.size() ? e.name.size() - name.size() : name.size() - e.name.size();
    if (gap >= best) continue;
    const size_t d = edit_distance(name, e.name);
    if (d < best) best = d, closest = &e;
  }
  std::string message = "weights '" + path_ + "': no tensor '" + std::string(name) + "'";
  if (closest) message += " (did you mean '" + closest->name + "'?)";
  fail(GK_NOT_FOUND, message + "; it holds " + std::to_string(tensors_.size()) + " tensors");
}

std::string WeightSet::metadata_json() const {
  return json_text(metadata_);
}

}  // namespace gk::weights
