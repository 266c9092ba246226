#include "tessera/train/parallel_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <thread>

#include <fmt/ranges.h>

#include "tessera/base/error.h"
#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/comm/api/gather_strings.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/hal/device.h"
#include "tessera/hal/peak.h"
#include "tessera/hal/threading.h"
#include "tessera/optim/schedule.h"
#include "tessera/parallel/pipeline/partition.h"
#include "tessera/parallel/tensor_parallel/collectives.h"
#include "tessera/train/checkpointing.h"
#include "tessera/train/gradient_guard.h"
#include "tessera/train/graph_mode_report.h"
#include "tessera/train/layer_costs.h"
#include "tessera/train/progress.h"
#include "tessera/train/report.h"
#include "tessera/train/run_record.h"

namespace tessera::train {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Fault injection for tests: at this step, one gradient is set to +inf
// before the optimizer sees it (fp16 loss scaling must skip the step).
base::Knob<int64_t> kInjectOverflowStep("TESSERA_INJECT_GRAD_OVERFLOW_STEP", 0,
                                        "testing: poison one gradient with inf at this training step (0 = never)");

Status Sum(comm::Communicator& c, std::vector<double>& v) {
  return c.AllReduce(v.data(), v.data(), v.size(), comm::DataType::kFloat64, comm::ReduceOp::kSum);
}

nlohmann::json TimelineJson(const std::vector<parallel::TimelineEvent>& events) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : events) j.push_back({e.name, e.category, e.start_s, e.duration_s});
  return j;
}

}  // namespace

ParallelTrainer::~ParallelTrainer() = default;

StatusOr<std::unique_ptr<ParallelTrainer>> ParallelTrainer::Create(const TrainConfig& config, comm::Communicator& world,
                                                                   const ParallelTrainerOptions& options) {
  TrainConfig resolved = config;
  TESSERA_RETURN_IF_ERROR(parallel::ResolveElasticDp(resolved.parallel, resolved.model, resolved.train.global_batch,
                                                     resolved.train.micro_batch, world.size()));
  TESSERA_RETURN_IF_ERROR(resolved.Validate());
  std::unique_ptr<ParallelTrainer> t(new ParallelTrainer(resolved, world, options));
  t->is_rank0_ = world.rank() == 0;
  const parallel::ParallelConfig& pc = resolved.parallel;
  if (resolved.train.threads > 0) {
    hal::SetNumThreads(static_cast<int>(resolved.train.threads));
  } else {
    // Ranks of one host share its cores.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const char* local = std::getenv("LOCAL_WORLD_SIZE");
    const int local_ranks = local != nullptr ? std::max(1, std::atoi(local)) : world.size();
    hal::SetNumThreads(std::max(1, cores / local_ranks));
  }
  PinKernelThreads(options.base);
  TESSERA_ASSIGN_OR_RETURN(t->dataset_, MakeDataset(config));
  auto mesh = parallel::DeviceMesh::Create(world, pc.mesh());
  if (!mesh.ok()) return mesh.status().WithContext("building the device mesh");
  t->mesh_ = std::move(mesh).value();
  std::vector<int> first_layer = parallel::EvenLayerSplit(resolved.model.n_layers, pc.pp * pc.virtual_stages);
  if (pc.pp * pc.virtual_stages > 1) {
    // Balance the stages by measured per-layer cost (rank 0 measures, every
    // rank uses its figures so all agree).
    std::vector<double> costs(resolved.model.n_layers, 0.0);
    if (world.rank() == 0) {
      TESSERA_ASSIGN_OR_RETURN(costs, MeasureLayerCosts(resolved, *t->dataset_));
    }
    TESSERA_RETURN_IF_ERROR(world.Broadcast(costs.data(), costs.data(), costs.size(), comm::DataType::kFloat64, 0));
    std::vector<int> starts = parallel::PartitionLayers(costs, pc.pp * pc.virtual_stages);
    starts.push_back(resolved.model.n_layers);
    first_layer = starts;
    t->layer_costs_ = costs;
  }
  if (!options.first_layer.empty()) {  // testing: a given initial partition
    first_layer = options.first_layer;
    first_layer.push_back(resolved.model.n_layers);
    if (static_cast<int>(first_layer.size()) != pc.pp * pc.virtual_stages + 1 || first_layer[0] != 0 ||
        std::adjacent_find(first_layer.begin(), first_layer.end(), std::greater_equal<int>()) != first_layer.end()) {
      return InvalidArgument("ParallelTrainerOptions::first_layer [{}] is not a partition of {} layers into {} stages",
                             fmt::join(options.first_layer, ", "), resolved.model.n_layers, pc.pp * pc.virtual_stages);
    }
  }
  TESSERA_RETURN_IF_ERROR(t->BuildStage(first_layer));
  if (pc.rebalance && pc.pp * pc.virtual_stages > 1) {
    t->rebalancer_ =
        std::make_unique<StageRebalancer>(t->layer_costs_, std::vector<int>(first_layer.begin(), first_layer.end() - 1),
                                          pc.rebalance_spread, StageRebalancer::kDefaultMaxMoves);
  }
  t->loss_scale_ = pc.precision == "fp16" ? pc.loss_scale : 1.0;
  TESSERA_RETURN_IF_ERROR(t->SetUpCheckpoints());
  return t;
}

