// Balanced layer partitioning for pipeline parallelism (the runtime's
// stages, parallel/pipeline, and the twin's, sim/twin.cc): split a sequence of
// layers with measured (or modelled) costs into contiguous, non-empty parts
// so that the most expensive part is as cheap as possible (the pipeline's
// step time is set by its slowest stage).
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "tessera/base/status.h"

namespace tessera::base {

// InvalidArgument if parts < 1, parts > layers, or a cost is negative or not
// finite.
Status ValidatePartition(const std::vector<double>& layer_costs, int parts);

// First layer index of each of `parts` contiguous non-empty parts (result[0]
// == 0, strictly increasing) minimizing the maximum part cost; exact
// (dynamic programming over prefix sums, O(parts * n^2)); among the optimal
// partitions, one whose cheapest part is as expensive as possible (smallest
// utilization spread), also exactly. CHECKs
// ValidatePartition (validate configs first to get the error as a Status).
std::vector<int> PartitionLayers(const std::vector<double>& layer_costs, int parts);

// Cost of each part given its first layers (as PartitionLayers returns).
std::vector<double> PartCosts(const std::vector<double>& layer_costs, const std::vector<int>& starts);

// (max - min) / max of the part costs: 0 for perfect balance (0 if max is 0).
double UtilizationSpread(const std::vector<double>& part_costs);

}  // namespace tessera::base
