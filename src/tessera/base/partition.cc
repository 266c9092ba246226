#include "tessera/base/partition.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/base/check.h"

namespace tessera::base {

Status ValidatePartition(const std::vector<double>& layer_costs, int parts) {
  const int layers = static_cast<int>(layer_costs.size());
  if (parts < 1 || parts > layers) {
    return InvalidArgument("cannot split {} layers into {} non-empty pipeline stages", layers, parts);
  }
  for (int i = 0; i < layers; ++i) {
    if (!std::isfinite(layer_costs[i]) || layer_costs[i] < 0) {
      return InvalidArgument("layer {} has cost {} (costs must be finite and non-negative)", i, layer_costs[i]);
    }
  }
  return Status::Ok();
}

std::vector<int> PartitionLayers(const std::vector<double>& layer_costs, int parts) {
  TESSERA_CHECK_OK(ValidatePartition(layer_costs, parts));
  const int n = static_cast<int>(layer_costs.size());
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layer_costs[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][i]: smallest maximum part cost of the first i layers in k parts.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, kInf));
  best[0][0] = 0.0;
  for (int k = 1; k <= parts; ++k) {
    for (int i = k; i <= n - (parts - k); ++i) {
      for (int j = k - 1; j < i; ++j) {
        const double cost = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        best[k][i] = std::min(best[k][i], cost);
      }
    }
  }
  // Second pass: among partitions whose parts all cost at most that optimum,
  // maximize the cheapest part (the utilization spread), exactly.
  const double limit = best[parts][n];
  std::vector<std::vector<int>> cut(parts + 1, std::vector<int>(n + 1, -1));
  std::vector<std::vector<double>> low(parts + 1, std::vector<double>(n + 1, -kInf));
  low[0][0] = kInf;
  for (int k = 1; k <= parts; ++k) {
    for (int i = k; i <= n - (parts - k); ++i) {
      for (int j = k - 1; j < i; ++j) {
        const double part = prefix[i] - prefix[j];
        if (part > limit || low[k - 1][j] == -kInf) continue;
        const double cheapest = std::min(low[k - 1][j], part);
        if (cheapest > low[k][i]) {
          low[k][i] = cheapest;
          cut[k][i] = j;
        }
      }
    }
  }
  std::vector<int> starts(parts);
  for (int k = parts, i = n; k >= 1; --k) {
    starts[k - 1] = cut[k][i];
    i = cut[k][i];
  }
  return starts;
}

std::vector<double> PartCosts(const std::vector<double>& layer_costs, const std::vector<int>& starts) {
  std::vector<double> costs(starts.size(), 0.0);
  for (size_t k = 0; k < starts.size(); ++k) {
    const int end = k + 1 < starts.size() ? starts[k + 1] : static_cast<int>(layer_costs.size());
    TESSERA_CHECK(starts[k] >= 0 && starts[k] < end && end <= static_cast<int>(layer_costs.size()),
                  "PartCosts: part {} spans layers [{}, {}) of {}", k, starts[k], end, layer_costs.size());
    for (int i = starts[k]; i < end; ++i) costs[k] += layer_costs[i];
  }
  return costs;
}

double UtilizationSpread(const std::vector<double>& part_costs) {
  if (part_costs.empty()) return 0.0;
  const auto [lo, hi] = std::minmax_element(part_costs.begin(), part_costs.end());
  return *hi > 0 ? (*hi - *lo) / *hi : 0.0;
}

}  // namespace tessera::base
