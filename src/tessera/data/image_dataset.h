// Image classification data for CNN training (ResNet, models/resnet.h),
// served by global sample index like data/dataset.h: any rank can fetch any
// sample in any order with the same result.
//
// SyntheticImages: a built-in, learnable dataset. Each class has a fixed
// random prototype image (seeded by (seed, class)); a sample is its class's
// prototype, shifted by up to `max_shift` pixels (wrapping), mirrored
// horizontally with probability 1/2 (unless mirror is false), plus Gaussian noise of `noise` stddev.
// Labels are drawn uniformly per sample. Training and held-out samples come
// from disjoint index streams. Images are fp32 in `layout` ([B, C, H, W] or
// [B, H, W, C]). Immutable, thread-safe.
#pragma once

#include <cstdint>

#include "tessera/base/status.h"
#include "tessera/ops/common/image_layout.h"
#include "tessera/tensor/tensor.h"

namespace tessera::data {

struct ImageBatch {
  Tensor images;  // fp32, [B, C, H, W] or [B, H, W, C]
  Tensor labels;  // int64 [B]
};

struct SyntheticImagesOptions {
  int64_t num_classes = 10;
  int64_t channels = 3;
  int64_t height = 32, width = 32;
  int64_t max_shift = 2;
  bool mirror = true;  // random horizontal flips
  float noise = 0.5f;
  uint64_t seed = 1234;
  ops::ImageLayout layout = ops::ImageLayout::kNCHW;
};

class SyntheticImages {
 public:
  // InvalidArgument for non-positive sizes or classes, or a negative shift/noise.
  static StatusOr<SyntheticImages> Create(const SyntheticImagesOptions& options);
  ImageBatch TrainBatch(int64_t first, int64_t batch_size) const { return Make(first, batch_size, 0); }
  ImageBatch EvalBatch(int64_t first, int64_t batch_size) const { return Make(first, batch_size, 1); }
  const SyntheticImagesOptions& options() const { return options_; }
  // Top-1 hits of `logits` [B, classes] against `labels` [B].
  static int64_t CountCorrect(const Tensor& logits, const Tensor& labels);

 private:
  explicit SyntheticImages(const SyntheticImagesOptions& options) : options_(options) {}
  ImageBatch Make(int64_t first, int64_t batch_size, uint64_t split) const;
  SyntheticImagesOptions options_;
};

}  // namespace tessera::data
