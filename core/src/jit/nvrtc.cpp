#include "jit/nvrtc.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "common/environment.h"
#include "common/error.h"
#include "common/read_file.h"
#include "plugin/library_search.h"

namespace gk::jit {

std::atomic<int64_t> Nvrtc::compile_count_{0};

namespace {

std::atomic<const Nvrtc*> opened_nvrtc{nullptr};

// The library names get() tries, in order.
std::vector<std::string> library_names() {
  if (auto chosen = env_value("GPUKIT_NVRTC_LIBRARY")) return {*chosen};
  return {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
}

}  // namespace

const Nvrtc* Nvrtc::opened() { return opened_nvrtc.load(std::memory_order_acquire); }

const Nvrtc* Nvrtc::get(std::string* why) {
  static std::once_flag once;
  static Nvrtc* nvrtc = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    const std::vector<std::string> names = library_names();
    void* handle = nullptr;
    std::string tried;
    for (const std::string& name : names) {
      // A path chosen by GPUKIT_NVRTC_LIBRARY is opened as given; a bare name is looked for
      // where the plugins' libraries are (the NVIDIA wheels, a toolkit, the loader's path).
      if (name.find('/') != std::string::npos) {
        handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
        const char* err = handle ? nullptr : dlerror();
        if (!handle) tried += (tried.empty() ? "" : "; ") + std::string(err ? err : name.c_str());
      } else {
        // The first name's message lists the folders searched; the others only add a name.
        LibraryLookup lib = open_runtime_library(name);
        handle = lib.handle;
        if (!handle) tried += tried.empty() ? lib.why : "; nor " + name;
      }
      if (handle) break;
    }
    if (!handle) {
      failure = "NVRTC is not installed (" + tried + ")";
      return;
    }
    auto* n = new Nvrtc();
    n->handle_ = handle;
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) {
      char* real = realpath(map->l_name, nullptr);
      n->library_path_ = real ? real : map->l_name;
      free(real);
    }
    NvrtcApi& a = n->api_;
    struct Symbol {
      const char* name;
      void** slot;
    };
    const Symbol symbols[] = {
        {"nvrtcVersion", reinterpret_cast<void**>(&a.nvrtcVersion)},
        {"nvrtcGetErrorString", reinterpret_cast<void**>(&a.nvrtcGetErrorString)},
        {"nvrtcCreateProgram", reinterpret_cast<void**>(&a.nvrtcCreateProgram)},
        {"nvrtcDestroyProgram", reinterpret_cast<void**>(&a.nvrtcDestroyProgram)},
        {"nvrtcAddNameExpression", reinterpret_cast<void**>(&a.nvrtcAddNameExpression)},
        {"nvrtcCompileProgram", reinterpret_cast<void**>(&a.nvrtcCompileProgram)},
        {"nvrtcGetProgramLogSize", reinterpret_cast<void**>(&a.nvrtcGetProgramLogSize)},
        {"nvrtcGetProgramLog", reinterpret_cast<void**>(&a.nvrtcGetProgramLog)},
        {"nvrtcGetPTXSize", reinterpret_cast<void**>(&a.nvrtcGetPTXSize)},
        {"nvrtcGetPTX", reinterpret_cast<void**>(&a.nvrtcGetPTX)},
        {"nvrtcGetCUBINSize", reinterpret_cast<void**>(&a.nvrtcGetCUBINSize)},
        {"nvrtcGetCUBIN", reinterpret_cast<void**>(&a.nvrtcGetCUBIN)},
        {"nvrtcGetLoweredName", reinterpret_cast<void**>(&a.nvrtcGetLoweredName)},
        {"nvrtcGetNumSupportedArchs", reinterpret_cast<void**>(&a.nvrtcGetNumSupportedArchs)},
        {"nvrtcGetSupportedArchs", reinterpret_cast<void**>(&a.nvrtcGetSupportedArchs)},
    };
    for (const Symbol& s : symbols) {
      *s.slot = dlsym(handle, s.name);
      if (!*s.slot) {
        failure = std::string("the NVRTC library lacks ") + s.name +
                  " (GPUkit needs NVRTC from CUDA 12 or newer)";
        dlclose(handle);
        delete n;
        return;
      }
    }
    int major = 0, minor = 0;
    if (a.nvrtcVersion(&major, &minor) != 0) {
      failure = "NVRTC did not report its version (nvrtcVersion failed)";
      delete n;
      return;
    }
    n->version_ = major * 1000 + minor * 10;
    int count = 0;
    if (a.nvrtcGetNumSupportedArchs(&count) == 0 && count > 0) {
      n->supported_sms_.resize(size_t(count));
      if (a.nvrtcGetSupportedArchs(n->supported_sms_.data()) != 0) n->supported_sms_.clear();
    }
    nvrtc = n;
    opened_nvrtc.store(n, std::memory_order_release);
  });
  if (!nvrtc && why) *why = failure;
  return nvrtc;
}

