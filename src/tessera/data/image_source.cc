#include "tessera/data/image_source.h"

#include <fmt/format.h>

namespace tessera::data {
namespace {

class SyntheticSource final : public ImageSource {
 public:
  explicit SyntheticSource(SyntheticImages images) : images_(std::move(images)) {}
  StatusOr<ImageBatch> TrainBatch(int64_t first, int64_t n) const override { return images_.TrainBatch(first, n); }
  StatusOr<ImageBatch> EvalBatch(int64_t first, int64_t n) const override { return images_.EvalBatch(first, n); }
  int64_t num_classes() const override { return images_.options().num_classes; }
  int64_t eval_size() const override { return 0; }
  std::string Describe() const override {
    const SyntheticImagesOptions& o = images_.options();
    return fmt::format("{}x{} synthetic images of {} classes", o.height, o.width, o.num_classes);
  }

 private:
  SyntheticImages images_;
};

}  // namespace

std::unique_ptr<ImageSource> MakeSyntheticSource(SyntheticImages images) {
  return std::make_unique<SyntheticSource>(std::move(images));
}

}  // namespace tessera::data
