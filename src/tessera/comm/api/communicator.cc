// Communicator creation, splitting, execution and failure handling.
#include "tessera/comm/api/communicator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/comm/algo/cost_model.h"
#include "tessera/comm/algo/hierarchical.h"
#include "tessera/comm/api/communicator_impl.h"
#include "tessera/comm/transport/shm/context.h"
#include "tessera/comm/transport/tcp/context.h"

namespace tessera::comm {

StatusOr<void*> AllocShared(size_t bytes) { return transport::shm::AllocShared(bytes); }
Status FreeShared(void* ptr) { return transport::shm::FreeShared(ptr); }
namespace {

base::Knob<int64_t> kTimeoutKnob("TESSERA_COMM_TIMEOUT_MS", 300000,
                                 "communication: milliseconds an operation (or communicator creation) may wait for "
                                 "a peer before failing with an error naming it");
base::Knob<std::string> kTransportKnob("TESSERA_TRANSPORT", "auto",
                                       "communication transport: auto (shm on one host, tcp across hosts), shm, tcp");
base::Knob<std::string> kProgressSchedKnob(
    "TESSERA_PROGRESS_SCHED", "auto",
    "progress thread scheduling: auto (SCHED_BATCH over tcp, whose socket buffers absorb a late turn, so it never "
    "preempts computation; the normal policy on shm), batch, normal");
base::Knob<std::string> kAlgoKnob("TESSERA_ALGO", "",
                                  "force collective algorithms: one name for all (shm_direct, shm_two_phase, ring, "
                                  "halving_doubling, binomial_tree, pairwise, hierarchical) or per collective, "
                                  "e.g. all_reduce=ring,all_to_all=pairwise");

using Clock = std::chrono::steady_clock;

// The op start for deadlines: CLOCK_MONOTONIC_COARSE (the steady clock's
// base, a few ms of resolution) costs a fraction of a precise read on the
// latency path; deadlines are seconds away.
Clock::time_point CoarseNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                                       std::chrono::nanoseconds(ts.tv_nsec)));
}

// Agrees on the cost-model constants: rank 0 reads the cache (or asks for a
// measurement) and publishes through the store; everyone measures together
// when needed.
StatusOr<algo::CostConstants> AgreeCostModel(Communicator::Impl& impl, algo::AlgoEnv& env) {
  const std::string key = algo::CostCacheKey(impl.topology.transport, impl.size,
                                             impl.topology.ranks[0].host_key + (impl.topology.single_host() ? "" : "+"));
  const std::string path = algo::CostCachePath();
  if (impl.rank == 0) {
    std::string published = "measure";
    StatusOr<std::optional<algo::CostConstants>> cached = algo::ReadCostCache(path, key);
    if (!cached.ok()) {
      TLOG(WARN, "ignoring cost-model cache: {}", cached.status().ToString());
    } else if (cached->has_value()) {
      published = (*cached)->Serialize();
    }
    TESSERA_RETURN_IF_ERROR(impl.store->SetString("cost_model", published));
  }
  TESSERA_ASSIGN_OR_RETURN(std::string text, impl.store->GetString("cost_model", impl.timeout));
  if (text != "measure") {
    TESSERA_ASSIGN_OR_RETURN(algo::CostConstants c, algo::CostConstants::Parse(text));
    c.source = path.empty() ? "measured earlier" : fmt::format("measured earlier, cached in {}", path);
    return c;
  }
  const auto t0 = Clock::now();
  TESSERA_ASSIGN_OR_RETURN(algo::CostConstants c, algo::MeasureConstants(env));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  c.source = fmt::format("measured now in {:.0f} ms{}", ms,
                         c.disturbed ? "; disturbed by other load, not cached" : "");
  if (impl.rank == 0 && !c.disturbed) {
    Status st = algo::WriteCostCache(path, key, c);
    if (!st.ok()) TLOG(WARN, "cannot cache the cost model: {}", st.ToString());
  }
  return c;
}

}  // namespace

Communicator::Impl::~Impl() {
  executor.reset();  // finish queued work before the transport goes away
}

void Communicator::Impl::Fail(const Status& st) {
  {
    std::lock_guard<std::mutex> lock(failure_mu);
    if (failure.ok()) failure = st;
  }
  failed.store(true, std::memory_order_release);
}

