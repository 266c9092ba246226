// The tile kernels and the tile GEMM program: every registered kernel this
// CPU runs, with explicit configurations (small blocks so every loop and
// edge tile is taken, every thread grid), against references — int8 bit
// for bit against an integer loop, fp32/bf16 within a bound relative to
// sum |a b| of a double oracle — on sizes that are not multiples of the
// tile (primes, 1, 0), transposed and padded operands, and partial k-groups;
// and the property the autotuner relies on: every configuration of one
// numerics class computes the same bits.
#include <omp.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/hal/cpu_features.h"
#include "tessera/tile/gemm.h"
#include "tessera/tile/kernels.h"
#include "tessera/tile/pack.h"

namespace tessera::tile {
namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k, pad;
};

std::vector<Case> Cases() {
  std::vector<Case> c;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      c.push_back({ta, tb, 37, 53, 41, 3});
      c.push_back({ta, tb, 1, 1, 1, 0});
      c.push_back({ta, tb, 13, 97, 5, 1});
    }
  }
  c.push_back({false, false, 0, 7, 5, 0});
  c.push_back({false, false, 7, 0, 5, 0});
  c.push_back({false, false, 7, 9, 0, 0});
  c.push_back({false, false, 61, 131, 67, 0});   // K crosses the tiny K blocks
  c.push_back({false, false, 96, 64, 1031, 2});  // K crosses the real int8 K block
  c.push_back({true, false, 29, 37, 263, 0});
  return c;
}

std::vector<const KernelInfo*> Supported(GemmType type) {
  std::vector<const KernelInfo*> out;
  for (const KernelInfo* k : AllKernels()) {
    if (k->type == type && k->supported()) out.push_back(k);
  }
  return out;
}

// Configurations that take every loop: the kernel's defaults, and tiny
// blocks (and a tiny K block, a copy of the kernel) on 1 and 2 threads.
struct TestConfig {
  KernelInfo kernel;
  GemmConfig config;
  std::string name;
};
std::vector<TestConfig> ConfigsFor(const KernelInfo& k) {
  std::vector<TestConfig> out;
  KernelInfo tiny_k = k;
  tiny_k.kc = k.group == 1 ? 13 : 4 * k.group + 1;
  for (const auto& [kernel, mc, nc] : {std::tuple{k, int64_t{k.mc}, int64_t{k.nc}},
                                      std::tuple{tiny_k, int64_t{2} * k.mr, int64_t{2} * k.nr}}) {
    for (auto [tm, tn] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}}) {
      out.push_back({kernel, GemmConfig{nullptr, mc, nc, tm, tn},
                     fmt::format("{} kc {} mc {} nc {} grid {}x{}", k.name, kernel.kc, mc, nc, tm, tn)});
    }
  }
  for (TestConfig& t : out) t.config.kernel = &t.kernel;
  return out;
}

// A stored op(X) of rows x cols, element (r, c) at x[r*ld + c] or, when
// transposed, x[c*ld + r]; padding holds `fill`.
template <typename T>
struct Stored {
  std::vector<T> data;
  int64_t ld;
  bool trans;
  T At(int64_t r, int64_t c) const { return trans ? data[c * ld + r] : data[r * ld + c]; }
};

template <typename T, typename Gen>
Stored<T> MakeStored(int64_t rows, int64_t cols, bool trans, int64_t pad, Gen&& gen) {
  Stored<T> s;
  s.trans = trans;
  const int64_t outer = trans ? cols : rows, inner = trans ? rows : cols;
  s.ld = std::max<int64_t>(1, inner + pad);
  s.data.resize(static_cast<size_t>(std::max<int64_t>(1, outer * s.ld)));
  for (T& v : s.data) v = gen();
  return s;
}

