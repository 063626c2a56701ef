// What a JIT compile produces and the disk cache stores: the cubin of one SM, its PTX,
// NVRTC's log and the lowered names of the name expressions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gk::jit {

struct ModuleImage {
  std::string key;  // 64 hex digits (program_key.h)
  int32_t sm_version = 0;
  int32_t nvrtc_version = 0;
  std::vector<char> cubin;
  std::string ptx;
  std::string log;
  // (name expression, lowered name), in the order of the compile's name expressions.
  std::vector<std::pair<std::string, std::string>> lowered_names;
};

}  // namespace gk::jit