Status Communicator::Impl::Health() const {
  if (!failed.load(std::memory_order_acquire)) return Status::Ok();
  std::lock_guard<std::mutex> lock(failure_mu);
  return failure;
}

Status Communicator::Impl::Execute(const CollectiveArgs& a) {
  if (failed.load(std::memory_order_acquire)) {
    return Health().WithContext(fmt::format("{} refused: communicator '{}' failed earlier (create a new one)",
                                            a.custom ? std::string_view(a.custom_label != nullptr ? a.custom_label : "custom")
                                                     : CollectiveName(a.kind),
                                            options.name));
  }
  ++op_seq;
  transport::OpContext ctx;
  ctx.label = a.custom ? std::string_view(a.custom_label != nullptr ? a.custom_label : "custom")
                       : CollectiveName(a.kind);
  ctx.seq = op_seq;
  ctx.comm = &options.name;
  ctx.rank = rank;
  ctx.size = size;
  ctx.deadline = CoarseNow() + timeout;
  ctx.aborted = &aborted;
  ctx.timeout = timeout;
  algo::AlgoEnv env;
  env.rank = rank;
  env.size = size;
  env.transport = transport.get();
  env.shm = shm;
  env.hierarchy = hierarchy.get();
  env.scratch = &scratch;
  env.ctx = &ctx;
  Status st;
  if (a.custom) {
    st = a.custom(env);
  } else if (a.kind == CollectiveKind::kSend || a.kind == CollectiveKind::kRecv ||
             a.kind == CollectiveKind::kSendRecv) {
    st = algo::PointToPoint(a, env);
  } else {
    // The choice depends on the kind and byte count only (all_to_allv: kind).
    CachedChoice& cached = choice_cache[static_cast<int>(a.kind)];
    const size_t key = a.count * a.ElementSize();
    if (!cached.valid || cached.bytes != key) {
      cached.choice = selector->Choose(a);
      cached.bytes = key;
      cached.valid = true;
    }
    const algo::Choice& choice = cached.choice;
    if (base::LogEnabled(base::LogLevel::kInfo)) {
      const size_t bytes = a.count * a.ElementSize();
      const int bucket = bytes == 0 ? -1 : static_cast<int>(std::log2(static_cast<double>(bytes)));
      auto key = std::make_pair(static_cast<int>(a.kind), bucket);
      auto it = logged.find(key);
      if (it == logged.end() || it->second != choice.algo) {
        logged[key] = choice.algo;
        const std::string route = shm != nullptr ? algo::ShmRoute(choice.algo, a, *shm, size) : "";
        TLOG(INFO, "{}: {} {} x {} ({} bytes) -> {}: {}{}", ctx.Name(), CollectiveName(a.kind), a.count,
             DataTypeName(a.dtype), bytes, algo::AlgorithmName(choice.algo), choice.reason,
             route.empty() ? "" : "; " + route);
      }
    }
    if (choice.algo == algo::Algorithm::kHierarchical) {
      st = hierarchy->Run(a, env);
    } else {
      st = choice.fn(a, env);
    }
  }
  if (!st.ok()) {
    if (!aborted.load()) {
      // A broken tcp link only says that the peer went away; the peer (if it
      // gave up rather than died) published why in the store: add it, so the
      // root cause (e.g. "rank 2 died") travels down the chain of aborts.
      const int peer = transport->failed_peer();
      if (peer >= 0) {
        StatusOr<std::string> why = store->GetString(fmt::format("abort/{}", peer), Timeout(300));
        if (why.ok()) st = Status(st.code(), fmt::format("{}; {}", st.message(), *why));
      }
      const std::string reason = st.message();  // starts with the op name and this rank
      if (topology.transport == transport::TransportKind::kTcp) {
        (void)store->SetString(fmt::format("abort/{}", rank), reason);
      }
      transport->Abort(reason);
      if (hierarchy) hierarchy->Abort(st.message());
    }
    Fail(st);
    TLOG(WARN, "{}", st.ToString());
  }
  // Single/zero copy exposed this rank's buffers to its peers: leave only
  // once no peer thread is inside them (the caller may free them next).
  if (shm != nullptr) shm->WithdrawBuffers();
  return st;
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Communicator::~Communicator() = default;

StatusOr<std::unique_ptr<Communicator>> Communicator::Create(std::shared_ptr<Store> store, int rank, int size,
                                                             CommOptions options) {
  if (store == nullptr) return InvalidArgument("Communicator::Create: no store");
  if (size < 1 || rank < 0 || rank >= size) {
    return InvalidArgument("Communicator::Create: rank {} is not in [0, {})", rank, size);
  }
  auto impl = std::make_unique<Impl>();
  impl->base_store = store;
  impl->store = std::shared_ptr<Store>(MakePrefixStore(store, fmt::format("tessera/{}/", options.name)));
  impl->rank = rank;
  impl->size = size;
  impl->timeout = options.timeout.count() > 0 ? options.timeout : std::chrono::milliseconds(kTimeoutKnob.Get());
  impl->options = options;
  auto where = [&] {
    return fmt::format("creating communicator '{}' (rank {} of {}, store {})", options.name, rank, size,
                       store->Address());
  };

  transport::TransportKind requested = options.transport;
  if (requested == transport::TransportKind::kAuto) {
    StatusOr<transport::TransportKind> k = transport::ParseTransportKind(kTransportKnob.Get());
    if (!k.ok()) return k.status().WithContext("reading TESSERA_TRANSPORT");
    requested = *k;
  }
  const transport::RankPlace mine = transport::LocalPlace(options.host_override);
  StatusOr<transport::TopologyPlan> plan =
      transport::DetectTopology(*impl->store, rank, size, mine, requested, impl->timeout);
  if (!plan.ok()) return plan.status().WithContext(where());
  impl->topology = std::move(*plan);

  if (impl->topology.transport == transport::TransportKind::kShm) {
    transport::shm::Options so;
    so.window_bytes = options.shm_window_bytes;
    so.p2p_bytes = options.shm_p2p_bytes;
    so.ll_bytes = options.shm_ll_bytes;
    so.single_copy = options.shm_single_copy;
    so.zero_copy = options.shm_zero_copy;
    so.direct_reduce_bytes = options.shm_direct_reduce_bytes;
    so.alltoall_single_copy_bytes = options.shm_alltoall_single_copy_bytes;
    so.host = mine.hostname;
    so.host_key = mine.host_key;
    auto ctx = transport::shm::Context::Create(*impl->store, rank, size, so, impl->timeout);
    if (!ctx.ok()) return ctx.status().WithContext(where());
    impl->shm = ctx->get();
    impl->transport = std::move(*ctx);
  } else {
    transport::tcp::Options to;
    to.streams = options.tcp_streams;
    to.checksum = options.tcp_checksum;
    to.hosts.reserve(size);
    for (const auto& p : impl->topology.ranks) {
      to.hosts.push_back(p.hostname);
      to.host_keys.push_back(p.host_key);
    }
    auto ctx = transport::tcp::Context::Create(*impl->store, rank, size, to, impl->timeout);
    if (!ctx.ok()) return ctx.status().WithContext(where());
    impl->transport = std::move(*ctx);
  }

  // Hierarchical sub-communicators when the ranks span hosts evenly.
  bool even = impl->topology.hosts.size() > 1 && impl->topology.hosts[0].size() > 1;
  for (const auto& h : impl->topology.hosts) even = even && h.size() == impl->topology.hosts[0].size();
  if (even) {
    const int host = impl->topology.host_of[rank];
    const int local = impl->topology.local_rank[rank];
    const int nhosts = static_cast<int>(impl->topology.hosts.size());
    const int per_host = static_cast<int>(impl->topology.hosts[0].size());
    CommOptions lo = options;
    lo.name = fmt::format("{}/host{}", options.name, host);
    lo.transport = transport::TransportKind::kShm;
    lo.algo = "";
    CommOptions xo = options;
    xo.name = fmt::format("{}/cross{}", options.name, local);
    xo.transport = transport::TransportKind::kTcp;
    xo.algo = "";
    auto local_comm = Create(store, local, per_host, lo);
    if (!local_comm.ok()) return local_comm.status().WithContext(where());
    auto cross_comm = Create(store, host, nhosts, xo);
    if (!cross_comm.ok()) return cross_comm.status().WithContext(where());
    impl->hierarchy = std::make_unique<algo::HierarchyContext>(std::move(*local_comm), std::move(*cross_comm),
                                                               impl->topology.hosts);
  }

  // Cost model and selector.
  std::string spec = options.algo.empty() ? kAlgoKnob.Get() : options.algo;
  StatusOr<algo::ForcedAlgos> forced = algo::ParseAlgoSpec(spec);
  if (!forced.ok()) return forced.status().WithContext(where());
  algo::ModelInputs inputs;
  inputs.size = size;
  inputs.transport = impl->topology.transport;
  inputs.shm_window_bytes = impl->shm ? impl->shm->window_bytes() : 0;
  inputs.shm_ll_bytes = impl->shm ? impl->shm->ll_capacity() : 0;
  inputs.shm_single_copy = impl->shm != nullptr && impl->shm->single_copy();
  algo::CostConstants constants = algo::DefaultConstants(inputs.transport, size);
  if (options.calibrate && size > 1) {
    transport::OpContext ctx;
    ctx.label = "cost-model calibration";
    ctx.comm = &impl->options.name;
    ctx.rank = rank;
    ctx.size = size;
    ctx.deadline = Clock::now() + impl->timeout;
    ctx.aborted = &impl->aborted;
    ctx.timeout = impl->timeout;
    algo::AlgoEnv env;
    env.rank = rank;
    env.size = size;
    env.transport = impl->transport.get();
    env.shm = impl->shm;
    env.scratch = &impl->scratch;
    env.ctx = &ctx;
    StatusOr<algo::CostConstants> c = AgreeCostModel(*impl, env);
    if (!c.ok()) return c.status().WithContext(where());
    constants = *c;
  }
  impl->selector = std::make_unique<algo::Selector>(inputs, constants, *forced, impl->hierarchy != nullptr);
  Impl* raw = impl.get();
  const std::string sched = kProgressSchedKnob.Get();
  if (sched != "auto" && sched != "batch" && sched != "normal") {
    return InvalidArgument("{}: TESSERA_PROGRESS_SCHED='{}' is not auto, batch or normal", where(), sched);
  }
  const bool over_tcp = impl->topology.transport == transport::TransportKind::kTcp || impl->topology.hosts.size() > 1;
  const bool batch = sched == "batch" || (sched == "auto" && over_tcp);
  impl->executor =
      std::make_unique<Executor>([raw](const CollectiveArgs& a) { return raw->Execute(a); }, batch);
  if (base::LogEnabled(base::LogLevel::kInfo)) {
    TLOG(INFO, "communicator '{}' rank {}/{}: {}cost model: {}", options.name, rank, size,
         impl->topology.ToString(rank), constants.ToString());
  }
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
const std::string& Communicator::name() const { return impl_->options.name; }
transport::TransportKind Communicator::transport_kind() const { return impl_->topology.transport; }
Status Communicator::health() const { return impl_->Health(); }

StatusOr<std::unique_ptr<Communicator>> Communicator::Split(int color, int key) {
  const int id = impl_->split_count.fetch_add(1);
  int64_t mine[2] = {color < 0 ? -1 : color, key};
  std::vector<int64_t> all(2 * impl_->size);
  Status st = AllGather(mine, all.data(), 2, DataType::kInt64);
  if (!st.ok()) return st.WithContext(fmt::format("splitting communicator '{}'", impl_->options.name));
  if (color < 0) return std::unique_ptr<Communicator>();
  std::vector<std::pair<int64_t, int>> members;
  for (int r = 0; r < impl_->size; ++r) {
    if (all[2 * r] == color) members.emplace_back(all[2 * r + 1], r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == impl_->rank) new_rank = static_cast<int>(i);
  }
  CommOptions o = impl_->options;
  o.name = fmt::format("{}/split{}/color{}", impl_->options.name, id, color);
  o.timeout = impl_->timeout;
  return Create(impl_->base_store, new_rank, static_cast<int>(members.size()), o);
}

void Communicator::Abort(std::string_view reason) {
  if (impl_->aborted.exchange(true)) return;
  const std::string why = reason.empty() ? fmt::format("Communicator::Abort on rank {}", impl_->rank)
                                         : fmt::format("rank {} aborted: {}", impl_->rank, reason);
  Status st = Aborted("communicator '{}' was aborted: {}", impl_->options.name, why);
  impl_->Fail(st);
  impl_->transport->Abort(why);
  if (impl_->hierarchy) impl_->hierarchy->Abort(why);
  impl_->executor->Cancel(st);
}

std::string Communicator::ExplainChoice(const CollectiveArgs& args) const {
  if (args.kind == CollectiveKind::kSend || args.kind == CollectiveKind::kRecv ||
      args.kind == CollectiveKind::kSendRecv) {
    return fmt::format("point-to-point over {}", transport::TransportKindName(impl_->topology.transport));
  }
  const algo::Choice c = impl_->selector->Choose(args);
  const std::string route = impl_->shm ? algo::ShmRoute(c.algo, args, *impl_->shm, impl_->size) : "";
  return fmt::format("{} ({}){}", algo::AlgorithmName(c.algo), c.reason, route.empty() ? "" : "; " + route);
}

std::string Communicator::CostModelText() const {
  return algo::SerializeModel(impl_->selector->inputs(), impl_->selector->constants());
}

bool Communicator::zero_copy() const { return impl_->shm != nullptr && impl_->shm->zero_copy(); }
uint64_t Communicator::zero_copy_ops() const { return impl_->shm != nullptr ? impl_->shm->zero_copy_ops() : 0; }
bool Communicator::direct_peer_reads() const { return impl_->shm != nullptr && impl_->shm->single_copy(); }

std::string Communicator::Describe() const {
  std::string out = fmt::format("communicator '{}': rank {} of {}\n", impl_->options.name, impl_->rank, impl_->size);
  out += impl_->topology.ToString(impl_->rank);
  if (impl_->shm) {
    out += fmt::format(
        "shm: segment {:.1f} MiB per rank, window 2 x {} KiB, spin {} us before sleeping; single copy {}, zero copy "
        "{}, reductions of >= {} KiB direct\n",
        impl_->shm->segment_bytes() / 1048576.0, impl_->shm->window_bytes() >> 10,
        impl_->shm->spin_policy().spin_ns / 1000, impl_->shm->single_copy() ? "on" : "off",
        impl_->shm->zero_copy() ? "on (AllocShared buffers)" : "off", impl_->shm->direct_reduce_bytes() >> 10);
  }
  if (impl_->hierarchy) {
    out += fmt::format("hierarchical: local group of {} (shm), cross-host group of {} (tcp)\n",
                       impl_->hierarchy->local().size(), impl_->hierarchy->cross().size());
  }
  out += fmt::format("cost model: {}\n", impl_->selector->constants().ToString());
  out += "algorithm per collective (float32, by message size):\n";
  const CollectiveKind kinds[] = {CollectiveKind::kAllReduce,  CollectiveKind::kReduce,
                                  CollectiveKind::kBroadcast,  CollectiveKind::kAllGather,
                                  CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll,
                                  CollectiveKind::kGather,     CollectiveKind::kScatter};
  const size_t sizes[] = {8, 64 << 10, 1 << 20, 64 << 20};
  for (CollectiveKind k : kinds) {
    out += fmt::format("  {:<15}", CollectiveName(k));
    for (size_t bytes : sizes) {
      CollectiveArgs a;
      a.kind = k;
      a.count = bytes / 4;
      a.dtype = DataType::kFloat32;
      const algo::Choice c = impl_->selector->Choose(a);
      out += fmt::format(" {:>9}: {:<16}", bytes >= (1 << 20) ? fmt::format("{} MiB", bytes >> 20)
                                                    : bytes >= 1024 ? fmt::format("{} KiB", bytes >> 10)
                                                                    : fmt::format("{} B", bytes),
                         algo::AlgorithmName(c.algo));
    }
    out += "\n";
  }
  CollectiveArgs b;
  b.kind = CollectiveKind::kBarrier;
  out += fmt::format("  {:<15} {}\n", "barrier", algo::AlgorithmName(impl_->selector->Choose(b).algo));
  return out;
}

}  // namespace tessera::comm
