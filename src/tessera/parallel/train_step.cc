#include "tessera/parallel/train_step.h"

#include <chrono>

#include <fmt/format.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/pipeline/executor.h"

namespace tessera::parallel {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Runs fn and appends a timeline event for it; adds its duration to *total.
template <typename Fn>
void Timed(std::vector<TimelineEvent>& timeline, Clock::time_point step_start, std::string name, const char* category,
           double* total, Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  const double d = Since(t0);
  timeline.push_back({std::move(name), category, std::chrono::duration<double>(t0 - step_start).count(), d});
  *total += d;
}

}  // namespace

TrainStep::TrainStep(GptStage& stage, ZeroOptimizer& zero, const DeviceMesh& mesh, const ParallelConfig& config)
    : stage_(stage), zero_(zero), mesh_(mesh), config_(config) {}

TrainStep::~TrainStep() = default;

Status TrainStep::Run(const std::vector<MicroBatchInput>& micro_batches, StepResult* result) {
  *result = StepResult();
  const auto t0 = Clock::now();
  const double wait0 = zero_.comm_wait_seconds();
  Status st = config_.pp == 1 ? RunSingleStage(micro_batches, result) : RunPipeline(micro_batches, result);
  if (!st.ok()) return st;
  const auto r0 = Clock::now();
  st = zero_.FinishReductions();
  result->timeline.push_back({"wait for gradient reductions", "comm",
                              std::chrono::duration<double>(r0 - t0).count(), Since(r0)});
  if (!st.ok()) return st;
  result->comm_wait_s += zero_.comm_wait_seconds() - wait0;
  result->step_s = Since(t0);
  return Status::Ok();
}

Status TrainStep::RunSingleStage(const std::vector<MicroBatchInput>& micro_batches, StepResult* result) {
  const auto start = Clock::now();
  const int n = stage_.num_segments();
  auto gather = [&](int s) -> Status {
    for (int b : stage_.segment(s).uses) TESSERA_RETURN_IF_ERROR(zero_.Gather(b));
    return Status::Ok();
  };
  auto release = [&](int s) {
    for (int b : stage_.segment(s).uses) zero_.Release(b);
  };
  std::vector<graph::Tape> tapes(n);
  std::vector<Tensor> inputs(n), outputs(n);
  for (size_t m = 0; m < micro_batches.size(); ++m) {
    const MicroBatchInput& mb = micro_batches[m];
    const bool last_mb = m + 1 == micro_batches.size();
    // Forward, segment by segment.
    Tensor x;
    for (int s = 0; s < n; ++s) {
      TESSERA_RETURN_IF_ERROR(gather(s));
      if (s > 0) {
        inputs[s] = graph::Detach(x);
        inputs[s].set_requires_grad(true);
      }
      Timed(result->timeline, start, fmt::format("F {} mb {}", stage_.segment(s).name, m), "compute",
            &result->compute_s, [&] {
              graph::TapeScope scope(tapes[s]);
              outputs[s] = stage_.RunSegment(s, inputs[s], mb, &result->stats);
            });
      x = outputs[s];
      release(s);
    }
    // Backward, segment by segment; a segment's gradients are final after
    // the last micro-batch: start reducing them.
    Tensor grad;
    for (int s = n - 1; s >= 0; --s) {
      TESSERA_RETURN_IF_ERROR(gather(s));
      Timed(result->timeline, start, fmt::format("B {} mb {}", stage_.segment(s).name, m), "compute",
            &result->compute_s, [&] {
              graph::TapeScope scope(tapes[s]);
              tapes[s].Backward({outputs[s]}, {grad});
            });
      outputs[s] = Tensor();
      grad = s > 0 ? inputs[s].grad() : Tensor();
      inputs[s] = Tensor();
      if (last_mb) {
        TESSERA_RETURN_IF_ERROR(stage_.SyncPartialGradients(s));
        for (int b : stage_.segment(s).buckets) TESSERA_RETURN_IF_ERROR(zero_.ReduceGradients(b));
      }
      release(s);
    }
  }
  return Status::Ok();
}

Status TrainStep::RunPipeline(const std::vector<MicroBatchInput>& micro_batches, StepResult* result) {
  const int m = static_cast<int>(micro_batches.size());
  PipelineConfig pc;
  TESSERA_ASSIGN_OR_RETURN(pc.schedule, ParsePipelineSchedule(config_.schedule));
  pc.microbatches = m;
  pc.virtual_stages = config_.virtual_stages;
  if (!executor_) {
    auto ex = PipelineExecutor::Create(mesh_.pp(), pc);
    if (!ex.ok()) return ex.status().WithContext("starting the pipeline executor");
    executor_ = std::move(ex).value();
  } else if (executor_->config().microbatches != m) {
    TESSERA_RETURN_IF_ERROR(executor_->SetConfig(pc));
  }
  // ZeRO-3 is refused with pp > 1 by the config check; gather is a no-op.
  PipelineStage stage;
  const int64_t batch = micro_batches.front().ids.defined() ? micro_batches.front().ids.size(0) : 0;
  stage.input_spec = [&](int, int) { return stage_.ActivationSpec(batch); };
  stage.forward = [&](int chunk, int mb, const Tensor& input) {
    Tensor x = input;
    for (int s : stage_.chunk_segments(chunk)) x = stage_.RunSegment(s, x, micro_batches[mb], &result->stats);
    return x;
  };
  // A chunk's gradients are final after its last micro-batch's backward:
  // reduce its segments then, while the pipeline drains. Segments holding a
  // tied embedding wait for SyncTiedEmbedding after the flush.
  std::vector<int> backwards(stage_.num_chunks(), 0);
  std::vector<bool> reduced(stage_.num_segments(), false);
  auto reduce_segment = [&](int s) -> Status {
    TESSERA_RETURN_IF_ERROR(stage_.SyncPartialGradients(s));
    for (int b : stage_.segment(s).buckets) TESSERA_RETURN_IF_ERROR(zero_.ReduceGradients(b));
    reduced[s] = true;
    return Status::Ok();
  };
  stage.after_backward = [&](int chunk, int) -> Status {
    if (++backwards[chunk] < m) return Status::Ok();
    const std::vector<int>& segs = stage_.chunk_segments(chunk);
    for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
      if (!stage_.segment(*it).tied_embedding) TESSERA_RETURN_IF_ERROR(reduce_segment(*it));
    }
    return Status::Ok();
  };
  Status st = executor_->RunStep(stage);
  const PipelineStepStats& ps = executor_->last_step();
  for (const PipelineEvent& e : ps.timeline) result->timeline.push_back({e.name, e.category, e.start_s, e.dur_s});
  result->compute_s += ps.busy_s;
  result->chunk_compute_s = ps.chunk_busy_s;
  result->comm_wait_s += ps.comm_wait_s;
  result->p2p_wait_s += ps.comm_wait_s;
  result->bubble_fraction = ps.bubble_fraction;
  if (!st.ok()) return st;
  TESSERA_RETURN_IF_ERROR(stage_.SyncTiedEmbedding());
  for (int s = stage_.num_segments() - 1; s >= 0; --s) {
    if (!reduced[s]) TESSERA_RETURN_IF_ERROR(reduce_segment(s));
  }
  return Status::Ok();
}

}  // namespace tessera::parallel
