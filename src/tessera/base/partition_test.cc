#include "tessera/base/partition.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <random>

#include <gtest/gtest.h>

namespace tessera::base {
namespace {

// Smallest achievable maximum part cost, then the largest cheapest part
// among those, by trying every set of cuts.
std::pair<double, double> BruteForceBest(const std::vector<double>& costs, int parts) {
  const int n = static_cast<int>(costs.size());
  std::pair<double, double> best = {1e300, 0};
  std::vector<int> starts(parts);
  std::function<void(int, int)> place = [&](int k, int from) {
    if (k == parts) {
      const std::vector<double> part = PartCosts(costs, starts);
      const double hi = *std::max_element(part.begin(), part.end());
      const double lo = *std::min_element(part.begin(), part.end());
      if (hi < best.first || (hi == best.first && lo > best.second)) best = {hi, lo};
      return;
    }
    for (int s = from; s <= n - (parts - k); ++s) {
      starts[k] = s;
      place(k + 1, s + 1);
    }
  };
  starts[0] = 0;
  place(1, 1);
  return best;
}

TEST(PartitionTest, OptimalAgainstBruteForce) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> cost(0.1, 5.0);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + trial % 9;
    std::vector<double> costs(n);
    for (double& c : costs) c = cost(rng);
    for (int parts = 1; parts <= n; ++parts) {
      std::vector<int> starts = PartitionLayers(costs, parts);
      ASSERT_EQ(starts.size(), static_cast<size_t>(parts));
      EXPECT_EQ(starts[0], 0);
      for (int k = 1; k < parts; ++k) EXPECT_LT(starts[k - 1], starts[k]);
      EXPECT_LT(starts.back(), n);
      std::vector<double> part = PartCosts(costs, starts);
      const auto [hi, lo] = BruteForceBest(costs, parts);
      EXPECT_DOUBLE_EQ(*std::max_element(part.begin(), part.end()), hi) << "n=" << n << " parts=" << parts;
      EXPECT_DOUBLE_EQ(*std::min_element(part.begin(), part.end()), lo) << "n=" << n << " parts=" << parts;
    }
  }
}

TEST(PartitionTest, UniformLayersSplitEvenly) {
  std::vector<double> costs(24, 1.0);
  EXPECT_EQ(PartitionLayers(costs, 4), (std::vector<int>{0, 6, 12, 18}));
  EXPECT_DOUBLE_EQ(UtilizationSpread(PartCosts(costs, {0, 6, 12, 18})), 0.0);
}

TEST(PartitionTest, GptLikeCostsBalanceWithinFivePercent) {
  // Embedding and the LM head are heavier than a block: the balanced split
  // gives the end stages fewer blocks.
  std::vector<double> costs = {2.5};
  for (int i = 0; i < 96; ++i) costs.push_back(1.0);
  costs.push_back(3.5);
  std::vector<int> starts = PartitionLayers(costs, 4);
  std::vector<double> part = PartCosts(costs, starts);
  EXPECT_DOUBLE_EQ(*std::max_element(part.begin(), part.end()), 26.0);
  EXPECT_DOUBLE_EQ(UtilizationSpread(part), 1.0 / 26.0);
}

TEST(PartitionTest, ClearErrors) {
  Status st = ValidatePartition({1, 2, 3}, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("3 layers into 4"), std::string::npos) << st.message();
  EXPECT_FALSE(ValidatePartition({1, -2, 3}, 2).ok());
  EXPECT_FALSE(ValidatePartition({1, 2}, 0).ok());
  EXPECT_TRUE(ValidatePartition({1, 2}, 2).ok());
  EXPECT_DOUBLE_EQ(UtilizationSpread({4, 3, 2}), 0.5);
}

}  // namespace
}  // namespace tessera::base
