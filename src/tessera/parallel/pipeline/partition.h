// The pipeline's balanced layer partitioning lives in base/partition.h (the
// twin partitions its predicted stages the same way); these names keep it
// where the pipeline code looks for it.
#pragma once

#include "tessera/base/partition.h"

namespace tessera::parallel {

using base::PartCosts;
using base::PartitionLayers;
using base::UtilizationSpread;
using base::ValidatePartition;

}  // namespace tessera::parallel
