// Plugin manifests (YAML, schema v1): read and validated before any library is opened.
// Errors carry file:line and the field ("matmul_sm90.yaml:12: field 'ops[3].dtypes':
// unknown dtype 'bf17'").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpukit/gpukit.h"

namespace gk {

struct ManifestOp {
  std::string name;
  std::vector<int32_t> dtypes;  // the dtypes of the op's first input it serves
};

struct Manifest {
  std::string path;           // the manifest file
  std::string name;
  std::string version;
  std::string family;
  std::string library;        // resolved against the manifest's folder
  int library_line = 0;       // where 'library' stands, for "missing library" reasons
  uint32_t plugin_abi = 0;    // GK_MAKE_VERSION form
  gk_device_kind device = GK_DEVICE_KIND_CPU;
  int32_t sm_min = 0;         // CUDA only: inclusive range, or an explicit list
  int32_t sm_max = 0;
  std::vector<int32_t> sm_list;
  int32_t priority = 0;
  std::vector<ManifestOp> ops;
  std::vector<std::string> architectures;  // a model plugin's (HF class names)
  // Shared libraries (file names such as libcufft.so.12) the runtime opens before the plugin,
  // from the folders of plugin/library_search.h; the plugin is skipped when one is missing.
  std::vector<std::string> requires_libraries;

  bool matches_sm(int32_t sm) const;
  const ManifestOp* find_op(const std::string& op) const;
  // "SM 80-90" or "SM 80, 86".
  std::string sm_text() const;
};

// What a path is, for messages: "a folder", "a FIFO", "a symbolic link loop", … ; empty for
// a regular file (or a symbolic link to one).
std::string path_kind_problem(const std::string& path);

// The largest manifest read: a manifest lists a plugin's ops, a few KiB.
inline constexpr uint64_t kMaxManifestBytes = 1 << 20;

// Parses and validates a manifest file (a regular file of at most kMaxManifestBytes). Throws gk::Error(INVALID_ARGUMENT) with
// "path:line: …" for malformed YAML (a second document and a key given twice included),
// unknown or missing fields, bad values and ops the runtime does not know.
Manifest read_manifest(const std::string& path);

}  // namespace gk
