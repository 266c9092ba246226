// Tessera's GEMM against the CPU BLAS libraries on one shape: each round
// times one call of every implementation loaded (the starting one
// rotating), so machine drift hits all alike; medians of the rounds are
// reported with Tessera's ratio to each, plus the measured peak of the same
// thread count.
//   gemm_compare --m 4096 --n 4096 --k 4096 --dtype f32,bf16,int8 --threads 2
//                --rounds 7 [--json]
// Libraries are loaded at run time when installed: OpenBLAS
// (libopenblas.so.0: cblas_sgemm), BLIS (libblis.so.4: cblas_sgemm),
// oneDNN (libdnnl.so.2: dnnl_sgemm, dnnl_gemm_bf16bf16f32,
// dnnl_gemm_u8s8s32). OpenBLAS reads OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
// and BLIS reads BLIS_ARCH_TYPE when loaded, and OpenBLAS's idle pool
// threads slow everything else in its process (measured: Tessera 340 -> 382
// GFLOP/s at 4096^3 without it loaded), so bench/gemm_vs_libs.py runs one
// process per implementation and setting, alternating (--libs, --no-tessera).
// Inputs are allocated and touched once; C is overwritten (beta 0).
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/base/float16.h"
#include "tessera/hal/peak.h"
#include "tessera/ops/matmul/gemm.h"
#include "tessera/tile/gemm.h"

namespace {

using tessera::bf16;

// cblas_sgemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); 101 = row-major, 111 = no trans.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
using DnnlBf16 = int (*)(char, char, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, const uint16_t*,
                         int64_t, float, float*, int64_t);
using DnnlU8S8 = int (*)(char, char, char, int64_t, int64_t, int64_t, float, const uint8_t*, int64_t, uint8_t,
                         const int8_t*, int64_t, int8_t, float, int32_t*, int64_t, const int32_t*);

void* Sym(void* lib, const char* name) { return lib == nullptr ? nullptr : dlsym(lib, name); }

struct Libraries {
  CblasSgemm openblas = nullptr, blis = nullptr;
  void (*openblas_threads)(int) = nullptr;
  void (*blis_threads)(int64_t) = nullptr;
  DnnlSgemm dnnl_sgemm = nullptr;
  DnnlBf16 dnnl_bf16 = nullptr;
  DnnlU8S8 dnnl_u8s8 = nullptr;
};

// Loads only the libraries asked for: OpenBLAS starts its thread pool when
// loaded, and its idle threads would compete with everyone else.
Libraries Load(const std::string& only) {
  auto wanted = [&](const char* name) {
    return ("," + only + ",").find(std::string(",") + name + ",") != std::string::npos;
  };
  Libraries l;
  void* ob = wanted("openblas") ? dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL) : nullptr;
  l.openblas = reinterpret_cast<CblasSgemm>(Sym(ob, "cblas_sgemm"));
  l.openblas_threads = reinterpret_cast<void (*)(int)>(Sym(ob, "openblas_set_num_threads"));
  void* bl = wanted("blis") ? dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL) : nullptr;
  l.blis = reinterpret_cast<CblasSgemm>(Sym(bl, "cblas_sgemm"));
  l.blis_threads = reinterpret_cast<void (*)(int64_t)>(Sym(bl, "bli_thread_set_num_threads"));
  void* dn = wanted("onednn") ? dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL) : nullptr;
  l.dnnl_sgemm = reinterpret_cast<DnnlSgemm>(Sym(dn, "dnnl_sgemm"));
  l.dnnl_bf16 = reinterpret_cast<DnnlBf16>(Sym(dn, "dnnl_gemm_bf16bf16f32"));
  l.dnnl_u8s8 = reinterpret_cast<DnnlU8S8>(Sym(dn, "dnnl_gemm_u8s8s32"));
  return l;
}

