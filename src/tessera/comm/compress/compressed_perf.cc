#include "tessera/comm/compress/compressed_perf.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "tessera/comm/compress/compressed_collectives.h"

namespace tessera::comm::compress {
namespace {

using Clock = std::chrono::steady_clock;

// Deterministic gradient-like values (sum of two hashes ~ triangular noise
// with a per-element trend), different on each rank.
void Fill(std::vector<float>& x, int rank) {
  for (size_t i = 0; i < x.size(); ++i) {
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) + 1) * 0xD1B54A32D192ED03ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    const float u = static_cast<float>(h & 0xffffff) / 16777216.0f - 0.5f;
    x[i] = 1e-3f * (u + 0.3f * std::sin(0.001f * static_cast<float>(i)));
  }
}

}  // namespace

StatusOr<std::vector<CompressedPerfRow>> RunCompressedPerf(Communicator& comm, const PerfOptions& o,
                                                           const CompressionSpec& spec, std::FILE* out) {
  if (o.op != PerfOp::kAllReduce && o.op != PerfOp::kReduceScatter) {
    return InvalidArgument("--compress works with allreduce and reducescatter (got {})", PerfOpName(o.op));
  }
  if (o.dtype != DataType::kFloat32) return InvalidArgument("--compress needs -d float (fp32 gradients)");
  if (!spec.enabled()) return InvalidArgument("--compress none: run without --compress");
  const int n = comm.size(), rank = comm.rank();
  const bool all_reduce = o.op == PerfOp::kAllReduce;
  const bool print = rank == 0 && out != nullptr;
  if (print) {
    std::fprintf(out,
                 "# Tessera compressed %s (%s, error feedback on) over %d rank(s), transport %s\n"
                 "# size: logical fp32 bytes; algbw/busbw on them (compare with the fp32 run); sent: bytes per "
                 "rank per call on the wire\n"
                 "#       size         count    time   algbw   busbw         sent   ratio   maxerr\n"
                 "#        (B)    (elements)    (us)  (GB/s)  (GB/s)          (B)              (rel)\n",
                 std::string(PerfOpName(o.op)).c_str(), CompressionSpecName(spec).c_str(), n,
                 std::string(transport::TransportKindName(comm.transport_kind())).c_str());
    std::fflush(out);
  }
  std::vector<CompressedPerfRow> rows;
  for (size_t bytes = std::max<size_t>(o.min_bytes, 4 * n); bytes <= o.max_bytes;) {
    // all_reduce: count elements per rank; reduce_scatter: count per rank's block.
    const size_t total = bytes / 4 / (all_reduce ? 1 : n) * (all_reduce ? 1 : n);
    const size_t count = all_reduce ? total : total / n;
    std::vector<float> input(total), work(total), shard(all_reduce ? 0 : count);
    Fill(input, rank);
    CompressedCollectives cc(&comm, spec);
    auto call = [&]() -> Status {
      std::copy(input.begin(), input.end(), work.begin());
      return all_reduce ? cc.AllReduce("perf", work.data(), total)
                        : cc.ReduceScatter("perf", work.data(), shard.data(), count);
    };
    for (int i = 0; i < o.warmup; ++i) TESSERA_RETURN_IF_ERROR(call());
    TESSERA_RETURN_IF_ERROR(comm.Barrier());
    cc.reset_bytes();
    double secs = 0;
    for (int i = 0; i < o.iters; ++i) {
      // The copy of the input is not timed (a gradient buffer is filled by backward).
      std::copy(input.begin(), input.end(), work.begin());
      const auto t0 = Clock::now();
      TESSERA_RETURN_IF_ERROR(all_reduce ? cc.AllReduce("perf", work.data(), total)
                                         : cc.ReduceScatter("perf", work.data(), shard.data(), count));
      secs += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    CompressedPerfRow row;
    row.size = total * 4;
    const double mine[3] = {secs / std::max(1, o.iters),
                            static_cast<double>(cc.bytes().sent) / std::max(1, o.iters),
                            cc.bytes().fp32_equivalent > 0
                                ? static_cast<double>(cc.bytes().sent) / cc.bytes().fp32_equivalent
                                : 0.0};
    double sum[3];
    TESSERA_RETURN_IF_ERROR(comm.AllReduce(mine, sum, 3, DataType::kFloat64, ReduceOp::kSum));
    const double t = sum[0] / n;
    row.time_us = t * 1e6;
    row.sent_bytes = sum[1] / n;
    row.ratio = sum[2] / n;
    row.algbw = t > 0 ? static_cast<double>(row.size) / t / 1e9 : 0;
    row.busbw = row.algbw * BusBandwidthFactor(o.op, n);
    if (o.check) {
      // One call without error feedback against the exact fp32 sum.
      CompressionSpec plain = spec;
      plain.error_feedback = false;
      CompressedCollectives check(&comm, plain);
      std::copy(input.begin(), input.end(), work.begin());
      std::vector<float> exact(total);
      TESSERA_RETURN_IF_ERROR(comm.AllReduce(input.data(), exact.data(), total, DataType::kFloat32, ReduceOp::kSum));
      const float* got = work.data();
      size_t lo = 0, m = total;
      if (all_reduce) {
        TESSERA_RETURN_IF_ERROR(check.AllReduce("check", work.data(), total));
      } else {
        TESSERA_RETURN_IF_ERROR(check.ReduceScatter("check", work.data(), shard.data(), count));
        got = shard.data();
        lo = rank * count;
        m = count;
      }
      double err = 0, mag = 0;
      for (size_t i = 0; i < m; ++i) {
        err = std::max(err, std::fabs(static_cast<double>(got[i]) - exact[lo + i]));
        mag = std::max(mag, std::fabs(static_cast<double>(exact[lo + i])));
      }
      double rel = mag > 0 ? err / mag : err, worst = 0;
      TESSERA_RETURN_IF_ERROR(comm.AllReduce(&rel, &worst, 1, DataType::kFloat64, ReduceOp::kMax));
      row.max_rel_error = worst;
    }
    if (print) {
      std::fprintf(out, "%12zu  %12zu  %7.0f  %6.3f  %6.3f  %11.0f  %6.4f  %7.1e\n", row.size,
                   all_reduce ? total : count, row.time_us, row.algbw, row.busbw, row.sent_bytes, row.ratio,
                   row.max_rel_error);
      std::fflush(out);
    }
    rows.push_back(row);
    const size_t next = o.step ? bytes + o.step : static_cast<size_t>(std::ceil(static_cast<double>(bytes) * o.factor));
    if (next <= bytes) break;
    bytes = next;
  }
  if (print) {
    double bw = 0;
    for (const auto& r : rows) bw += r.busbw;
    std::fprintf(out, "# Avg bus bandwidth    : %g \n#\n", rows.empty() ? 0.0 : bw / rows.size());
  }
  return rows;
}

}  // namespace tessera::comm::compress
