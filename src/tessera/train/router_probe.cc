#include "tessera/train/router_probe.h"

#include <algorithm>

#include <cstdio>
#include <memory>

#include "tessera/models/gpt.h"
#include "tessera/train/trainer.h"

namespace tessera::train {

StatusOr<ExpertLoad> ExpertLoadOf(const std::vector<std::vector<int64_t>>& counts, int dp, int ep, int window) {
  if (dp < 1 || ep < 1 || dp % ep != 0) return InvalidArgument("expert load: ep = {} does not divide dp = {}", ep, dp);
  if (counts.empty() || counts.size() % static_cast<size_t>(dp) != 0) {
    return InvalidArgument("expert load: {} micro-batches are not a multiple of dp = {}", counts.size(), dp);
  }
  const size_t experts = counts.front().size();
  if (experts == 0 || experts % static_cast<size_t>(ep) != 0) {
    return InvalidArgument("expert load: {} experts are not a multiple of ep = {}", experts, ep);
  }
  for (const auto& c : counts) {
    if (c.size() != experts) return InvalidArgument("expert load: micro-batches route to different expert counts");
  }
  ExpertLoad out;
  if (ep == 1) return out;
  const size_t local = counts.size() / static_cast<size_t>(dp);  // micro-batches per dp rank
  const size_t per_rank = experts / static_cast<size_t>(ep);     // experts per ep rank
  const size_t w = std::clamp<size_t>(static_cast<size_t>(std::max(window, 1)), 1, local);
  double mean_sum = 0;
  int exchanges = 0;
  out.peak = 0;
  for (int group = 0; group < dp / ep; ++group) {
    // share[j][i]: what ep rank i receives in exchange j over the balanced share.
    std::vector<std::vector<double>> share(local, std::vector<double>(ep, 0.0));
    for (size_t j = 0; j < local; ++j) {
      double total = 0;
      for (int i = 0; i < ep; ++i) {
        const auto& c = counts[(static_cast<size_t>(group) * ep + i) * local + j];
        for (size_t e = 0; e < experts; ++e) {
          share[j][e / per_rank] += static_cast<double>(c[e]);
          total += static_cast<double>(c[e]);
        }
      }
      for (double& s : share[j]) s = total > 0 ? s * ep / total : 1.0;
      mean_sum += *std::max_element(share[j].begin(), share[j].end());
      ++exchanges;
    }
    for (int i = 0; i < ep; ++i) {
      for (size_t j = 0; j + w <= local; ++j) {
        double sum = 0;
        for (size_t q = j; q < j + w; ++q) sum += share[q][i];
        out.peak = std::max(out.peak, sum / static_cast<double>(w));
      }
    }
  }
  out.mean = mean_sum / exchanges;
  return out;
}

StatusOr<std::vector<ExpertLoad>> ProbeExpertLoad(const TrainConfig& config, int max_steps) {
  const models::GptConfig& m = config.model;
  std::vector<ExpertLoad> load(static_cast<size_t>(m.n_layers));
  const parallel::ParallelConfig& p = config.parallel;
  if (m.moe.num_experts <= 0 || p.ep <= 1) return load;
  // The single-process trainer takes the parallel run's steps exactly
  // (the same micro-batches in the same order, the same updates), so its
  // routing is the parallel run's.
  TrainConfig probe = config;
  probe.parallel = parallel::ParallelConfig{};
  probe.train.steps = std::clamp<int64_t>(config.train.steps, 1, std::max(max_steps, 1));
  probe.train.log_every = probe.train.steps + 1;
  probe.eval.every = 0;
  probe.eval.samples = 1;
  probe.eval.batch = 1;
  probe.checkpoint = CheckpointOptions{};
  probe.train.threads = 1;  // as each rank of a parallel run that shares the cores
  std::unique_ptr<FILE, int (*)(FILE*)> sink(std::fopen("/dev/null", "w"), &std::fclose);
  if (sink == nullptr) return Internal("router probe: cannot open /dev/null");
  const int64_t micro_batches = config.accumulation_steps();
  // counts[step][layer][micro-batch][expert]
  std::vector<std::vector<std::vector<std::vector<int64_t>>>> counts(
      probe.train.steps, std::vector<std::vector<std::vector<int64_t>>>(load.size()));
  TrainerOptions options;
  options.out = sink.get();
  options.force_plain = true;
  options.write_records = false;
  options.after_forward = [&](int64_t step, int64_t, const models::Gpt& model) {
    for (int layer = 0; layer < m.n_layers; ++layer) {
      if (model.block(layer).is_moe()) {
        counts[step - 1][layer].push_back(model.block(layer).moe()->last_routing().tokens_per_expert);
      }
    }
  };
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(probe, options));
  TrainSummary summary;
  TESSERA_RETURN_IF_ERROR(trainer->Run(&summary));
  const int window = std::max(1, p.pp);  // 1F1B: the first stage keeps pp micro-batches in flight
  for (size_t layer = 0; layer < load.size(); ++layer) {
    if (!m.IsMoeLayer(static_cast<int>(layer))) continue;
    double mean_sum = 0;
    load[layer].peak = 0;
    for (const auto& step : counts) {
      if (static_cast<int64_t>(step[layer].size()) != micro_batches) {
        return Internal("router probe: layer {} routed {} micro-batches in a step, not {}", layer, step[layer].size(),
                        micro_batches);
      }
      TESSERA_ASSIGN_OR_RETURN(ExpertLoad l, ExpertLoadOf(step[layer], p.dp, p.ep, window));
      mean_sum += l.mean;
      load[layer].peak = std::max(load[layer].peak, l.peak);
    }
    load[layer].mean = mean_sum / static_cast<double>(counts.size());
  }
  return load;
}

}  // namespace tessera::train