struct Impl {
  std::string name;
  std::function<void()> call;
  std::vector<double> seconds;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera GEMM vs OpenBLAS / BLIS / oneDNN, interleaved in one process"};
  int64_t m = 4096, n = 4096, k = 4096;
  int threads = 2, rounds = 7;
  std::string dtypes = "f32";
  std::string only = "openblas,blis,onednn";
  bool json = false, no_tessera = false;
  app.add_option("--m", m);
  app.add_option("--n", n);
  app.add_option("--k", k);
  app.add_option("--dtype", dtypes, "comma-separated: f32, bf16, int8");
  app.add_option("--threads", threads);
  app.add_option("--rounds", rounds);
  app.add_option("--libs", only, "libraries to compare with (comma-separated; empty: Tessera alone)");
  app.add_flag("--no-tessera", no_tessera, "time the libraries only (bench/gemm_vs_libs.py runs each in its own process)");
  app.add_flag("--json", json);
  CLI11_PARSE(app, argc, argv);

  omp_set_num_threads(threads);
  Libraries libs = Load(only);
  if (libs.openblas_threads != nullptr) libs.openblas_threads(threads);
  if (libs.blis_threads != nullptr) libs.blis_threads(threads);

  std::vector<float> af(m * k), bfv(k * n), c(m * n);
  std::vector<bf16> ah(m * k), bh(k * n);
  std::vector<uint8_t> au(m * k);
  std::vector<int8_t> bs(k * n);
  std::vector<int32_t> ci(m * n);
  uint32_t x = 12345;
  auto next = [&] { return (x = x * 1664525u + 1013904223u) >> 8; };
  for (int64_t i = 0; i < m * k; ++i) {
    af[i] = static_cast<float>(next() % 2001) / 1000.0f - 1.0f;
    ah[i] = bf16(af[i]);
    au[i] = static_cast<uint8_t>(next());
  }
  for (int64_t i = 0; i < k * n; ++i) {
    bfv[i] = static_cast<float>(next() % 2001) / 1000.0f - 1.0f;
    bh[i] = bf16(bfv[i]);
    bs[i] = static_cast<int8_t>(next());
  }
  const tessera::hal::PeakInfo peak = tessera::hal::MeasurePeak(threads);
  const double flops = 2.0 * m * n * k;
  nlohmann::json out = {{"m", m}, {"n", n}, {"k", k}, {"threads", threads}, {"rounds", rounds},
                        {"peak_fp32_gflops", peak.fp32_flops * 1e-9}, {"peak_bf16_gflops", peak.bf16_flops * 1e-9}};
  std::string start = dtypes;
  for (size_t pos = 0; pos <= start.size();) {
    const size_t comma = start.find(',', pos);
    const std::string dt = start.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? start.size() + 1 : comma + 1;
    std::vector<Impl> impls;
    std::string config;
    if (dt == "f32") {
      impls.push_back({"tessera", [&] {
                         tessera::ops::GemmF32(false, false, m, n, k, 1.0f, af.data(), k, bfv.data(), n, 0.0f,
                                               c.data(), n);
                       }, {}});
      if (libs.openblas) {
        impls.push_back({"openblas", [&] {
                           libs.openblas(101, 111, 111, m, n, k, 1.0f, af.data(), k, bfv.data(), n, 0.0f, c.data(), n);
                         }, {}});
      }
      if (libs.blis) {
        impls.push_back({"blis", [&] {
                           libs.blis(101, 111, 111, m, n, k, 1.0f, af.data(), k, bfv.data(), n, 0.0f, c.data(), n);
                         }, {}});
      }
      if (libs.dnnl_sgemm) {
        impls.push_back({"onednn", [&] {
                           libs.dnnl_sgemm('N', 'N', m, n, k, 1.0f, af.data(), k, bfv.data(), n, 0.0f, c.data(), n);
                         }, {}});
      }
      tessera::tile::F32Args g;
      g.m = m, g.n = n, g.k = k, g.a = af.data(), g.lda = k, g.b = bfv.data(), g.ldb = n, g.c = c.data(), g.ldc = n;
      config = tessera::tile::ChosenConfig(g).ToString();
    } else if (dt == "bf16") {
      impls.push_back({"tessera", [&] {
                         tessera::ops::GemmBF16F32(false, false, m, n, k, 1.0f, ah.data(), k, bh.data(), n, 0.0f,
                                                   c.data(), n);
                       }, {}});
      if (libs.dnnl_bf16) {
        impls.push_back({"onednn", [&] {
                           libs.dnnl_bf16('N', 'N', m, n, k, 1.0f, reinterpret_cast<const uint16_t*>(ah.data()), k,
                                          reinterpret_cast<const uint16_t*>(bh.data()), n, 0.0f, c.data(), n);
                         }, {}});
      }
      tessera::tile::Bf16Args g;
      g.m = m, g.n = n, g.k = k, g.a = ah.data(), g.lda = k, g.b = bh.data(), g.ldb = n, g.c = c.data(), g.ldc = n;
      config = tessera::tile::ChosenConfig(g).ToString();
    } else if (dt == "int8") {
      impls.push_back({"tessera", [&] {
                         tessera::ops::GemmU8S8S32(false, false, m, n, k, au.data(), k, bs.data(), n, false,
                                                   ci.data(), n);
                       }, {}});
      if (libs.dnnl_u8s8) {
        const int32_t zero = 0;
        impls.push_back({"onednn", [&, zero] {
                           libs.dnnl_u8s8('N', 'N', 'F', m, n, k, 1.0f, au.data(), k, 0, bs.data(), n, 0, 0.0f,
                                          ci.data(), n, &zero);
                         }, {}});
      }
      tessera::tile::U8S8Args g;
      g.m = m, g.n = n, g.k = k, g.a = au.data(), g.lda = k, g.b = bs.data(), g.ldb = n, g.c = ci.data(), g.ldc = n;
      config = tessera::tile::ChosenConfig(g).ToString();
    } else {
      std::fprintf(stderr, "unknown dtype '%s' (f32, bf16, int8)\n", dt.c_str());
      return 2;
    }
    if (no_tessera) impls.erase(impls.begin());
    if (impls.empty()) continue;
    for (Impl& impl : impls) impl.call();  // warm-up (and Tessera's tuning, if any)
    for (int r = 0; r < rounds; ++r) {
      for (size_t j = 0; j < impls.size(); ++j) {
        Impl& impl = impls[(j + r) % impls.size()];
        const auto t0 = std::chrono::steady_clock::now();
        impl.call();
        impl.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    const double tessera_gflops = no_tessera ? 0 : flops / Median(impls[0].seconds) * 1e-9;
    const double peak_gflops = (dt == "bf16" ? peak.bf16_flops : peak.fp32_flops) * 1e-9;
    nlohmann::json rows = nlohmann::json::array();
    if (!json) {
      std::printf("gemm %s %ldx%ldx%ld, %d threads (%s), peak %s %.1f GFLOP/s\n", dt.c_str(), static_cast<long>(m),
                  static_cast<long>(n), static_cast<long>(k), threads, config.c_str(), dt == "bf16" ? "bf16" : "fp32",
                  peak_gflops);
    }
    for (const Impl& impl : impls) {
      const double g = flops / Median(impl.seconds) * 1e-9;
      const double best = flops / *std::min_element(impl.seconds.begin(), impl.seconds.end()) * 1e-9;
      rows.push_back({{"impl", impl.name}, {"gflops_median", g}, {"gflops_best", best}});
      if (!no_tessera) rows.back()["tessera_ratio"] = tessera_gflops / g;
      if (!json) {
        std::printf("  %-9s %8.1f GFLOP/s (best %7.1f)  tessera/this %.3f\n", impl.name.c_str(), g, best,
                    tessera_gflops / g);
      }
    }
    if (!json && dt != "int8" && !no_tessera) std::printf("  tessera = %.1f %% of the peak\n", 100 * tessera_gflops / peak_gflops);
    out[dt] = {{"config", config}, {"rows", rows}};
  }
  if (json) std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
