#include "tessera/train/image_trainer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/base/error.h"
#include "tessera/data/image_dataset.h"
#include "tessera/data/image_folder.h"
#include "tessera/data/image_source.h"
#include "tessera/graph/compiled_function.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/hal/device.h"
#include "tessera/hal/peak.h"
#include "tessera/hal/threading.h"
#include "tessera/models/resnet.h"
#include "tessera/optim/adamw.h"
#include "tessera/optim/clip.h"
#include "tessera/optim/schedule.h"
#include "tessera/train/checkpointing.h"
#include "tessera/train/graph_mode_report.h"
#include "tessera/train/progress.h"
#include "tessera/train/run_record.h"

namespace tessera::train {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Averages the parameters' gradients over the ranks with one fp32 sum
// all-reduce of their concatenation (a parameter without a gradient on
// this rank contributes zeros and gets the average).
class GradientAverager {
 public:
  explicit GradientAverager(std::vector<Tensor> params) : params_(std::move(params)) {
    int64_t n = 0;
    for (const Tensor& p : params_) n += p.numel();
    flat_.assign(static_cast<size_t>(n), 0.0f);
  }
  Status AllReduce(comm::Communicator& world) {
    float* at = flat_.data();
    for (Tensor& p : params_) {
      const int64_t n = p.numel();
      if (Tensor g = p.grad(); g.defined()) {
        Tensor c = g.Contiguous();
        std::copy_n(c.data<float>(), n, at);
      } else {
        std::fill_n(at, n, 0.0f);
      }
      at += n;
    }
    TESSERA_RETURN_IF_ERROR(
        world.AllReduce(flat_.data(), flat_.data(), flat_.size(), comm::DataType::kFloat32, comm::ReduceOp::kSum));
    const float scale = 1.0f / static_cast<float>(world.size());
    at = flat_.data();
    for (Tensor& p : params_) {
      const int64_t n = p.numel();
      Tensor g = p.grad();
      if (!g.defined() || !g.is_contiguous()) {
        g = Tensor::Empty(p.shape());
        p.set_grad(g);
      }
      float* dst = g.data<float>();
      for (int64_t i = 0; i < n; ++i) dst[i] = at[i] * scale;
      at += n;
    }
    return Status::Ok();
  }

