// ParallelTrainer's fault tolerance: checkpoints (resume, periodic sharded
// saves, explicit saves), gradient verification and rollback.
#include <unistd.h>

#include <csignal>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "tessera/base/checksum.h"
#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/comm/api/gather_strings.h"
#include "tessera/comm/heartbeat.h"
#include "tessera/parallel/checkpoint/checkpoint_root.h"
#include "tessera/train/run_record.h"
#include "tessera/train/checkpointing.h"
#include "tessera/train/parallel_trainer.h"

namespace tessera::train {
namespace {

base::Knob<int64_t> kInjectNanStep("TESSERA_INJECT_GRAD_NAN_STEP", 0,
                                   "testing: one rank's reduced gradient gets a NaN at this step (0 = never)");
base::Knob<int64_t> kInjectCorruptStep("TESSERA_INJECT_GRAD_CORRUPT_STEP", 0,
                                       "testing: one rank's reduced gradient gets a flipped bit at this step");
base::Knob<int64_t> kInjectKillStep("TESSERA_INJECT_KILL_STEP", 0,
                                    "testing: that rank SIGKILLs itself after this step, on the first attempt only");
base::Knob<int64_t> kInjectStopStep("TESSERA_INJECT_STOP_STEP", 0,
                                    "testing: that rank SIGSTOPs itself (hangs) after this step, first attempt only");

}  // namespace

void ParallelTrainer::InjectGradientFaults(int64_t step) {
  const int64_t rank = options_.inject_rank >= 0 ? options_.inject_rank : FaultInjectionRank();
  if (world_.rank() != rank || zero_->num_buckets() == 0) return;
  const int64_t nan_step = options_.inject_nan_step > 0 ? options_.inject_nan_step : kInjectNanStep.Get();
  const int64_t corrupt_step =
      options_.inject_corrupt_step > 0 ? options_.inject_corrupt_step : kInjectCorruptStep.Get();
  if (step == nan_step && !injected_nan_) {
    injected_nan_ = true;
    TLOG(WARN, "rank {}: injecting a NaN into the reduced gradient at step {} (fault injection)", rank, step);
    zero_->CorruptGradientForTesting(0, /*nan=*/true);
  }
  if (step == corrupt_step && !injected_corruption_) {
    injected_corruption_ = true;
    TLOG(WARN, "rank {}: flipping a bit of the reduced gradient at step {} (fault injection)", rank, step);
    zero_->CorruptGradientForTesting(0, /*nan=*/false);
  }
}

void ParallelTrainer::InjectProcessFaults(int64_t step) const {
  if (restart_count() > 0) return;
  for (auto [knob, sig] : {std::pair{kInjectKillStep.Get(), SIGKILL}, std::pair{kInjectStopStep.Get(), SIGSTOP}}) {
    if (knob != step) continue;
    // The failure strikes during the next step: every rank's in-memory
    // snapshot of `step` (asynchronous) is complete by then, as it is for
    // any step that takes longer than a snapshot write. (Every rank reads
    // the knob, so all of them take part in this barrier.)
    if (memory_) (void)memory_->Wait();
    if (!world_.Barrier().ok() || world_.rank() != FaultInjectionRank()) return;
    const char* name = sig == SIGKILL ? "SIGKILL" : "SIGSTOP";
    TLOG(WARN, "rank {}: raising {} after step {} (fault injection)", world_.rank(), name, step);
    if (options_.base.write_records) {  // when the failure struck, for recovery-time figures
      (void)AppendEvent(config_.train.out_dir + "/" + config_.name,
                        {{"event", "fault_injected"}, {"kind", name}, {"rank", world_.rank()}, {"after_step", step}});
    }
    std::raise(sig);
  }
}

StatusOr<std::string> ParallelTrainer::ReplicaMismatch() {
  // Reduced gradients have replicas at ZeRO 0-1 with dp > 1 only (the same
  // on every rank, so every rank takes the same path).
  if (config_.parallel.zero >= 2 || config_.parallel.dp == 1) return std::string();
  std::string mine;
  TESSERA_RETURN_IF_ERROR(zero_->CompareReplicaGradients(&mine));
  int64_t bad = mine.empty() ? 0 : 1;
  TESSERA_RETURN_IF_ERROR(world_.AllReduce(&bad, &bad, 1, comm::DataType::kInt64, comm::ReduceOp::kSum));
  if (bad == 0) return std::string();
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> all, comm::AllGatherStrings(world_, mine));
  std::string out;
  for (int r = 0; r < world_.size(); ++r) {
    if (!all[r].empty()) out += fmt::format("{}rank {} sees {}", out.empty() ? "" : "; ", r, all[r]);
  }
  return out;
}

StatusOr<int64_t> ParallelTrainer::RollBack(int64_t step, const std::string& why) {
  TESSERA_RETURN_IF_ERROR(checkpointer_->Wait());  // a save in flight may be the one to go back to
  TESSERA_ASSIGN_OR_RETURN(std::vector<parallel::checkpoint::CheckpointEntry> saved,
                           parallel::checkpoint::ListCheckpoints(ckpt_root_));
  if (saved.empty()) return int64_t{-1};
  StatusOr<ShardedResume> r = LoadShardedCheckpoint(world_, "latest", ckpt_root_, *zero_);
  if (!r.ok()) return r.status().WithContext(fmt::format("rolling back at step {}", step));
  if (config_.parallel.precision == "fp16") {
    loss_scale_ = r->metadata.value("loss_scale", loss_scale_);
    good_steps_ = r->metadata.value("good_steps", int64_t{0});
  }
  Event({{"event", "rollback"}, {"step", step}, {"to_step", r->step}, {"reason", why},
         {"checkpoint", r->dir.string()}});
  return r->step;
}

