// ExpertParallelMoe: a models::MoeFfn with its experts sharded over an
// expert-parallel group `ep` (GShard / DeepSpeed-MoE / Megatron-Core).
//
// Built from a full MoeFfn (and the GptConfig it came from): the router is
// replicated, rank r keeps experts [r·E/ep, (r+1)·E/ep) (E % ep == 0, else
// OpError). Parameter names match the full layer for the experts it holds:
// "router.weight", "experts.<global e>.w_up.weight", ...
//
// Forward(x) has MoeFfn's semantics on this rank's tokens: the same routing
// (fp32 router, softmax, top-k, optional renormalization), the same capacity
// (computed from this rank's token count) and dropping order, and the same
// Switch aux loss, so each rank's output equals MoeFfn::Forward of its own x.
// The tokens travel through comm::moe (DeepEP's dispatch / combine,
// parallel/expert_parallel/token_dispatch.h):
//   1. layout: the kept choices (capacity-dropped ones are -1) and their
//      gates; each token goes once to each rank that holds one of its
//      experts;
//   2. dispatch: the rows arrive grouped by local expert (by source rank,
//      then token order within an expert); each local expert runs once on
//      its contiguous block, and the concatenated outputs are already in
//      the dispatch layout;
//   3. combine: each rank sums the gated outputs of a token's local experts
//      and sends one vector back; the source adds the ranks' sums in rank
//      order (= expert order, as MoeFfn), in fp32.
// Payload: the activations' precision (exact), or fp8 e4m3 for the
// forward dispatch with set_dispatch_payload (lossy; gradients stay exact).
// Backward flows through both exchanges (they are differentiable), so every
// rank of `ep` must call Forward the same number of times and backpropagate
// through each output's y, even with no tokens kept.
// Gradients: an expert's gradient sums the contributions of all ep ranks'
// tokens; the router's gradient is this rank's own (sum or average it over
// the data-parallel group like any replicated parameter). With a loss that
// is a mean over the dp ranks' batches, average expert gradients over the
// expert-data-parallel group and divide them by ep as well.
// Thread-safety: Forward mutates last_routing(); one thread per instance.
#pragma once

#include <memory>
#include <vector>

#include "tessera/comm/api/communicator.h"
#include "tessera/comm/moe/buffer.h"
#include "tessera/graph/layers.h"
#include "tessera/models/ffn.h"
#include "tessera/models/gpt_config.h"

namespace tessera::parallel {

// The local experts, registered under their global indices.
class ExpertShard : public graph::Module {
 public:
  models::Mlp& Add(int expert, std::unique_ptr<models::Mlp> mlp);
  models::Mlp& operator[](size_t j) const { return *experts_.at(j); }
  size_t size() const { return experts_.size(); }

 private:
  std::vector<std::unique_ptr<models::Mlp>> experts_;
};

class ExpertParallelMoe : public graph::Module {
 public:
  // `config` is the one `full` was built from; `ep` must outlive the layer.
  ExpertParallelMoe(const models::MoeFfn& full, const models::GptConfig& config, comm::Communicator* ep);

  models::MoeOutput Forward(const Tensor& x);  // x [B, T, d] (or [N, d]); y like x

  const graph::nn::Linear& router() const { return *router_; }
  const ExpertShard& local_experts() const { return *experts_; }
  int num_experts() const { return num_experts_; }
  int num_local_experts() const { return static_cast<int>(experts_->size()); }
  int first_expert() const { return first_expert_; }
  // Routing of this rank's tokens in the last Forward (as MoeFfn's).
  const models::MoeRouting& last_routing() const { return last_routing_; }
  // Rows this rank's experts processed in the last Forward (from all ranks).
  int64_t last_received_rows() const { return last_received_rows_; }
  // Bytes this rank sent through the MoE exchanges so far.
  uint64_t exchange_bytes_sent() const { return buffer_->bytes_sent(); }
  void set_dispatch_payload(comm::moe::Payload p) { payload_ = p; }

 private:
  comm::Communicator* ep_;
  int num_experts_;
  int top_k_;
  double capacity_factor_;
  bool normalize_top_k_;
  int first_expert_;
  std::unique_ptr<graph::nn::Linear> router_;
  std::unique_ptr<ExpertShard> experts_;
  models::MoeRouting last_routing_;
  int64_t last_received_rows_ = 0;
  std::unique_ptr<comm::moe::MoeBuffer> buffer_;
  comm::moe::Payload payload_ = comm::moe::Payload::kFloat32;  // bf16 activations: bf16
};

}  // namespace tessera::parallel
