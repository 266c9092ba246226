#include "tessera/comm/transport/shm/context.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "tessera/base/check.h"
#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"
#include "tessera/comm/transport/shm/segment_header.h"
#include "tessera/hal/topology.h"

namespace tessera::comm::transport::shm {

namespace {

base::Knob<int64_t> kWindowKbKnob("TESSERA_SHM_WINDOW_KB", 0,
                                  "shm transport: bytes (KiB) of each half of a rank's double-buffered collective "
                                  "window (the chunk size of shm-direct collectives); 0 = auto: half a core's L2 "
                                  "cache, 256 KiB - 8 MiB");
base::Knob<int64_t> kLlKbKnob("TESSERA_SHM_LL_KB", 64,
                              "shm transport: bytes (KiB) of each of a rank's two low-latency slots (the largest "
                              "message small collectives move without a barrier)");
base::Knob<bool> kSingleCopyKnob("TESSERA_SHM_SINGLE_COPY", true,
                                  "shm transport: let large data-movement collectives read peers' buffers directly "
                                  "(memcpy between threads, process_vm_readv between processes) when allowed");
base::Knob<bool> kZeroCopyKnob("TESSERA_SHM_ZERO_COPY", true,
                                "shm transport: let collectives on buffers from AllocShared map peers' buffers and "
                                "read/write them directly (no staging copy) when allowed");
base::Knob<int64_t> kDirectReduceKbKnob("TESSERA_SHM_DIRECT_REDUCE_KB", 1024,
                                        "shm transport: all-reduce / reduce messages of at least this many KiB run "
                                        "direct (zero copy on AllocShared buffers, else single copy between "
                                        "processes) instead of through the windows; 0 = never");
base::Knob<int64_t> kAllToAllSingleCopyKbKnob(
    "TESSERA_SHM_ALLTOALL_SINGLE_COPY_KB", -1,
    "shm transport: all-to-all(v) on private buffers runs single copy (process_vm_readv from the peers' buffers) "
    "when the average bytes per rank reach this many KiB, else through the windows; -1 = measured default "
    "(16 MiB, only when ranks outnumber the host's CPUs more than 2x); 0 = never");
base::Knob<int64_t> kP2pKbKnob("TESSERA_SHM_P2P_KB", 2048,
                               "shm transport: bytes (KiB) of a rank's outgoing point-to-point slot rings (all "
                               "peers together)");

constexpr uint64_t kMagic = 0x5445535345524153ull;  // "TESSERAS"
constexpr uint32_t kVersion = 1;
constexpr size_t kPage = 4096;
constexpr int64_t kLivenessPeriodNs = 100'000'000;

size_t RoundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Half of one core's L2 per window half (256 KiB - 8 MiB; 512 KiB if the
// L2 is unknown): a step's staging, reduction and gather then run out of
// L2. Measured on a 2-core EPYC VM (1 MiB L2, 32 MiB L3), 64 MiB all-reduce
// at 2 / 4 ranks: 8.5 / 28.7 ms with 512 KiB halves vs 9.7 / 36.3 ms with
// the earlier half-the-L3 sizing (4 / 2 MiB); 8 ranks: no difference.
size_t AutoWindowBytes() {
  int64_t l2 = 0;
  for (const hal::CacheLevel& c : hal::MachineTopology().caches) {
    if (c.level == 2) l2 = std::max<int64_t>(l2, c.size_bytes);
  }
  const size_t per = l2 > 0 ? static_cast<size_t>(l2) / 2 : 512 << 10;
  return std::clamp<size_t>(per, 256 << 10, 8 << 20) / kPage * kPage;
}

uint64_t PidNamespace() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

std::string RandomHex() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

}  // namespace

static_assert(sizeof(SegmentHeader) <= kPage);

namespace {

struct Mapping {
  std::string name;
  int fd = -1;
  uint8_t* base = nullptr;
  size_t bytes = 0;
};

// Segments mapped in this process, by name: ranks that are threads of one
// process share one mapping of each segment (MappedSegment), so every
// segment has one address here -- the atomics that order the ranks are
// then the same objects to ThreadSanitizer too -- and a rank's segment
// stays mapped while a peer thread still uses it.
std::mutex g_segments_mu;
std::map<std::string, std::weak_ptr<MappedSegment>>& Segments() {
  static auto* segments = new std::map<std::string, std::weak_ptr<MappedSegment>>();
  return *segments;
}

std::shared_ptr<MappedSegment> Register(const std::string& name, uint8_t* base, size_t bytes) {
  auto seg = std::make_shared<MappedSegment>();
  seg->base = base;
  seg->bytes = bytes;
  std::lock_guard<std::mutex> lock(g_segments_mu);
  auto& all = Segments();
  for (auto it = all.begin(); it != all.end();) it = it->second.expired() ? all.erase(it) : std::next(it);
  all[name] = seg;
  return seg;
}

StatusOr<Mapping> CreateSegment(size_t bytes) {
  Mapping m;
  static std::atomic<int> counter{0};
  m.name = fmt::format("/tessera-shm-{}-{}-{}", getpid(), counter.fetch_add(1), RandomHex());
  m.fd = shm_open(m.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (m.fd < 0) return IoError("shm_open('{}') failed: {}", m.name, std::strerror(errno));
  if (ftruncate(m.fd, static_cast<off_t>(bytes)) != 0) {
    Status st = IoError("ftruncate('{}', {} bytes) failed: {} (is /dev/shm large enough?)", m.name, bytes,
                        std::strerror(errno));
    close(m.fd);
    shm_unlink(m.name.c_str());
    return st;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, m.fd, 0);
  if (p == MAP_FAILED) {
    Status st = IoError("mmap('{}', {} bytes) failed: {}", m.name, bytes, std::strerror(errno));
    close(m.fd);
    shm_unlink(m.name.c_str());
    return st;
  }
  close(m.fd);
  m.fd = -1;
  m.base = static_cast<uint8_t*>(p);
  m.bytes = bytes;
  return m;
}

StatusOr<std::shared_ptr<MappedSegment>> MapPeerSegment(const std::string& name, size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(g_segments_mu);
    auto it = Segments().find(name);
    if (it != Segments().end()) {
      if (std::shared_ptr<MappedSegment> seg = it->second.lock()) {
        if (seg->bytes != bytes) {
          return DataLoss("peer segment '{}' has {} bytes, expected {}", name, seg->bytes, bytes);
        }
        return seg;
      }
    }
  }
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return IoError("shm_open('{}') of a peer segment failed: {}", name, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return DataLoss("peer segment '{}' has {} bytes, expected {}", name, static_cast<long long>(st.st_size), bytes);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return IoError("mmap of peer segment '{}' failed: {}", name, std::strerror(errno));
  return Register(name, static_cast<uint8_t*>(p), bytes);
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

ChannelView ChannelOf(uint8_t* base, const SegmentHeader* h, int dest) {
  ChannelView v;
  uint8_t* p = base + h->chan_offset + static_cast<size_t>(dest) * h->chan_stride;
  v.ctl = reinterpret_cast<ChannelCtl*>(p);
  v.slots = p + sizeof(ChannelCtl);
  v.num_slots = h->num_slots;
  v.slot_payload = h->slot_payload;
  return v;
}

}  // namespace

StatusOr<std::unique_ptr<Context>> Context::Create(Store& store, int rank, int size, const Options& options,
                                                   Timeout timeout) {
  TESSERA_CHECK(size >= 1 && rank >= 0 && rank < size, "rank {} size {}", rank, size);
  std::unique_ptr<Context> ctx(new Context());
  ctx->rank_ = rank;
  ctx->size_ = size;
  ctx->options_ = options;
  ctx->policy_ = MakeSpinPolicy(size);

  // Layout of our segment.
  size_t window = options.window_bytes ? options.window_bytes : static_cast<size_t>(kWindowKbKnob.Get()) << 10;
  if (window == 0) window = AutoWindowBytes();
  window = RoundUp(std::max<size_t>(window, kPage), kPage);
  const size_t p2p = options.p2p_bytes ? options.p2p_bytes : static_cast<size_t>(kP2pKbKnob.Get()) << 10;
  const int slots = std::max(2, options.p2p_slots);
  size_t payload = p2p / (static_cast<size_t>(size) * slots);
  payload = payload > sizeof(SlotHeader) ? payload - sizeof(SlotHeader) : 0;
  payload = std::clamp<size_t>(payload / 64 * 64, 4096, 1 << 20);
  const size_t chan_stride = RoundUp(sizeof(ChannelCtl) + slots * (sizeof(SlotHeader) + payload), 64);
  const size_t ll_bytes = RoundUp(
      std::max<size_t>(options.ll_bytes ? options.ll_bytes : static_cast<size_t>(kLlKbKnob.Get()) << 10, 128), 64);
  const size_t ll_offset = kPage;
  const size_t chan_offset = RoundUp(ll_offset + 2 * ll_bytes, kPage);
  const size_t window_offset = RoundUp(chan_offset + chan_stride * size, 64 << 10);
  const size_t segment_bytes = window_offset + 2 * window;
  ctx->window_bytes_ = window;
  ctx->segment_bytes_ = segment_bytes;
  ctx->ll_bytes_ = ll_bytes;
  ctx->ll_offset_ = ll_offset;

  TESSERA_ASSIGN_OR_RETURN(Mapping mine, CreateSegment(segment_bytes));
  auto* hdr = new (mine.base) SegmentHeader();
  hdr->magic = kMagic;
  hdr->version = kVersion;
  hdr->rank = rank;
  hdr->size = size;
  hdr->pid = getpid();
  hdr->pidns = PidNamespace();
  hdr->segment_bytes = segment_bytes;
  hdr->chan_offset = chan_offset;
  hdr->chan_stride = chan_stride;
  hdr->slot_payload = payload;
  hdr->num_slots = slots;
  hdr->window_offset = window_offset;
  hdr->window_bytes = window;
  hdr->ll_offset = ll_offset;
  hdr->ll_bytes = ll_bytes;
  hdr->self_base = reinterpret_cast<uint64_t>(mine.base);
  for (int d = 0; d < size; ++d) new (mine.base + chan_offset + d * chan_stride) ChannelCtl();

  ctx->bases_.assign(size, nullptr);
  ctx->headers_.assign(size, nullptr);
  ctx->windows_.assign(size, nullptr);
  ctx->hosts_.assign(size, "");
  ctx->pids_.assign(size, 0);
  ctx->same_pidns_.assign(size, false);
  ctx->bases_[rank] = mine.base;
  ctx->segments_.assign(size, nullptr);
  ctx->segments_[rank] = Register(mine.name, mine.base, mine.bytes);

  auto fail = [&](Status st) -> Status {
    shm_unlink(mine.name.c_str());
    return st.WithContext(fmt::format("rank {} of {} setting up the shm transport", rank, size));
  };

  // Zero-copy probe: a small shared allocation every peer must be able to
  // map (freed once all ranks agreed, below).
  void* probe = nullptr;
  if (options.zero_copy < 0 ? kZeroCopyKnob.Get() : options.zero_copy != 0) {
    StatusOr<void*> p = AllocShared(kPage);
    if (p.ok()) {
      probe = *p;
      *static_cast<uint64_t*>(probe) = kMagic;
    }
  }
  struct ProbeGuard {
    void* p;
    ~ProbeGuard() { (void)FreeShared(p); }
  } probe_guard{probe};
  SharedRef probe_ref;
  if (probe != nullptr) FindShared(probe, kPage, &probe_ref);
  std::vector<SharedRef> probe_refs(size);
  probe_refs[rank] = probe_ref;
  const std::string desc = fmt::format("{}\n{}\n{}\n{}\n{}\n{} {} {} {}", mine.name, segment_bytes, options.host_key,
                                       options.host, getpid(), probe_ref.id, probe_ref.fd, probe_ref.bytes,
                                       probe_ref.addr);
  Status st = store.SetString(fmt::format("shm/{}", rank), desc);
  if (!st.ok()) return fail(st);
  const auto deadline = Clock::now() + timeout;
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      ctx->hosts_[r] = options.host;
      ctx->pids_[r] = getpid();
      ctx->same_pidns_[r] = true;
      continue;
    }
    auto left = std::chrono::duration_cast<Timeout>(deadline - Clock::now());
    StatusOr<std::string> peer = store.GetString(fmt::format("shm/{}", r), std::max(left, Timeout(0)));
    if (!peer.ok()) {
      return fail(peer.status().WithContext(
          fmt::format("rank {} did not join within {} ms (its shm segment name never appeared in the store {})", r,
                      timeout.count(), store.Address())));
    }
    std::vector<std::string> f = SplitLines(*peer);
    if (f.size() < 6 ||
        std::sscanf(f[5].c_str(), "%lu %lu %lu %lu", &probe_refs[r].id, &probe_refs[r].fd, &probe_refs[r].bytes,
                    &probe_refs[r].addr) != 4) {
      return fail(DataLoss("malformed shm descriptor of rank {}: '{}'", r, *peer));
    }
    if (f[2] != options.host_key) {
      return fail(FailedPrecondition("rank {} is on host '{}', not on this host '{}': the shm transport needs "
                                     "every rank on one host",
                                     r, f[3], options.host));
    }
    size_t bytes = std::stoull(f[1]);
    StatusOr<std::shared_ptr<MappedSegment>> seg = MapPeerSegment(f[0], bytes);
    if (!seg.ok()) return fail(seg.status().WithContext(fmt::format("mapping rank {}'s segment", r)));
    auto* ph = reinterpret_cast<SegmentHeader*>((*seg)->base);
    if (ph->magic != kMagic || ph->version != kVersion || ph->rank != r || ph->size != size) {
      return fail(DataLoss("rank {}'s segment '{}' has a bad header (magic/version/rank/size)", r, f[0]));
    }
    ctx->bases_[r] = (*seg)->base;
    ctx->segments_[r] = std::move(*seg);
    ctx->hosts_[r] = f[3];
    ctx->pids_[r] = ph->pid;
    ctx->same_pidns_[r] = ph->pidns == hdr->pidns && ph->pidns != 0;
  }
  for (int r = 0; r < size; ++r) {
    auto* h = reinterpret_cast<SegmentHeader*>(ctx->bases_[r]);
    ctx->headers_[r] = h;
    ctx->windows_[r] = ctx->bases_[r] + h->window_offset;
    if (h->ll_bytes != ll_bytes || h->ll_offset != ll_offset) {
      return fail(FailedPrecondition("rank {} uses {}-byte low-latency slots, this rank {} (set TESSERA_SHM_LL_KB "
                                     "alike on every rank)",
                                     r, h->ll_bytes, ll_bytes));
    }
    if (h->window_bytes != window) {
      return fail(FailedPrecondition("rank {} uses a {}-byte shm window, this rank {} (set TESSERA_SHM_WINDOW_KB "
                                     "alike on every rank)",
                                     r, h->window_bytes, window));
    }
  }
  ctx->pairs_.resize(size);
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    ctx->pairs_[r] = Pair(r, ChannelOf(ctx->bases_[rank], ctx->headers_[rank], r),
                          ChannelOf(ctx->bases_[r], ctx->headers_[r], rank), &ctx->headers_[rank]->doorbell,
                          &ctx->headers_[r]->doorbell);
  }
  auto left = std::chrono::duration_cast<Timeout>(deadline - Clock::now());
  st = StoreBarrier(store, "shm/mapped", size, std::max(left, Timeout(1)));
  if (!st.ok()) return fail(st);
  shm_unlink(mine.name.c_str());
  // Single copy: probe reading every peer's segment magic through its own
  // address space; zero copy: probe mapping every peer's shared probe
  // allocation. Then agree (every rank must be able to reach every other).
  bool can_read = options.single_copy < 0 ? kSingleCopyKnob.Get() : options.single_copy != 0;
  for (int r = 0; r < size && can_read; ++r) {
    if (r == rank || ctx->pids_[r] == getpid()) continue;
    uint64_t magic = 0;
    iovec local{&magic, sizeof(magic)};
    iovec remote{reinterpret_cast<void*>(ctx->headers_[r]->self_base), sizeof(magic)};
    can_read = process_vm_readv(ctx->pids_[r], &local, 1, &remote, 1, 0) == sizeof(magic) && magic == kMagic;
  }
  bool can_map = probe != nullptr;
  for (int r = 0; r < size; ++r) can_map = can_map && probe_refs[r].id != 0;
  for (int r = 0; r < size && can_map; ++r) {
    if (r == rank || ctx->pids_[r] == getpid()) continue;
    StatusOr<uint8_t*> p = ctx->MapPeerAllocation(r, probe_refs[r]);
    can_map = p.ok() && *reinterpret_cast<const uint64_t*>(*p) == kMagic;
    if (!p.ok()) TLOG(DEBUG, "shm transport: zero copy off: {}", p.status().ToString());
  }
  // The size thresholds pick paths every rank must take alike: agreed too.
  const int64_t direct_reduce =
      options.direct_reduce_bytes >= 0 ? options.direct_reduce_bytes : kDirectReduceKbKnob.Get() << 10;
  const int64_t alltoall_single =
      options.alltoall_single_copy_bytes >= 0 ? options.alltoall_single_copy_bytes
                                              : std::max<int64_t>(-1, kAllToAllSingleCopyKbKnob.Get() * 1024);
  const std::string thresholds = fmt::format("|{}|{}", direct_reduce, alltoall_single);
  st = store.SetString(fmt::format("shm/single_copy/{}", rank),
                       fmt::format("{}{}{}", can_read ? '1' : '0', can_map ? '1' : '0', thresholds));
  if (!st.ok()) return fail(st);
  bool all_can = true, all_map = true;
  for (int r = 0; r < size; ++r) {
    left = std::chrono::duration_cast<Timeout>(deadline - Clock::now());
    StatusOr<std::string> v = store.GetString(fmt::format("shm/single_copy/{}", r), std::max(left, Timeout(1)));
    if (!v.ok()) return v.status();
    if (v->size() < 2 || v->substr(2) != thresholds) {
      return fail(FailedPrecondition(
          "rank {} sizes its direct paths as '{}' (all-reduce direct from | all-to-all single copy from, bytes), "
          "this rank as '{}' (set TESSERA_SHM_DIRECT_REDUCE_KB and TESSERA_SHM_ALLTOALL_SINGLE_COPY_KB alike on "
          "every rank)",
          r, v->size() < 2 ? *v : v->substr(2), thresholds));
    }
    all_can = all_can && (*v)[0] == '1';
    all_map = all_map && (*v)[1] == '1';
  }
  ctx->single_copy_ = all_can;
  ctx->direct_reduce_bytes_ = static_cast<size_t>(direct_reduce);
  ctx->alltoall_single_copy_bytes_ = alltoall_single;
  ctx->zero_copy_ = all_map;
  TLOG(DEBUG, "shm transport: rank {}/{} segment {} bytes (window 2 x {}, {} slots x {} per peer, single copy {}, "
       "zero copy {})",
       rank, size, segment_bytes, window, slots, payload, ctx->single_copy_ ? "on" : "off",
       ctx->zero_copy_ ? "on" : "off");
  return ctx;
}

