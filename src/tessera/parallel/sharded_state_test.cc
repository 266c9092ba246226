// RangeToBoxes: the boxes of an element range tile exactly that range, in
// order, each contiguous, at most 2·rank − 1 of them.
#include "tessera/parallel/sharded_state.h"

#include <random>

#include <gtest/gtest.h>

namespace tessera::parallel {
namespace {

TEST(RangeToBoxes, TilesEveryRangeOfRandomShapesInOrder) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> shape;
    int64_t n = 1;
    for (int a = 0; a < rank; ++a) {
      shape.push_back(1 + static_cast<int64_t>(rng() % 5));
      n *= shape.back();
    }
    const int64_t begin = static_cast<int64_t>(rng() % (n + 1));
    const int64_t end = begin + static_cast<int64_t>(rng() % (n - begin + 1));
    const std::vector<ElementBox> boxes = RangeToBoxes(shape, begin, end);
    EXPECT_LE(static_cast<int>(boxes.size()), 2 * rank - 1);
    int64_t next = begin;
    for (const ElementBox& b : boxes) {
      ASSERT_EQ(b.first, next) << "boxes out of order or with a gap";
      // Every element of the box, in row-major order, is first, first+1, ...
      std::vector<int64_t> idx(rank, 0);
      int64_t volume = 1;
      for (int64_t d : b.shape) volume *= d;
      ASSERT_GT(volume, 0);
      for (int64_t k = 0; k < volume; ++k) {
        int64_t flat = 0;
        for (int a = 0; a < rank; ++a) flat = flat * shape[a] + b.offset[a] + idx[a];
        ASSERT_EQ(flat, b.first + k) << "box not contiguous";
        for (int a = rank - 1; a >= 0; --a) {
          if (++idx[a] < b.shape[a]) break;
          idx[a] = 0;
        }
      }
      next += volume;
    }
    EXPECT_EQ(next, end);
  }
}

TEST(RangeToBoxes, ScalarAndEmpty) {
  EXPECT_TRUE(RangeToBoxes(std::vector<int64_t>{3, 4}, 5, 5).empty());
  const auto scalar = RangeToBoxes(std::vector<int64_t>{}, 0, 1);
  ASSERT_EQ(scalar.size(), 1u);
  EXPECT_TRUE(scalar[0].shape.empty());
  // A middle range of a matrix: partial row, whole rows, partial row.
  const auto three = RangeToBoxes(std::vector<int64_t>{4, 5}, 3, 17);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(three[1].shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(three[2].shape, (std::vector<int64_t>{1, 2}));
}

}  // namespace
}  // namespace tessera::parallel
