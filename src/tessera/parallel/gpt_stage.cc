#include "tessera/parallel/gpt_stage.h"

#include <set>

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"

namespace tessera::parallel {
namespace {

bool IsExpertParameter(const std::string& name) { return name.find(".moe.experts.") != std::string::npos; }

std::vector<graph::NamedTensor> Prefixed(const std::string& prefix, const graph::Module& m) {
  std::vector<graph::NamedTensor> out;
  for (auto& [name, t] : m.NamedParameters()) out.emplace_back(prefix + name, t);
  return out;
}

}  // namespace

Tensor AttachAuxLoss(const Tensor& x, const Tensor& aux, float aux_grad) {
  Tensor y = x.Contiguous().View(x.shape());  // a new handle on x's data
  if (graph::ShouldRecord({x, aux})) {
    graph::Record("AttachAuxLoss", {x, aux}, {y},
                  [aux_grad](const std::vector<Tensor>& g, const std::vector<bool>&) {
                    return std::vector<Tensor>{g[0], Tensor::Scalar(aux_grad, DType::kF32)};
                  });
  }
  return y;
}

std::vector<int> EvenLayerSplit(int n_layers, int chunks) {
  std::vector<int> first(chunks + 1);
  for (int c = 0; c <= chunks; ++c) first[c] = static_cast<int>(static_cast<int64_t>(n_layers) * c / chunks);
  return first;
}

GptStage::~GptStage() = default;

int GptStage::virtual_stage(int chunk) const { return chunk * pc_.pp + mesh_->coord().pp; }

bool GptStage::is_last_virtual_stage(int chunk) const {
  return virtual_stage(chunk) == pc_.pp * pc_.virtual_stages - 1;
}

void GptStage::AddSegment(std::string name, int layer, std::vector<graph::NamedTensor> params) {
  Segment seg;
  seg.name = std::move(name);
  seg.layer = layer;
  ZeroBucketSpec dense{seg.name, {}, &mesh_->dp()};
  ZeroBucketSpec experts{seg.name + ".experts", {}, &mesh_->expert_dp()};
  for (auto& [pname, t] : params) {
    ZeroParam p{pname, t, 0.0, true};
    (pc_.ep > 1 && IsExpertParameter(pname) ? experts : dense).params.push_back(std::move(p));
    local_parameters_ += t.numel();
  }
  for (ZeroBucketSpec* spec : {&dense, &experts}) {
    if (spec->params.empty()) continue;
    seg.buckets.push_back(static_cast<int>(bucket_specs_.size()));
    bucket_specs_.push_back(std::move(*spec));
  }
  seg.uses = seg.buckets;
  segments_.push_back(std::move(seg));
}

StatusOr<std::unique_ptr<GptStage>> GptStage::Create(const models::GptConfig& model_config,
                                                     const ParallelConfig& config, const DeviceMesh& mesh,
                                                     std::vector<int> first_layer) {
  const int total_chunks = config.pp * config.virtual_stages;
  if (static_cast<int>(first_layer.size()) != total_chunks + 1 || first_layer.front() != 0 ||
      first_layer.back() != model_config.n_layers) {
    return InvalidArgument("layer split has {} boundaries for {} model chunks of {} layers", first_layer.size(),
                           total_chunks, model_config.n_layers);
  }
  for (int c = 0; c < total_chunks; ++c) {
    if (first_layer[c + 1] <= first_layer[c]) {
      return InvalidArgument("model chunk {} of the layer split has no layers", c);
    }
  }
  if (config.tp > 1 || config.ep > 1) {
    return Unimplemented("tensor and expert parallelism are not wired into the GPT stage yet (parallel.tp = {}, "
                         "parallel.ep = {})",
                         config.tp, config.ep);
  }
  std::unique_ptr<GptStage> st(new GptStage());
  st->mesh_ = &mesh;
  st->pc_ = config;
  st->first_layer_ = std::move(first_layer);
  TESSERA_ASSIGN_OR_RETURN(st->model_, models::Gpt::Create(model_config));
  models::Gpt& gpt = *st->model_;
  for (int i = 0; i < model_config.n_layers; ++i) st->moe_layers_total_ += gpt.block(i).is_moe() ? 1 : 0;

  const bool tied = model_config.tie_embeddings;
  const bool split_tied = tied && config.pp > 1;
  for (int c = 0; c < config.virtual_stages; ++c) {
    const int vs = c * config.pp + mesh.coord().pp;
    std::vector<int> segs;
    if (vs == 0) {
      std::vector<graph::NamedTensor> p = Prefixed("tok_emb.", gpt.tok_emb());
      if (gpt.pos_emb() != nullptr) {
        auto pos = Prefixed("pos_emb.", *gpt.pos_emb());
        p.insert(p.end(), pos.begin(), pos.end());
      }
      segs.push_back(st->num_segments());
      st->AddSegment("embed", -1, std::move(p));
      st->tied_master_ = split_tied;
    }
    for (int layer = st->first_layer_[vs]; layer < st->first_layer_[vs + 1]; ++layer) {
      segs.push_back(st->num_segments());
      st->AddSegment(fmt::format("blocks.{}", layer), layer,
                     Prefixed(fmt::format("blocks.{}.", layer), gpt.block(layer)));
    }
    if (vs == total_chunks - 1) {
      std::vector<graph::NamedTensor> p = Prefixed("norm_f.", gpt.norm_f());
      if (gpt.lm_head() != nullptr) {
        auto head = Prefixed("lm_head.", *gpt.lm_head());
        p.insert(p.end(), head.begin(), head.end());
      } else if (split_tied) {
        // The first stage owns the embedding; this copy follows it.
        auto copy = Prefixed("tok_emb.", gpt.tok_emb());
        p.insert(p.end(), copy.begin(), copy.end());
        st->tied_copy_ = true;
      }
      segs.push_back(st->num_segments());
      st->AddSegment("head", model_config.n_layers, std::move(p));
      if (tied && !split_tied) {  // the embedding is segment 0 of this rank
        const std::vector<int>& emb = st->segments_.front().buckets;
        st->segments_.back().uses.insert(st->segments_.back().uses.end(), emb.begin(), emb.end());
      }
    }
    st->chunks_.push_back(std::move(segs));
  }
  // The tied copy is counted in norms on the first stage only.
  for (ZeroBucketSpec& spec : st->bucket_specs_) {
    for (ZeroParam& p : spec.params) {
      if (st->tied_copy_ && p.name == "tok_emb.weight") p.count_in_norm = false;
    }
  }
  // Release the storage of every parameter this rank does not run.
  std::set<TensorImpl*> used;
  for (const ZeroBucketSpec& spec : st->bucket_specs_) {
    for (const ZeroParam& p : spec.params) used.insert(p.param.impl());
  }
  for (const Tensor& t : gpt.Parameters()) {
    if (!used.count(t.impl())) t.impl()->storage.reset();
  }
  return st;
}

std::vector<ZeroBucketSpec> GptStage::TakeBucketSpecs(double weight_decay) {
  // Decay as optim::DefaultParamGroups: matrices and embeddings only.
  for (ZeroBucketSpec& spec : bucket_specs_) {
    for (ZeroParam& p : spec.params) p.weight_decay = p.param.dim() >= 2 ? weight_decay : 0.0;
  }
  return std::move(bucket_specs_);
}

Tensor GptStage::RunSegment(int s, const Tensor& input, const MicroBatchInput& mb, MicroBatchStats* stats) {
  const Segment& seg = segments_.at(s);
  models::Gpt& gpt = *model_;
  gpt.set_forward_count(static_cast<uint64_t>(mb.global_index));
  const uint64_t seed = gpt.BeginForward();
  if (seg.layer < 0) return gpt.Embed(mb.ids, seed);
  const models::GptConfig& c = gpt.config();
  if (seg.layer < c.n_layers) {
    Tensor aux;
    Tensor y = gpt.block(seg.layer).Forward(input, gpt.training(), models::Gpt::BlockDropoutSeed(seed, seg.layer), &aux);
    if (!aux.defined()) return y;
    stats->aux_loss += aux.Item();
    stats->aux_terms += 1;
    if (c.moe.aux_loss_coef <= 0.0) return y;
    const double grad = c.moe.aux_loss_coef / moe_layers_total_ * mb.loss_scale;
    return AttachAuxLoss(y, aux, static_cast<float>(grad));
  }
  Tensor logits = gpt.Head(input);
  Tensor ce = graph::CrossEntropy(logits, mb.targets);
  stats->ce_loss += ce.Item();
  return graph::Scale(ce, mb.loss_scale);
}

Tensor GptStage::HeadLogits(const Tensor& x) { return model_->Head(x); }

Status GptStage::SyncTiedEmbedding() {
  if (!model_->config().tie_embeddings || pc_.pp == 1) return Status::Ok();
  const graph::nn::Embedding& emb = model_->tok_emb();
  Tensor grad;
  if (tied_master_ || tied_copy_) {
    grad = emb.weight().grad();
    if (!grad.defined()) {
      grad = Tensor::Zeros(emb.weight().shape(), DType::kF32);
      Tensor w = emb.weight();
      w.set_grad(grad);
    }
  } else {
    grad = Tensor::Zeros(emb.weight().shape(), DType::kF32);
  }
  Status s = mesh_->pp().AllReduce(grad.data<float>(), grad.data<float>(), grad.numel(), comm::DataType::kFloat32,
                                   comm::ReduceOp::kSum);
  if (!s.ok()) return s.WithContext("summing the tied embedding's gradient over the pipeline stages");
  return Status::Ok();
}

}  // namespace tessera::parallel
