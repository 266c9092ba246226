#include "tessera/plan/parallel_plan.h"

#include <fmt/format.h>

namespace tessera::plan {

std::string_view RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp8: return "fp8";
    case Precision::kFp32: return "fp32";
    case Precision::kBf16: break;
  }
  return "bf16";
}

std::string_view ScheduleName(Schedule s) {
  switch (s) {
    case Schedule::kOneFOneB: return "1f1b";
    case Schedule::kInterleaved: return "interleaved";
    case Schedule::kZeroBubble: return "zb";
  }
  return "?";
}

StatusOr<Recompute> ParseRecompute(std::string_view text) {
  if (text == "none") return Recompute::kNone;
  if (text == "selective") return Recompute::kSelective;
  if (text == "full") return Recompute::kFull;
  return InvalidArgument("recompute must be none|selective|full, got '{}'", text);
}

StatusOr<Precision> ParsePrecision(std::string_view text) {
  if (text == "bf16") return Precision::kBf16;
  if (text == "fp8") return Precision::kFp8;
  if (text == "fp32") return Precision::kFp32;
  return InvalidArgument("precision must be bf16|fp8|fp32, got '{}'", text);
}

StatusOr<Schedule> ParseSchedule(std::string_view text) {
  if (text == "1f1b") return Schedule::kOneFOneB;
  if (text == "interleaved") return Schedule::kInterleaved;
  if (text == "zb" || text == "zero-bubble" || text == "zb-h1") return Schedule::kZeroBubble;
  return InvalidArgument("schedule must be 1f1b|interleaved|zb, got '{}'", text);
}

std::string ParallelPlan::ToString() const {
  return fmt::format("dp={} tp={} pp={} ep={} vpp={} mb={} gb={} zero={} recompute={} precision={} schedule={}{}{}",
                     dp, tp, pp, ep, vpp, micro_batch, global_batch, zero, RecomputeName(recompute),
                     PrecisionName(precision), ScheduleName(schedule), sequence_parallel && tp > 1 ? " sp" : "",
                     offload_optimizer ? " offload" : "");
}

Status ValidatePlan(const ModelSpec& m, const ParallelPlan& p) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument("plan [{}] for model '{}': {}", p.ToString(), m.name, what);
  };
  if (p.dp < 1 || p.tp < 1 || p.pp < 1 || p.ep < 1 || p.vpp < 1) {
    return bad("dp, tp, pp, ep and vpp must be >= 1");
  }
  if (p.micro_batch < 1 || p.global_batch < 1) return bad("micro_batch and global_batch must be >= 1");
  if (p.zero < 0 || p.zero > 3) return bad(fmt::format("zero must be 0..3, got {}", p.zero));
  if (p.global_batch % (static_cast<int64_t>(p.dp) * p.micro_batch) != 0) {
    return bad(fmt::format("global_batch {} is not a multiple of dp*micro_batch = {}", p.global_batch,
                           static_cast<int64_t>(p.dp) * p.micro_batch));
  }
  if (static_cast<int64_t>(p.pp) * p.vpp > m.layers) {
    return bad(fmt::format("pp*vpp = {} exceeds the {} layers", p.pp * p.vpp, m.layers));
  }
  if (m.heads % p.tp != 0) return bad(fmt::format("heads {} not divisible by tp {}", m.heads, p.tp));
  if (m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0) {
    return bad(fmt::format("kv_heads {} and tp {}: neither divides the other", m.kv_heads, p.tp));
  }
  if (m.ffn_hidden > 0 && m.ffn_hidden % p.tp != 0) {
    return bad(fmt::format("ffn_hidden {} not divisible by tp {}", m.ffn_hidden, p.tp));
  }
  if (m.IsMoe()) {
    if (m.moe.experts % p.ep != 0) return bad(fmt::format("experts {} not divisible by ep {}", m.moe.experts, p.ep));
    if ((static_cast<int64_t>(p.dp) * p.tp) % p.ep != 0) {
      return bad(fmt::format("ep {} must divide dp*tp = {}", p.ep, p.dp * p.tp));
    }
  } else if (p.ep != 1) {
    return bad("ep > 1 needs an MoE model");
  }
  if ((p.schedule == Schedule::kInterleaved) != (p.vpp > 1)) {
    return bad("the interleaved schedule needs vpp > 1, and vpp > 1 needs the interleaved schedule");
  }
  if (p.vpp > 1 && p.pp < 2) return bad("vpp > 1 needs pp >= 2");
  if (p.vpp > 1 && p.MicroBatches() % p.pp != 0) {
    return bad(fmt::format("the interleaved schedule needs the {} micro-batches to be a multiple of pp {}",
                           p.MicroBatches(), p.pp));
  }
  if (p.Seq(m) < 1) return bad("seq_len must be >= 1");
  return Status::Ok();
}

}  // namespace tessera::plan
