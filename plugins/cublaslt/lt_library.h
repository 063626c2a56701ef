// The cuBLASLt library, opened with dlopen so that the plugin needs no cuBLAS at build or
// load time: the entry points the plugin calls and one handle, released with the library.
#pragma once

#include <cublasLt.h>

#include <string>

namespace gk::cublaslt {

// The cuBLASLt entry points we call, resolved from the dlopen'ed library.
struct LtApi {
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

class LtLibrary {
 public:
  // Opens libcublasLt of the major version the plugin was built against and creates a
  // handle. Throws the plugin SDK's Failure (GK_UNAVAILABLE) naming what is missing.
  LtLibrary();
  ~LtLibrary();
  LtLibrary(const LtLibrary&) = delete;
  LtLibrary& operator=(const LtLibrary&) = delete;

  const LtApi& api() const { return api_; }
  cublasLtHandle_t handle() const { return handle_; }
  // "`what`: <cuBLAS's name for st>".
  std::string error(const char* what, cublasStatus_t st) const;

 private:
  void* lib_ = nullptr;
  LtApi api_;
  cublasLtHandle_t handle_ = nullptr;
};

}  // namespace gk::cublaslt
