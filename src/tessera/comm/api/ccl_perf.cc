#include "tessera/comm/api/ccl_perf.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>

#include <fmt/format.h>

#include "tessera/base/float16.h"
#include "tessera/comm/api/element_access.h"

namespace tessera::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Buffers allocated once and touched once: private (huge-page advised)
// or, for -R 1, shared (AllocShared: peers map them, zero copy).
class PerfBuffer {
 public:
  static StatusOr<std::unique_ptr<PerfBuffer>> Create(size_t bytes, bool shared) {
    std::unique_ptr<PerfBuffer> b(new PerfBuffer());
    b->bytes_ = std::max<size_t>(bytes, 4096);
    b->shared_ = shared;
    if (shared) {
      TESSERA_ASSIGN_OR_RETURN(void* p, AllocShared(b->bytes_));
      b->data_ = static_cast<uint8_t*>(p);
      return b;
    }
    void* p = mmap(nullptr, b->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return ResourceExhausted("ccl-perf: cannot map {} bytes", b->bytes_);
    madvise(p, b->bytes_, MADV_HUGEPAGE);
    std::memset(p, 0, b->bytes_);
    b->data_ = static_cast<uint8_t*>(p);
    return b;
  }
  ~PerfBuffer() {
    if (shared_) {
      (void)FreeShared(data_);
    } else {
      munmap(data_, bytes_);
    }
  }
  uint8_t* data() const { return data_; }

 private:
  PerfBuffer() = default;
  size_t bytes_ = 0;
  bool shared_ = false;
  uint8_t* data_ = nullptr;
};

double Input(int rank, size_t i, DataType dt, ReduceOp op) {
  const int64_t h = static_cast<int64_t>((static_cast<uint64_t>(rank) * 7919u + i * 104729u) % 5u);
  if (op == ReduceOp::kProd) return dt == DataType::kUint8 ? (h % 2) + 1 : ((h % 3) - 1 == 0 ? 2 : (h % 3) - 1);
  return dt == DataType::kUint8 ? static_cast<double>(h) : static_cast<double>(h - 2);
}

double Expected(int n, size_t i, DataType dt, ReduceOp op) {
  double acc = Input(0, i, dt, op);
  for (int r = 1; r < n; ++r) {
    const double v = Input(r, i, dt, op);
    acc = ReduceReference(op, acc, v);
  }
  uint8_t tmp[8];
  SetElement(tmp, dt, 0, acc);  // integers wrap like the library
  acc = GetElement(tmp, dt, 0);
  if (op == ReduceOp::kAvg) acc = IsFloatingPoint(dt) ? acc / n : std::trunc(acc / n);
  SetElement(tmp, dt, 0, acc);
  return GetElement(tmp, dt, 0);
}

bool Matches(double got, double want, DataType dt, ReduceOp op) {
  if (op != ReduceOp::kAvg || !IsFloatingPoint(dt)) return got == want;
  const double tol = dt == DataType::kBFloat16 ? 1e-2 : dt == DataType::kFloat16 ? 2e-3 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

bool Reduces(PerfOp op) {
  return op == PerfOp::kAllReduce || op == PerfOp::kReduceScatter || op == PerfOp::kReduce;
}
bool Rooted(PerfOp op) { return op == PerfOp::kBroadcast || op == PerfOp::kReduce; }

struct Shape {
  size_t count = 0;      // the "count" column (per rank for gathered ops)
  size_t elements = 0;   // elements of the whole array ("size" / dtype)
};

Shape ShapeFor(PerfOp op, size_t bytes, size_t elem, int n) {
  Shape s;
  const size_t total = bytes / elem;
  switch (op) {
    case PerfOp::kAllGather:
    case PerfOp::kReduceScatter:
    case PerfOp::kAllToAll:
      s.count = total / n;
      s.elements = s.count * n;
      break;
    default:
      s.count = total;
      s.elements = total;
  }
  return s;
}

class Runner {
 public:
  Runner(Communicator& comm, const PerfOptions& o, uint8_t* send, uint8_t* recv)
      : c_(comm), o_(o), send_(send), recv_(recv), n_(comm.size()), r_(comm.rank()), elem_(DataTypeSize(o.dtype)) {}

  // The operation's buffers for a placement.
  CollectiveArgs Args(const Shape& s, bool in_place) const {
    CollectiveArgs a;
    a.dtype = o_.dtype;
    a.op = o_.redop;
    a.root = o_.root;
    a.count = s.count;
    a.send = send_;
    a.recv = recv_;
    switch (o_.op) {
      case PerfOp::kAllReduce: a.kind = CollectiveKind::kAllReduce; break;
      case PerfOp::kAllGather:
        a.kind = CollectiveKind::kAllGather;
        if (in_place) a.send = recv_ + r_ * s.count * elem_;
        break;
      case PerfOp::kReduceScatter:
        a.kind = CollectiveKind::kReduceScatter;
        if (in_place) a.recv = send_ + r_ * s.count * elem_;
        break;
      case PerfOp::kAllToAll: a.kind = CollectiveKind::kAllToAll; break;
      case PerfOp::kBroadcast: a.kind = CollectiveKind::kBroadcast; break;
      case PerfOp::kReduce: a.kind = CollectiveKind::kReduce; break;
      case PerfOp::kSendRecv:
        a.kind = CollectiveKind::kSendRecv;
        a.peer = (r_ + 1) % n_;
        a.recv_peer = (r_ + n_ - 1) % n_;
        a.recv_count = s.count;
        break;
    }
    if (in_place && o_.op != PerfOp::kAllGather && o_.op != PerfOp::kReduceScatter) a.send = a.recv;
    return a;
  }

  void FillInputs(const CollectiveArgs& a, const Shape& s) const {
    const auto* send = static_cast<const uint8_t*>(a.send);
    auto* in = const_cast<uint8_t*>(send);
    const ReduceOp op = Reduces(o_.op) ? o_.redop : ReduceOp::kSum;
    size_t n_in = s.count;
    if (o_.op == PerfOp::kReduceScatter || o_.op == PerfOp::kAllToAll) n_in = s.count * n_;
    for (size_t i = 0; i < n_in; ++i) SetElement(in, o_.dtype, i, Input(r_, i, o_.dtype, op));
  }

  int64_t CountWrong(const CollectiveArgs& a, const Shape& s) const {
    const auto* out = static_cast<const uint8_t*>(a.recv);
    const DataType dt = o_.dtype;
    int64_t wrong = 0;
    switch (o_.op) {
      case PerfOp::kAllReduce:
        for (size_t i = 0; i < s.count; ++i) wrong += !Matches(GetElement(out, dt, i), Expected(n_, i, dt, o_.redop), dt, o_.redop);
        break;
      case PerfOp::kReduce:
        if (r_ != o_.root) break;
        for (size_t i = 0; i < s.count; ++i) wrong += !Matches(GetElement(out, dt, i), Expected(n_, i, dt, o_.redop), dt, o_.redop);
        break;
      case PerfOp::kReduceScatter:
        for (size_t i = 0; i < s.count; ++i) {
          wrong += !Matches(GetElement(out, dt, i), Expected(n_, r_ * s.count + i, dt, o_.redop), dt, o_.redop);
        }
        break;
      case PerfOp::kAllGather:
        for (int j = 0; j < n_; ++j) {
          for (size_t i = 0; i < s.count; ++i) wrong += GetElement(out, dt, j * s.count + i) != Input(j, i, dt, ReduceOp::kSum);
        }
        break;
      case PerfOp::kAllToAll:
        for (int j = 0; j < n_; ++j) {
          for (size_t i = 0; i < s.count; ++i) {
            wrong += GetElement(out, dt, j * s.count + i) != Input(j, r_ * s.count + i, dt, ReduceOp::kSum);
          }
        }
        break;
      case PerfOp::kBroadcast:
        for (size_t i = 0; i < s.count; ++i) wrong += GetElement(out, dt, i) != Input(o_.root, i, dt, ReduceOp::kSum);
        break;
      case PerfOp::kSendRecv:
        for (size_t i = 0; i < s.count; ++i) wrong += GetElement(out, dt, i) != Input((r_ + n_ - 1) % n_, i, dt, ReduceOp::kSum);
        break;
    }
    return wrong;
  }

  // Mean seconds per iteration on this rank.
  StatusOr<double> Time(const CollectiveArgs& a) {
    for (int i = 0; i < o_.warmup; ++i) TESSERA_RETURN_IF_ERROR(c_.Run(a));
    TESSERA_RETURN_IF_ERROR(c_.Barrier());
    const auto t0 = Clock::now();
    if (o_.blocking) {
      for (int i = 0; i < o_.iters; ++i) TESSERA_RETURN_IF_ERROR(c_.Run(a));
    } else {
      works_.clear();
      for (int i = 0; i < o_.iters; ++i) works_.push_back(c_.SubmitAsync(a));
      for (Work& w : works_) TESSERA_RETURN_IF_ERROR(w.Wait());
    }
    return std::chrono::duration<double>(Clock::now() - t0).count() / std::max(1, o_.iters);
  }

  // Combines a per-rank time over ranks (-a).
  StatusOr<double> Combine(double seconds) {
    double v = seconds, out = 0;
    ReduceOp op = o_.average == 2 ? ReduceOp::kMin : o_.average == 3 ? ReduceOp::kMax : ReduceOp::kAvg;
    if (o_.average == 0) {
      TESSERA_RETURN_IF_ERROR(c_.Broadcast(&v, &out, 1, DataType::kFloat64, 0));
      return out;
    }
    TESSERA_RETURN_IF_ERROR(c_.AllReduce(&v, &out, 1, DataType::kFloat64, op));
    return out;
  }

 private:
  Communicator& c_;
  const PerfOptions& o_;
  uint8_t* send_;
  uint8_t* recv_;
  int n_;
  int r_;
  size_t elem_;
  std::vector<Work> works_;
};

std::string TimeText(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

}  // namespace

StatusOr<PerfOp> ParsePerfOp(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
  t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
  if (t == "allreduce") return PerfOp::kAllReduce;
  if (t == "allgather") return PerfOp::kAllGather;
  if (t == "reducescatter") return PerfOp::kReduceScatter;
  if (t == "alltoall") return PerfOp::kAllToAll;
  if (t == "broadcast" || t == "bcast") return PerfOp::kBroadcast;
  if (t == "reduce") return PerfOp::kReduce;
  if (t == "sendrecv") return PerfOp::kSendRecv;
  return InvalidArgument(
      "unknown operation '{}' (expected allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv)",
      text);
}

std::string_view PerfOpName(PerfOp op) {
  switch (op) {
    case PerfOp::kAllReduce: return "all_reduce";
    case PerfOp::kAllGather: return "all_gather";
    case PerfOp::kReduceScatter: return "reduce_scatter";
    case PerfOp::kAllToAll: return "alltoall";
    case PerfOp::kBroadcast: return "broadcast";
    case PerfOp::kReduce: return "reduce";
    case PerfOp::kSendRecv: return "sendrecv";
  }
  return "?";
}

double BusBandwidthFactor(PerfOp op, int n) {
  switch (op) {
    case PerfOp::kAllReduce: return 2.0 * (n - 1) / n;
    case PerfOp::kAllGather:
    case PerfOp::kReduceScatter:
    case PerfOp::kAllToAll: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

StatusOr<size_t> ParseByteSize(std::string_view text) {
  if (text.empty()) return InvalidArgument("empty size");
  size_t mult = 1;
  std::string t(text);
  const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
  if (last == 'K' || last == 'M' || last == 'G' || last == 'T') {
    mult = last == 'K' ? 1ull << 10 : last == 'M' ? 1ull << 20 : last == 'G' ? 1ull << 30 : 1ull << 40;
    t.pop_back();
  }
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](unsigned char ch) { return std::isdigit(ch); })) {
    return InvalidArgument("bad size '{}' (expected a number with an optional K, M, G suffix)", text);
  }
  return static_cast<size_t>(std::stoull(t)) * mult;
}

StatusOr<PerfResult> RunPerf(Communicator& comm, const PerfOptions& o, std::FILE* out) {
  if (o.min_bytes > o.max_bytes) return InvalidArgument("-b {} exceeds -e {}", o.min_bytes, o.max_bytes);
  if (o.step == 0 && !(o.factor > 1)) return InvalidArgument("-f must be > 1 (got {})", o.factor);
  if (Rooted(o.op) && (o.root < 0 || o.root >= comm.size())) {
    return InvalidArgument("-r {} is not a rank of [0, {})", o.root, comm.size());
  }
  const int n = comm.size();
  const int me = comm.rank();
  const bool print = me == 0 && out != nullptr;
  const size_t elem = DataTypeSize(o.dtype);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<PerfBuffer> send, PerfBuffer::Create(o.max_bytes + 64, o.shared_buffers));
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<PerfBuffer> recv, PerfBuffer::Create(o.max_bytes + 64, o.shared_buffers));
  Runner runner(comm, o, send->data(), recv->data());

  // Who is where (rank 0 prints it).
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  struct Who {
    char host[64];
    int32_t pid;
  } mine{}, *all = nullptr;
  std::memcpy(mine.host, host, sizeof(host));
  mine.pid = getpid();
  std::vector<Who> everyone(n);
  all = everyone.data();
  TESSERA_RETURN_IF_ERROR(comm.AllGather(&mine, all, sizeof(Who), DataType::kUint8));
  if (print) {
    std::fprintf(out,
                 "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d agg iters: 1 "
                 "validation: %d graph: 0\n#\n# Using devices\n",
                 o.min_bytes, o.max_bytes,
                 o.step ? fmt::format("{}(bytes)", o.step).c_str() : fmt::format("{:g}(factor)", o.factor).c_str(),
                 o.warmup, o.iters, o.check ? 1 : 0);
    for (int r = 0; r < n; ++r) {
      std::fprintf(out, "#  Rank %2d Group  0 Pid %6d on %10s device  0 [cpu] %s\n", r, all[r].pid, all[r].host,
                   std::string(transport::TransportKindName(comm.transport_kind())).c_str());
    }
    CollectiveArgs probe = runner.Args(ShapeFor(o.op, o.max_bytes, elem, n), false);
    std::fprintf(out, "# Tessera %s over %d rank(s), %s, %s buffers; at %zu bytes: %s\n",
                 std::string(PerfOpName(o.op)).c_str(), n, o.blocking ? "blocking calls" : "asynchronous calls",
                 o.shared_buffers ? "shared (AllocShared, zero copy)" : "private", o.max_bytes,
                 comm.ExplainChoice(probe).c_str());
    std::fprintf(out,
                 "#\n#                                                              out-of-place                       "
                 "in-place          \n"
                 "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
                 "algbw   busbw #wrong\n"
                 "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  "
                 "(GB/s)  (GB/s)       \n");
    std::fflush(out);
  }

  PerfResult result;
  double bw_sum = 0;
  int bw_count = 0;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
    const Shape s = ShapeFor(o.op, bytes, elem, n);
    PerfRow row;
    row.size = s.elements * elem;
    row.count = s.count;
    for (int placement = 0; placement < 2; ++placement) {
      const CollectiveArgs a = runner.Args(s, placement == 1);
      TESSERA_ASSIGN_OR_RETURN(double secs, runner.Time(a));
      TESSERA_ASSIGN_OR_RETURN(double t, runner.Combine(secs));
      row.time_us[placement] = t * 1e6;
      row.algbw[placement] = t > 0 ? static_cast<double>(row.size) / t / 1e9 : 0;
      row.busbw[placement] = row.algbw[placement] * BusBandwidthFactor(o.op, n);
      bw_sum += row.busbw[placement];
      ++bw_count;
      if (o.check) {
        runner.FillInputs(a, s);
        TESSERA_RETURN_IF_ERROR(comm.Run(a));
        int64_t w = runner.CountWrong(a, s), total = 0;
        TESSERA_RETURN_IF_ERROR(comm.AllReduce(&w, &total, 1, DataType::kInt64, ReduceOp::kSum));
        row.wrong[placement] = total;
        result.wrong += total;
      }
    }
    if (print) {
      std::fprintf(out, "%12zu  %12zu  %8s  %6s  %6d", row.size, row.count,
                   std::string(DataTypeNcclName(o.dtype)).c_str(),
                   Reduces(o.op) ? std::string(ReduceOpName(o.redop)).c_str() : "none", Rooted(o.op) ? o.root : -1);
      for (int p = 0; p < 2; ++p) {
        std::fprintf(out, "  %7s  %6.2f  %6.2f  %5s", TimeText(row.time_us[p]).c_str(), row.algbw[p], row.busbw[p],
                     row.wrong[p] < 0 ? "N/A" : std::to_string(row.wrong[p]).c_str());
      }
      std::fprintf(out, "\n");
      std::fflush(out);
    }
    result.rows.push_back(row);
    const size_t next = o.step ? bytes + o.step : static_cast<size_t>(std::ceil(static_cast<double>(bytes) * o.factor));
    if (next <= bytes) break;
    bytes = next;
  }
  result.avg_busbw = bw_count ? bw_sum / bw_count : 0;
  if (print) {
    std::fprintf(out, "# Out of bounds values : %lld %s\n", static_cast<long long>(result.wrong),
                 result.wrong == 0 ? "OK" : "FAILED");
    std::fprintf(out, "# Avg bus bandwidth    : %g \n", result.avg_busbw);
    std::fprintf(out, "# Zero-copy operations : %llu (zero copy %s)\n#\n",
                 static_cast<unsigned long long>(comm.zero_copy_ops()),
                 comm.zero_copy() ? "available" : "unavailable");
    std::fflush(out);
  }
  return result;
}

}  // namespace tessera::comm
