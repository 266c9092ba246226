// TrainConfig: everything `tessera train` needs, loaded from a TOML file with
// `--set key=value` overrides (dotted keys). Sections:
//   name            run name (runs/<name>/)
//   [model]         kind = "gpt" (GptConfig fields; [model.moe] its MoE
//                   fields) or "resnet" ([model.resnet]: models/resnet.h,
//                   trained by train/image_trainer.h)
//   [data]          which dataset: kind = "arithmetic" | "text" | "shards"
//                   (GPT), "synthetic_images" | "image_folder" (ResNet)
//   [train]         steps, batch sizes, optimizer, schedule, seed, logging
//   [eval]          how often and on how many held-out samples
//   [checkpoint]    where, how often and how many checkpoints; resume
//   [parallel]      dp, tp, pp, ep degrees, ZeRO stage, schedule (see
//                   parallel/parallel_config.h); train.precision,
//                   train.recompute, train.offload_optimizer and
//                   train.device_memory_limit land there too
// Load() rejects unknown keys, wrong types and inconsistent values with
// messages naming the key and where it was set. Plain value type.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"
#include "tessera/models/gpt_config.h"
#include "tessera/models/resnet.h"
#include "tessera/parallel/parallel_config.h"

namespace tessera::train {

class ConfigSchema;

struct DataOptions {
  std::string kind = "arithmetic";  // arithmetic | text | shards | synthetic_images | image_folder
  int digits = 3;                   // arithmetic: operand digits
  std::vector<std::string> path;    // text / shards: files; image_folder: one folder (root/<class>/*.png)
  std::string format = "";          // shards: uint16 | uint32 (text: ignored)
  double val_fraction = 0.1;        // text / shards: held-out tail of each file
  int64_t image_size = 32;          // synthetic_images, image_folder: height = width
  std::string eval_path = "";       // image_folder: held-out folder with the same classes ("": split path)
  int64_t eval_every = 10;          // image_folder without eval_path: every k-th file of a class is held out
  int64_t cache_mb = 512;           // image_folder: decoded-image cache per process
  double image_noise = 0.5;         // synthetic_images: noise stddev (prototypes have stddev 1)
  int64_t image_shift = 2;          // synthetic_images: random shifts up to this many pixels
};

struct TrainOptions {
  int64_t steps = 1000;
  int64_t micro_batch = 32;   // sequences per forward/backward
  int64_t global_batch = 32;  // sequences per optimizer step (multiple of micro_batch)
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup_steps = 50;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // 0 disables clipping
  int64_t seed = 1;
  int64_t log_every = 25;
  int64_t threads = 0;  // 0 = all cores
  std::string out_dir = "runs";
};

struct EvalOptions {
  int64_t every = 250;    // steps between evaluations (0: only at the end)
  int64_t samples = 256;  // held-out sequences evaluated
  int64_t batch = 64;
};

// [checkpoint]: periodic asynchronous checkpoints and resuming
// (train/checkpointing.h). Single-process runs only, so far.
struct CheckpointOptions {
  std::string dir = "";    // "" = <train.out_dir>/<name>/checkpoints
  int64_t every = 0;          // save every N steps (0: not by steps)
  double every_seconds = 0;   // save when this many seconds passed since the last save (0: not by time)
  double mtbf_hours = 0;      // > 0 and no interval set: every_seconds from Young/Daly (checkpointing.h)
  int64_t keep = 3;           // keep the last K checkpoints
  std::string resume = ""; // a checkpoint directory, "latest" (of dir), or "" (start fresh)
  int64_t memory_every = 0;    // in-memory snapshot (tmpfs, replicated to the next node) every N steps (0: off)
  std::string memory_dir = ""; // "" = /dev/shm/tessera-<uid>/<name>
};

// [guard]: gradient verification before each optimizer step
// (gradient_guard.h).
struct GuardOptions {
  double spike_factor = 0;      // > 0: a norm above this × the running median fails (0: off)
  int64_t spike_window = 20;    // accepted steps in the running median
  bool replica_checksum = true; // compare data-parallel replicas of the reduced gradients (ZeRO 0-1)
  std::string on_failure = "skip";  // skip | rollback (to the last checkpoint, then replay)
};

struct TrainConfig {
  std::string name = "run";
  std::string model_kind = "gpt";  // model.kind: gpt | resnet
  models::GptConfig model;
  models::ResNetConfig resnet;  // model.resnet.* (model.kind = "resnet")
  DataOptions data;
  TrainOptions train;
  EvalOptions eval;
  CheckpointOptions checkpoint;
  GuardOptions guard;
  parallel::ParallelConfig parallel;

  // Loads `path` then applies `overrides` ("train.steps=50"), validates.
  static StatusOr<TrainConfig> Load(const std::string& path, const std::vector<std::string>& overrides);
  // The same from a config as ToJson() wrote it (`source` names it in errors).
  static StatusOr<TrainConfig> FromJson(const nlohmann::json& config, const std::string& source,
                                        const std::vector<std::string>& overrides);
  Status Validate() const;
  Status ValidateImageRun() const;  // the model.kind = "resnet" rules (part of Validate)
  nlohmann::json ToJson() const;
  // The key reference (for `tessera train --help-config`).
  static std::string DescribeKeys();
  int64_t accumulation_steps() const { return train.global_batch / train.micro_batch; }
  bool is_image_model() const { return model_kind == "resnet"; }

 private:
  static StatusOr<TrainConfig> Build(const std::function<Status(ConfigSchema&)>& apply, const std::string& source,
                                     const std::vector<std::string>& overrides);
};

}  // namespace tessera::train
