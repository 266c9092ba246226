#include "calibrate_probes.h"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/models/gpt.h"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The upper median of `v` (non-empty).
double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

Tensor Filled(const Shape& shape, double value) { return Tensor::Full(shape, value, DType::kF32); }

Tensor Leaf(const Shape& shape, double value) {
  Tensor t = Filled(shape, value);
  t.set_requires_grad(true);
  return t;
}

constexpr int kProbeMicroBatches = 4;

}  // namespace

struct ProbeRank::State {
  std::unique_ptr<models::Gpt> model;
  std::vector<Tensor> inputs, targets;
  Tensor block_input, block_grad;
  std::vector<Tensor> block_out;
};

ProbeRank::ProbeRank(std::unique_ptr<State> state, int64_t micro_batch)
    : state_(std::move(state)), micro_batch_(micro_batch) {}
ProbeRank::~ProbeRank() = default;

StatusOr<std::unique_ptr<ProbeRank>> ProbeRank::Create(const models::GptConfig& config, int64_t micro_batch,
                                                       uint64_t seed) {
  auto model = models::Gpt::Create(config);
  if (!model.ok()) return model.status().WithContext("building a calibration probe model");
  auto st = std::make_unique<State>();
  st->model = std::move(model).value();
  std::vector<int64_t> ids(static_cast<size_t>(micro_batch * config.seq_len));
  for (int b = 0; b < kProbeMicroBatches; ++b) {
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((seed + 31 * i + 7 * b) % config.vocab_size);
    st->inputs.push_back(Tensor::FromInts(ids, {micro_batch, config.seq_len}));
    std::rotate(ids.begin(), ids.begin() + 1, ids.end());
    st->targets.push_back(Tensor::FromInts(ids, {micro_batch, config.seq_len}));
  }
  st->model->SetTraining(true);
  st->block_input = Leaf({micro_batch, config.seq_len, config.d_model}, 0.1);
  st->block_grad = Filled({micro_batch, config.seq_len, config.d_model}, 1e-3);
  st->block_out.resize(static_cast<size_t>(config.n_layers));
  return std::unique_ptr<ProbeRank>(new ProbeRank(std::move(st), micro_batch));
}

const models::GptConfig& ProbeRank::config() const { return state_->model->config(); }
int ProbeRank::layers() const { return config().n_layers; }

double ProbeRank::Step() {
  graph::GradModeGuard grad(true);
  const auto t0 = Clock::now();
  state_->model->ZeroGrad();
  for (int b = 0; b < kProbeMicroBatches; ++b) {
    models::GptOutput out = state_->model->Forward(state_->inputs[b], state_->targets[b]);
    out.ce_loss.Item();
    graph::Backward(out.loss, Tensor::Scalar(1.0 / kProbeMicroBatches, out.loss.dtype()));
  }
  return Since(t0) / kProbeMicroBatches;
}

void ProbeRank::BlockStep(int layer, bool backward) {
  graph::GradModeGuard grad(true);
  Tensor& y = state_->block_out[static_cast<size_t>(layer)];
  if (!backward) {
    Tensor aux;
    y = state_->model->block(layer).Forward(state_->block_input, true, 0, &aux);
  } else {
    graph::Backward(y, state_->block_grad);
    y = Tensor();
  }
}

sim::TwinModel TwinModelOf(const models::GptConfig& m) {
  sim::TwinModel model{.vocab = m.vocab_size,
                       .seq = m.seq_len,
                       .layers = m.n_layers,
                       .d_model = m.d_model,
                       .heads = m.n_heads,
                       .d_ff = m.ffn_dim(),
                       .gated_ffn = m.activation == models::ActivationKind::kSwiGlu,
                       .tied_embeddings = m.tie_embeddings,
                       .rope = m.rope,
                       .experts = m.moe.num_experts,
                       .top_k = m.moe.top_k,
                       .d_ff_expert = m.expert_ffn_dim(),
                       .moe = {},
                       .expert_load = {},
                       .expert_peak_load = {}};
  for (int i = 0; i < m.n_layers; ++i) model.moe.push_back(m.IsMoeLayer(i));
  return model;
}

std::vector<models::GptConfig> ProbeModelConfigs() {
  auto base = [](int64_t d, int heads, int64_t seq) {
    models::GptConfig m;
    m.vocab_size = 32;
    m.seq_len = seq;
    m.n_layers = 2;
    m.d_model = d;
    m.n_heads = heads;
    m.d_ff = 4 * d;
    m.norm = models::NormKind::kRmsNorm;
    m.activation = models::ActivationKind::kSwiGlu;
    m.rope = true;
    return m;
  };
  models::GptConfig dense = base(64, 2, 64);
  models::GptConfig moe = base(256, 4, 32);
  moe.moe.num_experts = 8;
  moe.moe.top_k = 1;
  moe.moe.every = 2;
  moe.moe.d_ff_expert = 512;
  return {dense, moe};
}


StatusOr<sim::OpLine> MeasureSharedCoreContext(const sim::HostCalibration& one, int cores, SweepSize size,
                                               std::vector<std::string>* report) {
  sim::OpLine line;
  line.points.emplace_back(cores, one.context_factor);
  if (size == SweepSize::kTiny) return line;
  hal::SetNumThreads(1);
  sim::HostCalibration isolated = one;
  isolated.context_factor = 1;
  for (int ranks : {2 * cores, 4 * cores}) {
    std::vector<double> factors;
    for (const models::GptConfig& config : ProbeModelConfigs()) {
      std::vector<std::unique_ptr<ProbeRank>> probes;
      for (int i = 0; i < ranks; ++i) {
        TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ProbeRank> rank, ProbeRank::Create(config, 4, 1 + i));
        probes.push_back(std::move(rank));
      }
      std::vector<double> samples;
      {
        size_t next = 1;
        BusyNeighbours busy(ranks - 1, [&] {
          ProbeRank* mine = probes[next++].get();
          return std::function<void()>([mine] { mine->Step(); });
        });
        probes[0]->Step();
        const auto start = Clock::now();
        for (int i = 0; i < 5 || (Since(start) < 1.0 && i < 200); ++i) samples.push_back(probes[0]->Step());
      }
      const double op_sum = sim::OpSumSecondsPerMicroBatch(isolated, TwinModelOf(config), 4);
      const double share = static_cast<double>(ranks) / cores;
      factors.push_back(Median(samples) / (op_sum * share));
      if (report) {
        report->push_back(fmt::format("{} ranks on {} cores, probe d{}: median {:.3f} ms per micro-batch, op-sum {:.3f} ms "
                                      "x {:.0f} (time share), factor {:.3f}",
                                      ranks, cores, config.d_model, 1e3 * Median(samples), 1e3 * op_sum, share,
                                      factors.back()));
      }
    }
    double sum = 0;
    for (double f : factors) sum += f;
    line.points.emplace_back(ranks, sum / static_cast<double>(factors.size()));
  }
  return line;
}

}  // namespace tessera::cli