std::vector<parallel::MicroBatchInput> ParallelTrainer::MicroBatches(int64_t step, float loss_scale) {
  const TrainOptions& t = config_.train;
  const int64_t total = config_.accumulation_steps();
  const int64_t local = total / config_.parallel.dp;
  const int dp_rank = mesh_->coord().dp;
  const bool needs_data = true;  // ids on the first stage, targets on the last
  std::vector<parallel::MicroBatchInput> out;
  for (int64_t j = 0; j < local; ++j) {
    const int64_t k = dp_rank * local + j;  // micro-batch within the step
    parallel::MicroBatchInput mb;
    mb.global_index = (step - 1) * total + k;
    mb.loss_scale = loss_scale / static_cast<float>(local);
    if (needs_data) {
      data::Batch b = dataset_->TrainBatch((step - 1) * t.global_batch + k * t.micro_batch, t.micro_batch);
      mb.ids = b.inputs;
      mb.targets = b.targets;
    }
    out.push_back(std::move(mb));
  }
  return out;
}

StatusOr<double> ParallelTrainer::GlobalGradNorm() {
  std::vector<double> sq = {zero_->SquaredGradNorm()};
  TESSERA_RETURN_IF_ERROR(Sum(world_, sq));
  return std::sqrt(sq[0]);
}

Status ParallelTrainer::Run(TrainSummary* summary) {
  try {
    return RunImpl(summary);
  } catch (const OpError& e) {
    graph::ClearTape();
    return StatusFromOpError(e).WithContext(fmt::format("training run '{}' on rank {}", config_.name, world_.rank()));
  }
}

