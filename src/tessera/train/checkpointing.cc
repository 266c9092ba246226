#include "tessera/train/checkpointing.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/parallel/checkpoint/checkpoint_root.h"
#include "tessera/parallel/checkpoint/checkpoint_writer.h"
#include "tessera/sim/faults.h"

namespace tessera::train {
namespace {

namespace ck = parallel::checkpoint;
using Clock = std::chrono::steady_clock;

constexpr char kKind[] = "tessera-trainer";
constexpr char kModelPrefix[] = "model/";
constexpr char kOptimPrefix[] = "optim/";
constexpr char kBufferPrefix[] = "buffer/";

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

ck::StorageDtype ToStorage(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ck::StorageDtype::kF32;
    case DType::kBF16: return ck::StorageDtype::kBF16;
    case DType::kF16: return ck::StorageDtype::kF16;
    case DType::kI32: return ck::StorageDtype::kI32;
    case DType::kI64: return ck::StorageDtype::kI64;
  }
  return ck::StorageDtype::kF32;
}

StatusOr<DType> FromStorage(ck::StorageDtype dtype, const std::string& name) {
  switch (dtype) {
    case ck::StorageDtype::kF32: return DType::kF32;
    case ck::StorageDtype::kBF16: return DType::kBF16;
    case ck::StorageDtype::kF16: return DType::kF16;
    case ck::StorageDtype::kI32: return DType::kI32;
    case ck::StorageDtype::kI64: return DType::kI64;
    default:
      return InvalidArgument("checkpoint tensor '{}' has dtype {}, which a Tessera tensor cannot hold", name,
                             ck::StorageDtypeName(dtype));
  }
}

}  // namespace

bool CheckpointSchedule::Due(int64_t step, int64_t first_step, double since_last_s) const {
  if (options_.every > 0 && step % options_.every == 0) return true;
  if (interval_s_ > 0 && since_last_s >= interval_s_) return true;
  // Young/Daly needs the cost of a save: measure it on the first step.
  return options_.every <= 0 && options_.every_seconds <= 0 && options_.mtbf_hours > 0 && !measured_ &&
         step == first_step;
}

void CheckpointSchedule::Saved(double blocking_s) {
  if (options_.every <= 0 && options_.every_seconds <= 0 && options_.mtbf_hours > 0 && !measured_) {
    sim::FaultParams p;
    p.cards = 1;
    p.card_mtbf_h = options_.mtbf_hours;
    p.checkpoint_s = std::max(blocking_s, 1e-6);
    interval_s_ = sim::YoungDalyInterval(p);
  }
  measured_ = true;
}

// The state of one step, copied out of the live tensors.
struct AsyncCheckpointer::Snapshot {
  struct Item {
    std::string name;
    ck::StorageDtype dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  int64_t step = 0;
  nlohmann::json metadata;
  std::vector<Item> items;