 private:
  std::vector<Tensor> params_;
  std::vector<float> flat_;
};

Status SumOverRanks(comm::Communicator* world, std::vector<double>& v) {
  if (world == nullptr || world->size() == 1) return Status::Ok();
  return world->AllReduce(v.data(), v.data(), v.size(), comm::DataType::kFloat64, comm::ReduceOp::kSum);
}

Status BroadcastBuffers(comm::Communicator* world, const models::ResNet& model) {
  if (world == nullptr || world->size() == 1) return Status::Ok();
  for (auto& [name, b] : model.NamedBuffers()) {
    Tensor t = b;
    TESSERA_RETURN_IF_ERROR(world->Broadcast(t.data<float>(), t.data<float>(), static_cast<size_t>(t.numel()),
                                             comm::DataType::kFloat32, 0));
  }
  return Status::Ok();
}

struct ImageEval {
  double loss = 0, accuracy = 0;
  int64_t samples = 0;
};

StatusOr<ImageEval> Evaluate(const TrainConfig& config, comm::Communicator* world, models::ResNet& model,
                             const data::ImageSource& data) {
  TESSERA_RETURN_IF_ERROR(BroadcastBuffers(world, model));
  graph::NoGradGuard no_grad;
  model.SetTraining(false);
  const int ranks = world ? world->size() : 1, rank = world ? world->rank() : 0;
  // A finite held-out split is evaluated at most once per sample.
  const int64_t total = data.eval_size() > 0 ? std::min(config.eval.samples, data.eval_size()) : config.eval.samples;
  const int64_t begin = total * rank / ranks, end = total * (rank + 1) / ranks;
  std::vector<double> sums(3, 0.0);  // loss sum, correct, samples
  for (int64_t first = begin; first < end; first += config.eval.batch) {
    const int64_t b = std::min(config.eval.batch, end - first);
    TESSERA_ASSIGN_OR_RETURN(data::ImageBatch batch, data.EvalBatch(first, b));
    Tensor logits = model.Forward(batch.images);
    sums[0] += graph::CrossEntropy(logits, batch.labels).Item() * static_cast<double>(b);
    sums[1] += static_cast<double>(data::SyntheticImages::CountCorrect(logits, batch.labels));
    sums[2] += static_cast<double>(b);
  }
  model.SetTraining(true);
  TESSERA_RETURN_IF_ERROR(SumOverRanks(world, sums));
  ImageEval e;
  e.samples = static_cast<int64_t>(sums[2]);
  e.loss = e.samples > 0 ? sums[0] / sums[2] : 0;
  e.accuracy = e.samples > 0 ? sums[1] / sums[2] : 0;
  return e;
}

// data.kind = "synthetic_images" or "image_folder" (data/image_source.h).
StatusOr<std::unique_ptr<data::ImageSource>> OpenImageSource(const TrainConfig& config) {
  const DataOptions& c = config.data;
  if (c.kind == "image_folder") {
    data::ImageFolderOptions o;
    o.root = c.path.front();
    o.eval_root = c.eval_path;
    o.eval_every = c.eval_every;
    o.channels = config.resnet.in_channels;
    o.height = o.width = c.image_size;
    o.layout = config.resnet.layout;
    o.seed = static_cast<uint64_t>(config.train.seed) * 7919 + 31;
    o.cache_mb = c.cache_mb;
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<data::ImageFolder> folder, data::ImageFolder::Open(o));
    if (folder->num_classes() != config.resnet.num_classes) {
      const auto& names = folder->classes();
      const size_t shown = std::min<size_t>(names.size(), 8);
      return InvalidArgument("data.path '{}' has {} classes ({}{}) but model.resnet.num_classes = {}", o.root,
                             names.size(), fmt::join(names.begin(), names.begin() + shown, ", "),
                             shown < names.size() ? ", ..." : "", config.resnet.num_classes);
    }
    return std::unique_ptr<data::ImageSource>(std::move(folder));
  }
  data::SyntheticImagesOptions d;
  d.num_classes = config.resnet.num_classes;
  d.channels = config.resnet.in_channels;
  d.height = d.width = c.image_size;
  d.max_shift = c.image_shift;
  d.noise = static_cast<float>(c.image_noise);
  d.seed = static_cast<uint64_t>(config.train.seed) * 7919 + 31;
  d.layout = config.resnet.layout;
  TESSERA_ASSIGN_OR_RETURN(data::SyntheticImages images, data::SyntheticImages::Create(d));
  return data::MakeSyntheticSource(std::move(images));
}

