#include "tessera/comm/algo/cost_model.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/base/knobs.h"
#include "tessera/comm/algo/network_cost.h"
#include "tessera/comm/transport/shm/waiter.h"

namespace tessera::comm::algo {
namespace {

base::Knob<std::string> kCostCacheKnob("TESSERA_COMM_MODEL_CACHE", "",
                                       "communication cost-model cache file; empty = "
                                       "$XDG_CACHE_HOME/tessera/comm_model.json or ~/.cache/tessera/comm_model.json, "
                                       "off = measure every time");

constexpr int kCacheVersion = 8;

double Chunks(double bytes, double per_chunk) { return bytes <= 0 ? 0 : std::ceil(bytes / std::max(per_chunk, 1.0)); }

}  // namespace

std::string CostConstants::ToString() const {
  return fmt::format(
      "shm barrier {:.2f} us, copy {:.2f} GB/s, reduce {:.2f} GB/s per source; p2p latency {:.2f} us, {:.2f} GB/s "
      "({})",
      barrier_s * 1e6, 1e-9 / copy_s_per_byte, 1e-9 / reduce_s_per_byte, p2p_latency_s * 1e6,
      1e-9 / p2p_s_per_byte, source);
}

std::string CostConstants::Serialize() const {
  return fmt::format("barrier_s={:.6e} copy_s_per_byte={:.6e} reduce_s_per_byte={:.6e} p2p_latency_s={:.6e} "
                     "p2p_s_per_byte={:.6e}",
                     barrier_s, copy_s_per_byte, reduce_s_per_byte, p2p_latency_s, p2p_s_per_byte);
}

StatusOr<CostConstants> CostConstants::Parse(const std::string& text) {
  CostConstants c;
  std::stringstream ss(text);
  std::string item;
  int seen = 0;
  while (ss >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return DataLoss("bad cost-model item '{}'", item);
    const std::string key = item.substr(0, eq);
    char* end = nullptr;
    const double v = std::strtod(item.c_str() + eq + 1, &end);
    if (end == nullptr || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      return DataLoss("bad cost-model value in '{}'", item);
    }
    if (key == "barrier_s") c.barrier_s = v;
    else if (key == "copy_s_per_byte") c.copy_s_per_byte = v;
    else if (key == "reduce_s_per_byte") c.reduce_s_per_byte = v;
    else if (key == "p2p_latency_s") c.p2p_latency_s = v;
    else if (key == "p2p_s_per_byte") c.p2p_s_per_byte = v;
    else return DataLoss("unknown cost-model key '{}'", key);
    ++seen;
  }
  if (seen != 5) return DataLoss("cost model '{}' has {} of 5 constants", text, seen);
  c.measured = true;
  return c;
}

std::string SerializeModel(const ModelInputs& in, const CostConstants& c) {
  return fmt::format("size={} transport={} window_bytes={} ll_bytes={} single_copy={} {}", in.size,
                     transport::TransportKindName(in.transport), in.shm_window_bytes, in.shm_ll_bytes,
                     in.shm_single_copy ? 1 : 0, c.Serialize());
}

StatusOr<std::pair<ModelInputs, CostConstants>> ParseModel(const std::string& text) {
  ModelInputs in;
  std::string constants;
  std::stringstream ss(text);
  int seen = 0;
  for (std::string item; ss >> item;) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    auto integer = [&](auto& out) -> Status {
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 0) return DataLoss("bad communication model value in '{}'", item);
      out = static_cast<std::remove_reference_t<decltype(out)>>(v);
      ++seen;
      return Status::Ok();
    };
    if (key == "size") {
      TESSERA_RETURN_IF_ERROR(integer(in.size));
    } else if (key == "transport") {
      TESSERA_ASSIGN_OR_RETURN(in.transport, transport::ParseTransportKind(value));
      ++seen;
    } else if (key == "window_bytes") {
      TESSERA_RETURN_IF_ERROR(integer(in.shm_window_bytes));
    } else if (key == "ll_bytes") {
      TESSERA_RETURN_IF_ERROR(integer(in.shm_ll_bytes));
    } else if (key == "single_copy") {
      int v = 0;
      TESSERA_RETURN_IF_ERROR(integer(v));
      in.shm_single_copy = v != 0;
    } else {
      constants += (constants.empty() ? "" : " ") + item;
    }
  }
  if (seen != 5 || in.size < 1) return DataLoss("communication model '{}' lacks size/transport/window/ll/single_copy", text);
  TESSERA_ASSIGN_OR_RETURN(CostConstants c, CostConstants::Parse(constants));
  return std::make_pair(in, c);
}

