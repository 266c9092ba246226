#include "tessera/train/auto_micro_batch.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "tessera/hal/device.h"
#include "tessera/train/stage_probe.h"

namespace tessera::train {
namespace {

// Allocator high-water mark of one forward + backward above what was held before it.
int64_t MeasureStep(parallel::GptStage& stage, const models::GptConfig& model, int64_t batch) {
  int64_t peak = 0;
  for (int rep = 0; rep < 3; ++rep) {  // graph mode: capture, check, replay; keep the last
    for (auto& [name, p] : stage.NamedParameters()) {
      Tensor g = p.grad();
      if (g.defined()) g.ZeroFill();
    }
    auto& alloc = hal::CpuDevice().allocator();
    const parallel::MicroBatchInput mb = SyntheticMicroBatch(model, batch, 7 + rep);
    const int64_t before = alloc.Stats().current_bytes;
    alloc.ResetPeak();
    RunForwardBackward(stage, mb);
    peak = alloc.Stats().peak_bytes - before;
  }
  return peak;
}

}  // namespace

std::string AutoMicroBatch::Describe() const {
  return fmt::format(
      "train.micro_batch = auto: {} (budget {:.1f} MiB per rank: training state {:.1f} MiB, activations {:.2f} MiB "
      "+ {:.3f} MiB per sequence, measured)",
      micro_batch, budget_bytes / 1048576.0, state_bytes / 1048576.0, fixed_bytes / 1048576.0,
      per_sample_bytes / 1048576.0);
}

StatusOr<AutoMicroBatch> ResolveAutoMicroBatch(TrainConfig& config, int world_size, int local_ranks) {
  AutoMicroBatch r;
  r.micro_batch = config.train.micro_batch;
  if (config.train.micro_batch != 0) return r;
  const parallel::ParallelConfig& pc = config.parallel;
  const int tp = std::max(1, pc.tp), pp = std::max(1, pc.pp);
  const int dp = pc.dp > 0 ? pc.dp : std::max(1, world_size / (tp * pp));
  if (config.train.global_batch % dp != 0) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("train.global_batch = {} is not divisible by dp = {}", config.train.global_batch, dp));
  }
  r.budget_bytes = pc.device_memory_limit;
  if (r.budget_bytes <= 0) {
    const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
    r.budget_bytes = physical / std::max(1, local_ranks);
  }
  TESSERA_ASSIGN_OR_RETURN(StageProbe probe, BuildStageProbe(config, pc.graph));
  const int64_t f1 = MeasureStep(*probe.stage, config.model, 1);
  const int64_t f4 = MeasureStep(*probe.stage, config.model, 4);
  const int64_t per_sample = std::max<int64_t>(1, (f4 - f1) / 3);
  const int64_t fixed = std::max<int64_t>(0, f1 - per_sample);
  int64_t params = 0;
  for (const auto& [name, p] : probe.stage->NamedParameters()) params += p.numel();
  const int64_t adam = 8 * params / (pc.zero >= 1 ? dp : 1);
  r.state_bytes = (8 * params + adam) / (static_cast<int64_t>(tp) * pp);
  r.fixed_bytes = fixed / tp;
  r.per_sample_bytes = std::max<int64_t>(1, per_sample / tp);
  const int64_t per_replica = config.train.global_batch / dp;
  const int64_t usable = r.budget_bytes * 9 / 10;
  int64_t best = 0;
  for (int64_t m = 1; m <= per_replica; ++m) {
    if (per_replica % m != 0) continue;
    if (pc.schedule == "interleaved" && (per_replica / m) % pp != 0) continue;
    if (r.state_bytes + r.fixed_bytes + r.per_sample_bytes * m <= usable) best = m;
  }
  if (best == 0) {
    return Status(
        StatusCode::kResourceExhausted,
        fmt::format("train.micro_batch = auto: even one sequence per micro-batch needs {:.1f} MiB per rank "
                    "(training state {:.1f} MiB + activations {:.2f} + {:.3f} MiB per sequence), over 90% "
                    "of the budget {:.1f} MiB (train.device_memory_limit)",
                    (r.state_bytes + r.fixed_bytes + r.per_sample_bytes) / 1048576.0, r.state_bytes / 1048576.0,
                    r.fixed_bytes / 1048576.0, r.per_sample_bytes / 1048576.0, r.budget_bytes / 1048576.0));
  }
  r.micro_batch = best;
  config.train.micro_batch = best;
  TESSERA_RETURN_IF_ERROR(config.Validate());
  return r;
}

}  // namespace tessera::train
