// The run-time search for the NVIDIA libraries (cuBLASLt, cuFFT, NVRTC) that plugins and the
// JIT use without a link-time dependency on them: a release wheel carries none, and finds
// them in the NVIDIA PyPI wheels (pip install gpukit[cuda]) or a CUDA toolkit. Folders, in
// order (docs/plugins.md, "Libraries a plugin requires"):
//   1. $GPUKIT_CUDA_LIBRARY_PATH, folders separated by ':'
//   2. the NVIDIA wheels beside the package: <site-packages>/nvidia/*/lib, where
//      <site-packages> is the folder above the one holding libgpukit
//   3. $CUDA_HOME/lib64, $CUDA_PATH/lib64
//   4. the dynamic loader's own search (LD_LIBRARY_PATH, RUNPATH, /etc/ld.so.cache)
//   5. /usr/local/cuda/lib64
#pragma once

#include <string>
#include <vector>

namespace gk {

// One library found (or not) by open_runtime_library.
struct LibraryLookup {
  void* handle = nullptr;  // dlopen handle, never closed; null when not found
  std::string path;        // the file opened, or the bare name when the loader found it
  std::string why;         // when not found: every place tried, with the loader's reason
};

// The places of the search above, in order, each listed once; an empty string stands for
// step 4, the loader's own search. `libgpukit_dir` is the folder holding libgpukit (empty:
// step 2 is skipped); `use_env` false skips the environment variables (steps 1 and 3).
std::vector<std::string> library_search_places(const std::string& libgpukit_dir, bool use_env);

// Opens the shared library `soname` (a file name such as "libcufft.so.12", no folder) from
// the first place of the search above that has it, with RTLD_NOW | RTLD_LOCAL. Later
// dlopen() calls for the same soname, and plugins that name it in DT_NEEDED, get this copy.
// Results, found or not, are cached for the process. Thread-safe.
LibraryLookup open_runtime_library(const std::string& soname);

// The folder holding libgpukit, from dladdr.
std::string libgpukit_folder();

}  // namespace gk
