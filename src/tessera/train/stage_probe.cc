#include "tessera/train/stage_probe.h"

#include "tessera/comm/store.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/tensor/rng.h"

namespace tessera::train {

StatusOr<StageProbe> BuildStageProbe(const TrainConfig& config, bool graph) {
  parallel::ParallelConfig pc = config.parallel;
  pc.dp = pc.tp = pc.pp = pc.ep = 1;
  pc.zero = 0;
  pc.virtual_stages = 1;
  pc.schedule = "1f1b";
  pc.sequence_parallel = false;
  pc.graph = graph;
  StageProbe p;
  TESSERA_ASSIGN_OR_RETURN(p.world, comm::Communicator::Create(comm::MakeInMemoryStore(), 0, 1));
  TESSERA_ASSIGN_OR_RETURN(p.mesh, parallel::DeviceMesh::Create(*p.world, pc.mesh()));
  TESSERA_ASSIGN_OR_RETURN(p.stage, parallel::GptStage::Create(config.model, pc, *p.mesh,
                                                               parallel::EvenLayerSplit(config.model.n_layers, 1)));
  p.stage->model().InitParameters(config.model.seed);
  return p;
}

parallel::MicroBatchInput SyntheticMicroBatch(const models::GptConfig& model, int64_t batch, uint64_t seed) {
  parallel::MicroBatchInput mb;
  std::vector<int64_t> ids(static_cast<size_t>(batch * model.seq_len)), targets(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int64_t>(UniformAt(seed, 2 * i) * static_cast<float>(model.vocab_size)) % model.vocab_size;
    targets[i] =
        static_cast<int64_t>(UniformAt(seed, 2 * i + 1) * static_cast<float>(model.vocab_size)) % model.vocab_size;
  }
  mb.ids = Tensor::FromInts(ids, {batch, model.seq_len});
  mb.targets = Tensor::FromInts(targets, {batch, model.seq_len});
  return mb;
}

double RunForwardBackward(parallel::GptStage& stage, const parallel::MicroBatchInput& mb) {
  parallel::MicroBatchStats stats;
  // The segments are chained on one tape (no detach between them), so the
  // backward runs through every segment, as the pipeline's would.
  Tensor x;
  for (int s = 0; s < stage.num_segments(); ++s) x = stage.RunSegment(s, x, mb, &stats);
  graph::Backward(x);
  return stats.ce_loss;
}

}  // namespace tessera::train
