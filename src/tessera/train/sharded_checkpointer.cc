#include "tessera/train/sharded_checkpointer.h"

#include <chrono>
#include <csignal>
#include <system_error>
#include <vector>

#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/comm/api/gather_strings.h"
#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/parallel/checkpoint/checkpoint_root.h"
#include "tessera/parallel/checkpoint/checkpoint_writer.h"
#include "tessera/parallel/sharded_state.h"
#include "tessera/train/checkpointing.h"

namespace tessera::train {
namespace {

namespace ck = parallel::checkpoint;
using Clock = std::chrono::steady_clock;

constexpr char kKind[] = "tessera-trainer";

base::Knob<int64_t> kKillInSaveStep("TESSERA_INJECT_KILL_IN_SAVE_STEP", 0,
                                     "testing: TESSERA_INJECT_RANK SIGKILLs itself while saving this step's checkpoint "
                                     "(its shard written, the index not yet), on the first attempt only");

// A crash in the middle of a save: the shard files are there, index.json is not.
void MaybeKillInSave(int64_t step, int rank) {
  if (kKillInSaveStep.Get() != step || RestartCount() > 0 || rank != FaultInjectionRank()) {
    return;
  }
  TLOG(WARN, "rank {}: SIGKILL in the middle of saving step {} (fault injection)", rank, step);
  std::raise(SIGKILL);
}

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// A Status as JSON and back (rank 0 tells every rank the outcome).
nlohmann::json StatusToJson(const Status& st) { return {{"code", static_cast<int>(st.code())}, {"message", st.message()}}; }
Status StatusFromJson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("code") || !j["code"].is_number_integer() || !j.contains("message") ||
      !j["message"].is_string()) {
    return Internal("checkpoint save: malformed outcome from rank 0: '{}'", text);
  }
  if (j["code"].get<int>() == 0) return Status::Ok();
  return Status(static_cast<StatusCode>(j["code"].get<int>()), j["message"].get<std::string>());
}

// This rank's shard, written; every rank's record (or error) gathered on
// every rank; rank 0 commits. Returns rank 0's verdict on every rank.
Status WriteAndCommit(comm::Communicator& c, const std::filesystem::path& root, const std::filesystem::path& dir,
                      int64_t step, const parallel::StateSnapshot& snap, const nlohmann::json& metadata,
                      int64_t keep) {
  StatusOr<ck::ShardRecord> mine = ck::WriteShardFile(dir, c.rank(), c.size(), step, snap.slices);
  MaybeKillInSave(step, c.rank());
  const nlohmann::json report = mine.ok() ? nlohmann::json{{"record", ck::ShardRecordToJson(*mine)}}
                                          : nlohmann::json{{"error", StatusToJson(mine.status())}};
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> reports, comm::AllGatherStrings(c, report.dump()));
  Status verdict;
  if (c.rank() == 0) {
    verdict = [&]() -> Status {
      std::vector<ck::ShardRecord> records;
      Status first_error;
      bool exists = false;
      for (int r = 0; r < c.size(); ++r) {
        const nlohmann::json j = nlohmann::json::parse(reports[r], nullptr, false);
        if (j.is_object() && j.contains("record")) {
          StatusOr<ck::ShardRecord> rec = ck::ShardRecordFromJson(j["record"], fmt::format("rank {}", r));
          if (rec.ok()) {
            records.push_back(std::move(*rec));
            continue;
          }
          if (first_error.ok()) first_error = rec.status();
          continue;
        }
        const Status st = j.is_object() && j.contains("error") ? StatusFromJson(j["error"].dump())
                                                               : Internal("malformed report from rank {}", r);
        if (st.code() == StatusCode::kAlreadyExists) exists = true;
        if (first_error.ok()) first_error = st.WithContext(fmt::format("rank {}", r));
      }
      if (exists && records.empty()) {
        TLOG(WARN, "checkpoint '{}' already exists: not saved again", dir.string());
        return Status::Ok();
      }
      if (!first_error.ok()) {
        for (const ck::ShardRecord& rec : records) {  // our files, useless without every shard
          std::error_code ec;
          std::filesystem::remove(dir / rec.file, ec);
        }
        return first_error;
      }
      TESSERA_RETURN_IF_ERROR(ck::CommitCheckpointIndex(dir, step, metadata, records));
      if (keep <= 0) return Status::Ok();
      return ck::KeepLastCheckpoints(root, static_cast<int>(keep)).status();
    }();
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> verdicts,
                           comm::AllGatherStrings(c, c.rank() == 0 ? StatusToJson(verdict).dump() : std::string()));
  return StatusFromJson(verdicts[0]);
}

}  // namespace