// True when `name` reads TYPE_gemm_MRxNR_ISA[_via_f32], TYPE one of the three
// numerics and ISA lower-case letters and digits. (Hand-parsed: std::regex
// trips GCC 12's -Wmaybe-uninitialized inside libstdc++ at -O1 under ASan.)
bool FollowsNamingConvention(std::string_view name) {
  auto digits = [&name]() {
    size_t n = 0;
    while (n < name.size() && std::isdigit(static_cast<unsigned char>(name[n]))) ++n;
    name.remove_prefix(n);
    return n > 0;
  };
  auto eat = [&name](std::string_view s) {
    if (name.substr(0, s.size()) != s) return false;
    name.remove_prefix(s.size());
    return true;
  };
  if (!eat("f32") && !eat("bf16f32") && !eat("u8s8s32")) return false;
  if (!eat("_gemm_") || !digits() || !eat("x") || !digits() || !eat("_")) return false;
  if (name.ends_with("_via_f32")) name.remove_suffix(8);
  if (name.empty()) return false;
  for (char c : name) {
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

TEST(TileKernels, NamingConventionParserRejectsOtherNames) {
  EXPECT_TRUE(FollowsNamingConvention("f32_gemm_12x32_avx512"));
  EXPECT_TRUE(FollowsNamingConvention("bf16f32_gemm_6x16_avx2_via_f32"));
  EXPECT_FALSE(FollowsNamingConvention("f32_gemm_12x_avx512"));
  EXPECT_FALSE(FollowsNamingConvention("f64_gemm_12x32_avx512"));
  EXPECT_FALSE(FollowsNamingConvention("f32_gemm_12x32_AVX512"));
  EXPECT_FALSE(FollowsNamingConvention("f32_gemm_12x32_"));
}

TEST(TileKernels, NamesFollowTheConvention) {
  for (const KernelInfo* k : AllKernels()) {
    EXPECT_TRUE(FollowsNamingConvention(k->name)) << k->name;
    EXPECT_NE(std::string(k->name).find(fmt::format("_{}x{}_", k->mr, k->nr)), std::string::npos) << k->name;
    EXPECT_EQ(std::string(k->name).rfind(GemmTypeName(k->type), 0), 0u) << k->name;
    EXPECT_EQ(k->mc % k->mr, 0) << k->name;
    EXPECT_EQ(k->nc % k->nr, 0) << k->name;
    EXPECT_NE(k->packed, nullptr) << k->name;
  }
  for (GemmType type : {GemmType::kF32, GemmType::kBf16F32, GemmType::kU8S8S32}) {
    const KernelInfo& d = DefaultKernel(type);
    EXPECT_TRUE(d.supported()) << d.name;
    EXPECT_EQ(FindKernel(d.name), &d);
    EXPECT_EQ(SupportedKernels(type).front(), &d);
    for (const KernelInfo* k : SupportedKernels(type)) EXPECT_STREQ(k->numerics, d.numerics);
  }
  const hal::CpuFeatures& f = hal::GetCpuFeatures();
  if (f.HasAvx512Core()) {
    EXPECT_STREQ(DefaultKernel(GemmType::kF32).name, "f32_gemm_12x32_avx512");
    if (f.avx512_vnni) {
      EXPECT_STREQ(DefaultKernel(GemmType::kU8S8S32).name, "u8s8s32_gemm_12x32_avx512vnni");
    }
    if (f.avx512_bf16) {
      EXPECT_STREQ(DefaultKernel(GemmType::kBf16F32).name, "bf16f32_gemm_12x32_avx512bf16");
    }
  }
  EXPECT_EQ(FindKernel("f32_gemm_99x99_nonesuch"), nullptr);
}

TEST(TilePack, IntegerGroupsFollowTheLayout) {
  // S is 5 (x) by 7 (k); panels of width 4 in groups of 4 (and 2, widened).
  std::vector<int8_t> src(5 * 7);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<int8_t>(static_cast<int>(i) * 7 - 100);
  const int64_t sx = 7, sp = 1;
  for (int g : {1, 2, 4}) {
    const int64_t kg = (7 + g - 1) / g * g;
    std::vector<int8_t> out(2 * kg * 4, 99);
    std::vector<int16_t> wide(2 * kg * 4, 99);
    PackPanelsGroups(src.data(), sx, sp, 5, 7, 4, g, out.data());
    PackPanelsGroups(src.data(), sx, sp, 5, 7, 4, g, wide.data());
    for (int64_t x = 0; x < 8; ++x) {
      for (int64_t p = 0; p < kg; ++p) {
        const int64_t at = (x / 4) * kg * 4 + (p / g) * g * 4 + g * (x % 4) + p % g;
        const int want = x < 5 && p < 7 ? src[x * sx + p * sp] : 0;
        EXPECT_EQ(out[at], want) << "g " << g << " x " << x << " p " << p;
        EXPECT_EQ(wide[at], want) << "g " << g << " x " << x << " p " << p;
      }
    }
  }
}

TEST(TileGemm, Int8EveryKernelIsExact) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> u8(0, 255), s8(-128, 127);
  for (const KernelInfo* k : Supported(GemmType::kU8S8S32)) {
    for (const TestConfig& tc : ConfigsFor(*k)) {
      SCOPED_TRACE(tc.name);
      for (const Case& c : Cases()) {
        SCOPED_TRACE(fmt::format("ta {} tb {} m {} n {} k {} pad {}", c.ta, c.tb, c.m, c.n, c.k, c.pad));
        auto a = MakeStored<uint8_t>(c.m, c.k, c.ta, c.pad, [&] { return static_cast<uint8_t>(u8(rng)); });
        auto b = MakeStored<int8_t>(c.k, c.n, c.tb, c.pad, [&] { return static_cast<int8_t>(s8(rng)); });
        // Extremes in the first row and column: 255 * -128 everywhere along K.
        if (c.m > 0 && c.n > 0) {
          for (int64_t p = 0; p < c.k; ++p) {
            (c.ta ? a.data[p * a.ld] : a.data[p]) = 255;
            (c.tb ? b.data[p] : b.data[p * b.ld]) = -128;
          }
        }
        for (bool accumulate : {false, true}) {
          const int64_t ldc = c.n + c.pad;
          std::vector<int32_t> got(static_cast<size_t>(std::max<int64_t>(1, c.m * ldc)), 12345);
          std::vector<int32_t> want = got;
          for (int64_t i = 0; i < c.m; ++i) {
            for (int64_t j = 0; j < c.n; ++j) {
              int64_t s = accumulate ? want[i * ldc + j] : 0;
              for (int64_t p = 0; p < c.k; ++p) s += int64_t{a.At(i, p)} * b.At(p, j);
              want[i * ldc + j] = static_cast<int32_t>(s);
            }
          }
          U8S8Args g;
          g.trans_a = c.ta;
          g.trans_b = c.tb;
          g.m = c.m;
          g.n = c.n;
          g.k = c.k;
          g.a = a.data.data();
          g.lda = a.ld;
          g.b = b.data.data();
          g.ldb = b.ld;
          g.beta = accumulate ? 1.0f : 0.0f;
          g.c = got.data();
          g.ldc = ldc;
          GemmWithConfig(g, tc.config);
          ASSERT_EQ(got, want) << "accumulate " << accumulate;  // padding untouched too
        }
      }
    }
  }
}

// fp32 / bf16: each kernel and configuration against a double oracle,
// |error| <= 2e-6 * sum |a b| per element (bf16 inputs are exact in fp32).
template <typename T>
void CheckFloatKernels(GemmType type) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto gen = [&] {
    if constexpr (std::is_same_v<T, float>) {
      return dist(rng);
    } else {
      return bf16(dist(rng));
    }
  };
  for (const KernelInfo* k : Supported(type)) {
    for (const TestConfig& tc : ConfigsFor(*k)) {
      SCOPED_TRACE(tc.name);
      for (const Case& c : Cases()) {
        SCOPED_TRACE(fmt::format("ta {} tb {} m {} n {} k {} pad {}", c.ta, c.tb, c.m, c.n, c.k, c.pad));
        auto a = MakeStored<T>(c.m, c.k, c.ta, c.pad, gen);
        auto b = MakeStored<T>(c.k, c.n, c.tb, c.pad, gen);
        const int64_t ldc = c.n + c.pad;
        std::vector<float> got(static_cast<size_t>(std::max<int64_t>(1, c.m * ldc)), 0.25f);
        GemmArgs<T, T, float> g;
        g.trans_a = c.ta;
        g.trans_b = c.tb;
        g.m = c.m;
        g.n = c.n;
        g.k = c.k;
        g.alpha = 0.5f;
        g.a = a.data.data();
        g.lda = a.ld;
        g.b = b.data.data();
        g.ldb = b.ld;
        g.beta = 2.0f;
        g.c = got.data();
        g.ldc = ldc;
        GemmWithConfig(g, tc.config);
        int bad = 0;
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            if (j >= c.n) {
              bad += got[i * ldc + j] != 0.25f;  // padding untouched
              continue;
            }
            double s = 0, mag = 0;
            for (int64_t p = 0; p < c.k; ++p) {
              const double x = static_cast<float>(a.At(i, p)), y = static_cast<float>(b.At(p, j));
              s += x * y;
              mag += std::fabs(x * y);
            }
            const double want = 0.5 * s + 2.0 * 0.25;
            bad += std::fabs(got[i * ldc + j] - want) > 2e-6 * (mag + 1);
          }
        }
        ASSERT_EQ(bad, 0);
      }
    }
  }
}

