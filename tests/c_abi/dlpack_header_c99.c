/*
 * dlpack_header_c99.c — gpukit_dlpack.h compiles as strict C99 (-pedantic -Werror) on its
 * own, declares the DLPack 1.x structs, and makes a later <dlpack/dlpack.h> a no-op.
 */
#include <gpukit/gpukit_dlpack.h>

#include <stdio.h>
#include <string.h>

static void deleter(DLManagedTensorVersioned* self) { self->manager_ctx = NULL; }

int main(void) {
  int64_t shape[2] = {2, 3};
  DLManagedTensorVersioned m;
  int failures = 0;

  memset(&m, 0, sizeof m);
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  m.deleter = deleter;
  m.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  m.dl_tensor.device.device_type = kDLCUDA;
  m.dl_tensor.dtype.code = kDLBfloat;
  m.dl_tensor.dtype.bits = 16;
  m.dl_tensor.dtype.lanes = 1;
  m.dl_tensor.ndim = 2;
  m.dl_tensor.shape = shape;
  m.manager_ctx = &m;
  m.deleter(&m);
  if (m.manager_ctx != NULL) ++failures;
  if (DLPACK_MAJOR_VERSION < 1) ++failures;
#ifndef DLPACK_DLPACK_H_
  ++failures;
#endif
  if (failures) {
    fprintf(stderr, "%d gpukit_dlpack.h check(s) failed\n", failures);
    return 1;
  }
  printf("gpukit_dlpack.h: C99 ok (DLPack %d.%d)\n", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  return 0;
}
