// kAuto's measured algorithm choice (conv_tune.h): a miss is timed and
// stored (every candidate's time, the fastest chosen), kAuto then runs
// exactly the chosen algorithm, a stored choice is obeyed, an entry naming
// an algorithm that does not apply is retuned, small layers and
// TESSERA_TUNE=0 keep the shape heuristic and write nothing, and the GEMM
// tuner's section of the same file survives.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/ops/conv/conv.h"
#include "tessera/tile/autotune.h"
#include "tessera/tile/tune_scope_testing.h"

namespace tessera::ops {
namespace {

using tile::TuneMode;
using tile::testing::Slurp;
using tile::testing::TuneScope;

Tensor Values(const Shape& shape, float scale) {
  Tensor t = Tensor::Empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = scale * static_cast<float>(static_cast<int>(i * 37 % 23) - 11);
  return t;
}

std::vector<float> Data(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

// 3x3, stride 1, pad 1, 32 -> 32 channels at 16x16, batch 2, NHWC: 4.7M
// multiply-adds, three candidates (Winograd 4x4 and 2x2, im2col).
const Shape kX = {2, 16, 16, 32};
const Shape kW = {32, 32, 3, 3};
Conv2dOptions Opts(Conv2dAlgo algo = Conv2dAlgo::kAuto) {
  Conv2dOptions o;
  o.pad_h = o.pad_w = 1;
  o.layout = ImageLayout::kNHWC;
  o.algo = algo;
  return o;
}

nlohmann::json ConvSection(const std::string& path) { return nlohmann::json::parse(Slurp(path)).at("conv"); }

TEST(ConvTune, MissIsTimedStoredAndRun) {
  TuneScope scope(TuneMode::kOn);
  const Conv2dAlgo chosen = ChooseConv2dAlgo(kX, kW, Opts());
  ASSERT_TRUE(std::filesystem::exists(scope.path()));
  const nlohmann::json file = nlohmann::json::parse(Slurp(scope.path()));
  EXPECT_TRUE(file.contains("gemm"));  // still a tune file the GEMM tuner reads
  const nlohmann::json conv = file.at("conv");
  ASSERT_EQ(conv.size(), 1u);
  const nlohmann::json e = conv.begin().value();
  EXPECT_EQ(e.at("algo"), Conv2dAlgoName(chosen));
  EXPECT_EQ(e.at("default"),
            "winograd4x4");  // the heuristic's choice, timed first
  const nlohmann::json ms = e.at("ms");
  ASSERT_EQ(ms.size(), 3u) << ms.dump();
  for (const char* a : {"winograd4x4", "winograd2x2", "im2col"}) ASSERT_TRUE(ms.contains(a)) << ms.dump();
  // The choice is the fastest, or the default when nothing beat it by 3 %.
  for (auto it = ms.begin(); it != ms.end(); ++it) {
    EXPECT_LE(ms.at(e.at("algo").get<std::string>()).get<double>(), it.value().get<double>() / 0.97) << ms.dump();
  }
  // kAuto runs exactly the chosen algorithm, forward and backward.
  const Tensor x = Values(kX, 0.1f), w = Values(kW, 0.02f), b = Values({32}, 0.5f);
  EXPECT_EQ(Data(Conv2d(x, w, b, Opts())), Data(Conv2d(x, w, b, Opts(chosen))));
  const Tensor gy = Values({2, 16, 16, 32}, 0.03f);
  const Conv2dGrads ga = Conv2dBackward(gy, x, w, Opts()), gc = Conv2dBackward(gy, x, w, Opts(chosen));
  EXPECT_EQ(Data(ga.grad_x), Data(gc.grad_x));
  EXPECT_EQ(Data(ga.grad_w), Data(gc.grad_w));
}

TEST(ConvTune, StoredChoiceIsObeyedAndABadOneRetuned) {
  TuneScope scope(TuneMode::kOn);
  ChooseConv2dAlgo(kX, kW, Opts());
  nlohmann::json file = nlohmann::json::parse(Slurp(scope.path()));
  for (const char* a : {"im2col", "winograd2x2"}) {
    file["conv"].begin().value()["algo"] = a;
    std::ofstream(scope.path()) << file.dump();
    tile::TuneCache::Get().Reset();
    EXPECT_STREQ(Conv2dAlgoName(ChooseConv2dAlgo(kX, kW, Opts())), a);
  }
  // gemm1x1 cannot run a 3x3 layer; "fastest" is no algorithm at all.
  for (const char* bad : {"gemm1x1", "fastest"}) {
    file["conv"].begin().value()["algo"] = bad;
    std::ofstream(scope.path()) << file.dump();
    tile::TuneCache::Get().Reset();
    const Conv2dAlgo a = ChooseConv2dAlgo(kX, kW, Opts());
    EXPECT_TRUE(a == Conv2dAlgo::kWinograd4x4 || a == Conv2dAlgo::kWinograd2x2 || a == Conv2dAlgo::kIm2col);
    EXPECT_EQ(ConvSection(scope.path()).begin().value().at("algo"), Conv2dAlgoName(a));
  }
}

TEST(ConvTune, SmallLayersAndTuneOffKeepTheHeuristic) {
  {
    TuneScope scope(TuneMode::kOn);
    EXPECT_EQ(ChooseConv2dAlgo({1, 8, 8, 8}, {8, 8, 3, 3}, Opts()), Conv2dAlgo::kWinograd4x4);
    EXPECT_EQ(ChooseConv2dAlgo({1, 8, 8, 4}, {8, 4, 3, 3}, Opts()), Conv2dAlgo::kIm2col);
    EXPECT_FALSE(std::filesystem::exists(scope.path()));
  }
  {
    TuneScope scope(TuneMode::kOff);
    EXPECT_EQ(ChooseConv2dAlgo(kX, kW, Opts()), Conv2dAlgo::kWinograd4x4);
    EXPECT_FALSE(std::filesystem::exists(scope.path()));
  }
  // A 1x1 layer has two candidates (gemm1x1, im2col); the key names the
  // layer's geometry.
  TuneScope scope(TuneMode::kOn);
  Conv2dOptions o = Opts();
  o.pad_h = o.pad_w = 0;
  const Conv2dAlgo a = ChooseConv2dAlgo({4, 32, 32, 64}, {64, 64, 1, 1}, o);
  EXPECT_TRUE(a == Conv2dAlgo::kGemm1x1 || a == Conv2dAlgo::kIm2col);
  const nlohmann::json conv = ConvSection(scope.path());
  ASSERT_EQ(conv.size(), 1u);
  EXPECT_EQ(conv.begin().value().at("ms").size(), 2u);
  EXPECT_NE(conv.begin().key().find("NHWC n4 c64 h32 w32 k64 r1 s1"), std::string::npos) << conv.begin().key();
}

}  // namespace
}  // namespace tessera::ops