TEST(TileGemm, F32EveryKernelMatchesTheOracle) { CheckFloatKernels<float>(GemmType::kF32); }
TEST(TileGemm, Bf16EveryKernelMatchesTheOracle) { CheckFloatKernels<bf16>(GemmType::kBf16F32); }

// Every kernel of the default's numerics class, every block size and grid
// the tuner may pick: the same bits as the default configuration.
template <typename T>
void CheckSameBits(GemmType type) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Case& c : std::vector<Case>{{false, false, 203, 301, 700, 0}, {true, false, 77, 45, 1500, 1},
                                         {false, true, 130, 20, 600, 0}}) {
    SCOPED_TRACE(fmt::format("ta {} tb {} m {} n {} k {}", c.ta, c.tb, c.m, c.n, c.k));
    std::vector<T> a(static_cast<size_t>(c.m * c.k + c.pad * c.k + c.pad * c.m + 8));
    std::vector<T> b(static_cast<size_t>(c.k * c.n + c.pad * c.k + c.pad * c.n + 8));
    for (T& v : a) v = T(dist(rng));
    for (T& v : b) v = T(dist(rng));
    GemmArgs<T, T, float> g;
    g.trans_a = c.ta;
    g.trans_b = c.tb;
    g.m = c.m;
    g.n = c.n;
    g.k = c.k;
    g.a = a.data();
    g.lda = (c.ta ? c.m : c.k) + c.pad;
    g.b = b.data();
    g.ldb = (c.tb ? c.k : c.n) + c.pad;
    g.ldc = c.n;
    std::vector<float> want(static_cast<size_t>(c.m * c.n)), got(want.size());
    g.c = want.data();
    GemmWithConfig(g, DefaultConfig(type, c.ta, c.tb, c.m, c.n, c.k, g.lda, 1));
    g.c = got.data();
    for (const KernelInfo* k : SupportedKernels(type)) {
      for (int64_t mc : {int64_t{k->mr}, int64_t{k->mc}}) {
        for (int64_t nc : {int64_t{k->nr}, int64_t{k->nc}}) {
          for (auto [tm, tn] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}}) {
            const GemmConfig cfg{k, mc, nc, tm, tn};
            std::fill(got.begin(), got.end(), -1.0f);
            GemmWithConfig(g, cfg);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << cfg.ToString();
          }
        }
      }
    }
  }
}

