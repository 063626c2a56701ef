// The JIT's compile path, below the C API: a gk_jit_compile request checked and keyed
// (prepare_compile), and its image taken from this process's images, the disk cache or a
// fresh NVRTC compile (build_image). It uses NVRTC, the caches and the Logger; loading the
// image on a device and the gk_jit_* handles are the C API's (capi/jit_api.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpukit/gpukit.h"
#include "jit/module_image.h"
#include "jit/program_key.h"

namespace gk {
class Logger;
}

namespace gk::jit {

class Nvrtc;

// Thrown by build_image when the key was made with a remembered NVRTC version
// (remembered_nvrtc) that the NVRTC opened to compile does not have: the caller prepares the
// compile again with trust_remembered false.
struct RememberedVersionWrong {};

// A compile checked and keyed, ready for build_image.
struct CompileRequest {
  ProgramSpec spec;
  std::string key;  // program_key(spec, nvrtc_version, gk_abi_version())
  // Null when NVRTC's facts were remembered in the cache folder: it is then opened only to
  // compile, on a miss.
  const Nvrtc* nvrtc = nullptr;
  int nvrtc_version = 0;
  bool force = false;     // GK_JIT_FORCE_COMPILE
  bool use_disk = false;  // not GK_JIT_NO_DISK_CACHE
  std::string cache_dir;  // the disk cache's folder when use_disk
};

// Checks `options` (copied in full by the caller) against NVRTC and keys the compile of
// `source` for `sm_version` (the options' SM, else the device's). `trust_remembered`: use
// NVRTC facts remembered in the cache folder instead of opening NVRTC. Throws gk::Error with
// messages that name gk_jit_compile.
CompileRequest prepare_compile(const char* source, const gk_jit_options& options,
                               int32_t sm_version, bool trust_remembered);

// The image of `request`: from this process's images, else the disk cache, else compiled
// (and written to the disk cache). Sets `origin` (GK_JIT_ORIGIN_*) and `cache_path` (the
// disk cache entry, empty when none). When NVRTC was opened, its facts are remembered in the
// cache folder for the next process. Throws gk::Error, or RememberedVersionWrong.
std::shared_ptr<const ModuleImage> build_image(const Logger& logger, const CompileRequest& request,
                                               int32_t& origin, std::string& cache_path);

// In-process state for tests: forgets this process's images, so the next compile goes to the
// disk cache.
void forget_process_images();

}  // namespace gk::jit
