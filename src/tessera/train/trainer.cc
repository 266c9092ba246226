#include "tessera/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <fmt/ranges.h>

#include "tessera/base/error.h"
#include "tessera/base/logging.h"
#include "tessera/comm/heartbeat.h"
#include "tessera/data/arithmetic.h"
#include "tessera/data/token_dataset.h"
#include "tessera/graph/tape.h"
#include "tessera/hal/affinity.h"
#include "tessera/hal/device.h"
#include "tessera/hal/peak.h"
#include "tessera/hal/threading.h"
#include "tessera/optim/adamw.h"
#include "tessera/optim/clip.h"
#include "tessera/optim/schedule.h"
#include "tessera/train/checkpointing.h"
#include "tessera/train/progress.h"
#include "tessera/train/run_record.h"

namespace tessera::train {
namespace {
using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

nlohmann::json TrainSummary::ToJson() const {
  nlohmann::json j = {{"steps", steps},
          {"skipped_steps", skipped_steps},
          {"final_loss", final_loss},
          {"final_loss_avg10", final_loss_avg10},
          {"eval_loss", eval.loss},
          {"eval_metric", eval.metric},
          {"eval_metric_name", metric_name},
          {"eval_samples", eval.samples},
          {"chance_metric", chance_metric},
          {"tokens_per_s", tokens_per_s},
          {"model_flops_per_token", model_flops_per_token},
          {"mfu", mfu},
          {"peak_flops", peak_flops},
          {"peak_memory_bytes", peak_memory_bytes},
          {"parameters", parameters},
          {"active_parameters", active_parameters},
          {"wall_s", wall_s}};
  if (!parallel.is_null()) j["parallel"] = parallel;
  if (checkpoints > 0) {
    j["checkpoint"] = {{"saves", checkpoints},
                       {"snapshot_s", checkpoint_snapshot_s},
                       {"write_s", checkpoint_write_s},
                       {"interval_s", checkpoint_interval_s}};
  }
  if (memory_snapshots > 0) j["memory_snapshot"] = {{"saves", memory_snapshots}, {"snapshot_s", memory_snapshot_s}};
  return j;
}

StatusOr<std::unique_ptr<data::Dataset>> MakeDataset(const TrainConfig& config) {
  const models::GptConfig& m = config.model;
  std::unique_ptr<data::Dataset> ds;
  if (config.data.kind == "arithmetic") {
    data::ArithmeticConfig a;
    a.digits = config.data.digits;
    a.seq_len = m.seq_len;
    a.seed = static_cast<uint64_t>(config.train.seed) * 7919 + 17;
    a.eval_samples = config.eval.samples;
    TESSERA_ASSIGN_OR_RETURN(ds, data::ArithmeticDataset::Create(a));
  } else {
    data::TokenDatasetConfig t;
    t.paths = config.data.path;
    if (config.data.kind == "text") {
      t.format = data::TokenFormat::kText;
    } else {
      TESSERA_ASSIGN_OR_RETURN(t.format, data::ParseTokenFormat(config.data.format));
    }
    t.vocab_size = m.vocab_size;
    t.seq_len = m.seq_len;
    t.val_fraction = config.data.val_fraction;
    t.eval_samples = config.eval.samples;
    t.seed = static_cast<uint64_t>(config.train.seed);
    TESSERA_ASSIGN_OR_RETURN(ds, data::TokenDataset::Create(t));
  }
  if (ds->vocab_size() > m.vocab_size) {
    return InvalidArgument("model.vocab_size = {} is smaller than the {} dataset's vocabulary ({})", m.vocab_size,
                           ds->name(), ds->vocab_size());
  }
  return ds;
}

double JobPeakFlops(std::string_view dtype, int world_size) {
  const hal::PeakInfo& peak = hal::MachinePeak();
  const char* local_env = std::getenv("LOCAL_WORLD_SIZE");
  const int local_ranks = local_env != nullptr ? std::max(1, std::atoi(local_env)) : world_size;
  const int hosts = (world_size + local_ranks - 1) / local_ranks;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return peak.FlopsFor(dtype, /*all_cores=*/false) * cores * hosts;
}

void PinKernelThreads(const TrainerOptions& options) {
  if (options.bind_slot < 0) return;
  auto cpus = hal::BindKernelThreads(options.bind_slot, options.bind_slots);
  if (!cpus.ok()) {
    TLOG(INFO, "kernel threads left unpinned: {}", cpus.status().message());
  } else if (!cpus->empty()) {
    TLOG(INFO, "kernel threads pinned to CPUs {}", fmt::join(*cpus, ","));
  }
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainConfig& config, const TrainerOptions& options) {
  TESSERA_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<Trainer> t(new Trainer(config, options));
  TESSERA_ASSIGN_OR_RETURN(t->dataset_, MakeDataset(config));
  if (config.train.threads > 0) hal::SetNumThreads(static_cast<int>(config.train.threads));
  PinKernelThreads(options);
  auto model = models::Gpt::Create(config.model);
  if (!model.ok()) return model.status().WithContext("building the model");
  t->model_ = std::move(model).value();
  return t;
}

EvalResult Trainer::Evaluate() {
  graph::NoGradGuard no_grad;
  model_->SetTraining(false);
  EvalResult r;
  data::MetricCounts counts;
  double loss_sum = 0;
  int64_t loss_tokens = 0;
  const int64_t n = std::min(dataset_->NumEvalSamples(), config_.eval.samples);
  for (int64_t first = 0; first < n; first += config_.eval.batch) {
    int64_t b = std::min(config_.eval.batch, n - first);
    data::Batch batch = dataset_->EvalBatch(first, b);
    models::GptOutput out = model_->Forward(batch.inputs, batch.targets);
    loss_sum += out.ce_loss.Item() * static_cast<double>(batch.num_target_tokens);
    loss_tokens += batch.num_target_tokens;
    data::MetricCounts c = dataset_->Score(batch, out.logits);
    counts.hits += c.hits;
    counts.total += c.total;
  }
  model_->SetTraining(true);
  r.loss = loss_tokens > 0 ? loss_sum / static_cast<double>(loss_tokens) : 0;
  r.metric = counts.value();
  r.samples = n;
  return r;
}

Status Trainer::Run(TrainSummary* summary) {
  try {
    return RunImpl(summary);
  } catch (const OpError& e) {
    graph::ClearTape();
    return StatusFromOpError(e).WithContext(fmt::format("training run '{}'", config_.name));
  }
}

Status Trainer::RunImpl(TrainSummary* summary) {
  const TrainOptions& t = config_.train;
  std::string run_dir = t.out_dir + "/" + config_.name;

  optim::AdamWOptions ao;
  ao.beta1 = t.beta1;
  ao.beta2 = t.beta2;
  ao.eps = t.eps;
  ao.weight_decay = t.weight_decay;
  optim::AdamW opt(model_->NamedParameters(), ao);
  optim::WarmupCosineSchedule sched{t.lr, t.min_lr, std::min(t.warmup_steps, t.steps), t.steps};
  TESSERA_RETURN_IF_ERROR(sched.Validate());
  std::vector<Tensor> params = model_->Parameters();

  const hal::PeakInfo& peak = hal::MachinePeak();
  const double peak_flops = peak.FlopsFor(DTypeName(config_.model.compute_dtype));
  const double flops_per_token = model_->TrainingFlopsPerToken();
  const int64_t accum = config_.accumulation_steps();
  const int64_t tokens_per_step = t.global_batch * config_.model.seq_len;

  Progress progress(t.steps, t.log_every, options_.out, options_.force_plain);
  progress.Message(fmt::format(
      "tessera train '{}': {} params ({} active/token), {} on {} data, {} steps x {} seqs x {} tokens, "
      "{} threads, peak {:.0f} GFLOP/s ({})",
      config_.name, model_->NumParameters(), model_->NumActiveParameters(),
      config_.model.moe.num_experts > 0 ? fmt::format("MoE {}x top-{}", config_.model.moe.num_experts,
                                                      config_.model.moe.top_k)
                                        : std::string("dense"),
      dataset_->name(), t.steps, t.global_batch, config_.model.seq_len, hal::NumThreads(), peak_flops / 1e9,
      DTypeName(config_.model.compute_dtype)));

  // Checkpoints (train/checkpointing.h): resume, then save every N steps.
  const std::filesystem::path ckpt_root =
      config_.checkpoint.dir.empty() ? std::filesystem::path(run_dir) / "checkpoints"
                                     : std::filesystem::path(config_.checkpoint.dir);
  int64_t first_step = 1;
  std::string resumed_from;  // the checkpoint, when resumed
  TESSERA_ASSIGN_OR_RETURN(const std::string resume, EffectiveResume(config_.checkpoint, ckpt_root));
  if (!resume.empty()) {
    TESSERA_ASSIGN_OR_RETURN(
        ResumedRun resumed,
        ResumeFromCheckpoints(resume, ckpt_root, t.steps, [&](const std::filesystem::path& dir) {
          return LoadTrainerCheckpoint(dir, *model_, opt);
        }));
    first_step = resumed.state.step + 1;
    resumed_from = resumed.dir.string();
    progress.Message(fmt::format("resumed from {} (step {}){}", resumed_from, resumed.state.step,
                                 resumed.skipped.empty() ? "" : " — newer checkpoints unusable: " + resumed.skipped));
  }
  std::unique_ptr<RunRecord> record;
  if (options_.write_records) {
    TESSERA_ASSIGN_OR_RETURN(record, RunRecord::Create(run_dir, first_step > 1 ? first_step - 1 : -1));
    TESSERA_RETURN_IF_ERROR(record->WriteJson("config.json", config_.ToJson()));
  }
  CheckpointSchedule schedule(config_.checkpoint);
  if (config_.checkpoint.memory_every > 0) {
    progress.Message("checkpoint.memory_every is ignored on one process (the in-memory tier replicates across "
                     "ranks); disk checkpoints still apply");
  }
  std::unique_ptr<AsyncCheckpointer> checkpointer;
  if (schedule.enabled()) checkpointer = std::make_unique<AsyncCheckpointer>(ckpt_root, config_.checkpoint.keep);
  auto last_save = Clock::now();

  hal::CpuDevice().allocator().ResetPeak();
  model_->SetTraining(true);
  auto start = Clock::now();
  double timed_s = 0;
  int64_t timed_tokens = 0;
  std::vector<double>& losses = losses_;
  losses.clear();
  EvalResult last_eval;
  bool have_eval = false;
  int64_t skipped_steps = 0;
  for (int64_t step = first_step; step <= t.steps; ++step) {
    auto s0 = Clock::now();
    model_->ZeroGrad();
    double loss_sum = 0, aux_sum = 0;
    for (int64_t micro = 0; micro < accum; ++micro) {
      int64_t first = (step - 1) * t.global_batch + micro * t.micro_batch;
      data::Batch batch = dataset_->TrainBatch(first, t.micro_batch);
      models::GptOutput out = model_->Forward(batch.inputs, batch.targets);
      if (options_.after_forward) options_.after_forward(step, micro, *model_);
      loss_sum += out.ce_loss.Item();
      if (out.aux_loss.defined()) aux_sum += out.aux_loss.Item();
      graph::Backward(out.loss, Tensor::Scalar(1.0 / static_cast<double>(accum), out.loss.dtype()));
    }
    double loss = loss_sum / static_cast<double>(accum);
    if (!std::isfinite(loss)) {
      return Aborted("training loss became {} at step {} (lower train.lr or enable train.grad_clip)", loss, step);
    }
    double grad_norm = t.grad_clip > 0 ? optim::ClipGradNorm(params, t.grad_clip) : optim::GradNorm(params);
    double lr = sched.LearningRate(step - 1);
    if (std::isfinite(grad_norm)) {
      opt.Step(lr);
    } else {
      // A finite loss with an overflowing gradient: skip the update rather
      // than write inf/NaN into the weights.
      ++skipped_steps;
      progress.Message(fmt::format("step {}: gradient norm is {}; update skipped", step, grad_norm));
    }
    auto s1 = Clock::now();
    double step_s = Seconds(s0, s1);
    if (step > 1 || t.steps == 1) {
      timed_s += step_s;
      timed_tokens += tokens_per_step;
    }
    losses.push_back(loss);
    double tps = timed_s > 0 ? static_cast<double>(timed_tokens) / timed_s : tokens_per_step / step_s;
    progress.Update({step, loss, lr, tps, grad_norm, Seconds(start, s1)});
    if (record) {
      nlohmann::json row = {{"step", step},     {"loss", loss},        {"lr", lr},
                            {"grad_norm", grad_norm}, {"step_s", step_s}, {"tokens_per_s", tps}};
      if (config_.model.moe.num_experts > 0) row["aux_loss"] = aux_sum / static_cast<double>(accum);
      TESSERA_RETURN_IF_ERROR(record->AppendMetrics(row));
    }
    if (step == first_step && !resumed_from.empty() && record) {
      // As multi-rank runs do (the launcher's agent may shrink a job to one rank).
      const nlohmann::json e = RecoveryEvent("disk", resumed_from, first_step - 1, RestartCount(),
                                             record->last_step_before_resume());
      TESSERA_RETURN_IF_ERROR(AppendEvent(run_dir, e));
      comm::ReportRestored("disk", first_step - 1, e.value("steps_lost", int64_t{0}));
    }
    if (checkpointer && schedule.Due(step, first_step, Seconds(last_save, Clock::now()))) {
      TESSERA_RETURN_IF_ERROR(checkpointer->Save(step, *model_, opt, config_.ToJson()));
      schedule.Saved(checkpointer->last_snapshot_seconds());
      last_save = Clock::now();
    }
    bool eval_now = step == t.steps || (config_.eval.every > 0 && step % config_.eval.every == 0);
    if (eval_now) {
      last_eval = Evaluate();
      have_eval = true;
      progress.Message(fmt::format("eval @ step {}: loss {:.4f}, {} {:.4f} on {} held-out samples", step,
                                   last_eval.loss, dataset_->metric_name(), last_eval.metric, last_eval.samples));
      if (record) {
        TESSERA_RETURN_IF_ERROR(record->AppendMetrics({{"step", step},
                                                       {"eval_loss", last_eval.loss},
                                                       {"eval_metric", last_eval.metric},
                                                       {"eval_metric_name", dataset_->metric_name()}}));
      }
    }
  }
  if (checkpointer) TESSERA_RETURN_IF_ERROR(checkpointer->Wait());
  progress.Finish();

  TrainSummary s;
  s.steps = t.steps;
  if (checkpointer) {
    s.checkpoints = checkpointer->saves();
    s.checkpoint_snapshot_s = checkpointer->snapshot_seconds();
    s.checkpoint_write_s = checkpointer->write_seconds();
    s.checkpoint_interval_s = schedule.interval_seconds();
  }
  s.skipped_steps = skipped_steps;
  s.final_loss = losses.back();
  size_t tail = std::min<size_t>(10, losses.size());
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) s.final_loss_avg10 += losses[i] / tail;
  if (have_eval) s.eval = last_eval;
  s.metric_name = dataset_->metric_name();
  s.chance_metric = dataset_->ChanceMetric();
  s.tokens_per_s = timed_s > 0 ? static_cast<double>(timed_tokens) / timed_s : 0;
  s.model_flops_per_token = flops_per_token;
  s.peak_flops = peak_flops;
  s.mfu = peak_flops > 0 ? s.tokens_per_s * flops_per_token / peak_flops : 0;
  s.peak_memory_bytes = hal::CpuDevice().allocator().Stats().peak_bytes;
  s.parameters = model_->NumParameters();
  s.active_parameters = model_->NumActiveParameters();
  s.wall_s = Seconds(start, Clock::now());
  s.run_dir = record ? run_dir : "";
  if (record) TESSERA_RETURN_IF_ERROR(record->WriteJson("summary.json", s.ToJson()));
  progress.Message(fmt::format(
      "done: {} steps in {:.1f}s | final loss {:.4f} | eval loss {:.4f} | {} {:.4f} (chance {:.4f}) | "
      "{:.0f} tokens/s | MFU {:.1f}% | peak memory {:.1f} MiB{}",
      s.steps, s.wall_s, s.final_loss, s.eval.loss, s.metric_name, s.eval.metric, s.chance_metric, s.tokens_per_s,
      100 * s.mfu, s.peak_memory_bytes / 1048576.0, record ? " | " + run_dir + "/summary.json" : ""));
  if (summary != nullptr) *summary = s;
  return Status::Ok();
}

}  // namespace tessera::train
