#include "tessera/train/stage_rebalancer.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/base/check.h"
#include "tessera/parallel/pipeline/partition.h"

namespace tessera::train {
namespace {

double Max(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

}  // namespace

StageRebalancer::StageRebalancer(std::vector<double> layer_costs, std::vector<int> starts, double target_spread,
                                 int max_moves)
    : costs_(std::move(layer_costs)), starts_(std::move(starts)), target_(target_spread), max_moves_(max_moves),
      initial_starts_(starts_) {
  TESSERA_CHECK_OK(parallel::ValidatePartition(costs_, static_cast<int>(starts_.size())));
  (void)parallel::PartCosts(costs_, starts_);  // CHECKs the partition
}

StageRebalancer::Decision StageRebalancer::Stop(std::string outcome) {
  done_ = true;
  outcome_ = std::move(outcome);
  Decision d;
  d.why = outcome_;
  if (best_ >= 0 && windows_[best_].starts != starts_) {
    d.move = true;
    d.starts = windows_[best_].starts;
    d.why += fmt::format("; back to the best partition measured (slowest stage {:.3g} ms)",
                         1e3 * Max(windows_[best_].stage_s));
    return d;
  }
  final_measured_ = true;
  return d;
}

StageRebalancer::Decision StageRebalancer::Observe(int64_t step, const std::vector<double>& stage_s) {
  TESSERA_CHECK(stage_s.size() == starts_.size(), "StageRebalancer: {} stage times for {} stages", stage_s.size(),
                starts_.size());
  if (finished()) return {};
  windows_.push_back({step, starts_, stage_s, parallel::UtilizationSpread(stage_s)});
  const int now = static_cast<int>(windows_.size()) - 1;
  if (done_) {  // the final partition, measured after going back to the best one
    final_measured_ = true;
    return {};
  }
  const double slowest = Max(stage_s);
  if (best_ < 0 || slowest < Max(windows_[best_].stage_s)) best_ = now;
  if (windows_[now].spread < target_) {
    done_ = final_measured_ = true;
    outcome_ = "converged";
    return {false, {}, outcome_};
  }
  if (best_ != now) return Stop("the last move made the slowest stage slower");
  if (moves() >= max_moves_) return Stop(fmt::format("{} moves made", moves()));
  // Scale each stage's layer estimates so the stage predicts what it measured.
  const std::vector<double> predicted = parallel::PartCosts(costs_, starts_);
  for (size_t k = 0; k < starts_.size(); ++k) {
    const int end = k + 1 < starts_.size() ? starts_[k + 1] : static_cast<int>(costs_.size());
    for (int i = starts_[k]; i < end; ++i) {
      costs_[i] = predicted[k] > 0 ? costs_[i] * stage_s[k] / predicted[k] : stage_s[k] / (end - starts_[k]);
    }
  }
  const std::vector<int> proposal = parallel::PartitionLayers(costs_, static_cast<int>(starts_.size()));
  const double expected = Max(parallel::PartCosts(costs_, proposal));
  const bool tried = std::any_of(windows_.begin(), windows_.end(), [&](const Window& w) { return w.starts == proposal; });
  if (tried || expected > slowest * (1 - kMinGain)) {
    return Stop(fmt::format("no untried partition predicted to beat the slowest stage by {:.0f}%", 100 * kMinGain));
  }
  return {true, proposal,
          fmt::format("spread {:.1f}% > {:.1f}%: first layers [{}] -> [{}], slowest stage {:.3g} -> {:.3g} ms predicted",
                      100 * windows_[now].spread, 100 * target_, fmt::join(starts_, ", "), fmt::join(proposal, ", "),
                      1e3 * slowest, 1e3 * expected)};
}

void StageRebalancer::Moved(int64_t step, const std::vector<int>& starts) {
  TESSERA_CHECK(starts.size() == starts_.size(), "StageRebalancer: a partition of {} stages for {}", starts.size(),
                starts_.size());
  starts_ = starts;
  move_steps_.push_back(step);
}

void StageRebalancer::Abandon(std::string why) {
  done_ = final_measured_ = true;
  outcome_ = std::move(why);
}

nlohmann::json StageRebalancer::ToJson() const {
  nlohmann::json windows = nlohmann::json::array();
  for (const Window& w : windows_) {
    windows.push_back({{"step", w.step}, {"first_layer", w.starts}, {"stage_s", w.stage_s}, {"spread", w.spread}});
  }
  nlohmann::json j = {{"initial_first_layer", initial_starts_},
                      {"final_first_layer", starts_},
                      {"target_spread", target_},
                      {"rebalances", moves()},
                      {"rebalance_steps", move_steps_},
                      {"outcome", outcome_},
                      {"layer_cost_estimates_s", costs_},
                      {"windows", windows},
                      {"initial_stage_s", nullptr},
                      {"initial_spread", nullptr},
                      {"final_stage_s", nullptr},
                      {"final_spread", nullptr}};
  if (!windows_.empty()) {
    j["initial_stage_s"] = windows_.front().stage_s;
    j["initial_spread"] = windows_.front().spread;
    if (windows_.back().starts == starts_) {  // the final partition was measured
      j["final_stage_s"] = windows_.back().stage_s;
      j["final_spread"] = windows_.back().spread;
    }
  }
  return j;
}

}  // namespace tessera::train
