#include "tessera/comm/moe/layout.h"

namespace tessera::comm::moe {

StatusOr<DispatchLayout> GetDispatchLayout(std::span<const int64_t> topk_idx, int64_t num_tokens, int top_k,
                                           int num_experts, int num_ranks) {
  if (num_ranks < 1 || num_experts < 1 || num_experts % num_ranks != 0) {
    return InvalidArgument("MoE layout: {} experts cannot be sharded over {} ranks (need a positive multiple)",
                           num_experts, num_ranks);
  }
  if (top_k < 1 || num_tokens < 0 || topk_idx.size() != static_cast<size_t>(num_tokens) * top_k) {
    return InvalidArgument("MoE layout: topk_idx has {} entries, expected tokens {} x top_k {}", topk_idx.size(),
                           num_tokens, top_k);
  }
  DispatchLayout l;
  l.num_ranks = num_ranks;
  l.num_experts = num_experts;
  l.top_k = top_k;
  l.num_tokens = num_tokens;
  l.tokens_per_rank.assign(num_ranks, 0);
  l.tokens_per_expert.assign(num_experts, 0);
  l.token_in_rank.assign(static_cast<size_t>(num_tokens) * num_ranks, 0);
  const int local = num_experts / num_ranks;
  for (int64_t t = 0; t < num_tokens; ++t) {
    uint8_t* in_rank = &l.token_in_rank[static_cast<size_t>(t) * num_ranks];
    for (int j = 0; j < top_k; ++j) {
      const int64_t e = topk_idx[static_cast<size_t>(t) * top_k + j];
      if (e == -1) continue;
      if (e < 0 || e >= num_experts) {
        return InvalidArgument("MoE layout: token {} choice {} names expert {}, outside [0, {}) (or -1 for none)", t,
                               j, e, num_experts);
      }
      ++l.tokens_per_expert[e];
      const int r = static_cast<int>(e / local);
      if (!in_rank[r]) {
        in_rank[r] = 1;
        ++l.tokens_per_rank[r];
      }
    }
  }
  return l;
}

}  // namespace tessera::comm::moe
