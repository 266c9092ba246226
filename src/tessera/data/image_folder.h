// ImageFolder: image classification data from a folder of PNG files, laid
// out as torchvision's ImageFolder expects:
//
//   root/<class_name>/<any name>.png
//
// Classes are the sub-folders of `root`, sorted by name (byte order); a
// class's label is its index. A class's images are its folder's *.png
// files (extension in any case), sorted by name. Hidden entries (names
// starting with '.'), other files, and folders inside a class folder are
// ignored. An empty root, or a class folder with no image, is an error
// naming it.
//
// Held-out split: with `eval_root` set, it is a second folder of the same
// layout and the same class names (an error naming the first difference
// otherwise) and all of `root` trains. With `eval_root` empty, the k-th,
// 2k-th, ... file of each class (sorted index i with i % k == k - 1,
// k = eval_every) is held out and never trained on.
//
// Samples (ImageSource): training index i reads epoch e = i / N (N training
// files), position i % N of a fixed permutation seeded by (seed, e) — every
// file once per epoch, the same index always the same file, on any rank.
// Held-out index i reads position i % M of one fixed permutation (so any
// prefix mixes the classes). Each image is decoded (data/png_image.h: 8-bit
// RGB, or gray with channels = 1), resized to height x width by bilinear
// interpolation (align_corners = false, no antialiasing; a plain resize to
// the target size, aspect ratio not kept — no crop, flip or other
// augmentation), scaled to [0, 1] and normalized per channel:
// (x - mean[c]) / std[c]. Batches are fp32 in `layout` ([B, C, H, W] or
// [B, H, W, C]) with int64 labels, as SyntheticImages's.
//
// Files are read lazily. Resized images (fp32, before normalization) are
// kept in an LRU cache of at most cache_mb MiB (0: no cache). A file that
// cannot be read or decoded makes the batch fail with a Status naming it.
// Thread-safe: batches may be fetched from several threads at once; a
// batch decodes its samples in parallel (OpenMP) when not already inside a
// parallel region.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/data/image_source.h"
#include "tessera/ops/common/image_layout.h"

namespace tessera::data {

struct ImageFolderOptions {
  std::string root;         // root/<class>/*.png: the training images
  std::string eval_root;    // held-out images, same classes ("": split root by eval_every)
  int64_t eval_every = 10;  // eval_root empty: every k-th file of each class is held out (k >= 2)
  int64_t channels = 3;     // 3: RGB, 1: gray
  int64_t height = 32, width = 32;
  // Per channel (or one value for all); ImageNet's. With channels = 1 and
  // three values, their average is used.
  std::vector<float> mean = {0.485f, 0.456f, 0.406f};
  std::vector<float> std = {0.229f, 0.224f, 0.225f};
  ops::ImageLayout layout = ops::ImageLayout::kNCHW;
  uint64_t seed = 1234;    // training order
  int64_t cache_mb = 512;  // decoded-image cache (0: none)
};

class ImageFolder final : public ImageSource {
 public:
  struct File {
    std::string path;
    int64_t label = 0;
  };

  // Scans the folders (no file is decoded yet). NotFound for a missing
  // root; InvalidArgument for bad options, an empty root or class folder,
  // mismatched eval classes, an empty held-out split.
  static StatusOr<std::unique_ptr<ImageFolder>> Open(const ImageFolderOptions& options);
  ~ImageFolder() override;

  StatusOr<ImageBatch> TrainBatch(int64_t first, int64_t n) const override;
  StatusOr<ImageBatch> EvalBatch(int64_t first, int64_t n) const override;
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  int64_t eval_size() const override { return static_cast<int64_t>(eval_.size()); }
  std::string Describe() const override;

  const std::vector<std::string>& classes() const { return classes_; }
  int64_t train_size() const { return static_cast<int64_t>(train_.size()); }
  // The file that training / held-out sample `index` reads.
  const File& TrainFile(int64_t index) const;
  const File& EvalFile(int64_t index) const;
  const ImageFolderOptions& options() const { return options_; }
  int64_t cached_bytes() const;

 private:
  struct Cache;
  explicit ImageFolder(const ImageFolderOptions& options);
  // Resized [H, W, C] image of file `id` (train files first, then eval).
  StatusOr<std::shared_ptr<const std::vector<float>>> Load(int64_t id) const;
  StatusOr<ImageBatch> Make(const std::vector<int64_t>& ids) const;
  int64_t TrainId(int64_t index) const;

  ImageFolderOptions options_;
  std::vector<float> mean_, std_;  // one per channel
  std::vector<std::string> classes_;
  std::vector<File> train_, eval_;
  std::vector<int64_t> eval_order_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace tessera::data
