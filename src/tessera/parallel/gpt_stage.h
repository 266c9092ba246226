// GptStage: the part of a models::Gpt that one rank runs under a
// ParallelConfig — its pipeline chunks, each a list of segments (the
// embedding, transformer blocks, the head + loss), with tensor- and
// expert-parallel layers in place of the dense ones when tp / ep > 1.
//
// Every rank builds the full model from the same seed and keeps only what
// its chunks need (the storage of other parameters is released), so a
// parallel run starts from exactly the single-process parameters. Virtual
// stage u = c·pp + pp_rank (chunk c of this rank) holds layers
// [first_layer[u], first_layer[u+1]); the first virtual stage also embeds,
// the last one also computes the head and loss.
//
// RunSegment runs one segment's forward for a micro-batch (on the caller's
// current tape): the embedding reads `mb.ids`; blocks take the previous
// activation; the head returns the loss to backpropagate, already scaled by
// mb.loss_scale (1 / micro-batches, times the fp16 loss scale). A MoE
// block's load-balancing loss is attached to its output activation
// (AttachAuxLoss), so the aux gradient flows wherever that block runs.
// Dropout masks depend on (model seed, global micro-batch index, layer) as
// in single-process training.
//
// Blocks are composed here (pre-norm: x + drop(attn(norm1 x)), then
// + drop(ffn(norm2 ·))) from the full model's norms and either its own
// attention / MLP / MoE (tp = ep = 1) or TensorParallelAttention,
// TensorParallelMlp and ExpertParallelMoe built by slicing them. Recompute:
// "full" checkpoints each block (graph::Checkpoint), "selective" only its
// attention half (norm, projections, attention core), keeping the
// feed-forward activations.
// Parameters are grouped per segment into ZeRO buckets (dense ones over the
// data-parallel group; with ep > 1 the local experts over the
// expert-data-parallel group, scaled by 1/ep as their gradient sums every
// ep rank's tokens). Parameters replicated over tp are counted in the
// gradient norm on tp rank 0 only. With tied embeddings split across stages the
// last stage holds a copy of the embedding whose gradient
// SyncTiedEmbedding() sums with the first stage's (over the pp group).
// Thread-safety: one thread drives a stage.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/models/gpt.h"
#include "tessera/parallel/mesh.h"
#include "tessera/parallel/parallel_config.h"
#include "tessera/parallel/zero.h"

namespace tessera::graph {
class GraphFunction;
}  // namespace tessera::graph

namespace tessera::parallel {

// y = x in the forward pass; the backward pass passes y's gradient to x and
// gives `aux` (a scalar) the gradient `aux_grad` (Megatron's MoE aux-loss
// auto-scaler).
Tensor AttachAuxLoss(const Tensor& x, const Tensor& aux, float aux_grad);

struct MicroBatchInput {
  Tensor ids;                // [B, T] (first virtual stage)
  Tensor targets;            // [B, T] (last virtual stage)
  int64_t global_index = 0;  // micro-batch index in the whole run (dropout stream)
  float loss_scale = 1.0f;   // multiplies the loss before backward
};

struct MicroBatchStats {
  double ce_loss = 0;   // sum of the micro-batches' cross-entropy (last stage)
  double aux_loss = 0;  // sum of the MoE layers' aux losses run here
  int64_t aux_terms = 0;
};

// first_layer for `chunks` virtual stages of (nearly) equal layer counts.
std::vector<int> EvenLayerSplit(int n_layers, int chunks);

class TensorParallelAttention;
class TensorParallelMlp;
class ExpertParallelMoe;
class VocabParallelEmbedding;
class ColumnParallelLinear;

class GptStage {
 public:
  struct Segment {
    std::string name;                   // "embed", "blocks.3", "head"
    int layer = -1;                     // block index; -1 embed; n_layers head
    std::vector<int> buckets;           // ZeRO buckets of this segment's parameters (reduced after its backward)
    std::vector<int> uses;              // buckets it reads (gathered around it under ZeRO-3): its own, and the
                                        // embedding's for a head tied to an embedding on this rank
    std::vector<Tensor> partial_grads;  // replicated parameters with per-rank partial gradients
                                        // (sequence parallelism): summed over tp before reduction
    bool tied_embedding = false;        // holds an embedding tied across stages (SyncTiedEmbedding first)
  };