StatusOr<std::unique_ptr<ShardedCheckpointer>> ShardedCheckpointer::Create(comm::Communicator& world,
                                                                           std::filesystem::path root, int64_t keep) {
  std::unique_ptr<ShardedCheckpointer> c(new ShardedCheckpointer(std::move(root), keep));
  auto split = world.Split(0, world.rank());
  if (!split.ok()) return split.status().WithContext("creating the checkpoint saver's communicator");
  c->comm_ = std::move(split).value();
  return c;
}

ShardedCheckpointer::~ShardedCheckpointer() {
  Status st = Wait();
  if (!st.ok()) TLOG(WARN, "checkpoint save failed: {}", st.ToString());
}

Status ShardedCheckpointer::Wait() { return writer_.Wait(); }

Status ShardedCheckpointer::Save(int64_t step, parallel::ZeroOptimizer& zero, nlohmann::json metadata) {
  TESSERA_RETURN_IF_ERROR(Wait());
  if (!metadata.is_object()) return InvalidArgument("checkpoint metadata must be a JSON object");
  const auto t0 = Clock::now();
  auto snap = std::make_shared<parallel::StateSnapshot>(parallel::SnapshotShardedState(zero, comm_->rank() == 0));
  metadata["step"] = step;
  last_snapshot_s_ = Seconds(t0, Clock::now());
  snapshot_s_ += last_snapshot_s_;
  last_bytes_ = snap->bytes();
  ++saves_;
  writer_.Start([this, snap, step, metadata = std::move(metadata)]() -> Status {
    const std::filesystem::path dir = root_ / ck::StepDirName(step);
    Status st = WriteAndCommit(*comm_, root_, dir, step, *snap, metadata, keep_);
    return st.ok() ? st : st.WithContext(fmt::format("saving checkpoint '{}'", dir.string()));
  });
  return Status::Ok();
}

Status SaveShardedCheckpoint(comm::Communicator& comm, const std::filesystem::path& dir, int64_t step,
                             parallel::ZeroOptimizer& zero, nlohmann::json metadata) {
  if (!metadata.is_object()) return InvalidArgument("checkpoint metadata must be a JSON object");
  metadata["step"] = step;
  const parallel::StateSnapshot snap = parallel::SnapshotShardedState(zero, comm.rank() == 0);
  Status st = WriteAndCommit(comm, dir.parent_path(), dir, step, snap, metadata, /*keep=*/0);
  return st.ok() ? st : st.WithContext(fmt::format("saving checkpoint '{}'", dir.string()));
}

StatusOr<ShardedResume> LoadShardedCheckpoint(comm::Communicator& world, const std::string& spec,
                                              const std::filesystem::path& root, parallel::ZeroOptimizer& zero) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::filesystem::path> candidates, ResumeCandidates(spec, root));
  std::string skipped, reasons;
  StatusCode first_code = StatusCode::kOk;
  for (const std::filesystem::path& dir : candidates) {
    ShardedResume out;
    out.dir = dir;
    Status st = [&]() -> Status {
      TESSERA_ASSIGN_OR_RETURN(ck::CheckpointReader reader, ck::CheckpointReader::Open(dir));
      const nlohmann::json& meta = reader.metadata();
      if (!meta.is_object() || meta.value("kind", "") != kKind) {
        return InvalidArgument("'{}' is not a trainer checkpoint (metadata kind '{}')", dir.string(),
                               meta.is_object() ? meta.value("kind", "") : "");
      }
      out.metadata = meta;
      out.step = reader.step();
      return parallel::LoadShardedState(reader, zero);
    }();
    // Every rank must have loaded the same checkpoint.
    const std::string why = st.ok() ? std::string() : st.ToString();
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> all, comm::AllGatherStrings(world, why));
    std::string failures;
    for (int r = 0; r < world.size(); ++r) {
      if (!all[r].empty()) failures += fmt::format("{}rank {}: {}", failures.empty() ? "" : "; ", r, all[r]);
    }
    if (failures.empty()) {
      if (!skipped.empty() && world.rank() == 0) {
        TLOG(WARN, "resuming from '{}' (newer checkpoints unusable: {})", dir.string(), skipped);
      }
      return out;
    }
    if (world.rank() == 0) TLOG(WARN, "checkpoint '{}' cannot be loaded: {}", dir.string(), failures);
    skipped += fmt::format("{}{}", skipped.empty() ? "" : ", ", dir.filename().string());
    reasons += fmt::format("\n  {}: {}", dir.filename().string(), failures);
    if (first_code == StatusCode::kOk) first_code = st.ok() ? StatusCode::kDataLoss : st.code();
    if (spec != "latest") {
      return Status(st.ok() ? StatusCode::kDataLoss : st.code(),
                    fmt::format("cannot resume from '{}': {}", dir.string(), failures));
    }
  }
  return Status(first_code,
                fmt::format("--resume latest: no usable checkpoint under '{}':{}", root.string(), reasons));
}

}  // namespace tessera::train