CostConstants DefaultConstants(transport::TransportKind kind, int size) {
  CostConstants c;
  const bool oversubscribed = size > transport::shm::UsableCpus();
  if (kind == transport::TransportKind::kTcp) {
    c.p2p_latency_s = 30e-6;
    c.p2p_s_per_byte = 1.0 / 1.5e9;
  } else {
    c.p2p_latency_s = oversubscribed ? 20e-6 : 2e-6;
    c.p2p_s_per_byte = 1.0 / 5e9;
  }
  c.barrier_s = oversubscribed ? 10e-6 * size : 1e-6;
  c.copy_s_per_byte = 1.0 / 10e9;
  c.reduce_s_per_byte = 1.0 / 10e9;
  if (oversubscribed) {
    const double f = static_cast<double>(size) / transport::shm::UsableCpus();
    c.copy_s_per_byte *= f;
    c.reduce_s_per_byte *= f;
    c.p2p_s_per_byte *= f;
  }
  c.source = "built-in defaults";
  return c;
}

std::optional<double> PredictSeconds(Algorithm algo, const CollectiveArgs& a, const ModelInputs& in,
                                     const CostConstants& c) {
  const double n = in.size;
  const bool shm = in.transport == transport::TransportKind::kShm;
  const double w = static_cast<double>(in.shm_window_bytes);
  const double s = static_cast<double>(a.count * a.ElementSize());  // the op's per-rank unit
  const double lat = c.p2p_latency_s, pb = c.p2p_s_per_byte;
  const double bar = c.barrier_s, cp = c.copy_s_per_byte, rd = c.reduce_s_per_byte;
  const LinkConstants link{lat, pb, rd, cp};
  using K = CollectiveKind;
  switch (algo) {
    case Algorithm::kShmDirect: {
      if (!shm) return std::nullopt;
      // Payload of this rank's low-latency slot when the op fits one.
      double ll = s;
      if (a.kind == K::kReduceScatter || a.kind == K::kAllToAll || a.kind == K::kScatter) ll = n * s;
      if (a.kind != K::kAllToAllV && a.kind != K::kBarrier && ll <= static_cast<double>(in.shm_ll_bytes)) {
        const double reads = (a.kind == K::kAllReduce || a.kind == K::kReduce || a.kind == K::kReduceScatter)
                                  ? n * s * rd
                                  : n * s * cp;
        return bar + ll * cp + reads;
      }
      if (in.shm_single_copy) {  // address exchange + pull + closing barrier, one copy per byte
        switch (a.kind) {
          case K::kBroadcast:
          case K::kScatter: return 2 * bar + s * cp;
          case K::kAllGather:
          case K::kAllToAll:
          case K::kAllToAllV:
          case K::kGather: return 2 * bar + n * s * cp;
          default: break;
        }
      }
      switch (a.kind) {
        case K::kAllReduce:
        case K::kReduce: return Chunks(s, w) * bar + s * cp + n * s * rd;
        case K::kBroadcast: return (Chunks(s, w) + 1) * bar + 2 * s * cp;
        case K::kAllGather: return (Chunks(s, w) + 1) * bar + (n + 1) * s * cp;
        case K::kReduceScatter: return (Chunks(s, w / n) + 1) * bar + n * s * cp + n * s * rd;
        case K::kAllToAll:
        case K::kAllToAllV: return (Chunks(s, w / n) + 1) * bar + 2 * (n - 1) * s * cp;
        case K::kGather:
        case K::kScatter: return (Chunks(s, w / n) + 1) * bar + n * s * cp;
        case K::kBarrier: return bar;
        default: return std::nullopt;
      }
    }
    case Algorithm::kShmTwoPhase:
      if (!shm || (a.kind != K::kAllReduce && a.kind != K::kReduce)) return std::nullopt;
      return (Chunks(s, w * n / (n + 1)) + 1) * bar + s * cp * (2 + 1 / n) + s * rd;
    // The point-to-point algorithms: the formulas shared with the cluster
    // simulator (network_cost.h), for the kinds this library runs them for.
    case Algorithm::kRing:
      if (a.kind != K::kAllReduce && a.kind != K::kAllGather && a.kind != K::kReduceScatter) return std::nullopt;
      return NetworkAlgorithmSeconds(algo, a.kind, in.size, s, link);
    case Algorithm::kHalvingDoubling:
      if (a.kind != K::kAllReduce) return std::nullopt;
      return NetworkAlgorithmSeconds(algo, a.kind, in.size, s, link);
    case Algorithm::kBinomialTree:
    case Algorithm::kPairwise: return NetworkAlgorithmSeconds(algo, a.kind, in.size, s, link);
    case Algorithm::kHierarchical: return std::nullopt;  // priced by the selector from its sub-groups
  }
  return std::nullopt;
}