MappedSegment::~MappedSegment() {
  if (base != nullptr) munmap(base, bytes);
}

Context::~Context() {
  // segments_ unmap each segment once no Context of this process uses it.
  for (const PeerMapping& m : peer_mappings_) munmap(m.base, m.bytes);
}

StatusOr<uint8_t*> Context::MapPeerAllocation(int peer, const SharedRef& ref) {
  if (ref.id == 0) return FailedPrecondition("{} published no shared allocation", PeerDescription(peer));
  const std::string path = fmt::format("/proc/{}/fd/{}", pids_[peer], ref.fd);
  // The fd must still be the memfd of allocation `id` (names are unique).
  char link[512];
  const ssize_t len = readlink(path.c_str(), link, sizeof(link) - 1);
  const std::string want = "/memfd:" + SharedName(ref.id);
  const std::string got = len > 0 ? std::string(link, static_cast<size_t>(len)) : std::string();
  if (got != want && got != want + " (deleted)") {
    return FailedPrecondition("{}'s shared buffer {} is not reachable at {} ({})", PeerDescription(peer), ref.id, path,
                              len < 0 ? std::strerror(errno) : "found '" + got + "'");
  }
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return FailedPrecondition("opening {} failed: {}", path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != ref.bytes) {
    close(fd);
    return DataLoss("{}'s shared buffer {} has {} bytes, published {}", PeerDescription(peer), ref.id,
                    static_cast<long long>(st.st_size), ref.bytes);
  }
  void* p = mmap(nullptr, ref.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    return ResourceExhausted("mapping {}'s shared buffer {} ({} bytes) failed: {}", PeerDescription(peer), ref.id,
                             ref.bytes, std::strerror(errno));
  }
  // Evict mappings this one supersedes (the peer freed the allocation that
  // held this fd) and, beyond the cache size, the least recently used.
  const size_t cap = std::max<size_t>(64, 4 * static_cast<size_t>(size_));
  auto drop = [&](size_t i) {
    munmap(peer_mappings_[i].base, peer_mappings_[i].bytes);
    peer_mappings_.erase(peer_mappings_.begin() + static_cast<ptrdiff_t>(i));
  };
  for (size_t i = peer_mappings_.size(); i-- > 0;) {
    if (peer_mappings_[i].peer == peer && peer_mappings_[i].fd == ref.fd) drop(i);
  }
  while (peer_mappings_.size() >= cap) {
    size_t lru = 0;
    for (size_t i = 1; i < peer_mappings_.size(); ++i) {
      if (peer_mappings_[i].last_use < peer_mappings_[lru].last_use) lru = i;
    }
    drop(lru);
  }
  peer_mappings_.push_back(PeerMapping{peer, ref.id, ref.fd, static_cast<uint8_t*>(p), ref.bytes, ++map_clock_});
  return static_cast<uint8_t*>(p);
}

