#include "tessera/train/checkpointing.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <vector>

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
  TESSERA_RETURN_IF_ERROR(Wait());
  const auto t0 = Clock::now();
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->step = step;
  snapshot->metadata = {{"kind", kKind},
                        {"step", step},
                        {"forward_count", model.forward_count()},
                        {"config", config}};
  for (const auto& [name, t] : model.StateDict()) snapshot->Add(kModelPrefix + name, t);
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

StatusOr<ResumedState> LoadTrainerCheckpoint(const std::filesystem::path& dir, models::Gpt& model,
                                             optim::AdamW& optimizer) {
  auto where = [&] { return fmt::format("resuming from checkpoint '{}'", dir.string()); };
  StatusOr<ck::CheckpointReader> opened = ck::CheckpointReader::Open(dir);
  if (!opened.ok()) return opened.status().WithContext(where());
  const ck::CheckpointReader& reader = *opened;

  const nlohmann::json& meta = reader.metadata();
  if (!meta.is_object() || meta.value("kind", "") != kKind || !meta.contains("step") ||
      !meta["step"].is_number_integer() || !meta.contains("forward_count") ||
      !meta["forward_count"].is_number_unsigned()) {
    return InvalidArgument("'{}' is not a single-process trainer checkpoint (metadata kind '{}', step, "
                           "forward_count expected)",
                           dir.string(), meta.is_object() ? meta.value("kind", "") : "");
  }
  // Every tensor straight into its new tensor's memory, all at once
  // (ReadMany: shards loaded, checked and copied out on one thread per core).
  std::map<std::string, Tensor> model_state, optim_state;
  std::vector<ck::CheckpointReader::ReadRequest> reads;
  for (const auto& [name, global] : reader.index().tensors) {
    const bool is_model = name.rfind(kModelPrefix, 0) == 0;
    const bool is_optim = name.rfind(kOptimPrefix, 0) == 0;
    if (!is_model && !is_optim) return InvalidArgument("'{}': unexpected tensor '{}'", dir.string(), name);
    StatusOr<DType> dtype = FromStorage(global.dtype, name);
    if (!dtype.ok()) return dtype.status().WithContext(where());
    Tensor t = Tensor::Empty(global.shape, *dtype);
    reads.push_back({name, std::vector<int64_t>(global.shape.size(), 0), global.shape,
                     std::span<std::byte>(static_cast<std::byte*>(t.raw_data()), t.nbytes())});
    (is_model ? model_state : optim_state)[name.substr(is_model ? sizeof(kModelPrefix) - 1 : sizeof(kOptimPrefix) - 1)] =
        t;
  }
  Status read = reader.ReadMany(reads);
  if (!read.ok()) return read.WithContext(where());
  Status st = model.LoadStateDict(model_state);
  if (!st.ok()) return st.WithContext("loading the model's parameters").WithContext(where());
  st = optimizer.LoadStateDict(optim_state);
  if (!st.ok()) return st.WithContext("loading the optimizer's state").WithContext(where());
  ResumedState r;
  r.step = meta["step"].get<int64_t>();
  r.forward_count = meta["forward_count"].get<uint64_t>();
  model.set_forward_count(r.forward_count);
  return r;
}

}  // namespace tessera::train