TEST(TileGemm, EveryConfigurationOfANumericsClassGivesTheSameBits) {
  CheckSameBits<float>(GemmType::kF32);
  CheckSameBits<bf16>(GemmType::kBf16F32);
}

// A deliberately wrong kernel entry (k-group 2 declared for a kernel that
// reads groups of 4) must fail the oracle: the checks above can fail.
TEST(TileGemm, AWrongPanelLayoutIsCaught) {
  const KernelInfo* vnni = FindKernel("u8s8s32_gemm_12x32_avx512vnni");
  if (vnni == nullptr) GTEST_SKIP() << "no AVX512-VNNI on this CPU: the negative control needs its kernel";
  KernelInfo wrong = *vnni;
  wrong.group = 2;
  wrong.rows = nullptr;
  std::vector<uint8_t> a(24 * 16);
  std::vector<int8_t> b(16 * 32);
  for (int64_t i = 0; i < 24 * 16; ++i) a[i] = static_cast<uint8_t>((i * 5) % 13);
  for (int64_t i = 0; i < 16 * 32; ++i) b[i] = static_cast<int8_t>((i * 3) % 11 - 5);
  std::vector<int32_t> want(24 * 32, 0), c(24 * 32, 0);
  for (int64_t i = 0; i < 24; ++i) {
    for (int64_t j = 0; j < 32; ++j) {
      for (int64_t p = 0; p < 16; ++p) want[i * 32 + j] += a[i * 16 + p] * b[p * 32 + j];
    }
  }
  U8S8Args g;
  g.m = 24;
  g.n = 32;
  g.k = 16;
  g.a = a.data();
  g.lda = 16;
  g.b = b.data();
  g.ldb = 32;
  g.c = c.data();
  g.ldc = 32;
  GemmWithConfig(g, GemmConfig{vnni, 24, 32, 1, 1});
  EXPECT_EQ(c, want);  // the real entry is right
  GemmWithConfig(g, GemmConfig{&wrong, 24, 32, 1, 1});
  EXPECT_NE(c, want);
}