StatusOr<uint8_t*> Context::MapShared(int peer, const SharedRef& ref, const OpContext& ctx) {
  if (pids_[peer] == getpid()) return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(ref.addr));
  for (PeerMapping& m : peer_mappings_) {
    if (m.peer == peer && m.id == ref.id) {
      m.last_use = ++map_clock_;
      return m.base + ref.offset;
    }
  }
  StatusOr<uint8_t*> base = MapPeerAllocation(peer, ref);
  if (!base.ok()) return base.status().WithContext(ctx.Name());
  return *base + ref.offset;
}

std::string Context::PeerDescription(int peer) const {
  if (peer < 0 || peer >= size_) return fmt::format("rank {}", peer);
  return fmt::format("rank {} (host {}, pid {})", peer, hosts_[peer], pids_[peer]);
}

bool Context::PeerDead(int peer, std::string* why) const {
  if (!same_pidns_[peer]) return false;
  const int pid = pids_[peer];
  if (pid == getpid()) return false;  // ranks as threads of this process
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    *why = "its process is gone";
    return true;
  }
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text;
  std::getline(stat, text);
  const size_t paren = text.rfind(')');
  if (paren != std::string::npos && paren + 2 < text.size() && (text[paren + 2] == 'Z' || text[paren + 2] == 'X')) {
    *why = "its process exited (zombie)";
    return true;
  }
  return false;
}

