// NVRTC, opened at run time (libnvrtc.so.13, .so.12, .so) as the driver is, so libgpukit
// has no link-time dependency on it. Only the calls the JIT needs are declared, with
// NVRTC's own signatures.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gk::jit {

using NvrtcResult = int;
using NvrtcProgram = struct NvrtcProgramSt*;

struct NvrtcApi {
  NvrtcResult (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(NvrtcResult);
  NvrtcResult (*nvrtcCreateProgram)(NvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*);
  NvrtcResult (*nvrtcDestroyProgram)(NvrtcProgram*);
  NvrtcResult (*nvrtcAddNameExpression)(NvrtcProgram, const char*);
  NvrtcResult (*nvrtcCompileProgram)(NvrtcProgram, int, const char* const*);
  NvrtcResult (*nvrtcGetProgramLogSize)(NvrtcProgram, size_t*);
  NvrtcResult (*nvrtcGetProgramLog)(NvrtcProgram, char*);
  NvrtcResult (*nvrtcGetPTXSize)(NvrtcProgram, size_t*);
  NvrtcResult (*nvrtcGetPTX)(NvrtcProgram, char*);
  NvrtcResult (*nvrtcGetCUBINSize)(NvrtcProgram, size_t*);
  NvrtcResult (*nvrtcGetCUBIN)(NvrtcProgram, char*);
  NvrtcResult (*nvrtcGetLoweredName)(NvrtcProgram, const char*, const char**);
  NvrtcResult (*nvrtcGetNumSupportedArchs)(int*);
  NvrtcResult (*nvrtcGetSupportedArchs)(int*);
};

// What one compile produced.
struct CompileOutput {
  std::vector<char> cubin;
  std::string ptx;
  std::string log;
  // Lowered (mangled) name of each name expression, in the order given.
  std::vector<std::string> lowered_names;
};

class Nvrtc {
 public:
  // The process's NVRTC, or nullptr with *why set ("NVRTC is not installed: ...").
  // $GPUKIT_NVRTC_LIBRARY names another library file to open first (tests use it to
  // simulate a missing NVRTC with a path that does not exist). The first call opens the
  // library (a dlopen of ~100 MB: tens of milliseconds).
  static const Nvrtc* get(std::string* why);
  // The NVRTC get() opened, or nullptr when no call opened one yet. Opens nothing.
  static const Nvrtc* opened();

  // The library file dlopen found (absolute path), "" when the loader did not say.
  const std::string& library_path() const { return library_path_; }

  int version() const { return version_; }  // major*1000 + minor*10
  // SM versions this NVRTC compiles for (e.g. 75, 80, …).
  const std::vector<int>& supported_sms() const { return supported_sms_; }

  // Compiles; throws gk::Error INVALID_ARGUMENT with the log and the quoted source lines
  // on a compile error. `options` are passed as given ("-arch=sm_XX" included).
  CompileOutput compile(const std::string& source, const std::string& program_name,
                        const std::vector<std::string>& options,
                        const std::vector<std::string>& name_expressions) const;

  // How many times compile() ran NVRTC in this process (the cache tests count it).
  static int64_t compile_count() { return compile_count_.load(); }

 private:
  std::string error_text(NvrtcResult result) const;

  void* handle_ = nullptr;
  std::string library_path_;
  NvrtcApi api_{};
  int version_ = 0;
  std::vector<int> supported_sms_;
  static std::atomic<int64_t> compile_count_;
};

// What a cache hit needs of NVRTC: its version (part of every key) and the SMs it supports.
struct NvrtcFacts {
  int version = 0;
  std::vector<int> supported_sms;
};

// NVRTC's facts without opening it, when the cache folder `dir` remembers them
// (<dir>/nvrtc.facts, written by remember_nvrtc in an earlier process) and nothing that
// decides which library get() would open has changed since: $GPUKIT_NVRTC_LIBRARY,
// $LD_LIBRARY_PATH, /etc/ld.so.cache (size, modification time) and the library file (path,
// size, modification time). nullopt otherwise, and when an NVRTC is loaded in the process
// already (get() is then cheap and authoritative).
std::optional<NvrtcFacts> remembered_nvrtc(const std::string& dir);

// Writes <dir>/nvrtc.facts for `nvrtc` (to a temporary file renamed into place). A failure is
// ignored: it only costs the next process the dlopen.
void remember_nvrtc(const std::string& dir, const Nvrtc& nvrtc);

// NVRTC's log with each "file(line): error" followed by that line of `source`, numbered,
// and a caret line kept as NVRTC wrote it; lines of other files are left as they are.
std::string quote_source_lines(const std::string& log, const std::string& source,
                               const std::string& program_name);

}  // namespace gk::jit
