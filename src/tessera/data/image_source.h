// ImageSource: what the image trainer (train/image_trainer.h) reads, so
// that the built-in SyntheticImages (data/image_dataset.h) and a folder of
// PNG files (data/image_folder.h) are interchangeable.
//
// Samples are served by global index, as data/dataset.h does: any rank can
// fetch any sample in any order and gets the same result. TrainBatch and
// EvalBatch return `n` consecutive samples from `first` (n >= 1,
// first >= 0) as one ImageBatch; a source that reads files returns their
// errors (naming the file) instead of a batch. eval_size() is the number of
// distinct held-out samples (0: unbounded, as for generated data), so an
// evaluation need not repeat samples. Implementations are immutable from
// the caller's point of view and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessera/base/status.h"
#include "tessera/data/image_dataset.h"

namespace tessera::data {

class ImageSource {
 public:
  virtual ~ImageSource() = default;
  virtual StatusOr<ImageBatch> TrainBatch(int64_t first, int64_t n) const = 0;
  virtual StatusOr<ImageBatch> EvalBatch(int64_t first, int64_t n) const = 0;
  virtual int64_t num_classes() const = 0;
  virtual int64_t eval_size() const = 0;  // 0 = unbounded
  // One line for logs: "32x32 synthetic images of 10 classes".
  virtual std::string Describe() const = 0;
};

// SyntheticImages behind the interface (never fails).
std::unique_ptr<ImageSource> MakeSyntheticSource(SyntheticImages images);

}  // namespace tessera::data