Status Context::GroupAbortStatus(const OpContext& ctx) const {
  const int ar = headers_[0]->abort_rank.load(std::memory_order_acquire);
  if (ar >= 0 && ar < size_) {
    std::string reason(headers_[ar]->abort_reason, strnlen(headers_[ar]->abort_reason, sizeof(SegmentHeader::abort_reason)));
    return Aborted("{}: {} aborted the communicator: {}", ctx.Name(), PeerDescription(ar),
                   reason.empty() ? "no reason given" : reason);
  }
  return Status::Ok();
}

Status Context::CheckHealth(const OpContext& ctx, const std::vector<int>& waiting_for, const std::string& what,
                            int64_t* next_liveness_ns) const {
  if (ctx.Aborted()) return Aborted("{}: aborted on this rank (Communicator::Abort)", ctx.Name());
  TESSERA_RETURN_IF_ERROR(GroupAbortStatus(ctx));
  const int64_t now = NowNs();
  if (now >= *next_liveness_ns) {
    *next_liveness_ns = now + kLivenessPeriodNs;
    for (int p : waiting_for) {
      std::string why;
      if (PeerDead(p, &why)) {
        return Unavailable("{}: {} died ({}) while this rank was waiting {}", ctx.Name(), PeerDescription(p), why,
                           what);
      }
    }
  }
  const auto now_tp = Clock::now();
  if (now_tp >= ctx.deadline) {
    // Blame a peer that is not itself blocked waiting (it stalled or died);
    // if every awaited peer is waiting too, give the rank they wait for a
    // grace period to time out first and abort with the root cause.
    bool all_waiting = !waiting_for.empty();
    for (int p : waiting_for) all_waiting = all_waiting && headers_[p]->waiting.load(std::memory_order_acquire) != 0;
    const auto grace = std::min<Clock::duration>(ctx.timeout / 4, std::chrono::seconds(2));
    if (all_waiting && now_tp < ctx.deadline + grace) return Status::Ok();
    std::string peers;
    for (int p : waiting_for) peers += (peers.empty() ? "" : ", ") + PeerDescription(p);
    return DeadlineExceeded("{}: timed out after {} ms waiting {}; no progress from {}{}", ctx.Name(),
                            ctx.timeout.count(), what, peers.empty() ? "any peer" : peers,
                            all_waiting ? " (itself waiting for others)" : "");
  }
  return Status::Ok();
}

