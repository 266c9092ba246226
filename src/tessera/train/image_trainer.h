// Image-classification training (model.kind = "resnet"): a ResNet
// (models/resnet.h) on SyntheticImages (data.kind = "synthetic_images",
// data/image_dataset.h) or a folder of PNG files (data.kind =
// "image_folder", data/image_folder.h: its class count must equal
// model.resnet.num_classes), on one process or data-parallel over the ranks
// of a launched job — the path `tessera train` takes for an image config
// (train/run_query.h).
//
// Each step: gradient accumulation over micro-batches (global_batch /
// (ranks · micro_batch) per rank; rank r takes its contiguous share of the
// step's sample indices, so the data a step sees does not depend on the
// rank count), one fp32 sum all-reduce of the flattened gradients divided
// by the global micro-batch count (DDP's averaging), global-norm clipping,
// AdamW at the warm-up + cosine learning rate. Batch-norm statistics are
// per rank, as PyTorch DDP without SyncBatchNorm; before each evaluation
// rank 0's running statistics are broadcast. Evaluation: top-1 accuracy
// and mean cross-entropy on eval.samples held-out samples (at most the
// held-out split's size for an image folder; each rank a share, summed).
// Writes runs/<name>/{config.json, metrics.jsonl, summary.json} on rank 0.
// Throughput is images/s (summary tokens_per_s holds it, with
// model_flops_per_token = training FLOPs per image = 3 × the forward's);
// MFU = achieved model FLOP/s ÷ the measured fp32 peak of all ranks' cores.
// Operator and data errors (an unreadable or corrupt image) come back as Status. One thread drives it.
#pragma once

#include "tessera/comm/api/communicator.h"
#include "tessera/train/train_config.h"
#include "tessera/train/trainer.h"

namespace tessera::train {

// `world` null: one process. Otherwise every rank of `world` calls this.
Status RunImageTraining(const TrainConfig& config, comm::Communicator* world, const TrainerOptions& options,
                        TrainSummary* summary);

}  // namespace tessera::train