Status Run(const TrainConfig& config, comm::Communicator* world, const TrainerOptions& options, TrainSummary* summary) {
  const TrainOptions& t = config.train;
  const int ranks = world ? world->size() : 1, rank = world ? world->rank() : 0;
  if (t.global_batch % (static_cast<int64_t>(ranks) * t.micro_batch) != 0) {
    return InvalidArgument("train.global_batch ({}) must be a multiple of {} ranks x train.micro_batch ({})",
                           t.global_batch, ranks, t.micro_batch);
  }
  if (t.threads > 0) hal::SetNumThreads(static_cast<int>(t.threads));
  PinKernelThreads(options);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<data::ImageSource> source, OpenImageSource(config));
  const data::ImageSource& dataset = *source;
  const int64_t image_size = config.data.image_size;

  models::ResNet model(config.resnet);
  model.InitParameters(config.model.seed);
  optim::AdamWOptions ao;
  ao.beta1 = t.beta1;
  ao.beta2 = t.beta2;
  ao.eps = t.eps;
  ao.weight_decay = t.weight_decay;
  optim::AdamW opt(model.NamedParameters(), ao);
  optim::WarmupCosineSchedule sched{t.lr, t.min_lr, std::min(t.warmup_steps, t.steps), t.steps};
  TESSERA_RETURN_IF_ERROR(sched.Validate());
  std::vector<Tensor> params = model.Parameters();
  std::unique_ptr<GradientAverager> averager;
  if (ranks > 1) averager = std::make_unique<GradientAverager>(params);

  const int64_t per_rank = t.global_batch / ranks;
  const int64_t accum = per_rank / t.micro_batch;
  const double flops_per_image = 3.0 * model.ForwardFlopsPerImage(image_size, image_size);
  const double peak_flops = ranks > 1 ? JobPeakFlops("fp32", ranks) : hal::MachinePeak().FlopsFor("fp32");
  FILE* out = rank == 0 ? options.out : nullptr;
  std::unique_ptr<Progress> progress;
  if (out != nullptr) progress = std::make_unique<Progress>(t.steps, t.log_every, out, options.force_plain);
  auto message = [&](const std::string& line) {
    if (progress) progress->Message(line);
  };
  message(
      fmt::format("tessera train '{}': {}, {} params, {}, {} steps x {} images on {} rank{}, {} threads per "
                  "rank, {:.2f} GFLOP per training image",
                  config.name, config.resnet.Describe(), model.NumParameters(), dataset.Describe(), t.steps,
                  t.global_batch, ranks, ranks == 1 ? "" : "s", hal::NumThreads(), flops_per_image / 1e9));
  const std::string run_dir = t.out_dir + "/" + config.name;

  // Checkpoints (train/checkpointing.h). Every rank loads the same
  // checkpoint (parameters are replicated; rank 0's batch-norm statistics,
  // which evaluation broadcasts anyway); rank 0 saves.
  const std::filesystem::path ckpt_root = config.checkpoint.dir.empty() ? std::filesystem::path(run_dir) / "checkpoints"
                                                                        : std::filesystem::path(config.checkpoint.dir);
  int64_t first_step = 1;
  std::string resumed_from;
  TESSERA_ASSIGN_OR_RETURN(const std::string resume, EffectiveResume(config.checkpoint, ckpt_root));
  if (!resume.empty()) {
    TESSERA_ASSIGN_OR_RETURN(ResumedRun resumed,
                             ResumeFromCheckpoints(resume, ckpt_root, t.steps, [&](const std::filesystem::path& dir) {
                               return LoadTrainerCheckpoint(dir, static_cast<graph::Module&>(model), opt);
                             }));
    first_step = resumed.state.step + 1;
    resumed_from = resumed.dir.string();
    message(fmt::format("resumed from {} (step {}){}", resumed_from, resumed.state.step,
                        resumed.skipped.empty() ? "" : " — newer checkpoints unusable: " + resumed.skipped));
  }
  CheckpointSchedule schedule(config.checkpoint);
  std::unique_ptr<AsyncCheckpointer> checkpointer;
  if (rank == 0 && schedule.enabled()) {
    checkpointer = std::make_unique<AsyncCheckpointer>(ckpt_root, config.checkpoint.keep);
  }
  auto last_save = Clock::now();

  std::unique_ptr<RunRecord> record;
  if (rank == 0 && options.write_records) {
    TESSERA_ASSIGN_OR_RETURN(record, RunRecord::Create(run_dir, first_step > 1 ? first_step - 1 : -1));
    TESSERA_RETURN_IF_ERROR(record->WriteJson("config.json", config.ToJson()));
  }

  // Graph mode (train.graph): the training forward (model + loss) is one
  // graph, captured on the first micro-batch and replayed (docs/graph-mode.md);
  // evaluation stays eager.
  std::unique_ptr<graph::GraphFunction> graphed;
  if (config.parallel.graph) {
    graph::GraphOptions go;
    go.passes.recompute_budget_bytes = config.parallel.graph_recompute_budget;
    go.inter_op = config.parallel.graph_inter_op;
    graphed = std::make_unique<graph::GraphFunction>(
        "resnet",
        [&model](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{graph::CrossEntropy(model.Forward(in[0]), in[1])};
        },
        go);
  }
  hal::CpuDevice().allocator().ResetPeak();
  model.SetTraining(true);
  const auto start = Clock::now();
  double timed_s = 0;
  int64_t timed_images = 0;
  std::vector<double> losses;
  ImageEval last_eval;
  bool have_eval = false;
  int64_t skipped = 0;
  for (int64_t step = first_step; step <= t.steps; ++step) {
    const auto s0 = Clock::now();
    model.ZeroGrad();
    std::vector<double> loss_sum(1, 0.0);
    for (int64_t micro = 0; micro < accum; ++micro) {
      const int64_t first = (step - 1) * t.global_batch + rank * per_rank + micro * t.micro_batch;
      TESSERA_ASSIGN_OR_RETURN(data::ImageBatch batch, dataset.TrainBatch(first, t.micro_batch));
      Tensor loss = graphed ? (*graphed)({batch.images, batch.labels})[0]
                            : graph::CrossEntropy(model.Forward(batch.images), batch.labels);
      loss_sum[0] += loss.Item();
      graph::Backward(loss, Tensor::Scalar(1.0 / static_cast<double>(accum)));
    }
    // Mean over every rank's micro-batches, as one process would compute.
    if (averager) TESSERA_RETURN_IF_ERROR(averager->AllReduce(*world));
    TESSERA_RETURN_IF_ERROR(SumOverRanks(world, loss_sum));
    const double loss = loss_sum[0] / static_cast<double>(accum * ranks);
    if (!std::isfinite(loss)) {
      return Aborted("training loss became {} at step {} (lower train.lr or enable train.grad_clip)", loss, step);
    }
    const double grad_norm = t.grad_clip > 0 ? optim::ClipGradNorm(params, t.grad_clip) : optim::GradNorm(params);
    const double lr = sched.LearningRate(step - 1);
    if (std::isfinite(grad_norm)) {
      opt.Step(lr);
    } else {
      ++skipped;
      message(fmt::format("step {}: gradient norm is {}; update skipped", step, grad_norm));
    }
    const auto s1 = Clock::now();
    const double step_s = Seconds(s0, s1);
    if (step > first_step || t.steps == first_step) {  // the first step warms caches up
      timed_s += step_s;
      timed_images += t.global_batch;
    }
    losses.push_back(loss);
    const double ips = timed_s > 0 ? static_cast<double>(timed_images) / timed_s : t.global_batch / step_s;
    if (progress) progress->Update({step, loss, lr, ips, grad_norm, Seconds(start, s1), "img/s"});
    if (record) {
      TESSERA_RETURN_IF_ERROR(record->AppendMetrics({{"step", step},
                                                     {"loss", loss},
                                                     {"lr", lr},
                                                     {"grad_norm", grad_norm},
                                                     {"step_s", step_s},
                                                     {"images_per_s", ips}}));
    }
    if (step == first_step && !resumed_from.empty() && record) {
      TESSERA_RETURN_IF_ERROR(AppendEvent(run_dir, RecoveryEvent("disk", resumed_from, first_step - 1, RestartCount(),
                                                                 record->last_step_before_resume())));
    }
    if (checkpointer && schedule.Due(step, first_step, Seconds(last_save, Clock::now()))) {
      TESSERA_RETURN_IF_ERROR(checkpointer->Save(step, static_cast<const graph::Module&>(model), opt, config.ToJson()));
      schedule.Saved(checkpointer->last_snapshot_seconds());
      last_save = Clock::now();
    }
    if (step == t.steps || (config.eval.every > 0 && step % config.eval.every == 0)) {
      TESSERA_ASSIGN_OR_RETURN(last_eval, Evaluate(config, world, model, dataset));
      have_eval = true;
      message(fmt::format("eval @ step {}: loss {:.4f}, top-1 accuracy {:.4f} on {} held-out images", step,
                          last_eval.loss, last_eval.accuracy, last_eval.samples));
      if (record) {
        TESSERA_RETURN_IF_ERROR(record->AppendMetrics({{"step", step},
                                                       {"eval_loss", last_eval.loss},
                                                       {"eval_metric", last_eval.accuracy},
                                                       {"eval_metric_name", "top1_accuracy"}}));
      }
    }
  }
  if (checkpointer) TESSERA_RETURN_IF_ERROR(checkpointer->Wait());
  if (progress) progress->Finish();

  TrainSummary s;
  s.steps = t.steps;
  if (checkpointer) {
    s.checkpoints = checkpointer->saves();
    s.checkpoint_snapshot_s = checkpointer->snapshot_seconds();
    s.checkpoint_write_s = checkpointer->write_seconds();
    s.checkpoint_interval_s = schedule.interval_seconds();
  }
  s.skipped_steps = skipped;
  s.final_loss = losses.back();
  const size_t tail = std::min<size_t>(10, losses.size());
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) s.final_loss_avg10 += losses[i] / tail;
  if (have_eval) s.eval = {last_eval.loss, last_eval.accuracy, last_eval.samples};
  s.metric_name = "top1_accuracy";
  s.chance_metric = 1.0 / static_cast<double>(dataset.num_classes());
  s.tokens_per_s = timed_s > 0 ? static_cast<double>(timed_images) / timed_s : 0;
  s.model_flops_per_token = flops_per_image;
  s.peak_flops = peak_flops;
  s.mfu = peak_flops > 0 ? s.tokens_per_s * flops_per_image / peak_flops : 0;
  s.peak_memory_bytes = hal::CpuDevice().allocator().Stats().peak_bytes;
  s.parameters = s.active_parameters = model.NumParameters();
  s.wall_s = Seconds(start, Clock::now());
  s.run_dir = record ? run_dir : "";
  if (ranks > 1) s.parallel = {{"dp", ranks}, {"mode", "data-parallel (per-rank batch norm statistics)"}};
  if (graphed) {
    s.parallel["graph_segments_rank0"] = GraphModeJson({{graphed->name(), graphed.get()}});
    message(GraphModeLine(s.parallel["graph_segments_rank0"]));
  }
  if (record) {
    nlohmann::json j = s.ToJson();
    j["images_per_s"] = s.tokens_per_s;
    j["model_flops_per_image"] = flops_per_image;
    TESSERA_RETURN_IF_ERROR(record->WriteJson("summary.json", j));
  }
  message(
      fmt::format("done: {} steps in {:.1f}s | final loss {:.4f} | eval loss {:.4f} | top-1 {:.4f} (chance "
                  "{:.4f}) | {:.1f} img/s | MFU {:.1f}% | peak memory {:.1f} MiB{}",
                  s.steps, s.wall_s, s.final_loss, s.eval.loss, s.eval.metric, s.chance_metric, s.tokens_per_s,
                  100 * s.mfu, s.peak_memory_bytes / 1048576.0, record ? " | " + run_dir + "/summary.json" : ""));
  if (summary != nullptr) *summary = s;
  return Status::Ok();
}

}  // namespace

Status RunImageTraining(const TrainConfig& config, comm::Communicator* world, const TrainerOptions& options,
                        TrainSummary* summary) {
  TESSERA_RETURN_IF_ERROR(config.Validate());
  if (!config.is_image_model()) return InvalidArgument("RunImageTraining: model.kind is '{}'", config.model_kind);
  try {
    return Run(config, world, options, summary);
  } catch (const OpError& e) {
    graph::ClearTape();
    return StatusFromOpError(e).WithContext(fmt::format("training run '{}'", config.name));
  }
}

}  // namespace tessera::train
