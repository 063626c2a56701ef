// The largest sizes the runtime accepts, shared by the tensor checks and the allocators.
#pragma once

#include <cstdint>

namespace gk {

// The largest tensor or allocation, in bytes (and so in elements): 2^62 keeps every byte
// offset within a tensor, and the sum of two of them, inside int64, and every rounding of
// an allocation size inside uint64. No device holds that much; a request past it is refused
// before any arithmetic on it.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 62;

}  // namespace gk
