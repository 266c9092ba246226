// MoE dispatch layout (DeepEP's get_dispatch_layout) and the handle that
// dispatch and combine share (comm/moe/buffer.h).
//
// Routing input: topk_idx [T, k] global expert ids (-1 = no expert: a
// dropped or masked choice). Experts are sharded contiguously: rank r owns
// experts [r·L, (r+1)·L), L = E / ranks.
//   tokens_per_rank[r]   tokens that go to rank r (a token counts once per
//                        rank even when several of its experts live there)
//   tokens_per_expert[e] choices of expert e
//   token_in_rank[t·R+r] whether token t goes to rank r
//
// DispatchHandle: what both sides learned in MoeBuffer::Layout. The
// receive side's rows are grouped by local expert: expert j's rows are
// [expert_offsets[j], expert_offsets[j+1]), within it by source rank, and
// within a source in that source's token order. A token with several
// choices on one rank arrives once and fills one row per choice.
// Plain values; immutable once built.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::comm::moe {

struct DispatchLayout {
  int num_ranks = 1;
  int num_experts = 0;
  int top_k = 0;
  int64_t num_tokens = 0;
  std::vector<int64_t> tokens_per_rank;
  std::vector<int64_t> tokens_per_expert;
  std::vector<uint8_t> token_in_rank;
};

// Fails (naming the token and choice) on an expert id outside [-1, E), and
// when E is not a multiple of the rank count.
StatusOr<DispatchLayout> GetDispatchLayout(std::span<const int64_t> topk_idx, int64_t num_tokens, int top_k,
                                           int num_experts, int num_ranks);

struct DispatchHandle {
  int rank = 0;
  int num_ranks = 1;
  int num_experts = 0;
  int local_experts = 0;
  int top_k = 0;
  int64_t num_tokens = 0;
  DispatchLayout layout;
  // Send side: the tokens sent to each rank, in token order (send_offsets
  // [R+1] into send_tokens).
  std::vector<int64_t> send_offsets, send_tokens;
  // Tokens each rank sends each rank: counts_to[s·R + r], and choices of
  // each expert by each rank: expert_choices[s·E + e] (every rank knows
  // all of them).
  std::vector<int64_t> counts_to, expert_choices;
  // Source side: per (token, choice) its expert (topk_idx as given), the
  // row it fills on the expert's rank (-1: none) and its weight as given
  // to Layout (1 when none were).
  std::vector<int64_t> topk_idx, remote_rows;
  std::vector<float> topk_weights;
  // Receive side: tokens received from each source (recv_offsets [R+1]:
  // received token i of source s is entry recv_offsets[s] + i, the
  // source's token recv_src_tokens[i]); for each received token its rows
  // (row_offsets [received+1] into rows_of and choice_of: the row and the
  // top-k choice it came from).
  std::vector<int64_t> recv_offsets, recv_src_tokens;
  std::vector<int64_t> row_offsets, rows_of;
  std::vector<int32_t> choice_of;
  // Rows per local expert (expert_offsets [L+1]); each row's top-k weight
  // (the weights given to Layout, else 1).
  std::vector<int64_t> expert_offsets;
  std::vector<float> row_weights;

  int64_t num_recv_rows() const { return expert_offsets.empty() ? 0 : expert_offsets.back(); }
  int64_t num_recv_tokens() const { return recv_offsets.empty() ? 0 : recv_offsets.back(); }
  int64_t num_sent_tokens() const { return send_offsets.empty() ? 0 : send_offsets.back(); }
  int64_t rows_of_expert(int j) const { return expert_offsets[j + 1] - expert_offsets[j]; }
};

}  // namespace tessera::comm::moe
