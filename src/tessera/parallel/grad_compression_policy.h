// Which codec each gradient bucket's data-parallel reduction uses
// (parallel.grad_compression): one spec for every bucket ("int8"), or a
// default followed by per-bucket rules, first match wins:
//   "int8, embed=none, head=bf16, blocks.*.experts=topk:0.05"
// A rule's pattern is a shell glob (fnmatch) over bucket names: "embed",
// "head", "blocks.<layer>" and, under expert parallelism,
// "<segment>.experts". Specs as comm/compress ParseCompressionSpec.
// Errors name the offending piece.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/compress/codec.h"

namespace tessera::parallel {

struct GradCompressionPolicy {
  GradCompressionPolicy() = default;
  // Every bucket with `spec` (implicit: a single spec is a policy).
  GradCompressionPolicy(comm::compress::CompressionSpec spec) : default_spec(spec) {}  // NOLINT

  comm::compress::CompressionSpec default_spec;
  std::vector<std::pair<std::string, comm::compress::CompressionSpec>> rules;  // (glob, spec)

  // Whether rules[rule]'s glob matches bucket `name`.
  bool RuleMatches(size_t rule, const std::string& name) const;
  // The spec of bucket `name`: the first matching rule's, else the default.
  const comm::compress::CompressionSpec& For(const std::string& name) const;
  // True if any bucket may be compressed.
  bool any_enabled() const;
};

StatusOr<GradCompressionPolicy> ParseGradCompressionPolicy(std::string_view text);

}  // namespace tessera::parallel
