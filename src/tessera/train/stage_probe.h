// A GPT stage on one process for inspecting and measuring graph mode (the
// `tessera graph dump` command, bench/graph_mode_bench.cc, and the
// micro-batch auto-sizing): the train config's model with every parallel
// degree set to 1, initialized like a training run, and synthetic
// micro-batches of token ids run through all its segments, forward and
// backward.
#pragma once

#include <memory>

#include "tessera/comm/api/communicator.h"
#include "tessera/parallel/gpt_stage.h"
#include "tessera/parallel/mesh.h"
#include "tessera/train/train_config.h"

namespace tessera::train {

struct StageProbe {
  std::unique_ptr<comm::Communicator> world;
  std::unique_ptr<parallel::DeviceMesh> mesh;
  std::unique_ptr<parallel::GptStage> stage;
};

// `graph` selects graph mode (train.graph) for the stage.
StatusOr<StageProbe> BuildStageProbe(const TrainConfig& config, bool graph);

// Random ids/targets [batch, seq_len] from `seed`.
parallel::MicroBatchInput SyntheticMicroBatch(const models::GptConfig& model, int64_t batch, uint64_t seed);

// Forward through every segment, then backward (gradients accumulate into
// the parameters' .grad()). Returns the cross-entropy of the micro-batch.
double RunForwardBackward(parallel::GptStage& stage, const parallel::MicroBatchInput& mb);

}  // namespace tessera::train
