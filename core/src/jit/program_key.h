// A JIT compile's cache key and the NVRTC options it runs with.
//
// The key is the SHA-256 of: the key format, the GPUkit ABI version, NVRTC's version, the
// SM, the program name, the source, the normalised options, the name expressions, and the
// path and contents of every header the source includes, found as NVRTC will find it:
// #include "x" beside the including header (the source itself has no folder), then in the
// include folders in order; #include <x> in the include folders. Includes are scanned
// textually (those inside #if branches count too, which can only cause a rebuild, never a
// stale hit); a header found in no include folder (NVRTC's built-ins such as
// <cuda_fp16.h>, covered by the NVRTC version) counts by its name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gk::jit {

struct ProgramSpec {
  std::string source;
  std::string program_name;
  std::vector<std::string> options;           // as given (trimmed, -I removed, below)
  std::vector<std::string> include_paths;     // absolute, in search order
  std::vector<std::string> name_expressions;  // as given
  int32_t sm_version = 0;
};

// Trims the options, moves "-I<dir>", "-I <dir>" and "--include-path=<dir>" into
// include_paths (made absolute) after the explicit ones, and refuses options that set the
// architecture ("-arch", "--gpu-architecture": the SM is chosen by the device) or are
// empty. Throws gk::Error INVALID_ARGUMENT naming the option.
void normalise_options(const std::vector<std::string>& given_options,
                       const std::vector<std::string>& given_include_paths, ProgramSpec& spec);

// The options passed to NVRTC: the caller's, then -I for each include folder, then
// -arch=sm_XX.
std::vector<std::string> nvrtc_options(const ProgramSpec& spec);

// Whether `text` has an #include directive that names a file ("x" or <x>).
bool has_include_directive(const std::string& text);

// The headers the source includes, resolved as the file comment says (path, contents);
// unresolved names are returned with path "<name>" and empty contents.
struct IncludedHeader {
  std::string path;
  std::string contents;
};
std::vector<IncludedHeader> included_headers(const ProgramSpec& spec);

// The 64-hex-digit key (see the file comment).
std::string program_key(const ProgramSpec& spec, int nvrtc_version, uint32_t abi_version);

}  // namespace gk::jit
