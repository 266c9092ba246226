#include "tessera/parallel/grad_compression_policy.h"

#include <fnmatch.h>

#include <algorithm>

namespace tessera::parallel {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool GradCompressionPolicy::RuleMatches(size_t rule, const std::string& name) const {
  return fnmatch(rules.at(rule).first.c_str(), name.c_str(), 0) == 0;
}

const comm::compress::CompressionSpec& GradCompressionPolicy::For(const std::string& name) const {
  for (size_t r = 0; r < rules.size(); ++r) {
    if (RuleMatches(r, name)) return rules[r].second;
  }
  return default_spec;
}

bool GradCompressionPolicy::any_enabled() const {
  return default_spec.enabled() ||
         std::any_of(rules.begin(), rules.end(), [](const auto& r) { return r.second.enabled(); });
}

StatusOr<GradCompressionPolicy> ParseGradCompressionPolicy(std::string_view text) {
  GradCompressionPolicy policy;
  bool first = true;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string_view piece = Trim(text.substr(at, comma == std::string_view::npos ? text.npos : comma - at));
    const size_t eq = piece.find('=');
    if (first && eq == std::string_view::npos) {
      auto spec = comm::compress::ParseCompressionSpec(piece);
      if (!spec.ok()) return InvalidArgument("default codec '{}': {}", piece, spec.status().message());
      policy.default_spec = *spec;
    } else if (eq == std::string_view::npos) {
      return InvalidArgument("'{}': after the default codec, each piece is BUCKET_GLOB=CODEC (e.g. embed=none)",
                             piece);
    } else {
      const std::string_view pattern = Trim(piece.substr(0, eq)), codec = Trim(piece.substr(eq + 1));
      if (pattern.empty()) return InvalidArgument("'{}': empty bucket pattern", piece);
      auto spec = comm::compress::ParseCompressionSpec(codec);
      if (!spec.ok()) return InvalidArgument("codec '{}' for buckets '{}': {}", codec, pattern, spec.status().message());
      policy.rules.emplace_back(std::string(pattern), *spec);
    }
    first = false;
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return policy;
}

}  // namespace tessera::parallel
