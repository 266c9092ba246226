#include "tessera/parallel/checkpoint/strict_json.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tessera::parallel::checkpoint {
namespace {

// Records the keys of every open object and remembers the first repeat.
template <typename Json>
struct DuplicateKeyDetector {
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  bool too_deep = false;

  bool operator()(int depth, nlohmann::json::parse_event_t event, Json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth) {
      too_deep = true;
      return false;  // the parser skips (does not build) this container
    }
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty() && parsed.is_string()) {
      if (!open_objects.back().insert(parsed.template get<std::string>()).second && !duplicate) {
        duplicate = parsed.template get<std::string>();
      }
    }
    return true;
  }
};

template <typename Json>
StatusOr<Json> Parse(std::string_view text) {
  DuplicateKeyDetector<Json> detector;
  Json value;
  try {
    value = Json::parse(text.begin(), text.end(), std::ref(detector));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("is not valid JSON: {}", e.what());
  }
  if (detector.too_deep) return InvalidArgument("nests deeper than {} levels", kMaxJsonDepth);
  if (detector.duplicate) return InvalidArgument("repeats key '{}' in one object", *detector.duplicate);
  return value;
}

}  // namespace

StatusOr<nlohmann::json> ParseStrictJson(std::string_view text) { return Parse<nlohmann::json>(text); }

StatusOr<nlohmann::ordered_json> ParseStrictOrderedJson(std::string_view text) {
  return Parse<nlohmann::ordered_json>(text);
}

}  // namespace tessera::parallel::checkpoint
