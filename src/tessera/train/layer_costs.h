// MeasureLayerCosts: seconds of forward + backward of each transformer block
// of a config's model on one micro-batch (best of five interleaved rounds: a
// disturbance touches every part alike), the embedding's
// cost added to the first block and the head + loss's to the last, as the
// pipeline stages run them — what ParallelTrainer balances its stages by.
#pragma once

#include <vector>

#include "tessera/base/status.h"
#include "tessera/data/dataset.h"
#include "tessera/train/train_config.h"

namespace tessera::train {

StatusOr<std::vector<double>> MeasureLayerCosts(const TrainConfig& config, const data::Dataset& dataset);

}  // namespace tessera::train
