// ParallelTrainer's evaluation: held-out loss and metric across the mesh
// (data-parallel ranks split the samples; the pipeline passes activations).
#include <algorithm>

#include "tessera/base/error.h"
#include "tessera/base/logging.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/tensor_parallel/collectives.h"
#include "tessera/train/parallel_trainer.h"

namespace tessera::train {

EvalResult ParallelTrainer::Evaluate() {
  try {
    auto r = EvaluateImpl();
    if (r.ok()) return *r;
    TLOG(ERROR, "evaluation on rank {}: {}", world_.rank(), r.status().ToString());
  } catch (const OpError& e) {
    TLOG(ERROR, "evaluation on rank {}: {}", world_.rank(), e.what());
  }
  return EvalResult{};
}

StatusOr<EvalResult> ParallelTrainer::EvaluateImpl() {
  graph::NoGradGuard no_grad;
  models::Gpt& gpt = stage_->model();
  gpt.SetTraining(false);
  std::vector<double> acc = {0, 0, 0, 0};  // loss sum, tokens, hits, total
  const int64_t n = std::min(dataset_->NumEvalSamples(), config_.eval.samples);
  const parallel::ParallelConfig& pc = config_.parallel;
  const int pp_rank = mesh_->coord().pp;
  const int chunks = pc.pp * pc.virtual_stages;
  // Data-parallel ranks split the samples; the pipeline passes activations
  // stage to stage (virtual stage u runs on pp rank u mod pp).
  auto run_segments = [&](const std::vector<int>& segs, Tensor x, const parallel::MicroBatchInput& mb,
                          bool stop_before_head) -> StatusOr<Tensor> {
    parallel::MicroBatchStats scratch;
    for (int s : segs) {
      if (stop_before_head && stage_->segment(s).layer == config_.model.n_layers) break;
      for (int bucket : stage_->segment(s).uses) TESSERA_RETURN_IF_ERROR(zero_->Gather(bucket));
      x = stage_->RunSegment(s, x, mb, &scratch);
      for (int bucket : stage_->segment(s).uses) zero_->Release(bucket);
    }
    return x;
  };
  // Every data-parallel rank runs the same number of batches (expert
  // parallelism exchanges tokens between them): one without samples left
  // repeats the first batch and does not count it.
  const int64_t batches = (n + config_.eval.batch - 1) / config_.eval.batch;
  const int64_t rounds = (batches + pc.dp - 1) / pc.dp;
  for (int64_t round = 0; round < rounds; ++round) {
    int64_t first = (round * pc.dp + mesh_->coord().dp) * config_.eval.batch;
    const bool counted = first < n;
    if (!counted) first = 0;
    const int64_t b = std::min(config_.eval.batch, n - first);
    data::Batch batch = dataset_->EvalBatch(first, b);
    parallel::MicroBatchInput mb;
    mb.ids = batch.inputs;
    mb.targets = batch.targets;
    Tensor x;
    for (int u = 0; u < chunks; ++u) {
      if (u % pc.pp != pp_rank) continue;
      const int chunk = u / pc.pp;
      if (u > 0 && pc.pp > 1) {
        auto [shape, dtype] = stage_->ActivationSpec(b);
        x = Tensor::Empty(shape, dtype);
        TESSERA_RETURN_IF_ERROR(mesh_->pp().Recv(x.raw_data(), x.numel(), parallel::CommDataType(dtype),
                                                 (u - 1) % pc.pp));
      }
      const bool last = u == chunks - 1;
      TESSERA_ASSIGN_OR_RETURN(x, run_segments(stage_->chunk_segments(chunk), x, mb, last));
      if (!last && pc.pp > 1) {
        x = x.Contiguous();
        TESSERA_RETURN_IF_ERROR(mesh_->pp().Send(x.raw_data(), x.numel(), parallel::CommDataType(x.dtype()),
                                                 (u + 1) % pc.pp));
      }
      if (last) {
        const int head = stage_->chunk_segments(chunk).back();
        for (int bucket : stage_->segment(head).uses) TESSERA_RETURN_IF_ERROR(zero_->Gather(bucket));
        Tensor logits = stage_->HeadLogits(x);
        for (int bucket : stage_->segment(head).uses) zero_->Release(bucket);
        if (counted && mesh_->coord().tp == 0) {
          Tensor ce = graph::CrossEntropy(logits, batch.targets);
          acc[0] += ce.Item() * static_cast<double>(batch.num_target_tokens);
          acc[1] += static_cast<double>(batch.num_target_tokens);
          data::MetricCounts c = dataset_->Score(batch, logits);
          acc[2] += static_cast<double>(c.hits);
          acc[3] += static_cast<double>(c.total);
        }
      }
    }
  }
  gpt.SetTraining(true);
  TESSERA_RETURN_IF_ERROR(world_.AllReduce(acc.data(), acc.data(), acc.size(), comm::DataType::kFloat64, comm::ReduceOp::kSum));
  EvalResult r;
  r.loss = acc[1] > 0 ? acc[0] / acc[1] : 0;
  r.metric = acc[3] > 0 ? acc[2] / acc[3] : 0;
  r.samples = n;
  return r;
}

}  // namespace tessera::train
