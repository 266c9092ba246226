// ParallelPlan: one parallel training configuration the planner evaluates —
// the 3D (+expert) decomposition, batch split, ZeRO stage, recompute,
// precision, offload and pipeline schedule.
//
// Layout (Megatron's rank order, tp innermost): world = pp x dp x tp; the tp
// ranks of a group are consecutive, the dp peers of a rank are tp apart, and
// the pipeline stages are dp*tp apart. In MoE layers the dp*tp ranks of a
// stage are regrouped as ep x edp (expert tensor parallelism 1: each rank
// holds experts/ep whole experts; tokens are sequence-split over tp first),
// so ep must divide dp*tp and the experts; the ep group is consecutive ranks.
// Plain value type; thread-safe functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/base/status.h"
#include "tessera/plan/model_spec.h"

namespace tessera::plan {

enum class Recompute { kNone, kSelective, kFull };
enum class Precision { kBf16, kFp8, kFp32 };  // kFp32: fp32 kernels (Tessera on CPUs)
enum class Schedule {
  kOneFOneB,     // PipeDream-flush 1F1B: bubble (p-1)/m
  kInterleaved,  // Megatron interleaved 1F1B with vpp chunks: (p-1)/(m*vpp)
  kZeroBubble,   // ZB-H1 (Qi et al. 2023): backward split into B and W, bubble ~ (p-1)*t_f
};

std::string_view RecomputeName(Recompute r);
std::string_view PrecisionName(Precision p);
std::string_view ScheduleName(Schedule s);
StatusOr<Recompute> ParseRecompute(std::string_view text);   // none|selective|full
StatusOr<Precision> ParsePrecision(std::string_view text);   // bf16|fp8|fp32
StatusOr<Schedule> ParseSchedule(std::string_view text);     // 1f1b|interleaved|zb

// Bytes per parameter of the training state.
enum class StateLayout {
  kMixedAdam,  // bf16 weights 2 + bf16 grads 2 + fp32 master and moments 12 (ZeRO paper, Megatron)
  kFp32Adam,   // fp32 weights 4 + fp32 grads 4 + moments 8 (fp32 training; Tessera's CPU runtime)
};

struct ParallelPlan {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int ep = 1;   // expert parallel (MoE layers only)
  int vpp = 1;  // virtual pipeline chunks per device (interleaved schedule)
  int64_t micro_batch = 1;   // sequences per micro-batch per dp replica
  int64_t global_batch = 1;  // sequences per step
  int64_t seq_len = 0;       // 0: the model's
  int zero = 0;              // 0..3
  Recompute recompute = Recompute::kNone;
  Precision precision = Precision::kBf16;
  Schedule schedule = Schedule::kOneFOneB;
  bool sequence_parallel = true;     // Megatron SP (only matters when tp > 1)
  bool flash_attention = true;       // no s x s score tensors in memory or HBM traffic
  bool offload_optimizer = false;    // optimizer states (fp32 master + moments) on the host tier
  bool overlap_grad_reduce = true;   // dp gradient reduction overlapped with the last backward
  StateLayout state_layout = StateLayout::kMixedAdam;

  int64_t Devices() const { return static_cast<int64_t>(dp) * tp * pp; }
  int64_t MicroBatches() const { return global_batch / (static_cast<int64_t>(dp) * micro_batch); }
  int64_t Seq(const ModelSpec& m) const { return seq_len > 0 ? seq_len : m.seq_len; }
  // Short one-line description ("dp=8 tp=8 pp=4 ep=1 vpp=1 mb=1 zero=1 ...").
  std::string ToString() const;
};

// Checks the plan against the model: divisibility of layers by pp*vpp,
// heads/kv_heads/ffn by tp, experts and dp*tp by ep, global batch by
// dp*micro_batch, the schedule vs vpp. Errors name the fields and values.
Status ValidatePlan(const ModelSpec& m, const ParallelPlan& p);

}  // namespace tessera::plan
