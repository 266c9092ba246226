// ParallelTrainer: building this rank's stage, and moving layers between
// pipeline stages at run time (StageRebalancer decides; docs/pipeline.md).
#include <algorithm>
#include <filesystem>
#include <system_error>

#include <fmt/ranges.h>

#include "tessera/base/check.h"
#include "tessera/base/logging.h"
#include "tessera/parallel/pipeline/partition.h"
#include "tessera/parallel/pipeline/schedule.h"
#include "tessera/train/parallel_trainer.h"

namespace tessera::train {

Status ParallelTrainer::BuildStage(const std::vector<int>& first_layer) {
  const parallel::ParallelConfig& pc = config_.parallel;
  auto stage = parallel::GptStage::Create(config_.model, pc, *mesh_, first_layer);
  if (!stage.ok()) return stage.status().WithContext("building this rank's part of the model");
  stage_ = std::move(stage).value();

  // Memory budget: offload the optimizer state when the training state
  // would not fit the device tier; fail if it still does not fit.
  const int64_t n = stage_->local_parameters();
  const int dp = pc.dp;
  const int64_t params = 4 * (pc.zero == 3 ? n / dp : n);
  const int64_t grads = 4 * (pc.zero >= 2 ? n / dp : n);
  const int64_t state = 8 * (pc.zero >= 1 ? n / dp : n);
  bool offload = pc.offload_optimizer;
  if (pc.device_memory_limit > 0 && !offload && params + grads + state > pc.device_memory_limit) {
    offload = true;
    TLOG(INFO, "rank {}: training state {} B exceeds train.device_memory_limit {} B: optimizer state goes to the "
         "host tier", world_.rank(), params + grads + state, pc.device_memory_limit);
  }
  if (pc.device_memory_limit > 0 && params + grads > pc.device_memory_limit) {
    return ResourceExhausted(
        "rank {}: parameters ({} B) and gradients ({} B) alone exceed train.device_memory_limit = {} B; raise it, "
        "shard more (parallel.zero = 3, larger tp/pp) or offload",
        world_.rank(), params, grads, pc.device_memory_limit);
  }
  parallel::ZeroOptions zo;
  zo.stage = pc.zero;
  zo.adam.beta1 = config_.train.beta1;
  zo.adam.beta2 = config_.train.beta2;
  zo.adam.eps = config_.train.eps;
  zo.offload_optimizer = offload;
  TESSERA_ASSIGN_OR_RETURN(zo.grad_compression, parallel::ParseGradCompressionPolicy(pc.grad_compression));
  if (zero_) {
    // A rebalance replaces the optimizer: keep its byte counts (error
    // feedback residuals restart from zero, one step's compression error).
    const parallel::ZeroCommBytes b = zero_->GradCommBytes();
    grad_bytes_carried_.sent += b.sent;
    grad_bytes_carried_.fp32_equivalent += b.fp32_equivalent;
  }
  auto zero = parallel::ZeroOptimizer::Create(stage_->TakeBucketSpecs(config_.train.weight_decay), zo);
  if (!zero.ok()) return zero.status().WithContext("building the optimizer");
  zero_ = std::move(zero).value();
  if (!zo.grad_compression.rules.empty()) {
    // A per-bucket rule that names no bucket on any rank is a typo, not a
    // choice: say so instead of silently compressing with the default.
    std::vector<int64_t> matched(zo.grad_compression.rules.size(), 0);
    std::string names;
    for (int b = 0; b < zero_->num_buckets(); ++b) {
      names += (names.empty() ? "" : ", ") + zero_->bucket_name(b);
      for (size_t r = 0; r < matched.size(); ++r) {
        if (zo.grad_compression.RuleMatches(r, zero_->bucket_name(b))) matched[r] = 1;
      }
    }
    TESSERA_RETURN_IF_ERROR(world_.AllReduce(matched.data(), matched.data(), matched.size(), comm::DataType::kInt64,
                                             comm::ReduceOp::kMax));
    for (size_t r = 0; r < matched.size(); ++r) {
      if (!matched[r]) {
        return InvalidArgument(
            "parallel.grad_compression: the rule for buckets '{}' matches no gradient bucket on any rank (this "
            "rank's: {})",
            zo.grad_compression.rules[r].first, names);
      }
    }
  }
  step_ = std::make_unique<parallel::TrainStep>(*stage_, *zero_, *mesh_, pc);
  return Status::Ok();
}

Status ParallelTrainer::MaybeRebalance(int64_t step, const parallel::StepResult& res,
                                       const std::function<void(const std::string&)>& message) {
  if (!rebalancer_ || rebalancer_->finished()) return Status::Ok();
  // The first step after a start or a move warms caches and allocators: not measured.
  if (step <= std::max(first_step_, measure_after_)) return Status::Ok();
  const parallel::ParallelConfig& pc = config_.parallel;
  TESSERA_CHECK(static_cast<int>(res.chunk_compute_s.size()) == pc.virtual_stages,
                "rank {}: {} chunk times for {} virtual stages", world_.rank(), res.chunk_compute_s.size(),
                pc.virtual_stages);
  chunk_times_.push_back(res.chunk_compute_s);
  if (static_cast<int>(chunk_times_.size()) < pc.rebalance_every) return Status::Ok();
  // Each virtual stage's seconds per step: its fastest step of the window
  // (other processes, descheduling, page faults only ever add time), the
  // slowest of its replicas (tp, dp ranks), gathered everywhere.
  std::vector<double> mine = {static_cast<double>(mesh_->coord().pp)};
  for (int c = 0; c < pc.virtual_stages; ++c) {
    double fastest = chunk_times_.front()[c];
    for (const auto& t : chunk_times_) fastest = std::min(fastest, t[c]);
    mine.push_back(fastest);
  }
  chunk_times_.clear();
  const size_t k = mine.size();
  std::vector<double> all(k * world_.size());
  TESSERA_RETURN_IF_ERROR(world_.AllGather(mine.data(), all.data(), k, comm::DataType::kFloat64)
                              .WithContext("gathering pipeline stage times"));
  std::vector<double> stage_s(pc.pp * pc.virtual_stages, 0.0);
  for (int r = 0; r < world_.size(); ++r) {
    const int pp_rank = static_cast<int>(all[r * k]);
    for (int c = 0; c < pc.virtual_stages; ++c) {
      double& s = stage_s[parallel::VirtualStage(pp_rank, c, pc.pp)];
      s = std::max(s, all[r * k + 1 + c]);
    }
  }
  const StageRebalancer::Decision d = rebalancer_->Observe(step, stage_s);
  std::vector<double> ms;
  for (double s : stage_s) ms.push_back(1e3 * s);
  message(fmt::format("step {}: pipeline stages compute {:.3g} ms per step (first layers [{}]), spread {:.1f}%", step,
                      fmt::join(ms, ", "), fmt::join(rebalancer_->starts(), ", "),
                      100 * parallel::UtilizationSpread(stage_s)));
  if (!d.move) {
    if (rebalancer_->done() && !d.why.empty()) message(fmt::format("pipeline rebalancing stops: {}", d.why));
    return Status::Ok();
  }
  const std::vector<int> from = rebalancer_->starts();
  TESSERA_ASSIGN_OR_RETURN(const bool moved, MoveLayers(step, d.starts));
  if (!moved) {
    rebalancer_->Abandon("the state could not be saved for the move (see the warning)");
    message(fmt::format("step {}: pipeline rebalancing abandoned: the state could not be saved", step));
    return Status::Ok();
  }
  rebalancer_->Moved(step, d.starts);
  measure_after_ = step + 1;
  message(fmt::format("step {}: pipeline rebalanced, first layers [{}] -> [{}] ({})", step, fmt::join(from, ", "),
                      fmt::join(d.starts, ", "), d.why));
  Event({{"event", "pipeline_rebalanced"}, {"step", step}, {"from", from}, {"to", d.starts}, {"why", d.why}});
  return Status::Ok();
}

StatusOr<bool> ParallelTrainer::MoveLayers(int64_t step, const std::vector<int>& first_layer) {
  // Nothing may still read the old optimizer: finish the saves in flight.
  if (checkpointer_) TESSERA_RETURN_IF_ERROR(checkpointer_->Wait());
  if (memory_) {
    Status ms = memory_->ForgetLayout();
    if (!ms.ok()) TLOG(WARN, "rank {}: in-memory snapshot failed: {}", world_.rank(), ms.ToString());
  }
  // The state goes through a sharded checkpoint (any layout loads any
  // other's), in a folder of the checkpoint root (visible to every rank)
  // that no "latest" lookup lists.
  const std::filesystem::path dir = ckpt_root_ / fmt::format(".rebalance-step-{}", step);
  std::error_code ec;
  if (world_.rank() == 0) std::filesystem::remove_all(dir, ec);  // a crashed run's leftovers
  TESSERA_RETURN_IF_ERROR(world_.Barrier());
  const auto where = [&] { return fmt::format("rank {}: moving pipeline layers at step {}", world_.rank(), step); };
  Status st = SaveShardedCheckpoint(world_, dir, step, *zero_, CheckpointMetadata(step));
  if (!st.ok()) {  // every rank has the same verdict; nothing has changed yet: train on as before
    TLOG(WARN, "{}: cannot save the state to move ({}); the partition stays", where(), st.ToString());
    if (world_.rank() == 0) std::filesystem::remove_all(dir, ec);
    return false;
  }
  step_.reset();  // refers to the stage and the optimizer
  zero_.reset();
  stage_.reset();
  std::vector<int> bounds = first_layer;
  bounds.push_back(config_.model.n_layers);
  st = BuildStage(bounds);
  if (!st.ok()) return st.WithContext(where());
  stage_->model().SetTraining(true);
  StatusOr<ShardedResume> loaded = LoadShardedCheckpoint(world_, dir.string(), ckpt_root_, *zero_);
  // LoadShardedCheckpoint agrees over the world: every rank is done reading.
  if (world_.rank() == 0) {
    std::filesystem::remove_all(dir, ec);
    std::filesystem::remove(ckpt_root_, ec);  // only if empty (no checkpoints configured)
  }
  if (!loaded.ok()) return loaded.status().WithContext(where());
  return true;
}

nlohmann::json ParallelTrainer::RebalanceJson() const {
  const parallel::ParallelConfig& pc = config_.parallel;
  nlohmann::json j = rebalancer_ ? rebalancer_->ToJson() : nlohmann::json::object();
  j["enabled"] = rebalancer_ != nullptr;
  j["every"] = pc.rebalance_every;
  if (!rebalancer_) {
    std::vector<int> starts(stage_->first_layer().begin(), stage_->first_layer().end() - 1);
    j["initial_first_layer"] = starts;
    j["final_first_layer"] = starts;
    j["rebalances"] = 0;
    j["rebalance_steps"] = nlohmann::json::array();
    j["outcome"] = pc.pp * pc.virtual_stages > 1 ? "off (parallel.rebalance = false)" : "off (one stage)";
  }
  return j;
}

}  // namespace tessera::train
