// The autotuner: shape-class keys, the JSON cache (round trip, merge of what
// another process wrote, malformed files ignored, stale entries refused),
// and tuned GEMMs — a miss is searched and stored, a hit reuses the stored
// winner, force retunes, and the tuned result has the untuned bits.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/tile/autotune.h"
#include "tessera/tile/gemm.h"
#include "tessera/tile/tune_scope_testing.h"

namespace tessera::tile {
namespace {

using testing::Slurp;
using testing::TuneScope;

TEST(TuneKey, RoundsSizesToTheNearestPowerOfTwo) {
  EXPECT_EQ(GemmShapeKey(GemmType::kF32, false, true, 4096, 2800, 1, 2), "f32 nt m4096 n2048 k1 t2");
  EXPECT_EQ(GemmShapeKey(GemmType::kU8S8S32, true, false, 2000, 3100, 700, 1), "u8s8s32 tn m2048 n4096 k512 t1");
}

TEST(TuneCache, RoundTripsMergesAndIgnoresBadFiles) {
  TuneScope scope(TuneMode::kOn);
  TuneCache& cache = TuneCache::Get();
  EXPECT_FALSE(cache.Find("f32 nn m1 n1 k1 t1").has_value());
  TunedGemm t;
  t.kernel = DefaultKernel(GemmType::kF32).name;
  t.mc = 96;
  t.nc = 512;
  t.tm = 1;
  t.tn = 1;
  t.gflops = 100;
  cache.Put("f32 nn m1 n1 k1 t1", t);
  ASSERT_TRUE(std::filesystem::exists(scope.path()));
  // Another process adds an entry; ours is written again: both survive.
  nlohmann::json file = nlohmann::json::parse(Slurp(scope.path()));
  ASSERT_EQ(file.at("version"), 2);
  nlohmann::json other = file.at("gemm").begin().value();
  file["gemm"]["bf16f32 nn m2 n2 k2 t1 | elsewhere"] = other;
  std::ofstream(scope.path()) << file.dump();
  cache.Put("f32 nn m8 n8 k8 t1", t);
  file = nlohmann::json::parse(Slurp(scope.path()));
  EXPECT_EQ(file.at("gemm").size(), 3u);
  cache.Reset();
  std::optional<TunedGemm> back = cache.Find("f32 nn m1 n1 k1 t1");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->kernel, t.kernel);
  EXPECT_EQ(back->mc, 96);
  // A version-1 file (winners not confirmed): its GEMM entries are searched
  // again, its other sections kept.
  cache.PutEntry("conv", "some geometry", {{"algorithm", "im2col"}});
  nlohmann::json v1 = nlohmann::json::parse(Slurp(scope.path()));
  v1["version"] = 1;
  std::ofstream(scope.path()) << v1.dump();
  cache.Reset();
  EXPECT_FALSE(cache.Find("f32 nn m1 n1 k1 t1").has_value());
  EXPECT_TRUE(cache.FindEntry("conv", "some geometry").has_value());
  // Garbage: ignored (a warning), then replaced by a valid file.
  std::ofstream(scope.path()) << "{not json";
  cache.Reset();
  EXPECT_FALSE(cache.Find("f32 nn m1 n1 k1 t1").has_value());
  cache.Put("f32 nn m1 n1 k1 t1", t);
  EXPECT_EQ(nlohmann::json::parse(Slurp(scope.path())).at("gemm").size(), 1u);
  // A malformed entry is not used.
  file = nlohmann::json::parse(Slurp(scope.path()));
  file["gemm"].begin().value()["mc"] = "ninety-six";
  std::ofstream(scope.path()) << file.dump();
  cache.Reset();
  EXPECT_FALSE(cache.Find("f32 nn m1 n1 k1 t1").has_value());
}

struct Problem {
  std::vector<float> a, b, c;
  F32Args args;
  explicit Problem(int64_t m, int64_t n, int64_t k) : a(m * k), b(k * n), c(m * n) {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> d(-1, 1);
    for (float& v : a) v = d(rng);
    for (float& v : b) v = d(rng);
    args.m = m;
    args.n = n;
    args.k = k;
    args.a = a.data();
    args.lda = k;
    args.b = b.data();
    args.ldb = n;
    args.c = c.data();
    args.ldc = n;
  }
};

TEST(TunedGemm, MissIsSearchedStoredAndReusedWithTheSameBits) {
  Problem p(256, 320, 256);  // >= 2^24 multiply-adds: worth a search
  std::vector<float> untuned;
  {
    TuneScope off(TuneMode::kOff);
    Gemm(p.args);
    untuned = p.c;
    EXPECT_FALSE(std::filesystem::exists(off.path()));  // nothing written when off
  }
  TuneScope scope(TuneMode::kOn);
  std::fill(p.c.begin(), p.c.end(), 0.0f);
  Gemm(p.args);
  EXPECT_EQ(p.c, untuned);
  ASSERT_TRUE(std::filesystem::exists(scope.path()));
  const nlohmann::json file = nlohmann::json::parse(Slurp(scope.path()));
  ASSERT_EQ(file.at("gemm").size(), 1u);
  const nlohmann::json entry = file.at("gemm").begin().value();
  ASSERT_NE(FindKernel(entry.at("kernel").get<std::string>()), nullptr);
  EXPECT_GT(entry.at("gflops").get<double>(), 0);
  // The winner is never slower than the default on the problem it timed.
  EXPECT_GE(entry.at("gflops").get<double>(), entry.at("default_gflops").get<double>());
  // A hit: the stored configuration comes back (edit it to see that it is
  // used). (The edited M block is a multiple of the stored kernel's rows, which
  // need not be the default kernel's: otherwise the entry is invalid.)
  nlohmann::json edited = file;
  const int64_t mr = FindKernel(entry.at("kernel").get<std::string>())->mr;
  edited["gemm"].begin().value()["mc"] = mr * 3;
  std::ofstream(scope.path()) << edited.dump();
  TuneCache::Get().Reset();
  EXPECT_EQ(ChosenConfig(p.args).mc, mr * 3);
  std::fill(p.c.begin(), p.c.end(), 0.0f);
  Gemm(p.args);
  EXPECT_EQ(p.c, untuned);
  // An entry naming a kernel this build lacks is not used: it is retuned.
  edited["gemm"].begin().value()["kernel"] = "f32_gemm_99x99_nonesuch";
  std::ofstream(scope.path()) << edited.dump();
  TuneCache::Get().Reset();
  EXPECT_NE(std::string(ChosenConfig(p.args).kernel->name), "f32_gemm_99x99_nonesuch");
  const nlohmann::json retuned = nlohmann::json::parse(Slurp(scope.path()));
  EXPECT_NE(retuned.at("gemm").begin().value().at("kernel"), "f32_gemm_99x99_nonesuch");
}

TEST(TunedGemm, SmallGemmsUseTheDefaultsAndForceRetunes) {
  Problem small(32, 32, 32);
  TuneScope scope(TuneMode::kOn);
  const GemmConfig c = ChosenConfig(small.args);
  EXPECT_EQ(c.kernel, &DefaultKernel(GemmType::kF32));
  EXPECT_FALSE(std::filesystem::exists(scope.path()));  // too small to search
  Problem big(300, 256, 256);
  TunedGemm planted;
  planted.kernel = DefaultKernel(GemmType::kF32).name;
  planted.mc = DefaultKernel(GemmType::kF32).mr;
  planted.nc = DefaultKernel(GemmType::kF32).nr;
  planted.tm = 1;
  planted.tn = GemmThreads(300, 256, 256);
  TuneCache::Get().Put(GemmShapeKey(GemmType::kF32, false, false, 300, 256, 256, planted.tn), planted);
  EXPECT_EQ(ChosenConfig(big.args).mc, planted.mc);  // on: the cached entry
  SetTuneModeOverride(TuneMode::kForce);
  ChosenConfig(big.args);  // force: searched again, the entry replaced by a measured one
  const nlohmann::json file = nlohmann::json::parse(Slurp(scope.path()));
  EXPECT_GT(file.at("gemm").begin().value().at("gflops").get<double>(), 0);
}

// Fake timings for the search: every configuration takes 1 s except the
// one named below, and the very first timing (the default's, during a
// "slow moment") takes 10 s.
const char* g_fast_kernel = nullptr;
double g_fast_seconds = 1.0;
int g_timings = 0;
double FakeTimer(const GemmConfig& cfg) {
  if (g_timings++ == 0) return 10.0;
  return g_fast_kernel != nullptr && std::string(cfg.kernel->name) == g_fast_kernel ? g_fast_seconds : 1.0;
}

// The kernel the search stores for a fresh class under FakeTimer.
std::string TunedKernel(const char* fast_kernel, double fast_seconds) {
  g_fast_kernel = fast_kernel;
  g_fast_seconds = fast_seconds;
  g_timings = 0;
  TuneScope scope(TuneMode::kOn);
  SetTuneTimerForTesting(&FakeTimer);
  Problem p(256, 320, 256);
  const std::string kernel = ChosenConfig(p.args).kernel->name;
  SetTuneTimerForTesting(nullptr);
  return kernel;
}

TEST(TunedGemm, AWinnerMustBeatTheDefaultAgainInInterleavedRounds) {
  std::vector<const KernelInfo*> others;
  for (const KernelInfo* k : SupportedKernels(GemmType::kF32)) {
    if (k != &DefaultKernel(GemmType::kF32)) others.push_back(k);
  }
  if (others.empty()) GTEST_SKIP() << "this CPU runs one fp32 kernel only: nothing to choose between";
  const char* other = others.front()->name;
  const std::string def = DefaultKernel(GemmType::kF32).name;
  // The default timed slow once, then as fast as the rest: the first
  // candidate "wins" the search by 10x, and the confirmation takes it back.
  EXPECT_EQ(TunedKernel(other, 1.0), def);
  EXPECT_EQ(TunedKernel(nullptr, 1.0), def);
  // Really faster (by more than the margin), in every round: kept.
  EXPECT_EQ(TunedKernel(other, 0.5), other);
  // Faster by less than the 3 % margin: the default stays.
  EXPECT_EQ(TunedKernel(other, 0.99), def);
}

}  // namespace
}  // namespace tessera::tile
