#include "tessera/train/layer_costs.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/models/gpt.h"

namespace tessera::train {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

StatusOr<std::vector<double>> MeasureLayerCosts(const TrainConfig& config, const data::Dataset& dataset) {
  TESSERA_ASSIGN_OR_RETURN(auto gpt, models::Gpt::Create(config.model));
  data::Batch batch = dataset.TrainBatch(0, config.train.micro_batch);
  // The parts run in interleaved rounds and each keeps its best time: a
  // disturbance (the other ranks starting up on the same cores) then
  // touches every part alike instead of one part's three runs.
  std::vector<std::function<void()>> parts;
  Tensor x;
  {
    graph::NoGradGuard no_grad;
    x = graph::Detach(gpt->Embed(batch.inputs, 0));
  }
  parts.push_back([&] {
    graph::Tape tape;
    graph::TapeScope scope(tape);
    Tensor e = gpt->Embed(batch.inputs, 0);
    tape.Backward({e}, {Tensor::Full(e.shape(), 1e-3, e.dtype())});
  });
  const int n = config.model.n_layers;
  for (int i = 0; i < n; ++i) {
    parts.push_back([&, i] {
      Tensor in = graph::Detach(x);
      in.set_requires_grad(true);
      graph::Tape tape;
      graph::TapeScope scope(tape);
      Tensor aux;
      Tensor y = gpt->block(i).Forward(in, true, 0, &aux);
      tape.Backward({y}, {Tensor::Full(y.shape(), 1e-3, y.dtype())});
    });
  }
  parts.push_back([&] {
    Tensor in = graph::Detach(x);
    in.set_requires_grad(true);
    graph::Tape tape;
    graph::TapeScope scope(tape);
    Tensor loss = graph::CrossEntropy(gpt->Head(in), batch.targets);
    tape.Backward({loss}, {Tensor()});
  });
  std::vector<double> best(parts.size(), 1e300);
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t p = 0; p < parts.size(); ++p) {
      const auto t0 = Clock::now();
      parts[p]();
      best[p] = std::min(best[p], Seconds(t0, Clock::now()));
    }
  }
  const double embed = best.front(), head = best.back();
  std::vector<double> costs(best.begin() + 1, best.end() - 1);
  costs.front() += embed;
  costs.back() += head;
  return costs;
}


}  // namespace tessera::train