Status Context::StepBarrier(const OpContext& ctx) {
  ++step_;
  headers_[rank_]->arrived_step.store(step_, std::memory_order_release);
  FutexWord& bar = headers_[0]->barrier;
  const uint32_t target = step_ * static_cast<uint32_t>(size_);
  const uint32_t v = bar.value.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (v == target) {
    WakeIfWaiting(bar);
    return Status::Ok();
  }
  int64_t next_live = NowNs() + kLivenessPeriodNs;
  auto ready = [&] { return static_cast<int32_t>(bar.value.load(std::memory_order_acquire) - target) >= 0; };
  auto check = [&]() -> Status {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (static_cast<int32_t>(headers_[r]->arrived_step.load(std::memory_order_acquire) - step_) < 0) {
        missing.push_back(r);
      }
    }
    return CheckHealth(ctx, missing, fmt::format("for all ranks to reach shm step {}", step_), &next_live);
  };
  headers_[rank_]->waiting.store(1, std::memory_order_release);
  Status st = SpinThenSleep(bar, policy_, ready, check);
  PublishFailure(st);
  headers_[rank_]->waiting.store(0, std::memory_order_release);
  return st;
}

namespace {

PackedFutexWord* LlFlag(uint8_t* base, size_t offset, size_t bytes, int parity) {
  return reinterpret_cast<PackedFutexWord*>(base + offset + parity * bytes);
}

}  // namespace