namespace {

// "size mtime" of a file, "absent" when it cannot be read.
std::string file_stamp(const std::string& path) {
  struct stat st{};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return "absent";
  return std::to_string(int64_t(st.st_size)) + " " + std::to_string(int64_t(st.st_mtim.tv_sec)) +
         "." + std::to_string(int64_t(st.st_mtim.tv_nsec));
}

// The lines of nvrtc.facts that say which library get() would open now, given its path.
std::string loader_lines(const std::string& library_path) {
  auto env_line = [](const char* name) {
    auto value = env_value(name);
    return std::string(name) + "=" + (value ? "set:" + *value : "unset") + "\n";
  };
  return "gpukit-nvrtc-facts/1\n" + env_line("GPUKIT_NVRTC_LIBRARY") +
         env_line("LD_LIBRARY_PATH") + "ld.so.cache=" + file_stamp("/etc/ld.so.cache") + "\n" +
         "library=" + library_path + "\n" + "library stamp=" + file_stamp(library_path) + "\n";
}

std::string facts_path(const std::string& dir) { return dir + "/nvrtc.facts"; }

// Whether another library of the process (CuPy, PyTorch) has loaded NVRTC already: then
// get() opens that one, whatever the facts say. Reads the loader's list of loaded objects:
// dlopen(RTLD_NOLOAD) would search the file system for each name, which cost more than the
// rest of a warm cache hit.
bool nvrtc_loaded_elsewhere() {
  if (auto chosen = env_value("GPUKIT_NVRTC_LIBRARY")) {
    void* loaded = dlopen(chosen->c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (loaded) dlclose(loaded);
    return loaded != nullptr;
  }
  auto is_nvrtc = [](dl_phdr_info* info, size_t, void*) -> int {
    const char* path = info->dlpi_name;
    if (!path || !*path) return 0;
    const char* slash = std::strrchr(path, '/');
    const char* base = slash ? slash + 1 : path;
    return std::strncmp(base, "libnvrtc.so", 11) == 0 ? 1 : 0;
  };
  return dl_iterate_phdr(is_nvrtc, nullptr) != 0;
}

}  // namespace

std::optional<NvrtcFacts> remembered_nvrtc(const std::string& dir) {
  if (dir.empty() || Nvrtc::opened()) return std::nullopt;
  if (nvrtc_loaded_elsewhere()) return std::nullopt;
  std::string text;
  if (!read_file(facts_path(dir), text)) return std::nullopt;
  // The facts follow the loader lines: "version=13000\nsms=75 80 ...\n".
  const size_t library_at = text.find("\nlibrary=");
  if (library_at == std::string::npos) return std::nullopt;
  const size_t path_end = text.find('\n', library_at + 9);
  if (path_end == std::string::npos) return std::nullopt;
  const std::string library_path = text.substr(library_at + 9, path_end - library_at - 9);
  const std::string expected = loader_lines(library_path);
  if (library_path.empty() || text.compare(0, expected.size(), expected) != 0) return std::nullopt;
  std::istringstream rest(text.substr(expected.size()));
  std::string version_line, sms_line;
  if (!std::getline(rest, version_line) || !std::getline(rest, sms_line)) return std::nullopt;
  if (version_line.rfind("version=", 0) != 0 || sms_line.rfind("sms=", 0) != 0) {
    return std::nullopt;
  }
  NvrtcFacts facts;
  try {
    facts.version = std::stoi(version_line.substr(8));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::istringstream sms(sms_line.substr(4));
  for (int sm; sms >> sm;) facts.supported_sms.push_back(sm);
  if (facts.version <= 0) return std::nullopt;
  return facts;
}

void remember_nvrtc(const std::string& dir, const Nvrtc& nvrtc) {
  const std::string& path = nvrtc.library_path();
  if (dir.empty() || path.empty() || path.find('\n') != std::string::npos) return;
  std::string text = loader_lines(path);
  // A value with a line break would make the file ambiguous: not remembered.
  if (std::count(text.begin(), text.end(), '\n') != 6) return;
  text += "version=" + std::to_string(nvrtc.version()) + "\nsms=";
  for (int sm : nvrtc.supported_sms()) text += std::to_string(sm) + " ";
  text += "\n";
  const std::string final_path = facts_path(dir);
  static std::atomic<int64_t> serial{0};
  const std::string temporary = final_path + ".tmp." + std::to_string(getpid()) + "." +
                                std::to_string(serial.fetch_add(1));
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out << text;
    if (!out.flush()) {
      std::remove(temporary.c_str());
      return;
    }
  }
  if (std::rename(temporary.c_str(), final_path.c_str()) != 0) std::remove(temporary.c_str());
}

std::string Nvrtc::error_text(NvrtcResult result) const {
  const char* text = api_.nvrtcGetErrorString ? api_.nvrtcGetErrorString(result) : nullptr;
  return text ? std::string(text) : "NVRTC error " + std::to_string(result);
}

CompileOutput Nvrtc::compile(const std::string& source, const std::string& program_name,
                             const std::vector<std::string>& options,
                             const std::vector<std::string>& name_expressions) const {
  NvrtcProgram program = nullptr;
  NvrtcResult r =
      api_.nvrtcCreateProgram(&program, source.c_str(), program_name.c_str(), 0, nullptr, nullptr);
  if (r != 0) fail(GK_INTERNAL, "nvrtcCreateProgram failed: " + error_text(r));
  struct Destroy {
    const NvrtcApi& api;
    NvrtcProgram& program;
    ~Destroy() { api.nvrtcDestroyProgram(&program); }
  } destroy{api_, program};
  for (const std::string& e : name_expressions) {
    r = api_.nvrtcAddNameExpression(program, e.c_str());
    if (r != 0) {
      fail(GK_INVALID_ARGUMENT, "name expression '" + e + "' refused by NVRTC: " + error_text(r));
    }
  }
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  compile_count_.fetch_add(1);
  r = api_.nvrtcCompileProgram(program, int(argv.size()), argv.data());
  CompileOutput out;
  size_t size = 0;
  if (api_.nvrtcGetProgramLogSize(program, &size) == 0 && size > 1) {
    out.log.resize(size);
    api_.nvrtcGetProgramLog(program, out.log.data());
    out.log.resize(size - 1);
  }
  if (r != 0) {
    std::string options_text;
    for (const std::string& o : options) options_text += " " + o;
    fail(GK_INVALID_ARGUMENT, program_name + " did not compile (" + error_text(r) +
                                  ", options:" + options_text + "):\n" +
                                  quote_source_lines(out.log, source, program_name));
  }
  if (api_.nvrtcGetCUBINSize(program, &size) == 0 && size > 0) {
    out.cubin.resize(size);
    api_.nvrtcGetCUBIN(program, out.cubin.data());
  }
  if (out.cubin.empty()) fail(GK_INTERNAL, program_name + ": NVRTC produced no cubin");
  if (api_.nvrtcGetPTXSize(program, &size) == 0 && size > 1) {
    out.ptx.resize(size);
    api_.nvrtcGetPTX(program, out.ptx.data());
    out.ptx.resize(size - 1);
  }
  for (const std::string& e : name_expressions) {
    const char* lowered = nullptr;
    r = api_.nvrtcGetLoweredName(program, e.c_str(), &lowered);
    if (r != 0 || !lowered) {
      fail(GK_INVALID_ARGUMENT, program_name + ": name expression '" + e +
                                    "' names no kernel of the source (" + error_text(r) + ")");
    }
    out.lowered_names.emplace_back(lowered);
  }
  return out;
}

std::string quote_source_lines(const std::string& log, const std::string& source,
                               const std::string& program_name) {
  std::vector<std::string> lines;
  {
    std::istringstream in(source);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  // NVRTC writes "name(line): error: text".
  std::set<size_t> error_lines;
  {
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      const std::string head = program_name + "(";
      if (line.compare(0, head.size(), head) != 0) continue;
      size_t close = line.find(')', head.size());
      if (close == std::string::npos) continue;
      if (line.find("error", close) == std::string::npos) continue;
      try {
        size_t n = std::stoul(line.substr(head.size(), close - head.size()));
        if (n >= 1 && n <= lines.size()) error_lines.insert(n);
      } catch (const std::exception&) {
      }
    }
  }
  std::string out = log;
  if (error_lines.empty()) return out;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += "source lines:\n";
  size_t last_printed = 0;
  for (size_t n : error_lines) {
    const size_t from = std::max<size_t>(1, n - 1), to = std::min(lines.size(), n + 1);
    if (last_printed && from > last_printed + 1) out += "   ...\n";
    for (size_t k = std::max(from, last_printed + 1); k <= to; ++k) {
      std::string number = std::to_string(k);
      out += (k == n ? "> " : "  ") + std::string(number.size() < 5 ? 5 - number.size() : 0, ' ') +
             number + " | " + lines[k - 1] + "\n";
      last_printed = k;
    }
  }
  return out;
}

}  // namespace gk::jit
