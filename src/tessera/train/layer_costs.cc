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
  auto timed = [](const std::function<void()>& fn) {
    double best = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = Clock::now();
      fn();
      best = std::min(best, Seconds(t0, Clock::now()));
    }
    return best;
  };
  Tensor x;
  const double embed = timed([&] {
    graph::Tape tape;
    graph::TapeScope scope(tape);
    x = gpt->Embed(batch.inputs, 0);
    tape.Backward({x}, {Tensor::Full(x.shape(), 1e-3, x.dtype())});
  });
  x = graph::Detach(x);
  const int n = config.model.n_layers;
  std::vector<double> costs(n);
  for (int i = 0; i < n; ++i) {
    costs[i] = timed([&] {
      Tensor in = graph::Detach(x);
      in.set_requires_grad(true);
      graph::Tape tape;
      graph::TapeScope scope(tape);
      Tensor aux;
      Tensor y = gpt->block(i).Forward(in, true, 0, &aux);
      tape.Backward({y}, {Tensor::Full(y.shape(), 1e-3, y.dtype())});
    });
  }
  const double head = timed([&] {
    Tensor in = graph::Detach(x);
    in.set_requires_grad(true);
    graph::Tape tape;
    graph::TapeScope scope(tape);
    Tensor loss = graph::CrossEntropy(gpt->Head(in), batch.targets);
    tape.Backward({loss}, {Tensor()});
  });
  costs.front() += embed;
  costs.back() += head;
  return costs;
}


}  // namespace tessera::train
