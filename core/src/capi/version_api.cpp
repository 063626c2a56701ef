// Versions, errors, strings and dtypes.
#include <cstdlib>

#include "common/dtype.h"
#include "common/error.h"
#include "gpukit/gpukit.h"

extern "C" {

GK_API uint32_t gk_abi_version(void) { return GK_ABI_VERSION; }

GK_API const char* gk_library_version(void) { return GPUKIT_VERSION_STRING; }

GK_API const char* gk_last_error(void) { return gk::last_error(); }

GK_API const char* gk_status_name(gk_status status) {
  static const char* const kNames[] = {
      "OK",        "CANCELLED",         "UNKNOWN",          "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",   "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",      "DATA_LOSS",
      "UNAUTHENTICATED"};
  if (status < 0 || status > GK_UNAUTHENTICATED) return "UNKNOWN_STATUS";
  return kNames[status];
}

GK_API void gk_string_free(char* str) { std::free(str); }

GK_API size_t gk_dtype_size(int32_t dtype) { return gk::dtype_size(dtype); }

GK_API const char* gk_dtype_name(int32_t dtype) { return gk::dtype_name(dtype); }

GK_API uint32_t gk_dtype_block(int32_t dtype, uint32_t* out_block_bytes) {
  return gk::dtype_block(dtype, out_block_bytes);
}

}  // extern "C"
