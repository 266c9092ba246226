// JSON parsing for untrusted checkpoint files: like nlohmann::json::parse,
// but a repeated key in any object is an error (nlohmann silently keeps
// one), nesting deeper than kMaxJsonDepth is refused (deep values would
// recurse when copied or printed), and failures are a Status instead of an
// exception. Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"

namespace tessera::parallel::checkpoint {

inline constexpr int kMaxJsonDepth = 64;

// InvalidArgument "is not valid JSON: <parser message>", "repeats key 'k' in
// one object" or "nests deeper than 64 levels" (callers prefix what was
// parsed).
StatusOr<nlohmann::json> ParseStrictJson(std::string_view text);
// The same, keeping the objects' key order.
StatusOr<nlohmann::ordered_json> ParseStrictOrderedJson(std::string_view text);

// A short rendering of a value for error messages: numbers, booleans and
// null as JSON, strings quoted and cut at 40 characters, containers by type.
template <typename Json>
std::string BriefJson(const Json& j) {
  if (j.is_string()) {
    const std::string& s = j.template get_ref<const std::string&>();
    return s.size() <= 40 ? Json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                          : Json(s.substr(0, 40)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                "...";
  }
  if (j.is_structured()) return std::string("a JSON ") + j.type_name();
  return j.dump();
}

}  // namespace tessera::parallel::checkpoint
