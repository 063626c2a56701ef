// lt_library.cpp — see lt_library.h.
#include "lt_library.h"

#include <dlfcn.h>

#include <string>

#include "gpukit/gpukit_plugin.hpp"

namespace gk::cublaslt {
namespace {

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*out) *missing = name;
  return *out != nullptr;
}

// Fills *api from `lib`; false with *why naming what is missing or mismatched.
bool resolve_api(void* lib, LtApi* api, std::string* why) {
  std::string missing;
  const bool ok =
      resolve(lib, "cublasLtGetVersion", &api->get_version, &missing) &&
      resolve(lib, "cublasLtGetStatusString", &api->status_string, &missing) &&
      resolve(lib, "cublasLtCreate", &api->create, &missing) &&
      resolve(lib, "cublasLtDestroy", &api->destroy, &missing) &&
      resolve(lib, "cublasLtMatmulDescCreate", &api->desc_create, &missing) &&
      resolve(lib, "cublasLtMatmulDescDestroy", &api->desc_destroy, &missing) &&
      resolve(lib, "cublasLtMatmulDescSetAttribute", &api->desc_set, &missing) &&
      resolve(lib, "cublasLtMatrixLayoutCreate", &api->layout_create, &missing) &&
      resolve(lib, "cublasLtMatrixLayoutDestroy", &api->layout_destroy, &missing) &&
      resolve(lib, "cublasLtMatrixLayoutSetAttribute", &api->layout_set, &missing) &&
      resolve(lib, "cublasLtMatmulPreferenceCreate", &api->pref_create, &missing) &&
      resolve(lib, "cublasLtMatmulPreferenceDestroy", &api->pref_destroy, &missing) &&
      resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &api->pref_set, &missing) &&
      resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &api->heuristic, &missing) &&
      resolve(lib, "cublasLtMatmul", &api->matmul, &missing);
  if (!ok) {
    *why = "libcublasLt lacks " + missing;
    return false;
  }
  const size_t version = api->get_version();
  if (version / 10000 != CUBLAS_VER_MAJOR) {
    *why = "libcublasLt version " + std::to_string(version) + " is not the major version " +
           std::to_string(CUBLAS_VER_MAJOR) + " this plugin was built against";
    return false;
  }
  return true;
}

}  // namespace

LtLibrary::LtLibrary() {
  const char* names[] = {"libcublasLt.so.13", "libcublasLt.so"};
  for (const char* n : names) {
    lib_ = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (lib_) break;
  }
  if (!lib_) {
    const char* e = dlerror();
    gk::plugin::fail(GK_UNAVAILABLE,
                     std::string("libcublasLt.so.13 not found: ") + (e ? e : "dlopen failed"));
  }
  std::string why;
  if (!resolve_api(lib_, &api_, &why)) {
    dlclose(lib_);
    gk::plugin::fail(GK_UNAVAILABLE, why);
  }
  const cublasStatus_t st = api_.create(&handle_);
  if (st != CUBLAS_STATUS_SUCCESS) {
    const std::string message = error("cublasLtCreate", st);
    dlclose(lib_);
    gk::plugin::fail(GK_UNAVAILABLE, message);
  }
}

LtLibrary::~LtLibrary() {
  if (handle_) api_.destroy(handle_);
  dlclose(lib_);
}

std::string LtLibrary::error(const char* what, cublasStatus_t st) const {
  return std::string(what) + ": " + (api_.status_string ? api_.status_string(st) : "?");
}

}  // namespace gk::cublaslt
