#include "tessera/parallel/pipeline/schedule.h"

#include <algorithm>
#include <fmt/format.h>

#include "tessera/base/check.h"

namespace tessera::parallel {
namespace {

using Kind = PipeAction::Kind;

std::vector<PipeAction> Gpipe(int microbatches) {
  std::vector<PipeAction> actions;
  for (int mb = 0; mb < microbatches; ++mb) actions.push_back({Kind::kForward, mb, 0});
  for (int mb = 0; mb < microbatches; ++mb) actions.push_back({Kind::kBackward, mb, 0});
  return actions;
}

std::vector<PipeAction> OneFOneB(int stage, int stages, int microbatches) {
  const int warmup = std::min(stages - stage - 1, microbatches);
  const int remaining = microbatches - warmup;
  std::vector<PipeAction> actions;
  for (int mb = 0; mb < warmup; ++mb) actions.push_back({Kind::kForward, mb, 0});
  for (int i = 0; i < remaining; ++i) {
    actions.push_back({Kind::kForward, warmup + i, 0});
    actions.push_back({Kind::kBackward, i, 0});
  }
  for (int mb = remaining; mb < microbatches; ++mb) actions.push_back({Kind::kBackward, mb, 0});
  return actions;
}

// Megatron-LM's forward_backward_pipelining_with_interleaving: the k-th
// forward (backward) of a stage handles micro-batch group k / (p*v), chunk
// (k % (p*v)) / p (counted from the last chunk for backwards).
PipeAction Interleaved(Kind kind, int k, int stages, int chunks) {
  const int group = k / (stages * chunks);
  const int in_group = k % (stages * chunks);
  int chunk = in_group / stages;
  if (kind == Kind::kBackward) chunk = chunks - 1 - chunk;
  return {kind, group * stages + in_group % stages, chunk};
}

std::vector<PipeAction> InterleavedOneFOneB(int stage, int stages, int microbatches, int chunks) {
  const int total = microbatches * chunks;
  int warmup = total;
  if (microbatches != stages) {
    warmup = std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  }
  const int remaining = total - warmup;
  std::vector<PipeAction> actions;
  for (int k = 0; k < warmup; ++k) actions.push_back(Interleaved(Kind::kForward, k, stages, chunks));
  for (int k = 0; k < remaining; ++k) {
    actions.push_back(Interleaved(Kind::kForward, warmup + k, stages, chunks));
    actions.push_back(Interleaved(Kind::kBackward, k, stages, chunks));
  }
  for (int k = remaining; k < total; ++k) actions.push_back(Interleaved(Kind::kBackward, k, stages, chunks));
  return actions;
}

}  // namespace

StatusOr<PipelineSchedule> ParsePipelineSchedule(std::string_view name) {
  if (name == "gpipe") return PipelineSchedule::kGpipe;
  if (name == "1f1b") return PipelineSchedule::k1F1B;
  if (name == "interleaved" || name == "interleaved-1f1b") return PipelineSchedule::kInterleaved1F1B;
  return InvalidArgument("unknown pipeline schedule '{}' (expected gpipe, 1f1b or interleaved)", name);
}

std::string_view PipelineScheduleName(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGpipe: return "gpipe";
    case PipelineSchedule::k1F1B: return "1f1b";
    case PipelineSchedule::kInterleaved1F1B: return "interleaved";
  }
  return "?";
}

std::string ToString(const PipeAction& action) {
  return fmt::format("{}{}.{}", action.kind == Kind::kForward ? 'F' : 'B', action.microbatch, action.chunk);
}

Status ValidatePipelineSchedule(PipelineSchedule schedule, int stages, int microbatches, int virtual_stages) {
  const std::string_view name = PipelineScheduleName(schedule);
  if (stages < 1) return InvalidArgument("pipeline schedule {}: {} stages (need at least 1)", name, stages);
  if (microbatches < 1) {
    return InvalidArgument("pipeline schedule {}: {} micro-batches (need at least 1)", name, microbatches);
  }
  if (schedule != PipelineSchedule::kInterleaved1F1B) {
    if (virtual_stages != 1) {
      return InvalidArgument(
          "pipeline schedule {} runs one model chunk per stage but virtual_stages = {} (use the interleaved "
          "schedule for virtual stages)",
          name, virtual_stages);
    }
    return Status::Ok();
  }
  if (virtual_stages < 2) {
    return InvalidArgument("interleaved pipeline schedule needs virtual_stages >= 2 (got {}; use 1f1b for 1)",
                           virtual_stages);
  }
  if (microbatches % stages != 0) {
    return InvalidArgument(
        "interleaved pipeline schedule needs the number of micro-batches ({}) to be a multiple of the number of "
        "pipeline stages ({})",
        microbatches, stages);
  }
  return Status::Ok();
}

std::vector<std::vector<PipeAction>> BuildPipelineSchedule(PipelineSchedule schedule, int stages, int microbatches,
                                                           int virtual_stages) {
  TESSERA_CHECK_OK(ValidatePipelineSchedule(schedule, stages, microbatches, virtual_stages));
  std::vector<std::vector<PipeAction>> result(stages);
  for (int s = 0; s < stages; ++s) {
    switch (schedule) {
      case PipelineSchedule::kGpipe: result[s] = Gpipe(microbatches); break;
      case PipelineSchedule::k1F1B: result[s] = OneFOneB(s, stages, microbatches); break;
      case PipelineSchedule::kInterleaved1F1B:
        result[s] = InterleavedOneFOneB(s, stages, microbatches, virtual_stages);
        break;
    }
  }
  return result;
}

double AnalyticBubbleFraction(PipelineSchedule schedule, int stages, int microbatches, int virtual_stages) {
  const double p = stages, m = microbatches;
  const double v = schedule == PipelineSchedule::kInterleaved1F1B ? virtual_stages : 1;
  return (p - 1) / (v * m + p - 1);
}

int MaxInFlight(const std::vector<PipeAction>& actions) {
  int alive = 0, most = 0;
  for (const PipeAction& a : actions) {
    alive += a.kind == Kind::kForward ? 1 : -1;
    most = std::max(most, alive);
  }
  return most;
}

}  // namespace tessera::parallel