Status ParallelTrainer::RunImpl(TrainSummary* summary) {
  const TrainOptions& t = config_.train;
  const parallel::ParallelConfig& pc = config_.parallel;
  std::unique_ptr<RunRecord> record;
  const std::string run_dir = t.out_dir + "/" + config_.name;
  if (is_rank0_ && options_.base.write_records) {
    TESSERA_ASSIGN_OR_RETURN(record, RunRecord::Create(run_dir, first_step_ > 1 ? first_step_ - 1 : -1));
    TESSERA_RETURN_IF_ERROR(record->WriteJson("config.json", config_.ToJson()));
  }
  optim::WarmupCosineSchedule sched{t.lr, t.min_lr, std::min(t.warmup_steps, t.steps), t.steps};
  TESSERA_RETURN_IF_ERROR(sched.Validate());
  const double peak_flops = JobPeakFlops(DTypeName(config_.model.compute_dtype), world_.size());
  const double flops_per_token = stage_->model().TrainingFlopsPerToken();
  const int64_t tokens_per_step = t.global_batch * config_.model.seq_len;

  FILE* out = is_rank0_ ? options_.base.out : nullptr;
  Progress progress(t.steps, t.log_every, out != nullptr ? out : stdout, options_.base.force_plain);
  auto message = [&](const std::string& line) {
    if (is_rank0_) progress.Message(line);
  };
  message(
      fmt::format("tessera train '{}' on {} ranks: mesh {}, ZeRO-{}, {} precision, schedule {}, recompute {}; "
                  "{} params, {} steps x {} seqs x {} tokens, {} threads per rank",
                  config_.name, world_.size(), pc.mesh().ToString(), pc.zero, pc.precision, pc.schedule, pc.recompute,
                  stage_->model().NumParameters(), t.steps, t.global_batch, config_.model.seq_len, hal::NumThreads()));

  hal::CpuDevice().allocator().ResetPeak();
  stage_->model().SetTraining(true);
  const auto start = Clock::now();
  double timed_s = 0, comm_s = 0, compute_s = 0, bubble_sum = 0, sync_s = 0, grad_comm_s = 0, grad_wait_s = 0;
  int64_t bubble_steps = 0;
  int64_t timed_tokens = 0, skipped = 0;
  EvalResult last_eval;
  bool have_eval = false;
  ReportData report;
  parallel::StepResult traced;
  // The step whose timeline goes into report.html (and trace.json).
  const int64_t timeline_step =
      options_.trace_step > 0 ? std::min(options_.trace_step, t.steps) : std::min<int64_t>(first_step_ + 1, t.steps);
  if (!resumed_from_.empty()) message(fmt::format("resumed from {} (step {})", resumed_from_, first_step_ - 1));
  CheckpointSchedule schedule(config_.checkpoint);
  GradientGuard guard(config_.guard);
  // A time-based schedule is decided on rank 0 (clocks differ) and broadcast.
  const bool time_based =
      config_.checkpoint.every_seconds > 0 || (config_.checkpoint.every <= 0 && config_.checkpoint.mtbf_hours > 0);
  auto last_save = Clock::now();
  for (int64_t step = first_step_; step <= t.steps; ++step) {
    const auto s0 = Clock::now();
    const double sync0 = zero_->comm_wait_seconds();  // gradient reductions + parameter gathers
    const double grad_comm0 = zero_->grad_comm_seconds(), grad_wait0 = zero_->grad_wait_seconds();
    parallel::StepResult res;
    TESSERA_RETURN_IF_ERROR(step_->Run(MicroBatches(step, static_cast<float>(loss_scale_)), &res));
    // Loss: cross-entropy from the last stage's tp rank 0; aux from every
    // stage's tp rank 0.
    const bool tp0 = mesh_->coord().tp == 0;
    std::vector<double> sums = {tp0 ? res.stats.ce_loss : 0.0, tp0 ? res.stats.aux_loss : 0.0,
                                tp0 ? static_cast<double>(res.stats.aux_terms) : 0.0};
    TESSERA_RETURN_IF_ERROR(Sum(world_, sums));
    const double micro_batches = static_cast<double>(config_.accumulation_steps());
    const double loss = sums[0] / micro_batches;
    if (!std::isfinite(loss)) {
      return Aborted("training loss became {} at step {} (lower train.lr or enable train.grad_clip)", loss, step);
    }
    const int64_t inject =
        options_.inject_overflow_step > 0 ? options_.inject_overflow_step : kInjectOverflowStep.Get();
    if (inject == step) zero_->ScaleGradients(std::numeric_limits<double>::infinity());
    InjectGradientFaults(step);
    std::string mismatch;
    if (config_.guard.replica_checksum) {
      TESSERA_ASSIGN_OR_RETURN(mismatch, ReplicaMismatch());
    }
    TESSERA_ASSIGN_OR_RETURN(double scaled_norm, GlobalGradNorm());
    const double grad_norm = scaled_norm / loss_scale_;
    const double lr = sched.LearningRate(step - 1);
    std::string why;
    const GradientVerdict verdict = guard.Check(grad_norm, mismatch, &why);
    // fp16 overflow is routine (the loss scale adapts), not a fault.
    const bool fp16_overflow = verdict == GradientVerdict::kNonFinite && pc.precision == "fp16";
    if (verdict == GradientVerdict::kOk) {
      double factor = 1.0 / loss_scale_;
      if (t.grad_clip > 0 && grad_norm > t.grad_clip) factor *= t.grad_clip / (grad_norm + 1e-6);
      if (factor != 1.0) zero_->ScaleGradients(factor);
      TESSERA_RETURN_IF_ERROR(zero_->Step(lr));
      if (pc.precision == "fp16" && ++good_steps_ >= pc.loss_scale_window) {
        loss_scale_ *= 2;
        good_steps_ = 0;
      }
    } else {
      TESSERA_RETURN_IF_ERROR(zero_->DiscardGradients());
      int64_t back = -1;  // the step a rollback replays from (-1: skip the update instead)
      if (!fp16_overflow && config_.guard.on_failure == "rollback" && rollbacks_[step]++ == 0 && checkpointer_) {
        TESSERA_ASSIGN_OR_RETURN(back, RollBack(step, why));
      }
      if (back >= 0) {
        const int64_t keep = std::max<int64_t>(0, back - (first_step_ - 1));
        if (static_cast<int64_t>(losses_.size()) > keep) losses_.resize(keep);
        std::erase_if(report.steps, [&](const auto& row) { return row.step > back; });
        std::erase_if(report.evals, [&](const auto& row) { return row.step > back; });
        if (record) TESSERA_RETURN_IF_ERROR(record->Rewind(back));
        message(fmt::format("step {}: {} ({}); rolled back to the checkpoint of step {}, replaying", step,
                            VerdictName(verdict), why, back));
        step = back;
        continue;
      }
      ++skipped;
      if (fp16_overflow) {
        loss_scale_ = std::max(1.0, loss_scale_ / 2);
        good_steps_ = 0;
        message(fmt::format("step {}: gradient overflow (norm {}); update skipped, loss scale lowered to {}", step,
                            grad_norm, loss_scale_));
      } else {
        message(fmt::format("step {}: {} ({}); update skipped", step, VerdictName(verdict), why));
        Event({{"event", "step_skipped"},
               {"step", step},
               {"reason", std::string(VerdictName(verdict))},
               {"detail", why}});
      }
    }
    const auto s1 = Clock::now();
    const double step_s = Seconds(s0, s1);
    if (step > first_step_ || t.steps == first_step_) {
      timed_s += step_s;
      timed_tokens += tokens_per_step;
      const double step_sync = zero_->comm_wait_seconds() - sync0;
      sync_s += step_sync;
      grad_comm_s += zero_->grad_comm_seconds() - grad_comm0;
      grad_wait_s += zero_->grad_wait_seconds() - grad_wait0;
      comm_s += res.p2p_wait_s + step_sync;
      compute_s += res.compute_s;
      bubble_sum += res.bubble_fraction;
      ++bubble_steps;
    }
    if (step == timeline_step) traced = res;
    losses_.push_back(loss);
    const double tps = timed_s > 0 ? static_cast<double>(timed_tokens) / timed_s : tokens_per_step / step_s;
    const double aux = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
    report.steps.push_back({step, loss, tps, step_s});
    if (is_rank0_) progress.Update({step, loss, lr, tps, grad_norm, Seconds(start, s1)});
    if (record) {
      nlohmann::json row = {{"step", step},
                            {"loss", loss},
                            {"lr", lr},
                            {"grad_norm", grad_norm},
                            {"step_s", step_s},
                            {"tokens_per_s", tps},
                            {"comm_wait_s", res.comm_wait_s}};
      if (config_.model.moe.num_experts > 0) row["aux_loss"] = aux;
      if (pc.precision == "fp16") row["loss_scale"] = loss_scale_;
      TESSERA_RETURN_IF_ERROR(record->AppendMetrics(row));
    }
    if (checkpointer_) {
      int64_t due = schedule.Due(step, first_step_, Seconds(last_save, Clock::now())) ? 1 : 0;
      if (time_based) TESSERA_RETURN_IF_ERROR(world_.Broadcast(&due, &due, 1, comm::DataType::kInt64, 0));
      if (due) {
        TESSERA_RETURN_IF_ERROR(checkpointer_->Save(step, *zero_, CheckpointMetadata(step)));
        schedule.Saved(checkpointer_->last_snapshot_seconds());
        last_save = Clock::now();
      }
    }
    if (memory_ && step % config_.checkpoint.memory_every == 0) {
      Status ms = memory_->Save(step, *zero_, {{"loss_scale", loss_scale_}, {"good_steps", good_steps_}});
      if (!ms.ok()) TLOG(WARN, "rank {}: in-memory snapshot failed: {}", world_.rank(), ms.ToString());
    }
    if (step == first_step_ && !restore_source_.empty()) RecordRecovery(record.get());
    InjectProcessFaults(step);
    if (step == options_.crash_after_step) return Aborted("rank {}: crash injected after step {}", world_.rank(), step);
    const bool eval_now = step == t.steps || (config_.eval.every > 0 && step % config_.eval.every == 0);
    if (eval_now) {
      last_eval = Evaluate();
      have_eval = true;
      message(fmt::format("eval @ step {}: loss {:.4f}, {} {:.4f} on {} held-out samples", step, last_eval.loss,
                          dataset_->metric_name(), last_eval.metric, last_eval.samples));
      report.evals.push_back({step, last_eval.loss, last_eval.metric});
      if (record) {
        TESSERA_RETURN_IF_ERROR(record->AppendMetrics({{"step", step},
                                                       {"eval_loss", last_eval.loss},
                                                       {"eval_metric", last_eval.metric},
                                                       {"eval_metric_name", dataset_->metric_name()}}));
      }
    }
    TESSERA_RETURN_IF_ERROR(MaybeRebalance(step, res, message));
  }
  if (checkpointer_) TESSERA_RETURN_IF_ERROR(checkpointer_->Wait());
  if (memory_) {
    Status ms = memory_->Wait();
    if (!ms.ok()) TLOG(WARN, "rank {}: in-memory snapshot failed: {}", world_.rank(), ms.ToString());
    memory_->Discard();  // the run is done: free the RAM
  }
  if (is_rank0_) progress.Finish();

  // Per-rank figures, gathered everywhere (every rank keeps the summary).
  const parallel::ZeroMemory zm = zero_->Memory();
  parallel::ZeroCommBytes grad_bytes = zero_->GradCommBytes();
  grad_bytes.sent += grad_bytes_carried_.sent;
  grad_bytes.fp32_equivalent += grad_bytes_carried_.fp32_equivalent;
  const hal::MemoryStats ms = hal::CpuDevice().allocator().Stats();
  const int world = world_.size();
  std::vector<double> mine = {static_cast<double>(ms.peak_bytes),
                              static_cast<double>(zm.parameters),
                              static_cast<double>(zm.gradients),
                              static_cast<double>(zm.optimizer_state),
                              static_cast<double>(zm.offloaded_optimizer_state),
                              timed_s > 0 ? comm_s / timed_s : 0.0,
                              compute_s,
                              static_cast<double>(mesh_->coord().pp),
                              bubble_steps > 0 ? bubble_sum / bubble_steps : 0.0,
                              timed_s > 0 ? sync_s / timed_s : 0.0,
                              grad_comm_s,
                              grad_wait_s,
                              static_cast<double>(grad_bytes.sent),
                              static_cast<double>(grad_bytes.fp32_equivalent)};
  const size_t k = mine.size();
  std::vector<double> all(k * world);
  TESSERA_RETURN_IF_ERROR(
      world_.AllGather(mine.data(), all.data(), k, comm::DataType::kFloat64).WithContext("gathering run figures"));
  TrainSummary s;
  s.steps = t.steps;
  s.skipped_steps = skipped;
  s.final_loss = losses_.back();
  if (checkpointer_) {
    s.checkpoints = checkpointer_->saves();
    s.checkpoint_snapshot_s = checkpointer_->snapshot_seconds();
    s.checkpoint_write_s = checkpointer_->write_seconds();
    s.checkpoint_interval_s = schedule.interval_seconds();
  }
  if (memory_) {
    s.memory_snapshots = memory_->saves();
    s.memory_snapshot_s = memory_->snapshot_seconds();
  }
  const size_t tail = std::min<size_t>(10, losses_.size());
  for (size_t i = losses_.size() - tail; i < losses_.size(); ++i) s.final_loss_avg10 += losses_[i] / tail;
  if (have_eval) s.eval = last_eval;
  s.metric_name = dataset_->metric_name();
  s.chance_metric = dataset_->ChanceMetric();
  s.tokens_per_s = timed_s > 0 ? static_cast<double>(timed_tokens) / timed_s : 0;
  s.model_flops_per_token = flops_per_token;
  s.peak_flops = peak_flops;
  s.mfu = peak_flops > 0 ? s.tokens_per_s * flops_per_token / peak_flops : 0;
  s.parameters = stage_->model().NumParameters();
  s.active_parameters = stage_->model().NumActiveParameters();
  s.wall_s = Seconds(start, Clock::now());
  s.run_dir = record ? run_dir : "";
  nlohmann::json ranks = nlohmann::json::array();
  std::vector<double> stage_compute(pc.pp, 0.0);
  double comm_fraction_sum = 0, bubble_fraction_sum = 0, sync_fraction_sum = 0, grad_comm_sum = 0, grad_wait_sum = 0;
  double grad_sent_sum = 0, grad_fp32_sum = 0;
  for (int r = 0; r < world; ++r) {
    const double* v = &all[r * k];
    s.peak_memory_bytes = std::max<int64_t>(s.peak_memory_bytes, static_cast<int64_t>(v[0]));
    const double training_state = v[1] + v[2] + v[3];
    ranks.push_back(
        {{"rank", r},
         {"peak_memory_bytes", static_cast<int64_t>(v[0])},
         {"parameters_bytes", static_cast<int64_t>(v[1])},
         {"gradients_bytes", static_cast<int64_t>(v[2])},
         {"optimizer_state_bytes", static_cast<int64_t>(v[3])},
         {"offloaded_optimizer_state_bytes", static_cast<int64_t>(v[4])},
         {"activations_and_buffers_bytes", std::max<int64_t>(0, static_cast<int64_t>(v[0] - training_state))},
         {"comm_fraction", v[5]},
         {"param_sync_fraction", v[9]},
         {"grad_comm_s", v[10]},
         {"grad_comm_exposed_s", v[11]},
         {"grad_bytes_sent", static_cast<int64_t>(v[12])},
         {"grad_bytes_fp32_equivalent", static_cast<int64_t>(v[13])}});
    grad_comm_sum += v[10];
    grad_wait_sum += v[11];
    grad_sent_sum += v[12];
    grad_fp32_sum += v[13];
    comm_fraction_sum += v[5];
    bubble_fraction_sum += v[8];
    sync_fraction_sum += v[9];
    stage_compute[static_cast<int>(v[7])] = std::max(stage_compute[static_cast<int>(v[7])], v[6]);
  }
  const double max_stage = *std::max_element(stage_compute.begin(), stage_compute.end());
  const double min_stage = *std::min_element(stage_compute.begin(), stage_compute.end());
  s.parallel = {
      {"world_size", world},
      {"mesh", pc.mesh().ToString()},
      {"zero", pc.zero},
      {"precision", pc.precision},
      {"schedule", pc.schedule},
      {"recompute", pc.recompute},
      {"graph", pc.graph},
      // Gradient reductions over all ranks and steps (docs/comm.md, Compressed collectives).
      // (flat keys: the report's table shows them)
      {"grad_compression", pc.grad_compression},
      {"grad_bytes_sent", static_cast<int64_t>(grad_sent_sum)},
      {"grad_bytes_fp32_equivalent", static_cast<int64_t>(grad_fp32_sum)},
      {"grad_bytes_ratio", grad_fp32_sum > 0 ? grad_sent_sum / grad_fp32_sum : 1.0},
      {"comm_fraction", comm_fraction_sum / world},
      {"param_sync_fraction", sync_fraction_sum / world},
      // Gradient reductions over the timed steps: the time they ran
      // and the part of it ranks waited for; the rest was hidden
      // behind the backward pass (null: no gradient communication).
      {"grad_comm_s", grad_comm_sum / world},
      {"grad_comm_exposed_s", grad_wait_sum / world},
      {"grad_comm_hidden_fraction", grad_comm_sum > 0
                                        ? nlohmann::json(std::clamp(1.0 - grad_wait_sum / grad_comm_sum, 0.0, 1.0))
                                        : nlohmann::json(nullptr)},
      {"bubble_fraction", bubble_fraction_sum / world},
      {"stage_compute_s", stage_compute},
      {"stage_balance_spread", max_stage > 0 ? (max_stage - min_stage) / max_stage : 0.0},
      {"layers_per_chunk", stage_->first_layer()},
      {"rebalance", RebalanceJson()},
      {"measured_layer_costs_s", layer_costs_},
      {"predicted_stage_spread",
       layer_costs_.empty()
           ? 0.0
           : parallel::UtilizationSpread(parallel::PartCosts(
                 layer_costs_, std::vector<int>(stage_->first_layer().begin(), stage_->first_layer().end() - 1)))},
      {"ranks", ranks}};
  if (pc.graph) s.parallel["graph_segments_rank0"] = GraphModeJson(*stage_);
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> timelines,
                           comm::AllGatherStrings(world_, TimelineJson(traced.timeline).dump()));
  if (record) {
    TESSERA_RETURN_IF_ERROR(record->WriteJson("summary.json", s.ToJson()));
    report.summary = s.ToJson();
    nlohmann::json trace_events = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      for (const auto& e : nlohmann::json::parse(timelines[r])) {
        ReportData::Event ev{r, e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<double>(),
                             e[3].get<double>()};
        // Chrome trace-event format: complete events in microseconds; one
        // process per rank, compute and communication on separate threads.
        trace_events.push_back({{"name", ev.name},
                                {"cat", ev.category},
                                {"ph", "X"},
                                {"pid", r},
                                {"tid", ev.category == "comm" ? 1 : 0},
                                {"ts", ev.start_s * 1e6},
                                {"dur", ev.duration_s * 1e6}});
        report.timeline.push_back(std::move(ev));
      }
      trace_events.push_back(
          {{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", fmt::format("rank {}", r)}}}});
    }
    AddRunHistory(run_dir, &report);
    TESSERA_RETURN_IF_ERROR(WriteReportHtml(run_dir + "/report.html", config_.name, report));
    if (options_.trace_step > 0) {
      nlohmann::json trace = {{"traceEvents", trace_events},
                              {"displayTimeUnit", "ms"},
                              {"otherData", {{"run", config_.name}, {"step", timeline_step}}}};
      TESSERA_RETURN_IF_ERROR(WriteFileAtomic(run_dir + "/trace.json", trace.dump()));
      message(fmt::format("trace of step {} across {} ranks: {}/trace.json (open in ui.perfetto.dev)", timeline_step,
                          world, run_dir));
    }
  }
  message(fmt::format("gradient reductions ({}): {:.1f} MiB sent over all ranks, fp32 would send {:.1f} MiB ({:.3f}x)",
                      pc.grad_compression, grad_sent_sum / 1048576.0, grad_fp32_sum / 1048576.0,
                      grad_fp32_sum > 0 ? grad_sent_sum / grad_fp32_sum : 1.0));
  if (pc.graph) message(GraphModeLine(s.parallel["graph_segments_rank0"]));
  message(fmt::format(
      "done: {} steps in {:.1f}s | final loss {:.4f} | eval loss {:.4f} | {} {:.4f} (chance {:.4f}) | "
      "{:.0f} tokens/s | MFU {:.1f}% | comm {:.1f}% of step (parameter sync {:.1f}%) | bubble {:.1f}% | peak memory "
      "{:.1f} MiB (max over ranks){}",
      s.steps, s.wall_s, s.final_loss, s.eval.loss, s.metric_name, s.eval.metric, s.chance_metric, s.tokens_per_s,
      100 * s.mfu, 100 * comm_fraction_sum / world, 100 * sync_fraction_sum / world, 100 * bubble_fraction_sum / world,
      s.peak_memory_bytes / 1048576.0, record ? " | " + run_dir + "/summary.json, report.html" : ""));
  if (summary != nullptr) *summary = s;
  return Status::Ok();
}

StatusOr<std::map<std::string, Tensor>> ParallelTrainer::LocalParameters() {
  TESSERA_RETURN_IF_ERROR(zero_->GatherAll());
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : stage_->NamedParameters()) out[name] = t.Clone();
  for (int b = 0; b < zero_->num_buckets(); ++b) zero_->Release(b);
  return out;
}

}  // namespace tessera::train
