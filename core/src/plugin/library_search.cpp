#include "plugin/library_search.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "common/environment.h"

namespace gk {
namespace {

std::vector<std::string> split_folders(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find(':', at);
    if (end == std::string::npos) end = text.size();
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// <site>/nvidia/*/lib, sorted: the layout of NVIDIA's PyPI wheels (nvidia/cu13/lib for the
// CUDA 13 ones, nvidia/cublas/lib, nvidia/cufft/lib, … for CUDA 12).
std::vector<std::string> nvidia_wheel_folders(const std::filesystem::path& site) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path root = site / "nvidia";
  if (!fs::is_directory(root, ec)) return out;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path lib = it->path() / "lib";
    if (fs::is_directory(lib, ec)) out.push_back(lib.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string libgpukit_folder() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&libgpukit_folder), &info) || !info.dli_fname) return "";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

std::vector<std::string> library_search_places(const std::string& libgpukit_dir, bool use_env) {
  std::vector<std::string> places;
  auto add = [&](const std::string& folder) {
    if (std::find(places.begin(), places.end(), folder) == places.end()) {
      places.push_back(folder);
    }
  };
  if (use_env) {
    if (auto v = env_value("GPUKIT_CUDA_LIBRARY_PATH")) {
      for (const std::string& f : split_folders(*v)) add(f);
    }
  }
  if (!libgpukit_dir.empty()) {
    // libgpukit sits in <site-packages>/gpukit/ when installed from the wheel.
    for (const std::string& f :
         nvidia_wheel_folders(std::filesystem::path(libgpukit_dir).parent_path())) {
      add(f);
    }
  }
  if (use_env) {
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      if (auto v = env_value(var)) add((std::filesystem::path(*v) / "lib64").string());
    }
  }
  places.push_back("");  // the loader's search; never a duplicate of a folder
  add("/usr/local/cuda/lib64");
  return places;
}

LibraryLookup open_runtime_library(const std::string& soname) {
  static std::mutex mutex;
  static std::map<std::string, LibraryLookup> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(soname); it != cache.end()) return it->second;

  LibraryLookup found;
  if (soname.empty() || soname.find('/') != std::string::npos) {
    found.why = "'" + soname + "' is not a library file name (such as libcufft.so.12)";
    return cache[soname] = found;
  }
  namespace fs = std::filesystem;
  std::string tried;
  for (const std::string& place : library_search_places(libgpukit_folder(), true)) {
    std::string path = soname;
    if (!place.empty()) {
      std::error_code ec;
      path = (fs::path(place) / soname).string();
      // A folder without the file is one short entry, not the loader's long message.
      if (!fs::exists(path, ec)) {
        tried += (tried.empty() ? "" : ", ") + place;
        continue;
      }
    }
    dlerror();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      found.handle = handle;
      found.path = path;
      return cache[soname] = found;
    }
    // The loader's "cannot open shared object file" after the folders' misses says nothing
    // new; any other failure (wrong architecture, a missing dependency) is worth its text.
    const char* err = dlerror();
    std::string reason = err ? err : "dlopen failed";
    if (place.empty()) {
      tried += (tried.empty() ? "" : ", ") + std::string("the loader's path") +
               (reason.find("No such file") == std::string::npos ? " (" + reason + ")" : "");
    } else {
      tried += (tried.empty() ? "" : ", ") + path + " (" + reason + ")";
    }
  }
  found.why = soname + " not found in " + tried +
              "; install the NVIDIA wheels (pip install gpukit[cuda]) or a CUDA toolkit, or "
              "set GPUKIT_CUDA_LIBRARY_PATH to the folder holding it";
  return cache[soname] = found;
}

}  // namespace gk