TEST(TileGemm, EpilogueSeesEveryBlockOnce) {
  std::vector<float> a(50 * 30, 1.0f), b(30 * 70, 1.0f);
  std::vector<int> hits(50 * 70, 0);
  struct Ctx {
    std::vector<int>* hits;
  } ctx{&hits};
  Epilogue e{[](void* p, const void* block, int64_t ld, int64_t row, int64_t rows, int64_t col, int64_t cols) {
               auto* h = static_cast<Ctx*>(p)->hits;
               const auto* v = static_cast<const float*>(block);
               for (int64_t r = 0; r < rows; ++r) {
                 for (int64_t j = 0; j < cols; ++j) {
                   if (v[r * ld + j] == 30.0f) {
#pragma omp atomic
                     (*h)[(row + r) * 70 + col + j] += 1;
                   }
                 }
               }
             },
             &ctx};
  F32Args g;
  g.m = 50;
  g.n = 70;
  g.k = 30;
  g.a = a.data();
  g.lda = 30;
  g.b = b.data();
  g.ldb = 70;
  g.c = nullptr;  // epilogue-only: C never materialized
  g.ldc = 70;
  g.epilogue = &e;
  const KernelInfo& k = DefaultKernel(GemmType::kF32);
  for (auto [tm, tn] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}}) {
    std::fill(hits.begin(), hits.end(), 0);
    GemmWithConfig(g, GemmConfig{&k, int64_t{2} * k.mr, int64_t{2} * k.nr, tm, tn});
    EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 50 * 70);
  }
}

}  // namespace
}  // namespace tessera::tile
