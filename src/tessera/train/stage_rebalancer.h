// StageRebalancer: decides, from the pipeline stages' compute times measured
// inside training steps, when and where layers should move between stages
// — the decision half of run-time pipeline rebalancing (ParallelTrainer
// does the move; docs/pipeline.md).
//
// It keeps one cost estimate per layer (initially the isolated per-layer
// measurements of MeasureLayerCosts). After each measurement window it is
// given every virtual stage's measured seconds per step; if their spread
// (max − min) / max is under the target it is done (converged). Otherwise
// each stage's layer estimates are scaled by measured / predicted for that
// stage (which folds in what isolated timings miss: embedding, head and
// loss, communication inside the layers, cache effects) and PartitionLayers
// re-splits them. It moves only to a partition it has not measured yet whose
// predicted slowest stage beats the current measured one by more than
// kMinGain; it stops — going back to the best partition measured when
// that is not the current one — when none does, when a move made the
// slowest stage slower, or after `max_moves` moves. So it never oscillates
// and moves at most max_moves + 1 times. Every rank feeds it the same
// gathered figures, so every rank takes the same decisions.
// Thread-safety: a plain value; one thread uses it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::train {

class StageRebalancer {
 public:
  static constexpr double kMinGain = 0.01;  // predicted relative improvement of the slowest stage to move
  static constexpr int kDefaultMaxMoves = 3;  // ParallelTrainer's bound (plus one move back to the best)

  // `layer_costs`: one estimate per layer; `starts`: first layer of each
  // virtual stage (starts[0] == 0, no end entry).
  StageRebalancer(std::vector<double> layer_costs, std::vector<int> starts, double target_spread, int max_moves);

  struct Decision {
    bool move = false;
    std::vector<int> starts;  // the partition to move to (when move)
    std::string why;          // for the log line
  };
  // The measured seconds per step of each virtual stage over a window that
  // ended at `step`, under the current partition. After a move, the caller
  // calls Moved() once the layers are in place.
  Decision Observe(int64_t step, const std::vector<double>& stage_s);
  void Moved(int64_t step, const std::vector<int>& starts);
  // The proposed move could not be made: no more moves or observations.
  void Abandon(std::string why);

  // No further moves will be proposed.
  bool done() const { return done_; }
  // done() and the final partition has been measured: nothing left to observe.
  bool finished() const { return done_ && final_measured_; }
  const std::vector<int>& starts() const { return starts_; }
  int moves() const { return static_cast<int>(move_steps_.size()); }
  // initial/final partition and measured stage seconds, spreads, moves and
  // the steps they happened at, the outcome and every window's figures.
  nlohmann::json ToJson() const;

 private:
  struct Window {
    int64_t step;
    std::vector<int> starts;
    std::vector<double> stage_s;
    double spread;
  };
  Decision Stop(std::string outcome);  // done; back to the best partition if needed

  std::vector<double> costs_;
  std::vector<int> starts_;
  double target_;
  int max_moves_;
  std::vector<int> initial_starts_;
  std::vector<Window> windows_;
  std::vector<int64_t> move_steps_;
  int best_ = -1;  // index into windows_ of the lowest measured slowest stage
  bool done_ = false, final_measured_ = false;
  std::string outcome_ = "not measured";
};

}  // namespace tessera::train
