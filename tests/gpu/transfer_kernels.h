// Host entry of tests/gpu/transfer_kernels.cu.
#pragma once

#include <cstddef>

// Queues on `stream` (a CUstream) a kernel whose blocks each wait `spin_ms` milliseconds, then
// copy `bytes` from `src` to `dst` (device addresses; src NULL: copy nothing). Returns the
// cudaError_t of the launch (0 = success).
int launch_spin_then_copy(const void* src, void* dst, size_t bytes, int spin_ms, void* stream);
