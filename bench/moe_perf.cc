// MoE dispatch / combine benchmark (comm/moe), run under `tessera launch`:
//   tessera launch --nproc 4 -- build/bin/moe_perf --tokens 1024 --hidden 1024
// Normal mode: layout + dispatch + combine of `tokens` per rank, top-k of
// 2·ranks experts with random routing, against a plain all-to-all-v that
// moves the same per-peer bytes twice (there and back) in the same run,
// interleaved, on plain buffers and on shared (AllocShared) buffers.
// Low-latency mode (--ll): dispatch of `tokens` bf16 rows, started and
// hooked, against 2 x the 8-byte all-reduce latency plus a memcpy of the
// bytes each rank receives (all ranks copying at once, until the last is
// done). Rank 0 prints one JSON object per line
// (nlohmann): medians over --iters, each op's time the slowest rank's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm_bench_util.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/moe/buffer.h"
#include "tessera/comm/moe/low_latency.h"

using namespace tessera;
using namespace tessera::comm;

using bench::Check;
using bench::Median;
constexpr auto Timed = [](Communicator& c, auto&& fn) { return bench::TimedOnSlowestRank(c, fn); };

int main(int argc, char** argv) {
  int64_t tokens = 1024, hidden = 1024;
  int top_k = 2, iters = 15, experts_per_rank = 2;
  bool ll = false;
  std::string payload_name = "fp32";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--tokens") tokens = std::stoll(next());
    else if (a == "--hidden") hidden = std::stoll(next());
    else if (a == "--top-k") top_k = std::stoi(next());
    else if (a == "--iters") iters = std::stoi(next());
    else if (a == "--experts-per-rank") experts_per_rank = std::stoi(next());
    else if (a == "--payload") payload_name = next();
    else if (a == "--ll") ll = true;
    else {
      std::fprintf(stderr, "moe_perf: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  auto comm_or = Communicator::FromEnvironment();
  Check(comm_or.status(), "communicator");
  Communicator& c = **comm_or;
  const int n = c.size(), me = c.rank();
  const int experts = experts_per_rank * n;
  auto payload_or = moe::ParsePayload(payload_name);
  Check(payload_or.status(), "payload");
  const moe::Payload payload = *payload_or;
  const DataType dtype = ll || payload != moe::Payload::kFloat32 ? DataType::kBFloat16 : DataType::kFloat32;
  const size_t esz = dtype == DataType::kFloat32 ? 4 : 2;

  std::mt19937 rng(17 + me);
  std::vector<int64_t> idx(static_cast<size_t>(tokens) * top_k);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int64_t> pool(experts);
    for (int e = 0; e < experts; ++e) pool[e] = e;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int j = 0; j < top_k; ++j) idx[t * top_k + j] = pool[j];
  }
  std::vector<float> w(idx.size(), 0.5f);
  std::vector<uint8_t> x(static_cast<size_t>(tokens * hidden) * esz, 1);
  nlohmann::json out;
  out["ranks"] = n;
  out["tokens"] = tokens;
  out["hidden"] = hidden;
  out["top_k"] = top_k;
  out["experts"] = experts;
  out["payload"] = payload_name;
  out["zero_copy"] = c.zero_copy();
  out["direct_peer_reads"] = c.direct_peer_reads();

  if (!ll) {
    auto buf_or = moe::MoeBuffer::Create(&c, experts, hidden);
    Check(buf_or.status(), "buffer");
    moe::MoeBuffer& buf = **buf_or;
    auto h0 = buf.Layout(idx, top_k, w);
    Check(h0.status(), "layout");
    const auto& h = **h0;
    std::vector<uint8_t> rows(static_cast<size_t>(h.num_recv_rows() * hidden) * esz);
    std::vector<uint8_t> y(rows.size()), combined(x.size());
    // The plain all-to-all-v of the same per-peer bytes.
    const size_t row = moe::RowBytes(payload, hidden);
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t sat = 0, rat = 0, wire = 0;
    for (int r = 0; r < n; ++r) {
      sc[r] = static_cast<size_t>(h.send_offsets[r + 1] - h.send_offsets[r]) * row;
      rc[r] = static_cast<size_t>(h.recv_offsets[r + 1] - h.recv_offsets[r]) * row;
      sd[r] = sat;
      rd[r] = rat;
      sat += sc[r];
      rat += rc[r];
      if (r != me) wire += sc[r];
    }
    std::vector<uint8_t> ps(std::max<size_t>(sat, 1)), pr(std::max<size_t>(rat, 1));
    auto shared_s = AllocShared(std::max<size_t>(sat, 1));
    auto shared_r = AllocShared(std::max<size_t>(rat, 1));
    Check(shared_s.status(), "alloc");
    Check(shared_r.status(), "alloc");
    std::vector<double> t_moe, t_plain, t_shared, t_layout, t_dispatch, t_combine;
    for (int it = 0; it < iters + 2; ++it) {
      const double a = Timed(c, [&] {
        auto hh = buf.Layout(idx, top_k, w);
        Check(hh.status(), "layout");
        Check(buf.Dispatch(**hh, x.data(), dtype, payload, rows.data()), "dispatch");
        const moe::Payload back = payload == moe::Payload::kFp8E4m3 ? moe::Payload::kBFloat16 : payload;
        Check(buf.CombineGated(**hh, rows.data(), dtype, /*gates=*/true, back, combined.data()), "combine");
      });
      const double b = Timed(c, [&] {
        Check(c.AllToAllV(ps.data(), sc, sd, pr.data(), rc, rd, DataType::kUint8), "alltoallv");
        Check(c.AllToAllV(pr.data(), rc, rd, ps.data(), sc, sd, DataType::kUint8), "alltoallv back");
      });
      const double s = Timed(c, [&] {
        Check(c.AllToAllV(*shared_s, sc, sd, *shared_r, rc, rd, DataType::kUint8), "alltoallv shared");
        Check(c.AllToAllV(*shared_r, rc, rd, *shared_s, sc, sd, DataType::kUint8), "alltoallv shared back");
      });
      // The parts alone (not interleaved with the references).
      std::shared_ptr<const moe::DispatchHandle> hp;
      const double l = Timed(c, [&] {
        auto hh = buf.Layout(idx, top_k, w);
        Check(hh.status(), "layout");
        hp = *hh;
      });
      const double d = Timed(c, [&] { Check(buf.Dispatch(*hp, x.data(), dtype, payload, rows.data()), "dispatch"); });
      const double cb = Timed(c, [&] {
        const moe::Payload back = payload == moe::Payload::kFp8E4m3 ? moe::Payload::kBFloat16 : payload;
        Check(buf.CombineGated(*hp, rows.data(), dtype, /*gates=*/true, back, combined.data()), "combine");
      });
      if (it >= 2) {  // warm-up
        t_layout.push_back(l);
        t_dispatch.push_back(d);
        t_combine.push_back(cb);
        t_moe.push_back(a);
        t_plain.push_back(b);
        t_shared.push_back(s);
      }
    }
    double total_wire = static_cast<double>(wire);
    Check(c.AllReduce(&total_wire, &total_wire, 1, DataType::kFloat64, ReduceOp::kMax), "wire");
    out["mode"] = "normal";
    out["wire_bytes_per_rank_max"] = total_wire;
    out["moe_s"] = Median(t_moe);
    out["layout_s"] = Median(t_layout);
    out["dispatch_s"] = Median(t_dispatch);
    out["combine_s"] = Median(t_combine);
    out["alltoallv_s"] = Median(t_plain);
    out["alltoallv_shared_s"] = Median(t_shared);
    out["ratio_vs_alltoallv"] = Median(t_plain) / Median(t_moe);
    out["ratio_vs_alltoallv_shared"] = Median(t_shared) / Median(t_moe);
    Check(FreeShared(*shared_s), "free");
    Check(FreeShared(*shared_r), "free");
  } else {
    auto ll_or = moe::LowLatencyBuffer::Create(&c, experts, hidden, tokens, top_k, payload);
    Check(ll_or.status(), "ll buffer");
    moe::LowLatencyBuffer& buf = **ll_or;
    std::vector<uint8_t> packed(buf.recv_bytes(dtype));
    std::vector<double> t_ll, t_lat, t_copy;
    double one = 0;
    size_t recv_bytes = 0;
    for (int it = 0; it < iters + 2; ++it) {
      const double a = Timed(c, [&] {
        auto hook = buf.Dispatch(x.data(), dtype, idx, w, packed.data());
        Check(hook.status(), "ll dispatch");
        Check(hook->Wait(), "ll hook");
      });
      recv_bytes = 0;
      for (int j = 0; j < buf.num_local_experts(); ++j) recv_bytes += static_cast<size_t>(buf.count(j) * hidden) * esz;
      const double b = Timed(c, [&] {
        for (int k = 0; k < 10; ++k) Check(c.AllReduce(&one, &one, 1, DataType::kFloat64, ReduceOp::kSum), "ar");
      }) / 10;
      std::vector<uint8_t> dst(std::max<size_t>(recv_bytes, 1));
      std::memset(dst.data(), 0, dst.size());
      // Every rank copies its received bytes at once; the time until all
      // are done (a barrier, less a barrier's own time): on a machine with
      // fewer cores than ranks the copies share them, as the dispatch does.
      const double bar = Timed(c, [&] {
        for (int k = 0; k < 10; ++k) Check(c.Barrier(), "barrier");
      }) / 10;
      const double cp = std::max(0.0, Timed(c, [&] {
        std::memcpy(dst.data(), packed.data(), recv_bytes);
        Check(c.Barrier(), "barrier");
      }) - bar);
      if (it >= 2) {
        t_ll.push_back(a);
        t_lat.push_back(b);
        t_copy.push_back(cp);
      }
    }
    out["mode"] = "low_latency";
    out["ll_dispatch_s"] = Median(t_ll);
    out["allreduce_8b_s"] = Median(t_lat);
    out["copy_s"] = Median(t_copy);
    out["received_bytes_rank0"] = recv_bytes;
    out["bound_s"] = 2 * Median(t_lat) + Median(t_copy);
    out["ratio_to_bound"] = Median(t_ll) / (2 * Median(t_lat) + Median(t_copy));
  }
  if (me == 0) std::printf("%s\n", out.dump().c_str());
  Check(c.Barrier(), "final barrier");
  return 0;
}
