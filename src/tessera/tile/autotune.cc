// The autotuner's mode knob and JSON cache (see autotune.h).
#include "tessera/tile/autotune.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/hal/cpu_features.h"

namespace tessera::tile {
namespace {

base::Knob<std::string> kTuneKnob("TESSERA_TUNE", "1",
                                  "GEMM autotuning: 0 (off: default heuristics), 1 (use cached winners, tune "
                                  "a "
                                  "missing shape class on first use), force (retune every shape class)");
base::Knob<std::string> kTuneCacheKnob("TESSERA_TUNE_CACHE", "",
                                       "autotuner cache file (default $XDG_CACHE_HOME/tessera/tune.json or "
                                       "~/.cache/tessera/tune.json)");

int64_t NearestPowerOfTwo(int64_t x) {
  if (x <= 1) return x;
  return int64_t{1} << static_cast<int>(std::lround(std::log2(static_cast<double>(x))));
}

std::string CpuKey() {
  const hal::CpuFeatures& f = hal::GetCpuFeatures();
  return fmt::format("{} [{}]", f.model_name, f.ToString());
}

// The file format's version: 2 since GEMM winners are confirmed.
constexpr int64_t kCacheVersion = 2;

// The cache file's sections ({section: {key: entry}}), or an empty object
// (with a warning when the file exists but cannot be used). A section that
// is not an object is dropped.
nlohmann::json ReadCacheFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("gemm") || !j["gemm"].is_object()) {
    TLOG(WARN,
         "autotuner cache {} is not a Tessera tune file (malformed JSON or no "
         "\"gemm\" object); ignoring it",
         path);
    return nlohmann::json::object();
  }
  nlohmann::json sections = nlohmann::json::object();
  // Version 1 stored GEMM winners without the interleaved confirmation
  // against the default (gemm_tuned.cc): some are noise; search them again.
  const nlohmann::json& version = j.contains("version") ? j["version"] : nlohmann::json(1);
  const bool stale_gemm = !version.is_number_integer() || version.get<int64_t>() < kCacheVersion;
  if (stale_gemm && !j["gemm"].empty()) {
    TLOG(INFO, "autotuner cache {}: GEMM entries of version {} are searched again (version {} confirms winners)", path,
         version.dump(), kCacheVersion);
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "version") continue;
    if (it.key() == "gemm" && stale_gemm) {
      sections["gemm"] = nlohmann::json::object();
      continue;
    }
    if (!it.value().is_object()) {
      TLOG(WARN, "autotuner cache {}: section \"{}\" is not an object; ignoring it", path, it.key());
      continue;
    }
    sections[it.key()] = it.value();
  }
  return sections;
}

}  // namespace

TuneMode CurrentTuneMode() {
  const std::string v = kTuneKnob.Get();
  if (v == "0" || v == "off") return TuneMode::kOff;
  if (v == "force") return TuneMode::kForce;
  if (v != "1" && v != "on") {
    static std::once_flag warned;
    std::call_once(warned, [&] { TLOG(WARN, "TESSERA_TUNE={} is not one of 0, 1, force; using 1", v); });
  }
  return TuneMode::kOn;
}

void SetTuneModeOverride(std::optional<TuneMode> mode) {
  if (!mode) {
    kTuneKnob.Reset();
  } else {
    kTuneKnob.Set(*mode == TuneMode::kOff ? "0" : *mode == TuneMode::kForce ? "force" : "1");
  }
}

void SetTuneCachePathOverride(const std::string& path) {
  if (path.empty()) {
    kTuneCacheKnob.Reset();
  } else {
    kTuneCacheKnob.Set(path);
  }
  TuneCache::Get().Reset();
}

std::string TuneCachePath() {
  if (std::string p = kTuneCacheKnob.Get(); !p.empty()) return p;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/tessera/tune.json";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.cache/tessera/tune.json";
  }
  return "/tmp/tessera-tune.json";
}

nlohmann::json ToJson(const TunedGemm& t) {
  return nlohmann::json{{"kernel", t.kernel},
                        {"mc", t.mc},
                        {"nc", t.nc},
                        {"tm", t.tm},
                        {"tn", t.tn},
                        {"gflops", t.gflops},
                        {"default_gflops", t.default_gflops},
                        {"measured", {t.m, t.n, t.k}}};
}