const uint8_t* Context::LlData(int rank) const {
  return bases_[rank] + ll_offset_ + (ll_seq_ & 1u) * ll_bytes_ + sizeof(PackedFutexWord);
}

Status Context::LlStep(const void* data, size_t bytes, const OpContext& ctx) {
  TESSERA_CHECK(bytes <= ll_capacity(), "{}: {} bytes exceed the {}-byte LL slot", ctx.Name(), bytes, ll_capacity());
  ++ll_seq_;
  ++ll_steps_;
  const int parity = static_cast<int>(ll_seq_ & 1u);
  PackedFutexWord* mine = LlFlag(bases_[rank_], ll_offset_, ll_bytes_, parity);
  if (bytes > 0) std::memcpy(reinterpret_cast<uint8_t*>(mine) + sizeof(PackedFutexWord), data, bytes);
  mine->value.store(ll_seq_, std::memory_order_seq_cst);
  WakeIfWaiting(*mine);
  const uint32_t seq = ll_seq_;
  int64_t next_live = NowNs() + kLivenessPeriodNs;
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    PackedFutexWord* flag = LlFlag(bases_[j], ll_offset_, ll_bytes_, parity);
    auto ready = [&] { return flag->value.load(std::memory_order_acquire) == seq; };
    if (ready()) continue;
    auto check = [&]() -> Status {
      std::vector<int> missing;
      for (int r = j; r < size_; ++r) {
        if (r != rank_ && LlFlag(bases_[r], ll_offset_, ll_bytes_, parity)->value.load(std::memory_order_acquire) != seq) {
          missing.push_back(r);
        }
      }
      return CheckHealth(ctx, missing, fmt::format("for all ranks to reach low-latency step {}", seq), &next_live);
    };
    headers_[rank_]->waiting.store(1, std::memory_order_release);
    Status st = SpinThenSleep(*flag, policy_, ready, check);
    PublishFailure(st);
    headers_[rank_]->waiting.store(0, std::memory_order_release);
    TESSERA_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

Status Context::Exchange(std::span<P2pOp> ops, const OpContext& ctx) {
  FutexWord& bell = headers_[rank_]->doorbell;
  int64_t next_live = NowNs() + kLivenessPeriodNs;
  while (true) {
    const uint32_t seen = bell.value.load(std::memory_order_seq_cst);
    bool moved = false;
    bool all_done = true;
    for (size_t i = 0; i < ops.size(); ++i) {
      P2pOp& op = ops[i];
      if (op.complete) continue;
      all_done = false;
      bool blocked = false;  // FIFO per (peer, direction)
      for (size_t j = 0; j < i && !blocked; ++j) {
        blocked = !ops[j].complete && ops[j].peer == op.peer && ops[j].kind == op.kind;
      }
      if (blocked) continue;
      TESSERA_CHECK(op.peer >= 0 && op.peer < size_ && op.peer != rank_, "{}: bad peer {}", ctx.Name(), op.peer);
      if (op.kind == P2pOp::Kind::kSend) {
        moved |= pairs_[op.peer].ProgressSend(op);
      } else {
        StatusOr<bool> r = pairs_[op.peer].ProgressRecv(op, ctx);
        if (!r.ok()) return r.status();
        moved |= *r;
      }
    }
    if (all_done) return Status::Ok();
    if (moved) continue;
    auto ready = [&] { return bell.value.load(std::memory_order_acquire) != seen; };
    auto check = [&]() -> Status {
      std::vector<int> peers;
      std::string what;
      for (const P2pOp& op : ops) {
        if (op.complete) continue;
        if (std::find(peers.begin(), peers.end(), op.peer) == peers.end()) peers.push_back(op.peer);
        if (what.size() < 400) {
          what += fmt::format("{}{} {} (tag {}, {} of {} bytes)", what.empty() ? "to " : "; ",
                              op.kind == P2pOp::Kind::kSend ? "send to" : "receive from", op.peer, op.tag,
                              op.done_bytes, op.bytes);
        }
      }
      return CheckHealth(ctx, peers, what, &next_live);
    };
    headers_[rank_]->waiting.store(1, std::memory_order_release);
    Status st = SpinThenSleep(bell, policy_, ready, check);
    PublishFailure(st);
    headers_[rank_]->waiting.store(0, std::memory_order_release);
    TESSERA_RETURN_IF_ERROR(st);
  }
}

void Context::PublishFailure(const Status& st) {
  // A failure this rank detected itself (its deadline passed, a peer died)
  // is published as the communicator's abort while this rank still shows as
  // waiting: peers that wait on this rank then report the root cause
  // ("no progress from rank 2") instead of blaming this rank. Aborts read
  // from peers (kAborted) are already published.
  if (!st.ok() && st.code() != StatusCode::kAborted) Abort(st.message());
}

void Context::Abort(std::string_view reason) {
  SegmentHeader* me = headers_[rank_];
  if (me->abort_reason[0] == '\0') {
    const size_t n = std::min(reason.size(), sizeof(SegmentHeader::abort_reason) - 1);
    std::memcpy(me->abort_reason, reason.data(), n);
    me->abort_reason[n] = '\0';
  }
  int32_t expected = -1;
  headers_[0]->abort_rank.compare_exchange_strong(expected, rank_, std::memory_order_seq_cst);
  for (int r = 0; r < size_; ++r) {
    Ring(headers_[r]->doorbell);
    for (int p = 0; p < 2; ++p) FutexWakeAll(&LlFlag(bases_[r], ll_offset_, ll_bytes_, p)->value);
  }
  FutexWakeAll(&headers_[0]->barrier.value);
}

}  // namespace tessera::comm::transport::shm
