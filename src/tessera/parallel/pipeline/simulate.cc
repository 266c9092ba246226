// SimulatePipeline (declared in schedule.h): a dependency-driven replay of a
// pipeline schedule with fixed per-action costs and free communication.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "tessera/parallel/pipeline/schedule.h"

namespace tessera::parallel {
namespace {

using Kind = PipeAction::Kind;

// Finish times per (micro-batch, virtual stage); negative = not run yet.
struct Done {
  int virtual_stages;
  std::vector<double> forward, backward;
  Done(int microbatches, int vstages)
      : virtual_stages(vstages),
        forward(static_cast<size_t>(microbatches) * vstages, -1.0),
        backward(static_cast<size_t>(microbatches) * vstages, -1.0) {}
  double& At(Kind kind, int mb, int vs) {
    return (kind == Kind::kForward ? forward : backward)[static_cast<size_t>(mb) * virtual_stages + vs];
  }
};

Status CheckCoverage(const std::vector<std::vector<PipeAction>>& schedule, int microbatches, int chunks) {
  for (size_t s = 0; s < schedule.size(); ++s) {
    std::vector<int> seen(static_cast<size_t>(2 * microbatches * chunks), 0);
    for (const PipeAction& a : schedule[s]) {
      if (a.microbatch < 0 || a.microbatch >= microbatches || a.chunk < 0 || a.chunk >= chunks) {
        return FailedPrecondition("pipeline schedule: stage {} has action {} out of range ({} micro-batches, {} chunks)",
                                  s, ToString(a), microbatches, chunks);
      }
      const size_t index = (static_cast<size_t>(a.microbatch) * chunks + a.chunk) * 2 + (a.kind == Kind::kBackward);
      if (++seen[index] > 1) return FailedPrecondition("pipeline schedule: stage {} repeats {}", s, ToString(a));
    }
    if (schedule[s].size() != seen.size()) {
      return FailedPrecondition("pipeline schedule: stage {} has {} actions, expected {}", s, schedule[s].size(),
                                seen.size());
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PipelineSimulation> SimulatePipeline(const std::vector<std::vector<PipeAction>>& schedule,
                                              int microbatches, int virtual_stages, double forward_cost,
                                              double backward_cost) {
  const int stages = static_cast<int>(schedule.size());
  if (stages < 1 || microbatches < 1 || virtual_stages < 1) {
    return InvalidArgument("SimulatePipeline: {} stages, {} micro-batches, {} virtual stages", stages, microbatches,
                           virtual_stages);
  }
  TESSERA_RETURN_IF_ERROR(CheckCoverage(schedule, microbatches, virtual_stages));
  const int last = stages * virtual_stages - 1;
  Done done(microbatches, last + 1);
  PipelineSimulation sim;
  sim.busy.assign(stages, 0.0);
  sim.start.resize(stages);
  std::vector<size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0.0);
  size_t remaining = 0;
  for (const auto& actions : schedule) remaining += actions.size();
  while (remaining > 0) {
    bool progress = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < schedule[s].size()) {
        const PipeAction& a = schedule[s][next[s]];
        const int vs = VirtualStage(s, a.chunk, stages);
        double ready = free_at[s];
        if (a.kind == Kind::kForward) {
          if (vs > 0) {
            const double dep = done.At(Kind::kForward, a.microbatch, vs - 1);
            if (dep < 0) break;
            ready = std::max(ready, dep);
          }
        } else {
          const double own = done.At(Kind::kForward, a.microbatch, vs);
          const double dep = vs < last ? done.At(Kind::kBackward, a.microbatch, vs + 1) : own;
          if (own < 0 || dep < 0) break;
          ready = std::max({ready, own, dep});
        }
        const double cost = a.kind == Kind::kForward ? forward_cost : backward_cost;
        sim.start[s].push_back(ready);
        free_at[s] = ready + cost;
        sim.busy[s] += cost;
        done.At(a.kind, a.microbatch, vs) = free_at[s];
        ++next[s];
        --remaining;
        progress = true;
      }
    }
    if (!progress) {
      std::string waiting;
      for (int s = 0; s < stages; ++s) {
        if (next[s] < schedule[s].size()) waiting += fmt::format(" stage {} at {};", s, ToString(schedule[s][next[s]]));
      }
      return FailedPrecondition("pipeline schedule deadlocks: every stage waits on another:{}", waiting);
    }
  }
  double total_busy = 0;
  for (int s = 0; s < stages; ++s) {
    sim.makespan = std::max(sim.makespan, free_at[s]);
    total_busy += sim.busy[s];
  }
  sim.bubble_fraction = sim.makespan > 0 ? 1.0 - total_busy / (stages * sim.makespan) : 0.0;
  return sim;
}

}  // namespace tessera::parallel