std::optional<TunedGemm> TunedGemmFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  for (const char* key : {"kernel", "mc", "nc", "tm", "tn"}) {
    if (!j.contains(key)) return std::nullopt;
  }
  if (!j["kernel"].is_string() || !j["mc"].is_number_integer() || !j["nc"].is_number_integer() ||
      !j["tm"].is_number_integer() || !j["tn"].is_number_integer()) {
    return std::nullopt;
  }
  TunedGemm t;
  t.kernel = j["kernel"].get<std::string>();
  t.mc = j["mc"].get<int64_t>();
  t.nc = j["nc"].get<int64_t>();
  t.tm = j["tm"].get<int>();
  t.tn = j["tn"].get<int>();
  if (j.contains("gflops") && j["gflops"].is_number()) t.gflops = j["gflops"].get<double>();
  if (j.contains("default_gflops") && j["default_gflops"].is_number()) {
    t.default_gflops = j["default_gflops"].get<double>();
  }
  return t;
}

std::string GemmShapeKey(GemmType type, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int threads) {
  return fmt::format("{} {}{} m{} n{} k{} t{}", GemmTypeName(type), trans_a ? 't' : 'n', trans_b ? 't' : 'n',
                     NearestPowerOfTwo(m), NearestPowerOfTwo(n), NearestPowerOfTwo(k), threads);
}

TuneCache& TuneCache::Get() {
  static TuneCache* cache = new TuneCache();  // never destroyed: used from any thread until exit
  return *cache;
}

std::string TuneCache::FullKey(const std::string& shape_key) const { return shape_key + " | " + CpuKey(); }

void TuneCache::LoadLocked() {
  if (loaded_) return;
  loaded_ = true;
  path_ = TuneCachePath();
  sections_ = ReadCacheFile(path_);
}

std::optional<nlohmann::json> TuneCache::FindEntry(const std::string& section, const std::string& shape_key) {
  std::lock_guard<std::mutex> lock(mu_);
  LoadLocked();
  auto s = sections_.find(section);
  if (s == sections_.end()) return std::nullopt;
  auto it = s->find(FullKey(shape_key));
  if (it == s->end()) return std::nullopt;
  return *it;
}

std::optional<TunedGemm> TuneCache::Find(const std::string& shape_key) {
  std::optional<nlohmann::json> j = FindEntry("gemm", shape_key);
  if (!j) return std::nullopt;
  std::optional<TunedGemm> t = TunedGemmFromJson(*j);
  if (!t) TLOG(WARN, "autotuner cache {}: entry \"{}\" is malformed; retuning it", TuneCachePath(), shape_key);
  return t;
}

void TuneCache::Put(const std::string& shape_key, const TunedGemm& tuned) {
  PutEntry("gemm", shape_key, ToJson(tuned));
}

void TuneCache::PutEntry(const std::string& section, const std::string& shape_key, const nlohmann::json& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  LoadLocked();
  const std::string key = FullKey(shape_key);
  sections_[section][key] = entry;
  // Merge what other processes wrote since we loaded, then replace the file
  // atomically (readers see the old or the new file, never a torn one).
  nlohmann::json merged = ReadCacheFile(path_);
  for (auto s = sections_.begin(); s != sections_.end(); ++s) {
    nlohmann::json& into = merged[s.key()];
    if (!into.is_object()) into = nlohmann::json::object();
    for (auto it = s.value().begin(); it != s.value().end(); ++it) {
      if ((s.key() == section && it.key() == key) || !into.contains(it.key())) into[it.key()] = it.value();
    }
  }
  if (!merged.contains("gemm")) merged["gemm"] = nlohmann::json::object();  // what marks a tune file
  sections_ = merged;
  std::error_code ec;
  const std::filesystem::path path(path_);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  const std::string tmp = fmt::format("{}.tmp.{}", path_, ::getpid());
  {
    nlohmann::json file = sections_;
    file["version"] = kCacheVersion;
    std::ofstream out(tmp, std::ios::trunc);
    out << file.dump(1) << "\n";
    if (!out) {
      TLOG(WARN,
           "autotuner cache {}: cannot write {} ({}); the winner is kept for "
           "this process only",
           path_, tmp, std::strerror(errno));
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    TLOG(WARN,
         "autotuner cache {}: rename failed ({}); the winner is kept for this "
         "process only",
         path_, ec.message());
    std::filesystem::remove(tmp, ec);
  }
}

void TuneCache::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  loaded_ = false;
  sections_ = nlohmann::json::object();
}

}  // namespace tessera::tile