  void Add(const std::string& name, const Tensor& t) {
    const Tensor c = t.Contiguous();
    Item item{name, ToStorage(c.dtype()), c.shape(), std::vector<std::byte>(c.nbytes())};
    if (c.nbytes() > 0) std::memcpy(item.bytes.data(), c.raw_data(), c.nbytes());
    items.push_back(std::move(item));
  }
};

AsyncCheckpointer::AsyncCheckpointer(std::filesystem::path root, int64_t keep)
    : root_(std::move(root)), keep_(keep) {}

AsyncCheckpointer::~AsyncCheckpointer() {
  Status st = Wait();
  if (!st.ok()) TLOG(WARN, "checkpoint save failed: {}", st.ToString());
}

Status AsyncCheckpointer::Wait() { return writer_.Wait(); }

Status AsyncCheckpointer::Save(int64_t step, const models::Gpt& model, const optim::AdamW& optimizer,
                               const nlohmann::json& config) {
  return Save(step, static_cast<const graph::Module&>(model), optimizer, config,
              {{"forward_count", model.forward_count()}});
}

Status AsyncCheckpointer::Save(int64_t step, const graph::Module& model, const optim::AdamW& optimizer,
                               const nlohmann::json& config, const nlohmann::json& extra) {
  TESSERA_RETURN_IF_ERROR(Wait());
  const auto t0 = Clock::now();
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->step = step;
  snapshot->metadata = {{"kind", kKind}, {"step", step}, {"config", config}};
  for (const auto& [key, value] : extra.items()) snapshot->metadata[key] = value;
  for (const auto& [name, t] : model.StateDict()) snapshot->Add(kModelPrefix + name, t);
  for (const auto& [name, t] : model.NamedBuffers()) snapshot->Add(kBufferPrefix + name, t);
  for (const auto& [name, t] : optimizer.StateDict()) snapshot->Add(kOptimPrefix + name, t);
  last_snapshot_s_ = Seconds(t0, Clock::now());
  snapshot_s_ += last_snapshot_s_;
  ++saves_;
  writer_.Start([this, snapshot]() -> Status {
    const std::filesystem::path dir = root_ / ck::StepDirName(snapshot->step);
    Status st = [&]() -> Status {
      ck::CheckpointWriter writer(1, snapshot->step);
      TESSERA_RETURN_IF_ERROR(writer.SetMetadata(snapshot->metadata));
      for (const Snapshot::Item& item : snapshot->items) {
        TESSERA_RETURN_IF_ERROR(writer.AddTensor(item.name, item.dtype, item.shape, item.bytes.data(), 0));
      }
      TESSERA_RETURN_IF_ERROR(writer.Commit(dir));
      return ck::KeepLastCheckpoints(root_, static_cast<int>(keep_)).status();
    }();
    return st.ok() ? st : st.WithContext(fmt::format("saving checkpoint '{}'", dir.string()));
  });
  return Status::Ok();
}

StatusOr<std::vector<std::filesystem::path>> ResumeCandidates(const std::string& spec,
                                                              const std::filesystem::path& root) {
  if (spec != "latest") return std::vector<std::filesystem::path>{spec};
  TESSERA_ASSIGN_OR_RETURN(std::vector<ck::CheckpointEntry> all, ck::ListCheckpoints(root));
  if (all.empty()) return NotFound("--resume latest: no checkpoint under '{}'", root.string());
  std::vector<std::filesystem::path> out;
  for (auto it = all.rbegin(); it != all.rend(); ++it) out.push_back(it->dir);
  return out;
}

int64_t FaultInjectionRank() {
  static base::Knob<int64_t> rank("TESSERA_INJECT_RANK", 0, "testing: the rank the injected faults hit");
  return rank.Get();
}

nlohmann::json RecoveryEvent(const std::string& source, const std::string& from, int64_t restored_step,
                             int restart_count, int64_t last_step_before) {
  nlohmann::json e = {{"event", restart_count > 0 ? "recovered" : "resumed"},
                      {"source", source},
                      {"from", from},
                      {"restored_step", restored_step},
                      {"attempt", restart_count}};
  if (last_step_before >= 0) {
    e["last_step_before"] = last_step_before;
    e["steps_lost"] = std::max<int64_t>(0, last_step_before - restored_step);
  }
  if (const char* failure = std::getenv("TESSERA_LAST_FAILURE"); failure != nullptr) {
    const nlohmann::json f = nlohmann::json::parse(failure, nullptr, false);
    if (f.is_object()) {
      e["failure"] = f;
      if (f.contains("detected_at") && f["detected_at"].is_number()) {
        const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        e["recovery_s"] = now - f["detected_at"].get<double>();
      }
    }
  }
  return e;
}

int RestartCount() {
  const char* restarts = std::getenv("TESSERA_RESTART_COUNT");
  return restarts == nullptr ? 0 : std::max(0, std::atoi(restarts));
}

StatusOr<std::string> EffectiveResume(const CheckpointOptions& options, const std::filesystem::path& root,
                                      int restart_count) {
  if (!options.resume.empty()) return options.resume;
  const bool saves = options.every > 0 || options.every_seconds > 0 || options.mtbf_hours > 0;
  if ((restart_count >= 0 ? restart_count : RestartCount()) == 0 || !saves) return std::string();
  TESSERA_ASSIGN_OR_RETURN(std::vector<ck::CheckpointEntry> all, ck::ListCheckpoints(root));
  return all.empty() ? std::string() : std::string("latest");
}

namespace {

// Checks the checkpoint's buffers against the model's (all of them, both
// ways) before anything is loaded; returns the copies to make.
StatusOr<std::vector<std::pair<Tensor, Tensor>>> MatchBuffers(const graph::Module& model,
                                                              const std::map<std::string, Tensor>& saved) {
  std::vector<std::string> problems;
  std::vector<std::pair<Tensor, Tensor>> copies;
  std::set<std::string> known;
  for (const auto& [name, b] : model.NamedBuffers()) {
    known.insert(name);
    auto it = saved.find(name);
    if (it == saved.end()) {
      problems.push_back(fmt::format("missing buffer '{}' (expected shape {})", name, ShapeString(b.shape())));
    } else if (it->second.shape() != b.shape() || it->second.dtype() != b.dtype()) {
      problems.push_back(fmt::format("mismatch for buffer '{}': checkpoint has {} {}, model expects {} {}", name,
                                     ShapeString(it->second.shape()), DTypeName(it->second.dtype()),
                                     ShapeString(b.shape()), DTypeName(b.dtype())));
    } else {
      copies.emplace_back(b, it->second);
    }
  }
  for (const auto& [name, t] : saved) {
    if (!known.count(name)) problems.push_back(fmt::format("unexpected buffer '{}'", name));
  }
  if (!problems.empty()) return InvalidArgument("{}", fmt::join(problems, "; "));
  return copies;
}

}  // namespace

StatusOr<ResumedState> LoadTrainerCheckpoint(const std::filesystem::path& dir, models::Gpt& model,
                                             optim::AdamW& optimizer) {
  // The dropout counter is checked before anything is loaded.
  StatusOr<ck::CheckpointReader> opened = ck::CheckpointReader::Open(dir);
  if (opened.ok()) {
    const nlohmann::json& meta = opened->metadata();
    if (meta.is_object() && meta.value("kind", "") == kKind &&
        !(meta.contains("forward_count") && meta["forward_count"].is_number_unsigned())) {
      return InvalidArgument("'{}' is not a GPT trainer checkpoint (no unsigned forward_count in its metadata)",
                             dir.string());
    }
  }
  TESSERA_ASSIGN_OR_RETURN(ResumedState r,
                           LoadTrainerCheckpoint(dir, static_cast<graph::Module&>(model), optimizer));
  model.set_forward_count(r.forward_count);
  return r;
}

StatusOr<ResumedRun> ResumeFromCheckpoints(
    const std::string& spec, const std::filesystem::path& root, int64_t total_steps,
    const std::function<StatusOr<ResumedState>(const std::filesystem::path&)>& load) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::filesystem::path> candidates, ResumeCandidates(spec, root));
  std::optional<ResumedRun> resumed;
  std::string reasons;
  std::string skipped;
  StatusCode first_code = StatusCode::kOk;
  for (const std::filesystem::path& candidate : candidates) {
    StatusOr<ResumedState> r = load(candidate);
    if (r.ok()) {
      resumed = ResumedRun{*r, candidate, skipped};
      break;
    }
    if (spec != "latest") return r.status();
    TLOG(WARN, "checkpoint '{}' cannot be loaded: {}", candidate.string(), r.status().ToString());
    if (first_code == StatusCode::kOk) first_code = r.status().code();
    skipped += fmt::format("{}{}", skipped.empty() ? "" : ", ", candidate.filename().string());
    reasons += fmt::format("\n  {}: {}", candidate.filename().string(), r.status().ToString());
  }
  if (!resumed) {
    return Status(first_code, fmt::format("--resume latest: no usable checkpoint under '{}':{}", root.string(),
                                          reasons));
  }
  if (resumed->state.step >= total_steps) {
    return InvalidArgument("checkpoint '{}' is at step {}, not before train.steps = {}: nothing left to train",
                           resumed->dir.string(), resumed->state.step, total_steps);
  }
  return *resumed;
}

