#include "tessera/sim/pipeline_replay.h"

#include <algorithm>

#include <fmt/format.h>

namespace tessera::sim {
namespace {

struct Task {
  int stage = 0;
  int stream = 0;  // 0 compute, 2 data-parallel (step_detail::Stream numbering)
  double duration = 0;
  std::vector<int> deps;        // must have ended
  int start_dep = -1;           // must have started
  double start = -1, end = -1;
  std::string name;
};

// (micro-batch, chunk, forward) in issue order on `stage`.
struct Item {
  int mb, chunk;
  bool fwd;
};

std::vector<Item> Order(const PipelineCost& c, int stage) {
  const int p = static_cast<int>(c.stages.size()), m = c.micro_batches;
  std::vector<Item> out;
  if (c.schedule != PipelineSchedule::kInterleaved) {
    const int warm = c.schedule == PipelineSchedule::kGPipe ? m : std::min(p - stage - 1, m);
    for (int i = 0; i < warm; ++i) out.push_back({i, 0, true});
    for (int i = 0; i < m - warm; ++i) {
      out.push_back({warm + i, 0, true});
      out.push_back({i, 0, false});
    }
    for (int i = m - warm; i < m; ++i) out.push_back({i, 0, false});
    return out;
  }
  // Megatron-LM forward_backward_pipelining_with_interleaving.
  const int v = c.vpp, total = m * v;
  auto item = [&](int k, bool fwd) {
    const int in_group = k % (p * v);
    int chunk = in_group / p;
    if (!fwd) chunk = v - 1 - chunk;
    return Item{(k / (p * v)) * p + k % p, chunk, fwd};
  };
  const int warm = std::min(total, (p - stage - 1) * 2 + (v - 1) * p);
  for (int k = 0; k < warm; ++k) out.push_back(item(k, true));
  for (int k = 0; k < total - warm; ++k) {
    out.push_back(item(warm + k, true));
    out.push_back(item(k, false));
  }
  for (int k = total - warm; k < total; ++k) out.push_back(item(k, false));
  return out;
}

// Runs the streams' tasks in issue order, each when its dependencies are
// done, as a fluid processor-sharing schedule: while n compute tasks run,
// each stands for `ranks_per_stage` ranks, and with `cores` > 0 every
// running task progresses at min(1, cores / (n ranks_per_stage)) (a
// work-conserving scheduler sharing the cores among the runnable ranks;
// waiting ranks sleep). With
// cores = 0 every task runs at rate 1 (a list schedule).
Status Schedule(std::vector<Task>& tasks, const std::vector<std::vector<int>>& stream, double cores,
                int ranks_per_stage) {
  std::vector<size_t> head(stream.size(), 0);
  std::vector<double> left(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) left[i] = tasks[i].duration;
  std::vector<int> running;  // task ids
  size_t done = 0;
  double now = 0;
  while (done < tasks.size()) {
    // Start every task at the head of an idle stream whose dependencies are met.
    for (size_t q = 0; q < stream.size(); ++q) {
      if (head[q] >= stream[q].size()) continue;
      const int id = stream[q][head[q]];
      Task& t = tasks[id];
      if (t.start >= 0) continue;  // running
      bool ok = true;
      for (int d : t.deps) ok = ok && tasks[d].end >= 0;
      if (t.start_dep >= 0) ok = ok && tasks[t.start_dep].start >= 0;
      if (!ok) continue;
      t.start = now;
      running.push_back(id);
    }
    if (running.empty()) return Internal("pipeline replay deadlocked with {} of {} tasks done", done, tasks.size());
    // Ranks computing compete for cores; a gradient reduction in flight
    // (the communication thread, mostly waiting) does not.
    double computing = 0;
    for (int id : running) computing += tasks[id].stream == 0 ? 1 : 0;
    const double demand = std::max(1.0, computing) * std::max(1, ranks_per_stage);
    const double rate = cores > 0 ? std::min(1.0, cores / demand) : 1.0;
    double step = 1e300;
    for (int id : running) step = std::min(step, left[id] / rate);
    now += step;
    std::vector<int> still;
    for (int id : running) {
      left[id] -= step * rate;
      if (left[id] <= 1e-12 * std::max(1.0, tasks[id].duration)) {
        tasks[id].end = now;
        ++head[static_cast<size_t>(tasks[id].stage) * 2 + (tasks[id].stream == 0 ? 0 : 1)];
        ++done;
      } else {
        still.push_back(id);
      }
    }
    running.swap(still);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<StepResult> ReplayPipeline(const PipelineCost& c) {
  const int p = static_cast<int>(c.stages.size()), m = c.micro_batches;
  const int v = c.schedule == PipelineSchedule::kInterleaved ? c.vpp : 1;
  if (p < 1 || m < 1 || v < 1) return InvalidArgument("pipeline replay: {} stages, {} micro-batches, vpp {}", p, m, v);
  if (v > 1 && m % p != 0) {
    return InvalidArgument("interleaved schedule: {} micro-batches are not a multiple of {} stages", m, p);
  }
  std::vector<Task> tasks;
  // id of (stage, micro-batch, chunk, direction)
  auto id = [&](int s, int i, int k, bool fwd) { return ((s * m + i) * v + k) * 2 + (fwd ? 0 : 1); };
  tasks.resize(static_cast<size_t>(p) * m * v * 2);
  for (int s = 0; s < p; ++s) {
    for (int i = 0; i < m; ++i) {
      for (int k = 0; k < v; ++k) {
        for (bool fwd : {true, false}) {
          Task& t = tasks[id(s, i, k, fwd)];
          t.stage = s;
          t.duration = (fwd ? c.stages[s].fwd_s : c.stages[s].bwd_s) / v;
          t.name = v > 1 ? fmt::format("{}{}.{}", fwd ? 'F' : 'B', i, k) : fmt::format("{}{}", fwd ? 'F' : 'B', i);
          if (fwd) {
            if (s > 0) t.deps.push_back(id(s - 1, i, k, true));
            else if (k > 0) t.deps.push_back(id(p - 1, i, k - 1, true));
          } else {
            t.deps.push_back(id(s, i, k, true));
            if (s < p - 1) t.deps.push_back(id(s + 1, i, k, false));
            else if (k < v - 1) t.deps.push_back(id(0, i, k + 1, false));
          }
        }
      }
    }
  }
  std::vector<std::vector<int>> stream(static_cast<size_t>(p) * 2);  // per stage: compute, data-parallel
  StepResult r;
  for (int s = 0; s < p; ++s) {
    std::vector<int>& comp = stream[2 * s];
    for (const Item& it : Order(c, s)) comp.push_back(id(s, it.mb, it.chunk, it.fwd));
    const StageCost& sc = c.stages[s];
    Task dp{s, 2, sc.dp_s, {}, -1, -1, -1, "dp gradient reduction"};
    // The last micro-batch's backward: its v chunk tasks are the last v compute tasks.
    const int first_of_last = comp[comp.size() - static_cast<size_t>(v)];
    if (sc.dp_overlaps_last_backward) dp.start_dep = first_of_last;
    else dp.deps.push_back(comp.back());
    tasks.push_back(dp);
    const int dp_id = static_cast<int>(tasks.size()) - 1;
    stream[2 * s + 1].push_back(dp_id);
    tasks.push_back(Task{s, 0, sc.optimizer_s, {dp_id, comp.back()}, -1, -1, -1, "optimizer"});
    comp.push_back(static_cast<int>(tasks.size()) - 1);
    if (s == 0) r.dp_comm_s = sc.dp_s;
  }
  TESSERA_RETURN_IF_ERROR(Schedule(tasks, stream, c.cores, c.ranks_per_stage));
  double flush = 0;
  for (const Task& t : tasks) {
    r.step_time_s = std::max(r.step_time_s, t.end);
    if (t.stream == 0 && t.name[0] == 'B') flush = std::max(flush, t.end);
    r.trace.push_back(TraceEvent{t.name, t.stage, t.stream, t.start, t.end});
  }
  for (int s = 0; s < p; ++s) {
    const double busy = m * (c.stages[s].fwd_s + c.stages[s].bwd_s);
    if (busy > r.compute_s) {
      r.compute_s = busy;
      r.bubble_fraction = flush > 0 ? 1 - busy / flush : 0;
    }
  }
  r.events = static_cast<int64_t>(tasks.size());
  return r;
}

}  // namespace tessera::sim
