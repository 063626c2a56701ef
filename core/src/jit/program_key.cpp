#include "jit/program_key.h"

#include <filesystem>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/read_file.h"
#include "jit/sha256.h"

namespace gk::jit {
namespace fs = std::filesystem;
namespace {

std::string trim(const std::string& s) {
  const char* space = " \t\r\n\f\v";
  size_t first = s.find_first_not_of(space);
  if (first == std::string::npos) return "";
  size_t last = s.find_last_not_of(space);
  return s.substr(first, last - first + 1);
}

std::string absolute_folder(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) return dir;
  return p.lexically_normal().string();
}

// The #include directives of a text: (name, quoted?).
std::vector<std::pair<std::string, bool>> include_directives(const std::string& text) {
  std::vector<std::pair<std::string, bool>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t at = line.find_first_not_of(" \t");
    if (at == std::string::npos || line[at] != '#') continue;
    at = line.find_first_not_of(" \t", at + 1);
    if (at == std::string::npos || line.compare(at, 7, "include") != 0) continue;
    at = line.find_first_not_of(" \t", at + 7);
    if (at == std::string::npos) continue;
    const char open = line[at];
    const char close = open == '"' ? '"' : open == '<' ? '>' : 0;
    if (!close) continue;  // #include MACRO: not followed (documented)
    size_t end = line.find(close, at + 1);
    if (end == std::string::npos) continue;
    out.emplace_back(line.substr(at + 1, end - at - 1), open == '"');
  }
  return out;
}

}  // namespace

bool has_include_directive(const std::string& text) {
  return !include_directives(text).empty();
}

void normalise_options(const std::vector<std::string>& given_options,
                       const std::vector<std::string>& given_include_paths, ProgramSpec& spec) {
  for (const std::string& dir : given_include_paths) {
    const std::string t = trim(dir);
    if (t.empty()) fail(GK_INVALID_ARGUMENT, "include path is empty");
    spec.include_paths.push_back(absolute_folder(t));
  }
  for (size_t i = 0; i < given_options.size(); ++i) {
    const std::string o = trim(given_options[i]);
    if (o.empty()) {
      fail(GK_INVALID_ARGUMENT, "option " + std::to_string(i) + " is empty");
    }
    if (o.rfind("-arch", 0) == 0 || o.rfind("--gpu-architecture", 0) == 0) {
      fail(GK_INVALID_ARGUMENT, "option '" + o +
                                    "' sets the architecture, which the device chooses; set "
                                    "gk_jit_options.sm_version to compile for another SM");
    }
    if (o == "-I" || o == "--include-path") {
      if (i + 1 >= given_options.size()) {
        fail(GK_INVALID_ARGUMENT, "option '" + o + "' lacks its folder");
      }
      spec.include_paths.push_back(absolute_folder(trim(given_options[++i])));
    } else if (o.rfind("--include-path=", 0) == 0) {
      spec.include_paths.push_back(absolute_folder(o.substr(15)));
    } else if (o.rfind("-I", 0) == 0) {
      spec.include_paths.push_back(absolute_folder(trim(o.substr(2))));
    } else {
      spec.options.push_back(o);
    }
  }
}

std::vector<std::string> nvrtc_options(const ProgramSpec& spec) {
  std::vector<std::string> out = spec.options;
  for (const std::string& dir : spec.include_paths) out.push_back("-I" + dir);
  out.push_back("-arch=sm_" + std::to_string(spec.sm_version));
  return out;
}

std::vector<IncludedHeader> included_headers(const ProgramSpec& spec) {
  std::vector<IncludedHeader> out;
  std::set<std::string> seen;
  // (text, folder of the file it came from; empty for the source).
  std::vector<std::pair<std::string, std::string>> pending{{spec.source, ""}};
  while (!pending.empty()) {
    auto [text, folder] = std::move(pending.back());
    pending.pop_back();
    for (const auto& [name, quoted] : include_directives(text)) {
      std::vector<fs::path> candidates;
      if (quoted && !folder.empty()) candidates.push_back(fs::path(folder) / name);
      for (const std::string& dir : spec.include_paths) candidates.push_back(fs::path(dir) / name);
      if (fs::path(name).is_absolute()) candidates = {fs::path(name)};
      bool found = false;
      for (const fs::path& c : candidates) {
        std::string contents;
        if (!read_file(c.string(), contents)) continue;
        const std::string path = c.lexically_normal().string();
        found = true;
        if (seen.insert(path).second) {
          out.push_back({path, contents});
          pending.emplace_back(contents, c.parent_path().lexically_normal().string());
        }
        break;
      }
      if (!found && seen.insert("<" + name + ">").second) out.push_back({"<" + name + ">", ""});
    }
  }
  return out;
}

std::string program_key(const ProgramSpec& spec, int nvrtc_version, uint32_t abi_version) {
  Sha256 h;
  h.field("gpukit-jit-key/2");
  h.field(std::to_string(abi_version));
  h.field(std::to_string(nvrtc_version));
  h.field(std::to_string(spec.sm_version));
  h.field(spec.program_name);
  h.field(spec.source);
  h.field("options:" + std::to_string(spec.options.size()));
  for (const std::string& o : spec.options) h.field(o);
  h.field("include paths:" + std::to_string(spec.include_paths.size()));
  for (const std::string& p : spec.include_paths) h.field(p);
  h.field("name expressions:" + std::to_string(spec.name_expressions.size()));
  for (const std::string& e : spec.name_expressions) h.field(e);
  const auto headers = included_headers(spec);
  h.field("headers:" + std::to_string(headers.size()));
  for (const IncludedHeader& header : headers) {
    h.field(header.path);
    h.field(header.contents);
  }
  return h.hex();
}

}  // namespace gk::jit