StatusOr<ResumedState> LoadTrainerCheckpoint(const std::filesystem::path& dir, graph::Module& model,
                                             optim::AdamW& optimizer) {
  auto where = [&] { return fmt::format("resuming from checkpoint '{}'", dir.string()); };
  StatusOr<ck::CheckpointReader> opened = ck::CheckpointReader::Open(dir);
  if (!opened.ok()) return opened.status().WithContext(where());
  const ck::CheckpointReader& reader = *opened;

  const nlohmann::json& meta = reader.metadata();
  if (!meta.is_object() || meta.value("kind", "") != kKind || !meta.contains("step") ||
      !meta["step"].is_number_integer()) {
    return InvalidArgument("'{}' is not a single-process trainer checkpoint (metadata kind '{}' and step expected)",
                           dir.string(), meta.is_object() ? meta.value("kind", "") : "");
  }
  // Every tensor straight into its new tensor's memory, all at once
  // (ReadMany: shards loaded, checked and copied out on one thread per core).
  std::map<std::string, Tensor> model_state, buffer_state, optim_state;
  std::vector<ck::CheckpointReader::ReadRequest> reads;
  for (const auto& [name, global] : reader.index().tensors) {
    std::map<std::string, Tensor>* into = nullptr;
    std::string key;
    for (auto [prefix, map] : {std::pair<std::string_view, std::map<std::string, Tensor>*>{kModelPrefix, &model_state},
                               {kBufferPrefix, &buffer_state},
                               {kOptimPrefix, &optim_state}}) {
      if (name.rfind(prefix, 0) == 0) {
        into = map;
        key = name.substr(prefix.size());
      }
    }
    if (into == nullptr) return InvalidArgument("'{}': unexpected tensor '{}'", dir.string(), name);
    StatusOr<DType> dtype = FromStorage(global.dtype, name);
    if (!dtype.ok()) return dtype.status().WithContext(where());
    Tensor t = Tensor::Empty(global.shape, *dtype);
    reads.push_back({name, std::vector<int64_t>(global.shape.size(), 0), global.shape,
                     std::span<std::byte>(static_cast<std::byte*>(t.raw_data()), t.nbytes())});
    (*into)[key] = t;
  }
  Status read = reader.ReadMany(reads);
  if (!read.ok()) return read.WithContext(where());
  StatusOr<std::vector<std::pair<Tensor, Tensor>>> buffers = MatchBuffers(model, buffer_state);
  if (!buffers.ok()) return buffers.status().WithContext("loading the model's buffers").WithContext(where());
  Status st = model.LoadStateDict(model_state);
  if (!st.ok()) return st.WithContext("loading the model's parameters").WithContext(where());
  st = optimizer.LoadStateDict(optim_state);
  if (!st.ok()) return st.WithContext("loading the optimizer's state").WithContext(where());
  for (auto& [dst, src] : *buffers) dst.CopyFrom(src);
  ResumedState r;
  r.step = meta["step"].get<int64_t>();
  if (meta.contains("forward_count") && meta["forward_count"].is_number_unsigned()) {
    r.forward_count = meta["forward_count"].get<uint64_t>();
  }
  return r;
}

}  // namespace tessera::train