std::string CostCachePath() {
  std::string path = kCostCacheKnob.Get();
  if (path == "off") return "";
  if (!path.empty()) return path;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fmt::format("{}/tessera/comm_model.json", xdg);
  if (const char* home = std::getenv("HOME"); home && *home) return fmt::format("{}/.cache/tessera/comm_model.json", home);
  return "";
}

std::string CostCacheKey(transport::TransportKind kind, int size, const std::string& host_key) {
  return fmt::format("v{} {} n={} cpus={} host={}", kCacheVersion, transport::TransportKindName(kind), size,
                     transport::shm::UsableCpus(), host_key);
}

StatusOr<std::optional<CostConstants>> ReadCostCache(const std::string& path, const std::string& key) {
  if (path.empty()) return std::optional<CostConstants>();
  std::ifstream in(path);
  if (!in) return std::optional<CostConstants>();
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const std::exception& e) {
    return DataLoss("cannot parse cost-model cache '{}': {}", path, e.what());
  }
  if (!doc.is_object() || !doc.contains("entries") || !doc["entries"].contains(key)) {
    return std::optional<CostConstants>();
  }
  const auto& entry = doc["entries"][key];
  if (!entry.is_string()) return DataLoss("cost-model cache '{}': entry '{}' is not a string", path, key);
  StatusOr<CostConstants> c = CostConstants::Parse(entry.get<std::string>());
  if (!c.ok()) return c.status().WithContext(fmt::format("reading cost-model cache '{}'", path));
  c->source = fmt::format("measured, cached in {}", path);
  return std::optional<CostConstants>(*c);
}

Status WriteCostCache(const std::string& path, const std::string& key, const CostConstants& c) {
  if (path.empty()) return Status::Ok();
  nlohmann::json doc = nlohmann::json::object();
  {
    std::ifstream in(path);
    if (in) {
      try {
        in >> doc;
      } catch (const std::exception&) {
        doc = nlohmann::json::object();
      }
    }
  }
  if (!doc.is_object()) doc = nlohmann::json::object();
  doc["version"] = kCacheVersion;
  doc["entries"][key] = c.Serialize();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(tmp);
    if (!out) return IoError("cannot write cost-model cache '{}'", tmp);
    out << doc.dump(2) << "\n";
    if (!out) return IoError("cannot write cost-model cache '{}'", tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return IoError("cannot replace cost-model cache '{}': {}", path, ec.message());
  return Status::Ok();
}

}  // namespace tessera::comm::algo
