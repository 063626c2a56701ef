#include "plugin/manifest.h"

#include <yaml-cpp/yaml.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/dtype.h"
#include "common/error.h"
#include "dispatch/op_schema.h"

namespace gk {
namespace {

constexpr int kSchemaVersion = 1;

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail_at(const YAML::Node& node, const std::string& field,
                            const std::string& problem) const {
    int line = node.Mark().is_null() ? 0 : node.Mark().line + 1;
    fail(GK_INVALID_ARGUMENT, path_ + ":" + std::to_string(line) + ": field '" + field + "': " +
                                  problem);
  }

  YAML::Node required(const YAML::Node& map, const char* key) const {
    YAML::Node n = map[key];
    if (!n) {
      int line = map.Mark().is_null() ? 0 : map.Mark().line + 1;
      fail(GK_INVALID_ARGUMENT, path_ + ":" + std::to_string(line) + ": missing required field '" +
                                    key + "'");
    }
    return n;
  }

  std::string scalar(const YAML::Node& node, const std::string& field) const {
    if (!node.IsScalar()) fail_at(node, field, "expected a single value");
    return node.Scalar();
  }

  int32_t integer(const YAML::Node& node, const std::string& field) const {
    std::string text = scalar(node, field);
    try {
      size_t used = 0;
      long long v = std::stoll(text, &used);
      if (used != text.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(text);
      return int32_t(v);
    } catch (const std::exception&) {
      fail_at(node, field, "'" + text + "' is not an integer");
    }
  }

  // Fails on a field not in `allowed`, and on a field given twice (YAML leaves that to the
  // reader; taking either copy would hide a mistake).
  void only_fields(const YAML::Node& map, const std::string& where,
                   const std::set<std::string>& allowed) const {
    std::set<std::string> seen;
    for (const auto& kv : map) {
      std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "(not a name)";
      if (!seen.insert(key).second) {
        fail(GK_INVALID_ARGUMENT, path_ + ":" + std::to_string(kv.first.Mark().line + 1) +
                                      ": field '" + (where.empty() ? key : where + "." + key) +
                                      "' is given twice");
      }
      if (allowed.count(key)) continue;
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      int line = kv.first.Mark().line + 1;
      fail(GK_INVALID_ARGUMENT, path_ + ":" + std::to_string(line) + ": unknown field '" +
                                    (where.empty() ? key : where + "." + key) +
                                    "' (expected one of: " + list + ")");
    }
  }

 private:
  std::string path_;
};

// "MAJOR" or "MAJOR.MINOR", each part decimal digits of at most 65535.
uint32_t parse_version(const Reader& r, const YAML::Node& node, const std::string& field) {
  const std::string text = r.scalar(node, field);
  auto part = [&](size_t begin, size_t end) {
    uint32_t value = 0;
    bool ok = end > begin && end - begin <= 5;
    for (size_t i = begin; ok && i < end; ++i) {
      ok = text[i] >= '0' && text[i] <= '9';
      value = value * 10 + uint32_t(text[i] - '0');
    }
    if (!ok || value > 0xffff) {
      r.fail_at(node, field, "'" + text + "' is not a MAJOR.MINOR version (each part 0..65535)");
    }
    return value;
  };
  const size_t dot = text.find('.');
  const uint32_t major = part(0, dot == std::string::npos ? text.size() : dot);
  const uint32_t minor = dot == std::string::npos ? 0 : part(dot + 1, text.size());
  return GK_MAKE_VERSION(major, minor);
}

// The whole text of a manifest file. Opened without blocking, so that a FIFO or a device
// named *.yaml is refused instead of waiting for a writer.
std::string read_manifest_text(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    fail(errno == ENOENT ? GK_NOT_FOUND : GK_INVALID_ARGUMENT,
         path + ": cannot open the manifest: " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(GK_INVALID_ARGUMENT, path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    fail(GK_INVALID_ARGUMENT, path + ": " + path_kind_problem(path) + ", not a manifest file");
  }
  if (uint64_t(st.st_size) > kMaxManifestBytes) {
    fail(GK_INVALID_ARGUMENT, path + ": " + std::to_string(st.st_size) +
                                  " bytes; a manifest is at most " +
                                  std::to_string(kMaxManifestBytes));
  }
  std::string text(size_t(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(GK_INVALID_ARGUMENT, path + ": cannot read the manifest");
    done += size_t(n);
  }
  return text;
}

}  // namespace

std::string path_kind_problem(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) {
    if (ec == std::errc::too_many_symbolic_link_levels) return "is a symbolic link loop";
    if (ec == std::errc::no_such_file_or_directory) {
      return fs::is_symlink(fs::symlink_status(path, ec)) ? "is a dangling symbolic link"
                                                          : "does not exist";
    }
    return "cannot be read (" + ec.message() + ")";
  }
  switch (st.type()) {
    case fs::file_type::regular:
      return "";
    case fs::file_type::directory:
      return "is a folder";
    case fs::file_type::fifo:
      return "is a FIFO";
    case fs::file_type::socket:
      return "is a socket";
    case fs::file_type::block:
    case fs::file_type::character:
      return "is a device file";
    default:
      return "is not a regular file";
  }
}

bool Manifest::matches_sm(int32_t sm) const {
  if (!sm_list.empty()) return std::find(sm_list.begin(), sm_list.end(), sm) != sm_list.end();
  return sm >= sm_min && sm <= sm_max;
}

const ManifestOp* Manifest::find_op(const std::string& op) const {
  for (const ManifestOp& o : ops) {
    if (o.name == op) return &o;
  }
  return nullptr;
}

std::string Manifest::sm_text() const {
  if (device != GK_DEVICE_KIND_CUDA) return "";
  if (sm_list.empty()) return "SM " + std::to_string(sm_min) + "-" + std::to_string(sm_max);
  std::string out = "SM ";
  for (size_t i = 0; i < sm_list.size(); ++i) out += (i ? ", " : "") + std::to_string(sm_list[i]);
  return out;
}

Manifest read_manifest(const std::string& path) {
  Reader r(path);
  const std::string text = read_manifest_text(path);
  // One document: a "---" or "..." line after the content starts another (which YAML::Load
  // would ignore). Checked on the text: yaml-cpp's LoadAll does not terminate on some
  // malformed input.
  bool content = false;
  int line_no = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + at, end - at);
    ++line_no;
    at = end + 1;
    const bool marker = (line.substr(0, 3) == "---" || line.substr(0, 3) == "...") &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    if (marker && content) {
      fail(GK_INVALID_ARGUMENT, path + ":" + std::to_string(line_no) +
                                    ": a second YAML document; a manifest is one document");
    }
    const size_t first = line.find_first_not_of(" \t\r");
    if (!marker && first != std::string_view::npos && line[first] != '#' && line[0] != '%') {
      content = true;
    }
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(GK_INVALID_ARGUMENT, path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (!root.IsMap()) {
    fail(GK_INVALID_ARGUMENT, path + ":1: invalid manifest: expected a YAML mapping at the top");
  }
  r.only_fields(root, "",
                {"schema", "name", "version", "plugin_abi", "library", "family", "device", "sm",
                 "priority", "ops", "architectures", "description", "requires"});
  Manifest m;
  m.path = path;
  int schema = r.integer(r.required(root, "schema"), "schema");
  if (schema != kSchemaVersion) {
    r.fail_at(root["schema"], "schema", "manifest schema " + std::to_string(schema) +
                                            " is not supported (this runtime reads schema 1)");
  }
  m.name = r.scalar(r.required(root, "name"), "name");
  if (m.name.empty() || m.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    r.fail_at(root["name"], "name", "'" + m.name + "' must be lower-case letters, digits and '_'");
  }
  m.version = r.scalar(r.required(root, "version"), "version");
  m.family = r.scalar(r.required(root, "family"), "family");
  m.plugin_abi = parse_version(r, r.required(root, "plugin_abi"), "plugin_abi");

  YAML::Node library = r.required(root, "library");
  std::filesystem::path lib = r.scalar(library, "library");
  if (lib.is_relative()) lib = std::filesystem::path(path).parent_path() / lib;
  m.library = lib.lexically_normal().string();
  m.library_line = library.Mark().line + 1;

  std::string device = r.scalar(r.required(root, "device"), "device");
  if (device == "cpu") {
    m.device = GK_DEVICE_KIND_CPU;
  } else if (device == "cuda") {
    m.device = GK_DEVICE_KIND_CUDA;
  } else {
    r.fail_at(root["device"], "device", "'" + device + "' is not 'cpu' or 'cuda'");
  }

  YAML::Node sm = root["sm"];
  if (m.device == GK_DEVICE_KIND_CUDA) {
    if (!sm) r.required(root, "sm");
    if (sm.IsMap()) {
      r.only_fields(sm, "sm", {"min", "max"});
      m.sm_min = r.integer(r.required(sm, "min"), "sm.min");
      m.sm_max = r.integer(r.required(sm, "max"), "sm.max");
      if (m.sm_min > m.sm_max) {
        r.fail_at(sm, "sm", "min " + std::to_string(m.sm_min) + " is above max " + std::to_string(m.sm_max));
      }
    } else if (sm.IsSequence() && sm.size() > 0) {
      for (size_t i = 0; i < sm.size(); ++i) {
        m.sm_list.push_back(r.integer(sm[i], "sm[" + std::to_string(i) + "]"));
      }
      m.sm_min = *std::min_element(m.sm_list.begin(), m.sm_list.end());
      m.sm_max = *std::max_element(m.sm_list.begin(), m.sm_list.end());
    } else {
      r.fail_at(sm, "sm", "expected {min: N, max: N} or a list of SM versions such as [80, 86]");
    }
  } else if (sm) {
    r.fail_at(sm, "sm", "only a cuda plugin has an SM range");
  }

  m.priority = r.integer(r.required(root, "priority"), "priority");

  // Bare file names only: the runtime chooses the folder (plugin/library_search.h).
  if (YAML::Node libs = root["requires"]) {
    if (!libs.IsSequence() || libs.size() == 0) {
      r.fail_at(libs, "requires",
                "expected a non-empty list of library file names such as "
                "[libcufft.so.12]");
    }
    for (size_t i = 0; i < libs.size(); ++i) {
      const std::string field = "requires[" + std::to_string(i) + "]";
      std::string name = r.scalar(libs[i], field);
      if (name.empty() || name.find('/') != std::string::npos ||
          name.find(".so") == std::string::npos) {
        r.fail_at(libs[i], field,
                  "'" + name +
                      "' is not a shared library file name without a "
                      "folder (such as libcufft.so.12)");
      }
      m.requires_libraries.push_back(std::move(name));
    }
  }

  // A model plugin lists the architectures it builds (HF config `architectures[0]`) and
  // may serve no op; a kernel plugin lists its ops.
  if (YAML::Node archs = root["architectures"]) {
    if (!archs.IsSequence() || archs.size() == 0) {
      r.fail_at(archs, "architectures", "expected a non-empty list such as [LlamaForCausalLM]");
    }
    for (size_t i = 0; i < archs.size(); ++i) {
      m.architectures.push_back(r.scalar(archs[i], "architectures[" + std::to_string(i) + "]"));
    }
    if (!root["ops"]) return m;
  }
  YAML::Node ops = r.required(root, "ops");
  if (!ops.IsSequence() || ops.size() == 0) r.fail_at(ops, "ops", "expected a non-empty list of ops");
  for (size_t i = 0; i < ops.size(); ++i) {
    const YAML::Node& op = ops[i];
    std::string where = "ops[" + std::to_string(i) + "]";
    if (!op.IsMap()) r.fail_at(op, where, "expected {name: OP, dtypes: [...]}");
    r.only_fields(op, where, {"name", "dtypes"});
    ManifestOp entry;
    entry.name = r.scalar(r.required(op, "name"), where + ".name");
    if (!OpRegistry::instance().find(entry.name)) {
      r.fail_at(op["name"], where + ".name", "unknown op '" + entry.name + "' (docs/ops.md lists the ops)");
    }
    if (m.find_op(entry.name)) r.fail_at(op["name"], where + ".name", "op '" + entry.name + "' is listed twice");
    YAML::Node dtypes = r.required(op, "dtypes");
    if (!dtypes.IsSequence() || dtypes.size() == 0) {
      r.fail_at(dtypes, where + ".dtypes", "expected a non-empty list of dtypes");
    }
    for (size_t k = 0; k < dtypes.size(); ++k) {
      std::string name = r.scalar(dtypes[k], where + ".dtypes");
      auto d = dtype_from_name(name);
      if (!d) {
        r.fail_at(dtypes[k], where + ".dtypes", "unknown dtype '" + name + "' (known: " + all_dtype_names() + ")");
      }
      entry.dtypes.push_back(*d);
    }
    m.ops.push_back(std::move(entry));
  }
  return m;
}

}  // namespace gk
