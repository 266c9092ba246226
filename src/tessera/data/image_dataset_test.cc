#include "tessera/data/image_dataset.h"

#include <cmath>

#include <gtest/gtest.h>

namespace tessera::data {
namespace {

TEST(SyntheticImagesTest, SamplesDependOnlyOnTheirIndex) {
  auto ds = SyntheticImages::Create({});
  ASSERT_TRUE(ds.ok());
  ImageBatch whole = ds->TrainBatch(10, 6);
  ImageBatch part = ds->TrainBatch(13, 2);
  EXPECT_EQ(whole.images.shape(), (Shape{6, 3, 32, 32}));
  const int64_t per = 3 * 32 * 32;
  std::vector<float> a = whole.images.ToFloatVector(), b = part.images.ToFloatVector();
  for (int64_t i = 0; i < 2 * per; ++i) ASSERT_EQ(a[3 * per + i], b[i]) << i;
  EXPECT_EQ(whole.labels.ToIntVector()[3], part.labels.ToIntVector()[0]);
  // Held-out samples are another stream.
  std::vector<float> e = ds->EvalBatch(10, 1).images.ToFloatVector();
  double diff = 0;
  for (int64_t i = 0; i < per; ++i) diff += std::fabs(e[i] - a[i]);
  EXPECT_GT(diff, 1.0);
}

TEST(SyntheticImagesTest, LayoutsHoldTheSamePixels) {
  SyntheticImagesOptions o;
  o.height = 5;
  o.width = 7;
  auto nchw = SyntheticImages::Create(o);
  o.layout = ops::ImageLayout::kNHWC;
  auto nhwc = SyntheticImages::Create(o);
  Tensor a = nchw->TrainBatch(0, 3).images;
  Tensor b = nhwc->TrainBatch(0, 3).images;
  EXPECT_EQ(b.shape(), (Shape{3, 5, 7, 3}));
  std::vector<float> x = a.ToFloatVector(), y = b.Permute({0, 3, 1, 2}).Contiguous().ToFloatVector();
  EXPECT_EQ(x, y);
}

TEST(SyntheticImagesTest, ClassesAreSeparableByTheirPrototypes) {
  // Without noise, shifts or flips a sample is its class prototype: two
  // samples of one class are equal, of two classes far apart.
  SyntheticImagesOptions o;
  o.noise = 0;
  o.max_shift = 0;
  o.mirror = false;
  o.num_classes = 3;
  auto ds = SyntheticImages::Create(o);
  ImageBatch batch = ds->TrainBatch(0, 64);
  std::vector<int64_t> labels = batch.labels.ToIntVector();
  std::vector<int64_t> seen(3, 0);
  for (int64_t l : labels) ++seen[l];
  for (int64_t n : seen) EXPECT_GT(n, 5);  // uniform labels
  std::vector<float> px = batch.images.ToFloatVector();
  const int64_t per = 3 * 32 * 32;
  auto distance = [&](int64_t i, int64_t j) {
    double d = 0;
    for (int64_t k = 0; k < per; ++k) d += std::fabs(px[i * per + k] - px[j * per + k]);
    return d / per;
  };
  for (int64_t i = 1; i < 64; ++i) {
    if (labels[i] == labels[0]) EXPECT_EQ(distance(0, i), 0.0) << i;
    else EXPECT_GT(distance(0, i), 0.5) << i;  // two unit Gaussians differ by ~1.13 on average
  }
}

TEST(SyntheticImagesTest, CountsTopOneHitsAndRejectsBadOptions) {
  Tensor logits = Tensor::FromVector({0.1f, 0.9f, 0.5f, 0.2f, 0.3f, 0.1f}, {3, 2});
  Tensor labels = Tensor::FromInts({1, 0, 1}, {3});
  EXPECT_EQ(SyntheticImages::CountCorrect(logits, labels), 2);
  SyntheticImagesOptions o;
  o.num_classes = 0;
  EXPECT_FALSE(SyntheticImages::Create(o).ok());
  o = {};
  o.noise = -1;
  EXPECT_FALSE(SyntheticImages::Create(o).ok());
}

}  // namespace
}  // namespace tessera::data
