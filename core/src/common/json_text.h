// JSON views as text. Names in them come from outside (manifests, task and owner names) and
// may hold bytes that are not UTF-8: those are replaced by U+FFFD instead of failing the
// whole view.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gk {

// For nlohmann::json and nlohmann::ordered_json alike.
template <typename Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gk
