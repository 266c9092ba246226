#include "tessera/parallel/gpt_stage.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/graph/checkpoint.h"
#include "tessera/graph/compiled_function.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/expert_parallel/moe.h"
#include "tessera/parallel/tensor_parallel/blocks.h"
#include "tessera/parallel/tensor_parallel/collectives.h"
#include "tessera/parallel/tensor_parallel/layers.h"
#include "tessera/tensor/rng.h"

namespace tessera::parallel {
namespace {

// graphs_ key of an MoE block's attention half (graph mode): above every layer.
constexpr int kAttentionHalfKey = 1 << 20;

bool IsExpertParameter(const std::string& name) { return name.find(".moe.experts.") != std::string::npos; }

std::vector<graph::NamedTensor> Prefixed(const std::string& prefix, const graph::Module& m) {
  std::vector<graph::NamedTensor> out;
  for (auto& [name, t] : m.NamedParameters()) out.emplace_back(prefix + name, t);
  return out;
}

template <typename T>
void Append(std::vector<T>& to, std::vector<T> more) {
  to.insert(to.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

}  // namespace

struct GptStage::Block {
  const models::Block* full = nullptr;  // norms, dropout, and the dense modules when tp = ep = 1
  std::unique_ptr<TensorParallelAttention> tp_attn;
  std::unique_ptr<TensorParallelMlp> tp_mlp;
  std::unique_ptr<ExpertParallelMoe> ep_moe;
};

Tensor AttachAuxLoss(const Tensor& x, const Tensor& aux, float aux_grad) {
  Tensor y = x.Contiguous().View(x.shape());  // a new handle on x's data
  if (graph::ShouldRecord({x, aux})) {
    graph::Record("AttachAuxLoss", {x, aux}, {y}, [aux_grad](const std::vector<Tensor>& g, const std::vector<bool>&) {
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

std::pair<Shape, DType> GptStage::ActivationSpec(int64_t batch) const {
  const models::GptConfig& c = model_->config();
  const int64_t t = pc_.sequence_parallel ? c.seq_len / pc_.tp : c.seq_len;
  return {{batch, t, c.d_model}, c.compute_dtype};
}

void GptStage::AddSegment(std::string name, int layer, std::vector<graph::NamedTensor> params,
                          std::vector<Tensor> partial_grads) {
  Segment seg;
  seg.name = std::move(name);
  seg.layer = layer;
  seg.partial_grads = std::move(partial_grads);
  ZeroBucketSpec dense{seg.name, {}, &mesh_->dp()};
  ZeroBucketSpec experts{seg.name + ".experts", {}, &mesh_->expert_dp(), 1.0 / pc_.ep};
  for (auto& [pname, t] : params) {
    named_params_.emplace_back(pname, t);
    (pc_.ep > 1 && IsExpertParameter(pname) ? experts : dense).params.push_back({pname, t, 0.0, true, {}, {}});
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

Status GptStage::BuildBlock(int layer) {
  const models::GptConfig& c = model_->config();
  const models::Block& full = model_->block(layer);
  auto b = std::make_unique<Block>();
  b->full = &full;
  comm::Communicator* tp = &mesh_->tp();
  const bool sp = pc_.sequence_parallel;
  const std::string prefix = fmt::format("blocks.{}.", layer);
  std::vector<graph::NamedTensor> params;
  std::vector<Tensor> partial;
  try {
    if (pc_.tp == 1 && pc_.ep == 1) {
      params = Prefixed(prefix, full);
    } else {
      Append(params, Prefixed(prefix + "norm1.", full.norm1()));
      if (pc_.tp > 1) {
        b->tp_attn = std::make_unique<TensorParallelAttention>(full.attn(), c, tp, sp);
        Append(params, Prefixed(prefix + "attn.", *b->tp_attn));
      } else {
        Append(params, Prefixed(prefix + "attn.", full.attn()));
      }
      Append(params, Prefixed(prefix + "norm2.", full.norm2()));
      if (full.is_moe()) {
        if (pc_.ep > 1) {
          b->ep_moe = std::make_unique<ExpertParallelMoe>(*full.moe(), c, &mesh_->ep());
          Append(params, Prefixed(prefix + "moe.", *b->ep_moe));
        } else {
          Append(params, Prefixed(prefix + "moe.", *full.moe()));
        }
      } else if (pc_.tp > 1) {
        b->tp_mlp = std::make_unique<TensorParallelMlp>(*full.mlp(), tp, sp);
        Append(params, Prefixed(prefix + "ffn.", *b->tp_mlp));
      } else {
        Append(params, Prefixed(prefix + "ffn.", *full.mlp()));
      }
    }
  } catch (const OpError& e) {
    return StatusFromOpError(e).WithContext(fmt::format("sharding block {}", layer));
  }
  if (sp) {
    for (const Tensor& t : full.norm1().Parameters()) partial.push_back(t);
    for (const Tensor& t : full.norm2().Parameters()) partial.push_back(t);
    if (b->tp_attn) Append(partial, b->tp_attn->PartialGradParameters());
    if (b->tp_mlp) Append(partial, b->tp_mlp->PartialGradParameters());
  }
  AddSegment(fmt::format("blocks.{}", layer), layer, std::move(params), std::move(partial));
  blocks_[layer] = std::move(b);
  graphs_.erase(layer);  // a rebuilt block has new parameters: capture it again
  return Status::Ok();
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
  std::unique_ptr<GptStage> st(new GptStage());
  st->mesh_ = &mesh;
  st->pc_ = config;
  st->first_layer_ = std::move(first_layer);
  TESSERA_ASSIGN_OR_RETURN(st->model_, models::Gpt::Create(model_config));
  models::Gpt& gpt = *st->model_;
  st->blocks_.resize(model_config.n_layers);
  for (int i = 0; i < model_config.n_layers; ++i) st->moe_layers_total_ += gpt.block(i).is_moe() ? 1 : 0;
  std::map<std::string, Shape> full_shape;
  for (auto& [name, t] : gpt.NamedParameters()) full_shape[name] = t.shape();

  const bool tied = model_config.tie_embeddings;
  const bool split_tied = tied && config.pp > 1;
  const bool tp = config.tp > 1;
  const bool sp = config.sequence_parallel;
  comm::Communicator* tp_comm = &mesh.tp();
  try {
    if (tp && (mesh.is_first_stage() || (tied && mesh.is_last_stage()))) {
      st->vocab_embedding_ = std::make_unique<VocabParallelEmbedding>(gpt.tok_emb(), tp_comm, sp);
    }
    if (tp && mesh.is_last_stage() && !tied) {
      st->vocab_head_ = std::make_unique<ColumnParallelLinear>(*gpt.lm_head(), tp_comm, false, sp);
    }
  } catch (const OpError& e) {
    return StatusFromOpError(e).WithContext("sharding the embedding / LM head over tensor-parallel ranks");
  }
  for (int c = 0; c < config.virtual_stages; ++c) {
    const int vs = c * config.pp + mesh.coord().pp;
    std::vector<int> segs;
    if (vs == 0) {
      std::vector<graph::NamedTensor> p =
          tp ? Prefixed("tok_emb.", *st->vocab_embedding_) : Prefixed("tok_emb.", gpt.tok_emb());
      std::vector<Tensor> partial;
      if (gpt.pos_emb() != nullptr) {
        Append(p, Prefixed("pos_emb.", *gpt.pos_emb()));
        if (sp) partial.push_back(gpt.pos_emb()->weight());
      }
      segs.push_back(st->num_segments());
      st->AddSegment("embed", -1, std::move(p), std::move(partial));
      st->tied_master_ = split_tied;
      st->segments_.back().tied_embedding = split_tied;
    }
    for (int layer = st->first_layer_[vs]; layer < st->first_layer_[vs + 1]; ++layer) {
      segs.push_back(st->num_segments());
      TESSERA_RETURN_IF_ERROR(st->BuildBlock(layer));
    }
    if (vs == total_chunks - 1) {
      std::vector<graph::NamedTensor> p = Prefixed("norm_f.", gpt.norm_f());
      std::vector<Tensor> partial;
      if (sp) partial = gpt.norm_f().Parameters();
      if (gpt.lm_head() != nullptr) {
        Append(p, tp ? Prefixed("lm_head.", *st->vocab_head_) : Prefixed("lm_head.", *gpt.lm_head()));
      } else if (split_tied) {
        // The first stage owns the embedding; this copy follows it.
        Append(p, tp ? Prefixed("tok_emb.", *st->vocab_embedding_) : Prefixed("tok_emb.", gpt.tok_emb()));
        st->tied_copy_ = true;
      }
      segs.push_back(st->num_segments());
      st->AddSegment("head", model_config.n_layers, std::move(p), std::move(partial));
      st->segments_.back().tied_embedding = st->tied_copy_;
      if (tied && !split_tied) {  // the embedding is segment 0 of this rank
        const std::vector<int>& emb = st->segments_.front().buckets;
        st->segments_.back().uses.insert(st->segments_.back().uses.end(), emb.begin(), emb.end());
      }
    }
    st->chunks_.push_back(std::move(segs));
  }
  // Each gradient element counts once in the global norm: replicas over tp
  // (a parameter as large here as in the full model) on tp rank 0 only,
  // the tied copy on the first stage only.
  // A tensor-parallel shard is the block at this rank's tp index along the
  // one axis where its shape differs from the full tensor's (TensorShard).
  for (ZeroBucketSpec& spec : st->bucket_specs_) {
    for (ZeroParam& p : spec.params) {
      const Shape& full = full_shape.at(p.name);
      const Shape& local = p.param.shape();
      const bool replicated_over_tp = local == full;
      if (replicated_over_tp && mesh.coord().tp != 0) p.count_in_norm = false;
      if (st->tied_copy_ && p.name == "tok_emb.weight") p.count_in_norm = false;
      if (replicated_over_tp) continue;
      p.global_shape.assign(full.begin(), full.end());
      p.global_offset.assign(full.size(), 0);
      int split_axes = 0;
      for (size_t a = 0; a < full.size() && local.size() == full.size(); ++a) {
        if (local[a] == full[a]) continue;
        ++split_axes;
        p.global_offset[a] = static_cast<int64_t>(mesh.coord().tp) * local[a];
        if (local[a] * config.tp != full[a]) split_axes = 2;
      }
      if (split_axes != 1) {
        return Internal("parameter '{}' is {} here but {} in the full model: not a tensor-parallel block", p.name,
                        ShapeString(local), ShapeString(full));
      }
    }
  }
  // Release the storage of every full-model parameter this rank does not run.
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

std::vector<graph::NamedTensor> GptStage::NamedParameters() const { return named_params_; }

namespace {

// Dropout of this rank's sequence shard [B, T/tp, d] with the mask the full
// [B, T, d] tensor would get (the mask depends on seed and element offset).
Tensor ShardDropout(const Tensor& x, float p, bool training, uint64_t seed, int64_t full_t, int rank) {
  if (!training || p <= 0.0f) return x;
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < b; ++i) {
    const uint64_t offset = static_cast<uint64_t>((i * full_t + rank * t) * d);
    rows.push_back(graph::Dropout(graph::Slice(x, 0, i, i + 1), p, training, seed, offset));
  }
  return graph::Concat(rows, 0);
}

}  // namespace

Tensor GptStage::EmbedForward(const Tensor& ids, uint64_t seed) {
  if (!vocab_embedding_) return model_->Embed(ids, seed);
  const models::GptConfig& c = model_->config();
  TESSERA_OP_CHECK(ids.defined() && ids.dim() == 2 && ids.size(1) == c.seq_len,
                   "parallel GPT: ids must be [B, {}] (the full sequence under tensor parallelism), got {}", c.seq_len,
                   ids.defined() ? ShapeString(ids.shape()) : "undefined");
  Tensor x = vocab_embedding_->Forward(ids);  // [B, T, d] or the sequence shard
  const int64_t t = x.size(1);
  const int rank = mesh_->coord().tp;
  if (const graph::nn::Embedding* pos = model_->pos_emb()) {
    const int64_t first = pc_.sequence_parallel ? rank * t : 0;
    x = graph::Add(x, graph::Slice(pos->weight(), 0, first, first + t));
  }
  x = graph::Cast(x, c.compute_dtype);
  return ShardDropout(x, c.dropout, model_->training(), DeriveSeed(seed, 0), c.seq_len,
                      pc_.sequence_parallel ? rank : 0);
}

Tensor GptStage::BlockForward(Block& block, int layer, const Tensor& x, uint64_t step_seed, Tensor* aux) {
  const models::Block& full = *block.full;
  const models::GptConfig& c = model_->config();
  const bool training = model_->training();
  const uint64_t seed = models::Gpt::BlockDropoutSeed(step_seed, layer);
  const bool sp = pc_.sequence_parallel;
  const int rank = sp ? mesh_->coord().tp : 0;
  // Captures by value: under selective recompute it runs again during
  // the backward pass, after this function returned.
  const models::Block* full_ptr = &full;
  const TensorParallelAttention* tp_attn = block.tp_attn.get();
  auto attention = [full_ptr, tp_attn](const std::vector<Tensor>& in) {
    Tensor h = full_ptr->norm1().Forward(in[0]);
    return std::vector<Tensor>{tp_attn != nullptr ? tp_attn->Forward(h) : full_ptr->attn().Forward(h)};
  };
  Tensor h;
  if (pc_.graph && full.is_moe()) {
    // Graph mode: the MoE half of this block reads routing data on the host
    // and runs eagerly (a graph break); the attention half is a graph of its
    // own, so only the MoE layer falls back (graph mode has no dropout).
    h = RunGraphed(kAttentionHalfKey + layer, fmt::format("blocks.{}.attention", layer),
                   [&attention](const std::vector<Tensor>& in) {
                     return std::vector<Tensor>{graph::Add(in[0], attention(in)[0])};
                   },
                   {x})[0];
  } else {
    const Tensor a =
        pc_.recompute == "selective" && graph::GradEnabled() ? graph::Checkpoint(attention, {x})[0] : attention({x})[0];
    h = graph::Add(x, ShardDropout(a, full.dropout(), training, DeriveSeed(seed, 0), c.seq_len, rank));
  }
  Tensor n2 = full.norm2().Forward(h);
  Tensor f;
  if (full.is_moe()) {
    // MoE routes whole sequences: under sequence parallelism the shard is
    // gathered first (backward: own slice) and the output sliced again.
    Tensor in = sp ? GatherFromTensorParallel(n2, 1, &mesh_->tp()) : n2;
    models::MoeOutput o = block.ep_moe ? block.ep_moe->Forward(in) : full.moe()->Forward(in);
    f = sp ? ScatterToTensorParallel(o.y, 1, &mesh_->tp()) : o.y;
    *aux = o.aux_loss;
  } else {
    f = block.tp_mlp ? block.tp_mlp->Forward(n2) : full.mlp()->Forward(n2);
  }
  return graph::Add(h, ShardDropout(f, full.dropout(), training, DeriveSeed(seed, 1), c.seq_len, rank));
}

Tensor GptStage::HeadLogitsLocal(const Tensor& x) {
  if (!vocab_embedding_ && !vocab_head_) return model_->Head(x);
  Tensor h = model_->norm_f().Forward(x);
  if (vocab_head_) return vocab_head_->Forward(h);
  return VocabParallelLmHead(h, vocab_embedding_->weight(), &mesh_->tp(), pc_.sequence_parallel);
}

Tensor GptStage::HeadLogits(const Tensor& x) {
  Tensor local = HeadLogitsLocal(x);
  if (pc_.tp == 1) return local;
  return GatherFromTensorParallel(local, -1, &mesh_->tp());
}

Tensor GptStage::RunSegment(int s, const Tensor& input, const MicroBatchInput& mb, MicroBatchStats* stats) {
  const Segment& seg = segments_.at(s);
  models::Gpt& gpt = *model_;
  const models::GptConfig& c = gpt.config();
  gpt.set_forward_count(static_cast<uint64_t>(mb.global_index));
  const uint64_t seed = gpt.BeginForward();
  using Ins = std::vector<Tensor>;
  if (seg.layer < 0) {
    if (!pc_.graph) return EmbedForward(mb.ids, seed);
    return RunGraphed(seg.layer, seg.name, [this, seed](const Ins& in) { return Ins{EmbedForward(in[0], seed)}; },
                      {mb.ids})[0];
  }
  if (seg.layer < c.n_layers) {
    Block& block = *blocks_.at(seg.layer);
    const int layer = seg.layer;
    auto fn = [this, &block, layer, seed](const std::vector<Tensor>& in) {
      Tensor aux;
      Tensor y = BlockForward(block, layer, in[0], seed, &aux);
      return aux.defined() ? std::vector<Tensor>{y, aux} : std::vector<Tensor>{y};
    };
    // Graph mode: a dense block is one graph; an MoE block runs its
    // attention half as a graph and its MoE half eagerly (BlockForward).
    const bool whole_graph = pc_.graph && !block.full->is_moe();
    std::vector<Tensor> out = whole_graph ? RunGraphed(layer, seg.name, fn, {input})
                              : pc_.recompute == "full" && graph::GradEnabled() ? graph::Checkpoint(fn, {input})
                                                                                : fn({input});
    const Tensor& y = out[0];
    if (out.size() < 2 || !out[1].defined()) return y;
    const Tensor& aux = out[1];
    stats->aux_loss += aux.Item();
    stats->aux_terms += 1;
    if (c.moe.aux_loss_coef <= 0.0) return y;
    const double grad = c.moe.aux_loss_coef / moe_layers_total_ * mb.loss_scale;
    return AttachAuxLoss(y, aux, static_cast<float>(grad));
  }
  auto head = [this](const Ins& in) {
    Tensor logits = HeadLogitsLocal(in[0]);
    return Ins{pc_.tp == 1 ? graph::CrossEntropy(logits, in[1])
                           : VocabParallelCrossEntropy(logits, in[1],
                                                       vocab_embedding_ ? vocab_embedding_->vocab_start()
                                                                        : mesh_->coord().tp * logits.size(-1),
                                                       &mesh_->tp())};
  };
  Tensor ce = pc_.graph ? RunGraphed(seg.layer, seg.name, head, {input, mb.targets})[0] : head({input, mb.targets})[0];
  stats->ce_loss += ce.Item();
  return graph::Scale(ce, mb.loss_scale);
}

std::vector<Tensor> GptStage::RunGraphed(int layer, const std::string& name,
                                         const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                                         const std::vector<Tensor>& inputs) {
  auto& [graph_name, function] = graphs_[layer];
  if (!function) {
    graph_name = name;
    graph::GraphOptions options;
    options.passes.recompute_budget_bytes = pc_.graph_recompute_budget;
    options.inter_op = pc_.graph_inter_op;
    function = std::make_shared<graph::GraphFunction>(name, options);
  }
  return function->Call(fn, inputs);
}

std::vector<std::pair<std::string, const graph::GraphFunction*>> GptStage::GraphFunctions() const {
  std::vector<std::pair<std::string, const graph::GraphFunction*>> out;
  for (const auto& [layer, entry] : graphs_) out.emplace_back(entry.first, entry.second.get());
  return out;
}

Status GptStage::SyncPartialGradients(int s) {
  for (const Tensor& p : segments_.at(s).partial_grads) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    TESSERA_CHECK(g.dtype() == DType::kF32 && g.is_contiguous(), "partial gradient of '{}' must be contiguous fp32",
                  p.name());
    Status st = mesh_->tp().AllReduce(g.data<float>(), g.data<float>(), g.numel(), comm::DataType::kFloat32,
                                      comm::ReduceOp::kSum);
    if (!st.ok()) return st.WithContext(fmt::format("summing the sequence-parallel gradient of '{}'", p.name()));
  }
  return Status::Ok();
}

Status GptStage::SyncTiedEmbedding() {
  if (!model_->config().tie_embeddings || pc_.pp == 1) return Status::Ok();
  // Every stage joins (middle stages with zeros): one all-reduce over pp.
  Tensor weight = vocab_embedding_ ? vocab_embedding_->weight() : model_->tok_emb().weight();
  Tensor grad;
  if (tied_master_ || tied_copy_) {
    grad = weight.grad();
    if (!grad.defined()) {
      grad = Tensor::Zeros(weight.shape(), DType::kF32);
      weight.set_grad(grad);
    }
  } else {
    const int64_t rows = model_->config().vocab_size / pc_.tp;
    grad = Tensor::Zeros({rows, model_->config().d_model}, DType::kF32);
  }
  Status s = mesh_->pp().AllReduce(grad.data<float>(), grad.data<float>(), grad.numel(), comm::DataType::kFloat32,
                                   comm::ReduceOp::kSum);
  if (!s.ok()) return s.WithContext("summing the tied embedding's gradient over the pipeline stages");
  return Status::Ok();
}

}  // namespace tessera::parallel