void ParallelTrainer::RecordRecovery(const RunRecord* record) const {
  if (!is_rank0_) return;
  const nlohmann::json e = RecoveryEvent(restore_source_, resumed_from_, first_step_ - 1, restart_count(),
                                         record != nullptr ? record->last_step_before_resume() : -1);
  TLOG(INFO, "{}", e.dump());
  Event(e);
  comm::ReportRestored(restore_source_, first_step_ - 1, e.value("steps_lost", int64_t{0}));  // to the agent, if any
}

void ParallelTrainer::Event(nlohmann::json event) const {
  if (!is_rank0_ || !options_.base.write_records) return;
  Status st = AppendEvent(config_.train.out_dir + "/" + config_.name, std::move(event));
  if (!st.ok()) TLOG(WARN, "{}", st.ToString());
}

Status ParallelTrainer::SetUpCheckpoints() {
  const CheckpointOptions& co = config_.checkpoint;
  ckpt_root_ = co.dir.empty() ? std::filesystem::path(config_.train.out_dir) / config_.name / "checkpoints"
                              : std::filesystem::path(co.dir);
  if (co.memory_every > 0) {
    MemoryCheckpointOptions mo;
    mo.ranks_per_node = options_.ranks_per_node;
    mo.fresh_start = restart_count() == 0 && co.resume.empty();
    if (const char* token = std::getenv("TESSERA_JOB_TOKEN"); token != nullptr && *token != '\0') {
      mo.job = base::HexDigest(base::Checksum64(std::string_view(token)));  // never the secret itself
    }
    mo.dir = co.memory_dir.empty()
                 ? std::filesystem::path("/dev/shm") / fmt::format("tessera-{}", ::getuid()) / config_.name
                 : std::filesystem::path(co.memory_dir);
    auto m = MemoryCheckpointer::Create(world_, mo);
    if (!m.ok()) return m.status();
    memory_ = std::move(m).value();
  }
  TESSERA_ASSIGN_OR_RETURN(const std::string resume, EffectiveResume(co, ckpt_root_, restart_count()));
  // After a failure the in-memory snapshot is the first choice (no disk
  // read), unless a disk checkpoint is newer.
  if (memory_ && (resume == "latest" || (co.resume.empty() && restart_count() > 0))) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<MemoryCheckpointer::Restored> m, memory_->Restore(*zero_));
    TESSERA_ASSIGN_OR_RETURN(std::optional<parallel::checkpoint::CheckpointEntry> disk,
                             parallel::checkpoint::LatestCheckpoint(ckpt_root_));
    if (m && (!disk || disk->step <= m->step)) {
      first_step_ = m->step + 1;
      resumed_from_ = fmt::format("the in-memory snapshot{}", m->replicas_used > 0 ? fmt::format(
                                      " ({} ranks from the next node's replica)", m->replicas_used) : "");
      restore_source_ = "memory";
      RestoreScalars(m->metadata);
    }
  }
  if (!resume.empty() && restore_source_.empty()) {
    StatusOr<ShardedResume> r = LoadShardedCheckpoint(world_, resume, ckpt_root_, *zero_);
    if (!r.ok()) return r.status().WithContext(fmt::format("rank {}: resuming ({})", world_.rank(), resume));
    first_step_ = r->step + 1;
    resumed_from_ = r->dir.string();
    restore_source_ = "disk";
    RestoreScalars(r->metadata);
  }
  if (first_step_ - 1 >= config_.train.steps) {
    return InvalidArgument("the state to resume is at step {}, not before train.steps = {}: nothing left to train",
                           first_step_ - 1, config_.train.steps);
  }
  if (CheckpointSchedule(co).enabled()) {
    auto c = ShardedCheckpointer::Create(world_, ckpt_root_, co.keep);
    if (!c.ok()) return c.status();
    checkpointer_ = std::move(c).value();
  }
  return Status::Ok();
}

void ParallelTrainer::RestoreScalars(const nlohmann::json& metadata) {
  if (config_.parallel.precision != "fp16" || !metadata.is_object()) return;
  loss_scale_ = metadata.value("loss_scale", loss_scale_);
  good_steps_ = metadata.value("good_steps", int64_t{0});
}

nlohmann::json ParallelTrainer::CheckpointMetadata(int64_t step) const {
  const parallel::ParallelConfig& pc = config_.parallel;
  // forward_count as the single-process Trainer counts it (one per
  // micro-batch when dropout is on), so it can resume from this too.
  const uint64_t forward_count =
      config_.model.dropout > 0 ? static_cast<uint64_t>(step * config_.accumulation_steps()) : 0;
  return {{"kind", "tessera-trainer"},
          {"forward_count", forward_count},
          {"config", config_.ToJson()},
          {"mesh",
           {{"world_size", world_.size()},
            {"dp", pc.dp},
            {"tp", pc.tp},
            {"pp", pc.pp},
            {"ep", pc.ep},
            {"zero", pc.zero},
            {"virtual_stages", pc.virtual_stages}}},
          {"loss_scale", loss_scale_},
          {"good_steps", good_steps_}};
}

Status ParallelTrainer::SaveCheckpoint(const std::filesystem::path& dir) {
  const int64_t step = completed_steps();
  return SaveShardedCheckpoint(world_, dir, step, *zero_, CheckpointMetadata(step));
}

}  // namespace tessera::train