  static StatusOr<std::unique_ptr<GptStage>> Create(const models::GptConfig& model, const ParallelConfig& config,
                                                    const DeviceMesh& mesh, std::vector<int> first_layer);
  ~GptStage();

  int num_chunks() const { return static_cast<int>(chunks_.size()); }
  const std::vector<int>& chunk_segments(int chunk) const { return chunks_.at(chunk); }
  int virtual_stage(int chunk) const;
  bool is_first_virtual_stage(int chunk) const { return virtual_stage(chunk) == 0; }
  bool is_last_virtual_stage(int chunk) const;
  int num_segments() const { return static_cast<int>(segments_.size()); }
  const Segment& segment(int s) const { return segments_.at(s); }
  const std::vector<int>& first_layer() const { return first_layer_; }
  // Shape and dtype of the activation between segments ([B, T, d], or
  // [B, T/tp, d] with sequence parallelism) for micro-batches of `batch`.
  std::pair<Shape, DType> ActivationSpec(int64_t batch) const;

  Tensor RunSegment(int s, const Tensor& input, const MicroBatchInput& mb, MicroBatchStats* stats);
  // Full-vocabulary logits of the head from the last block's activation
  // (evaluation, no grad).
  Tensor HeadLogits(const Tensor& x);

  // The bucket specs for ZeroOptimizer, with AdamW's decoupled decay on
  // matrices and embeddings only (call once; parameters then live in the
  // optimizer's flat buffers).
  std::vector<ZeroBucketSpec> TakeBucketSpecs(double weight_decay);
  // Before a segment's gradients are reduced: sums the partial gradients
  // of its replicated parameters over tp (sequence parallelism).
  Status SyncPartialGradients(int s);
  // Sums the tied embedding's gradient between the first and the last
  // pipeline stage (pp > 1).
  Status SyncTiedEmbedding();

  models::Gpt& model() { return *model_; }
  const models::GptConfig& config() const { return model_->config(); }
  int64_t local_parameters() const { return local_parameters_; }
  // This rank's parameters by full name (values as held here: shards under tp/ep).
  std::vector<graph::NamedTensor> NamedParameters() const;
  // Graph mode (ParallelConfig::graph): the graph function of each segment
  // run so far, by segment name ("embed", "blocks.3", "head").
  std::vector<std::pair<std::string, const graph::GraphFunction*>> GraphFunctions() const;

  struct Block;

 private:
  GptStage() = default;
  Status BuildBlock(int layer);
  void AddSegment(std::string name, int layer, std::vector<graph::NamedTensor> params,
                  std::vector<Tensor> partial_grads);
  Tensor BlockForward(Block& block, int layer, const Tensor& x, uint64_t seed, Tensor* aux);
  Tensor EmbedForward(const Tensor& ids, uint64_t seed);
  Tensor HeadLogitsLocal(const Tensor& x);  // [B, T, V/tp]
  // Runs fn(inputs) through the graph function of `layer` (graph mode).
  std::vector<Tensor> RunGraphed(int layer, const std::string& name,
                                 const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                                 const std::vector<Tensor>& inputs);

  const DeviceMesh* mesh_ = nullptr;
  ParallelConfig pc_;
  std::unique_ptr<models::Gpt> model_;
  std::vector<int> first_layer_;
  std::vector<Segment> segments_;
  std::vector<std::vector<int>> chunks_;  // segment indices per chunk
  std::vector<ZeroBucketSpec> bucket_specs_;
  std::vector<std::unique_ptr<Block>> blocks_;               // by layer (null when not on this rank)
  std::unique_ptr<VocabParallelEmbedding> vocab_embedding_;  // tp > 1
  std::unique_ptr<ColumnParallelLinear> vocab_head_;         // tp > 1, untied
  std::vector<graph::NamedTensor> named_params_;
  int moe_layers_total_ = 0;
  std::map<int, std::pair<std::string, std::shared_ptr<graph::GraphFunction>>> graphs_;  // by layer (-1 embed)
  bool tied_copy_ = false;    // the last stage's copy of a tied embedding
  bool tied_master_ = false;  // the first stage's embedding, tied to a copy elsewhere
  int64_t local_parameters_ = 0;
};

}  // namespace tessera::parallel
