#include "tessera/data/image_dataset.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/tensor/rng.h"

namespace tessera::data {

namespace {

// Gaussian from two uniforms of the counter-based stream (Box-Muller).
float NormalAt(uint64_t seed, uint64_t index) {
  const float u1 = std::max(UniformAt(seed, 2 * index), 1e-7f);
  const float u2 = UniformAt(seed, 2 * index + 1);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
}

}  // namespace

StatusOr<SyntheticImages> SyntheticImages::Create(const SyntheticImagesOptions& o) {
  if (o.num_classes < 1 || o.channels < 1 || o.height < 1 || o.width < 1) {
    return InvalidArgument("synthetic images: classes {}, channels {}, height {}, width {} must all be positive",
                           o.num_classes, o.channels, o.height, o.width);
  }
  if (o.max_shift < 0 || o.noise < 0) {
    return InvalidArgument("synthetic images: max_shift {} and noise {} must not be negative", o.max_shift, o.noise);
  }
  return SyntheticImages(o);
}

ImageBatch SyntheticImages::Make(int64_t first, int64_t batch_size, uint64_t split) const {
  TESSERA_CHECK(first >= 0 && batch_size > 0, "synthetic images: batch [{}, +{})", first, batch_size);
  const auto& o = options_;
  const int64_t C = o.channels, H = o.height, W = o.width;
  const bool nchw = o.layout == ops::ImageLayout::kNCHW;
  ImageBatch batch;
  batch.images = nchw ? Tensor::Empty({batch_size, C, H, W}) : Tensor::Empty({batch_size, H, W, C});
  batch.labels = Tensor::Empty({batch_size}, DType::kI64);
  float* img = batch.images.data<float>();
  int64_t* labels = batch.labels.data<int64_t>();
  const uint64_t sample_seed = DeriveSeed(o.seed, 100 + split);
  const uint64_t proto_seed = DeriveSeed(o.seed, 7);
  // Samples are independent and addressed by index: threads split the batch
  // (the result does not depend on how).
#pragma omp parallel for schedule(static) if (batch_size > 1 && batch_size * C * H * W >= (1 << 14) && !omp_in_parallel())
  for (int64_t b = 0; b < batch_size; ++b) {
    const uint64_t s = static_cast<uint64_t>(first + b);
    const uint64_t seed = DeriveSeed(sample_seed, s);
    const int64_t label = std::min<int64_t>(static_cast<int64_t>(UniformAt(seed, 0) * o.num_classes), o.num_classes - 1);
    const int64_t span = 2 * o.max_shift + 1;
    const int64_t dy = static_cast<int64_t>(UniformAt(seed, 1) * span) - o.max_shift;
    const int64_t dx = static_cast<int64_t>(UniformAt(seed, 2) * span) - o.max_shift;
    const bool mirror = o.mirror && UniformAt(seed, 3) < 0.5f;
    labels[b] = label;
    const uint64_t class_seed = DeriveSeed(proto_seed, static_cast<uint64_t>(label));
    const uint64_t noise_seed = DeriveSeed(seed, 11);
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t y = 0; y < H; ++y) {
        for (int64_t x = 0; x < W; ++x) {
          const int64_t sy = ((y - dy) % H + H) % H;
          int64_t sx = ((x - dx) % W + W) % W;
          if (mirror) sx = W - 1 - sx;
          const uint64_t at = static_cast<uint64_t>((c * H + sy) * W + sx);
          const float v = NormalAt(class_seed, at) + o.noise * NormalAt(noise_seed, static_cast<uint64_t>((c * H + y) * W + x));
          const int64_t dst = nchw ? ((b * C + c) * H + y) * W + x : ((b * H + y) * W + x) * C + c;
          img[dst] = v;
        }
      }
    }
  }
  return batch;
}

int64_t SyntheticImages::CountCorrect(const Tensor& logits, const Tensor& labels) {
  TESSERA_OP_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0),
                   "CountCorrect: logits {} and labels {}", ShapeString(logits.shape()), ShapeString(labels.shape()));
  std::vector<float> l = logits.ToFloatVector();
  std::vector<int64_t> y = labels.ToIntVector();
  const int64_t n = logits.size(0), k = logits.size(1);
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j) best = l[i * k + j] > l[i * k + best] ? j : best;
    correct += best == y[i];
  }
  return correct;
}

}  // namespace tessera::data
