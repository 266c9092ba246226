#include "tessera/train/train_config.h"

#include <fmt/ranges.h>

#include "tessera/train/config_schema.h"

namespace tessera::train {
namespace {

// Enum-valued model fields go through strings in the file.
struct EnumText {
  std::string norm;
  std::string activation;
  std::string param_dtype;
  std::string compute_dtype;
  std::string image_layout = "NCHW";
};

void BindAll(ConfigSchema& s, TrainConfig& c, EnumText& e, int64_t& model_seed) {
  s.Bind("name", &c.name, "run name; outputs go to <train.out_dir>/<name>/");
  models::GptConfig& m = c.model;
  s.Bind("model.kind", &c.model_kind, "gpt | resnet (the resnet keys are model.resnet.*)");
  models::ResNetConfig& r = c.resnet;
  s.Bind("model.resnet.bottleneck", &r.bottleneck, "bottleneck blocks (ResNet-50 style); false: basic blocks");
  s.Bind("model.resnet.layers", &r.layers, "blocks per stage ([3, 4, 6, 3] = ResNet-50, [2, 2, 2, 2] = ResNet-18)");
  s.Bind("model.resnet.width", &r.width, "stem channels = first stage's width (64 in torchvision)");
  s.Bind("model.resnet.num_classes", &r.num_classes, "classes (the dataset's)");
  s.Bind("model.resnet.small_stem", &r.small_stem, "3x3 stride-1 stem without max pooling (small images)");
  s.Bind("model.resnet.zero_init_residual", &r.zero_init_residual, "last norm of each residual branch starts at 0");
  s.Bind("model.resnet.layout", &e.image_layout, "activation layout: NCHW | NHWC");
  s.Bind("model.vocab_size", &m.vocab_size, "vocabulary size (>= the dataset's)");
  s.Bind("model.seq_len", &m.seq_len, "context length in tokens");
  s.Bind("model.n_layers", &m.n_layers, "transformer blocks");
  s.Bind("model.d_model", &m.d_model, "hidden size");
  s.Bind("model.n_heads", &m.n_heads, "attention heads");
  s.Bind("model.d_ff", &m.d_ff, "MLP hidden size (0 = 4 d_model)");
  s.Bind("model.norm", &e.norm, "layernorm | rmsnorm");
  s.Bind("model.activation", &e.activation, "gelu | swiglu");
  s.Bind("model.dropout", &m.dropout, "dropout probability (training only)");
  s.Bind("model.rope", &m.rope, "rotary positions (false: learned positions)");
  s.Bind("model.rope_base", &m.rope_base, "rotary base frequency");
  s.Bind("model.tie_embeddings", &m.tie_embeddings, "LM head shares the token embedding");
  s.Bind("model.bias", &m.bias, "biases in linear layers");
  s.Bind("model.init_std", &m.init_std, "initialization standard deviation");
  s.Bind("model.norm_eps", &m.norm_eps, "normalization epsilon");
  s.Bind("model.param_dtype", &e.param_dtype, "parameter storage dtype (fp32)");
  s.Bind("model.compute_dtype", &e.compute_dtype, "activation dtype: fp32 | bf16");
  s.Bind("model.seed", &model_seed, "parameter-init and dropout seed");
  s.Bind("model.moe.num_experts", &m.moe.num_experts, "experts per MoE layer (0 = dense)");
  s.Bind("model.moe.top_k", &m.moe.top_k, "experts per token");
  s.Bind("model.moe.layers", &m.moe.layers, "explicit list of MoE layer indices");
  s.Bind("model.moe.every", &m.moe.every, "every k-th layer is MoE (when layers is empty)");
  s.Bind("model.moe.d_ff_expert", &m.moe.d_ff_expert, "expert hidden size (0 = d_ff)");
  s.Bind("model.moe.aux_loss_coef", &m.moe.aux_loss_coef, "load-balancing loss weight");
  s.Bind("model.moe.capacity_factor", &m.moe.capacity_factor, "expert capacity factor (0 = no dropping)");
  s.Bind("model.moe.normalize_top_k", &m.moe.normalize_top_k, "renormalize the top-k gate weights");

  s.Bind("data.kind", &c.data.kind, "arithmetic | text | shards (gpt); synthetic_images | image_folder (resnet)");
  s.Bind("data.image_size", &c.data.image_size,
         "synthetic_images: image height = width in pixels; image_folder: images are resized to it");
  s.Bind("data.image_noise", &c.data.image_noise, "synthetic_images: noise stddev over unit-variance prototypes");
  s.Bind("data.image_shift", &c.data.image_shift, "synthetic_images: largest random shift in pixels");
  s.Bind("data.digits", &c.data.digits, "arithmetic: digits per operand");
  s.Bind("data.path", &c.data.path,
         "text/shards: file or list of files; image_folder: the training folder, <path>/<class>/*.png "
         "(classes sorted by name, label = index)");
  s.Bind("data.eval_path", &c.data.eval_path,
         "image_folder: held-out folder with the same class folders (\"\" = hold out every data.eval_every-th file "
         "of each class of data.path)");
  s.Bind("data.eval_every", &c.data.eval_every,
         "image_folder without eval_path: the k-th, 2k-th, ... file of each class is held out (k >= 2)");
  s.Bind("data.cache_mb", &c.data.cache_mb, "image_folder: MiB of decoded, resized images kept in memory per process");
  s.Bind("data.format", &c.data.format, "shards: uint16 | uint32");
  s.Bind("data.val_fraction", &c.data.val_fraction, "text/shards: held-out fraction of each file");

  TrainOptions& t = c.train;
  s.Bind("train.steps", &t.steps, "optimizer steps");
  s.BindIntOrAuto("train.micro_batch", &t.micro_batch,
                  "sequences per forward/backward, or \"auto\": the largest that fits train.device_memory_limit "
                  "(else the machine's memory per local rank), from the measured per-sample activation footprint "
                  "(train/auto_micro_batch.h)");
  s.Bind("train.global_batch", &t.global_batch, "sequences per optimizer step");
  s.Bind("train.lr", &t.lr, "peak learning rate");
  s.Bind("train.min_lr", &t.min_lr, "final learning rate of the cosine decay");
  s.Bind("train.warmup_steps", &t.warmup_steps, "linear warm-up steps");
  s.Bind("train.weight_decay", &t.weight_decay, "AdamW decoupled weight decay");
  s.Bind("train.beta1", &t.beta1, "AdamW beta1");
  s.Bind("train.beta2", &t.beta2, "AdamW beta2");
  s.Bind("train.eps", &t.eps, "AdamW epsilon");
  s.Bind("train.grad_clip", &t.grad_clip, "global gradient-norm clip (0 = off)");
  s.Bind("train.seed", &t.seed, "data-order seed");
  s.Bind("train.log_every", &t.log_every, "steps between plain log lines");
  s.Bind("train.threads", &t.threads, "compute threads (0 = all cores)");
  s.Bind("train.out_dir", &t.out_dir, "folder for run records");

  parallel::ParallelConfig& p = c.parallel;
  s.Bind("train.precision", &p.precision, "fp32 | bf16 | fp16 compute (fp32 master weights and gradients)");
  s.Bind("train.recompute", &p.recompute, "activation recompute: none | selective | full");
  s.Bind("train.graph", &p.graph,
         "graph mode: capture each segment into a static graph, optimize it (dead code, constants, common "
         "subexpressions, fusion, memory plan) and replay it (docs/graph-mode.md)");
  s.Bind("train.graph_recompute_budget", &p.graph_recompute_budget,
         "graph mode: bytes of activations a segment keeps for its backward per micro-batch before cheap ones are "
         "recomputed (-1, the default: never; 0: recompute every cheap one that saves memory)");
  s.Bind("train.graph_inter_op", &p.graph_inter_op,
         "graph mode: run independent operators side by side, one thread each, where the first replays measure it "
         "faster (default true)");
  s.Bind("train.offload_optimizer", &p.offload_optimizer, "keep optimizer state in the host memory tier");
  s.Bind("train.device_memory_limit", &p.device_memory_limit,
         "device-memory budget per rank in bytes (0 = none); over it, optimizer state is offloaded to the host "
         "tier, and if still over the run stops with the breakdown");
  s.Bind("train.loss_scale", &p.loss_scale, "fp16: initial dynamic loss scale");
  s.Bind("train.loss_scale_window", &p.loss_scale_window, "fp16: overflow-free steps before the scale doubles");
  s.Bind("parallel.dp", &p.dp, "data-parallel degree");
  s.Bind("parallel.tp", &p.tp, "tensor-parallel degree (divides n_heads, vocab_size, d_ff)");
  s.Bind("parallel.pp", &p.pp, "pipeline-parallel degree (stages)");
  s.Bind("parallel.ep", &p.ep, "expert-parallel degree (divides dp and num_experts)");
  s.Bind("parallel.zero", &p.zero, "ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters");
  s.Bind("parallel.grad_compression", &p.grad_compression,
         "compress the data-parallel gradient reductions, with error feedback: none | bf16 | fp16 | int8 | fp8 | "
         "topk:F, optionally per bucket: \"int8, embed=none, blocks.*.experts=bf16\" (glob=codec, first match "
         "wins; docs/comm.md, Compressed collectives)");
  s.Bind("parallel.sequence_parallel", &p.sequence_parallel, "shard norm/dropout regions along the sequence (tp > 1)");
  s.Bind("parallel.schedule", &p.schedule, "pipeline schedule: gpipe | 1f1b | interleaved");
  s.Bind("parallel.virtual_stages", &p.virtual_stages, "model chunks per pipeline stage (interleaved)");
  s.Bind("parallel.rebalance", &p.rebalance,
         "pp > 1: move layers between pipeline stages at run time until their measured compute times are within "
         "parallel.rebalance_spread (docs/pipeline.md)");
  s.Bind("parallel.rebalance_every", &p.rebalance_every, "steps per stage-time measurement window of the rebalancer");
  s.Bind("parallel.rebalance_spread", &p.rebalance_spread,
         "target (max - min) / max of the pipeline stages' measured compute times");

  s.Bind("eval.every", &c.eval.every, "steps between evaluations (0 = end only)");
  s.Bind("eval.samples", &c.eval.samples, "held-out sequences per evaluation");
  s.Bind("eval.batch", &c.eval.batch, "sequences per evaluation batch");

  s.Bind("checkpoint.dir", &c.checkpoint.dir, "checkpoint folder (\"\" = <train.out_dir>/<name>/checkpoints)");
  s.Bind("checkpoint.every", &c.checkpoint.every, "save a checkpoint every N steps, asynchronously (0 = not by steps)");
  s.Bind("checkpoint.every_seconds", &c.checkpoint.every_seconds,
         "save when this many seconds passed since the last save (0 = not by time)");
  s.Bind("checkpoint.mtbf_hours", &c.checkpoint.mtbf_hours,
         "mean time between failures of this job; with no interval set, saves every sqrt(2 x measured save cost x "
         "MTBF) seconds (Young/Daly; 0 = off)");
  s.Bind("guard.spike_factor", &c.guard.spike_factor,
         "a gradient norm above this x the running median fails verification (0 = off)");
  s.Bind("guard.spike_window", &c.guard.spike_window, "accepted steps in the running median of gradient norms");
  s.Bind("guard.replica_checksum", &c.guard.replica_checksum,
         "compare a checksum of the reduced gradients across data-parallel replicas (ZeRO 0-1)");
  s.Bind("guard.on_failure", &c.guard.on_failure,
         "skip (drop the update) | rollback (reload the last checkpoint and replay from it)");
  s.Bind("checkpoint.keep", &c.checkpoint.keep, "checkpoints kept (older ones are deleted after a save)");
  s.Bind("checkpoint.memory_every", &c.checkpoint.memory_every,
         "multi-rank runs: keep an in-memory snapshot (tmpfs, with a replica on the next node) every N steps, "
         "restored after a failure without reading disk (0 = off)");
  s.Bind("checkpoint.memory_dir", &c.checkpoint.memory_dir,
         "tmpfs folder of the in-memory snapshots (\"\" = /dev/shm/tessera-<uid>/<name>)");
  s.Bind("checkpoint.resume", &c.checkpoint.resume,
         "resume from a checkpoint directory or \"latest\" (of checkpoint.dir); \"\" = start fresh");
}

}  // namespace

StatusOr<TrainConfig> TrainConfig::Load(const std::string& path, const std::vector<std::string>& overrides) {
  return Build([&](ConfigSchema& schema) { return schema.ApplyFile(path); }, path, overrides);
}

StatusOr<TrainConfig> TrainConfig::FromJson(const nlohmann::json& config, const std::string& source,
                                            const std::vector<std::string>& overrides) {
  return Build([&](ConfigSchema& schema) { return schema.ApplyJson(config, source); }, source, overrides);
}

StatusOr<TrainConfig> TrainConfig::Build(const std::function<Status(ConfigSchema&)>& apply, const std::string& path,
                                         const std::vector<std::string>& overrides) {
  TrainConfig c;
  EnumText e{"layernorm", "gelu", "fp32", "fp32", "NCHW"};
  int64_t model_seed = static_cast<int64_t>(c.model.seed);
  ConfigSchema schema;
  BindAll(schema, c, e, model_seed);
  TESSERA_RETURN_IF_ERROR(apply(schema));
  for (const std::string& o : overrides) TESSERA_RETURN_IF_ERROR(schema.ApplyOverride(o));

  auto with = [&](Status st) { return st.WithContext(fmt::format("loading config '{}'", path)); };
  auto norm = models::ParseNormKind(e.norm);
  if (!norm.ok()) return with(norm.status());
  c.model.norm = *norm;
  auto act = models::ParseActivationKind(e.activation);
  if (!act.ok()) return with(act.status());
  c.model.activation = *act;
  auto pd = ParseDType(e.param_dtype);
  if (!pd.ok()) return with(pd.status());
  c.model.param_dtype = *pd;
  auto cd = ParseDType(e.compute_dtype);
  if (!cd.ok()) return with(cd.status());
  c.model.compute_dtype = *cd;
  c.model.seed = static_cast<uint64_t>(model_seed);
  if (e.image_layout != "NCHW" && e.image_layout != "NHWC") {
    return with(InvalidArgument("model.resnet.layout must be 'NCHW' or 'NHWC', got '{}'", e.image_layout));
  }
  c.resnet.layout = e.image_layout == "NCHW" ? ops::ImageLayout::kNCHW : ops::ImageLayout::kNHWC;
  // train.precision decides the compute dtype; an older config may say
  // model.compute_dtype instead.
  if (c.parallel.precision == "fp32" && c.model.compute_dtype != DType::kF32) {
    c.parallel.precision = std::string(DTypeName(c.model.compute_dtype));
  } else if (c.model.compute_dtype != DType::kF32 && c.parallel.precision != DTypeName(c.model.compute_dtype)) {
    return with(InvalidArgument("train.precision = '{}' contradicts model.compute_dtype = '{}' (set only one)",
                                c.parallel.precision, DTypeName(c.model.compute_dtype)));
  }
  if (c.parallel.precision == "bf16") c.model.compute_dtype = DType::kBF16;
  if (c.parallel.precision == "fp16") c.model.compute_dtype = DType::kF16;
  Status st = c.Validate();
  if (!st.ok()) return with(st);
  return c;
}

Status TrainConfig::Validate() const {
  if (name.empty() || name.find('/') != std::string::npos) {
    return InvalidArgument("name '{}' must be non-empty and contain no '/'", name);
  }
  if (model_kind != "gpt" && model_kind != "resnet") {
    return InvalidArgument("model.kind must be 'gpt' or 'resnet', got '{}'", model_kind);
  }
  TESSERA_RETURN_IF_ERROR(model.Validate());
  if (is_image_model()) TESSERA_RETURN_IF_ERROR(ValidateImageRun());
  const TrainOptions& t = train;
  if (t.steps < 1) return InvalidArgument("train.steps must be >= 1, got {}", t.steps);
  if (t.micro_batch < 0) return InvalidArgument("train.micro_batch must be >= 1 or \"auto\", got {}", t.micro_batch);
  const bool auto_micro_batch = t.micro_batch == 0;  // resolved before training (train/auto_micro_batch.h)
  if (auto_micro_batch && is_image_model()) {
    return InvalidArgument("train.micro_batch = \"auto\" is for GPT models so far (model.kind = 'resnet')");
  }
  if (t.global_batch < 1) return InvalidArgument("train.global_batch must be >= 1, got {}", t.global_batch);
  if (!auto_micro_batch && (t.global_batch < t.micro_batch || t.global_batch % t.micro_batch != 0)) {
    return InvalidArgument("train.global_batch ({}) must be a positive multiple of train.micro_batch ({})",
                           t.global_batch, t.micro_batch);
  }
  if (!(t.lr > 0)) return InvalidArgument("train.lr must be > 0, got {}", t.lr);
  if (t.min_lr < 0 || t.min_lr > t.lr) {
    return InvalidArgument("train.min_lr must be in [0, train.lr = {}], got {}", t.lr, t.min_lr);
  }
  if (t.warmup_steps < 0) return InvalidArgument("train.warmup_steps must be >= 0, got {}", t.warmup_steps);
  if (t.beta1 < 0 || t.beta1 >= 1 || t.beta2 < 0 || t.beta2 >= 1) {
    return InvalidArgument("train.beta1/beta2 must be in [0, 1), got {}/{}", t.beta1, t.beta2);
  }
  if (t.grad_clip < 0) return InvalidArgument("train.grad_clip must be >= 0, got {}", t.grad_clip);
  if (t.threads < 0) return InvalidArgument("train.threads must be >= 0, got {}", t.threads);
  if (t.log_every < 1) return InvalidArgument("train.log_every must be >= 1, got {}", t.log_every);
  if (eval.every < 0 || eval.samples < 1 || eval.batch < 1) {
    return InvalidArgument("eval.every must be >= 0 and eval.samples, eval.batch >= 1 (got {}, {}, {})", eval.every,
                           eval.samples, eval.batch);
  }
  if (checkpoint.every < 0 || checkpoint.every_seconds < 0 || checkpoint.mtbf_hours < 0 || checkpoint.keep < 1 ||
      checkpoint.memory_every < 0) {
    return InvalidArgument(
        "checkpoint.every, every_seconds, mtbf_hours, memory_every must be >= 0 and checkpoint.keep >= 1 "
        "(got {}, {}, {}, {})",
        checkpoint.every, checkpoint.every_seconds, checkpoint.mtbf_hours, checkpoint.keep);
  }
  if (guard.spike_factor < 0 || (guard.spike_factor > 0 && guard.spike_factor <= 1) || guard.spike_window < 1) {
    return InvalidArgument("guard.spike_factor must be 0 (off) or > 1 and guard.spike_window >= 1 (got {}, {})",
                           guard.spike_factor, guard.spike_window);
  }
  if (guard.on_failure != "skip" && guard.on_failure != "rollback") {
    return InvalidArgument("guard.on_failure must be 'skip' or 'rollback', got '{}'", guard.on_failure);
  }
  TESSERA_RETURN_IF_ERROR(
      parallel::ValidateParallelConfig(parallel, model, train.global_batch, auto_micro_batch ? 1 : train.micro_batch));
  if (is_image_model()) return Status::Ok();
  if (data.kind != "arithmetic" && data.kind != "text" && data.kind != "shards") {
    return InvalidArgument("data.kind must be 'arithmetic', 'text' or 'shards', got '{}'", data.kind);
  }
  if (data.kind != "arithmetic" && data.path.empty()) {
    return InvalidArgument("data.path is required for data.kind = '{}'", data.kind);
  }
  if (data.kind == "shards" && data.format != "uint16" && data.format != "uint32") {
    return InvalidArgument("data.format must be 'uint16' or 'uint32' for shards, got '{}'", data.format);
  }
  return Status::Ok();
}

Status TrainConfig::ValidateImageRun() const {
  TESSERA_RETURN_IF_ERROR(resnet.Validate());
  if (data.kind != "synthetic_images" && data.kind != "image_folder") {
    return InvalidArgument("data.kind must be 'synthetic_images' or 'image_folder' for model.kind = 'resnet', got '{}'",
                           data.kind);
  }
  if (data.kind == "image_folder") {
    if (data.path.size() != 1 || data.path[0].empty()) {
      return InvalidArgument(
          "data.path must name one folder (<path>/<class>/*.png) for data.kind = 'image_folder', "
          "got [{}]",
          fmt::join(data.path, ", "));
    }
    if (data.eval_path.empty() && data.eval_every < 2) {
      return InvalidArgument("data.eval_every must be >= 2 (without data.eval_path), got {}", data.eval_every);
    }
    if (data.cache_mb < 0) return InvalidArgument("data.cache_mb must be >= 0, got {}", data.cache_mb);
  }
  if (data.image_size < 1 || data.image_noise < 0 || data.image_shift < 0) {
    return InvalidArgument("data.image_size must be >= 1 and data.image_noise, data.image_shift >= 0 (got {}, {}, {})",
                           data.image_size, data.image_noise, data.image_shift);
  }
  const parallel::ParallelConfig& p = parallel;
  if (p.tp > 1 || p.pp > 1 || p.ep > 1 || p.zero > 0 || p.grad_compression != "none") {
    return InvalidArgument(
        "model.kind = 'resnet' trains data-parallel only (parallel.dp or the launched ranks); got tp {}, pp {}, "
        "ep {}, zero {}, grad_compression '{}'",
        p.tp, p.pp, p.ep, p.zero, p.grad_compression);
  }
  if (p.precision != "fp32" || p.recompute != "none") {
    return InvalidArgument(
        "model.kind = 'resnet' runs fp32 without recompute so far (train.precision '{}', "
        "train.recompute '{}')",
        p.precision, p.recompute);
  }
  if (checkpoint.memory_every > 0) {
    return InvalidArgument(
        "model.kind = 'resnet' saves disk checkpoints only: leave checkpoint.memory_every unset "
        "(got {})",
        checkpoint.memory_every);
  }
  return Status::Ok();
}

nlohmann::json TrainConfig::ToJson() const {
  TrainConfig copy = *this;
  EnumText e{std::string(models::NormKindName(model.norm)), std::string(models::ActivationKindName(model.activation)),
             std::string(DTypeName(model.param_dtype)), std::string(DTypeName(model.compute_dtype)),
             ops::ImageLayoutName(resnet.layout)};
  int64_t model_seed = static_cast<int64_t>(model.seed);
  ConfigSchema schema;
  BindAll(schema, copy, e, model_seed);
  return schema.ToJson();
}

std::string TrainConfig::DescribeKeys() {
  TrainConfig c;
  EnumText e{"layernorm", "gelu", "fp32", "fp32", "NCHW"};
  int64_t model_seed = static_cast<int64_t>(c.model.seed);
  ConfigSchema schema;
  BindAll(schema, c, e, model_seed);
  return schema.Describe();
}

}  // namespace tessera::train
