// Unique ids, communicator creation (blocking, non-blocking, all-in-one,
// split), teardown and queries of the NCCL C API.
//
// Unique id (128 bytes): "TSN1", the store port (big endian), 2 spare
// bytes, the host address (56 bytes, NUL-terminated) and a 64-character
// job token. ncclGetUniqueId hosts an authenticated TCP store in this
// process on an ephemeral port; the address is that of
// TESSERA_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME), else the first non-loopback
// IPv4 interface that is up, else 127.0.0.1; TESSERA_NCCL_ID_ADDR overrides.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <fmt/format.h>

#include "tessera/comm/auth.h"
#include "tessera/comm/tcp_store.h"
#include "tessera/nccl/internal.h"

using tessera::Status;
using tessera::StatusOr;
using tessera::comm::Communicator;
using tessera::comm::CommOptions;
using namespace tessera::nccl;

namespace {

constexpr char kMagic[4] = {'T', 'S', 'N', '1'};
constexpr size_t kHostOffset = 8, kHostBytes = 56, kTokenOffset = 64, kTokenBytes = 64;

struct HostedServer {
  std::shared_ptr<tessera::comm::TcpStoreServer> strong;  // until a communicator takes it
  std::weak_ptr<tessera::comm::TcpStoreServer> weak;
};
std::mutex g_servers_mu;
std::map<std::string, HostedServer>* g_servers = new std::map<std::string, HostedServer>();  // never freed

std::string LocalAddress() {
  if (const char* v = std::getenv("TESSERA_NCCL_ID_ADDR"); v != nullptr && *v) return v;
  const char* ifname = std::getenv("TESSERA_SOCKET_IFNAME");
  std::string found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
      if (ifname != nullptr && *ifname) {
        if (std::strcmp(a->ifa_name, ifname) != 0) continue;
      } else if (a->ifa_flags & IFF_LOOPBACK) {
        continue;
      }
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
      found = text;
    }
    freeifaddrs(list);
  }
  return found.empty() ? "127.0.0.1" : found;
}

struct DecodedId {
  std::string host;
  int port = 0;
  std::string token;
};

StatusOr<DecodedId> Decode(const ncclUniqueId& id) {
  if (std::memcmp(id.internal, kMagic, 4) != 0) {
    return tessera::InvalidArgument("ncclUniqueId: not an id from Tessera's ncclGetUniqueId (bad magic)");
  }
  DecodedId d;
  d.port = (static_cast<unsigned char>(id.internal[4]) << 8) | static_cast<unsigned char>(id.internal[5]);
  d.host.assign(id.internal + kHostOffset, strnlen(id.internal + kHostOffset, kHostBytes));
  d.token.assign(id.internal + kTokenOffset, kTokenBytes);
  if (d.port <= 0 || d.host.empty()) return tessera::InvalidArgument("ncclUniqueId: corrupt (no host or port)");
  return d;
}

// Creates the communicator of `rank` over the id's store (blocking).
Status InitFromId(ncclComm* c, const DecodedId& id, int rank, int nranks) {
  {
    std::lock_guard<std::mutex> lock(g_servers_mu);
    auto it = g_servers->find(id.token);
    if (it != g_servers->end()) {
      std::shared_ptr<tessera::comm::TcpStoreServer> server = it->second.weak.lock();
      it->second.strong.reset();  // now the communicators of this process hold it
      if (server == nullptr) {
        g_servers->erase(it);
      } else {
        c->keep_alive = server;
      }
    }
  }
  tessera::comm::TcpStoreClientOptions so;
  so.client_info = fmt::format("nccl rank {} of {} pid {}", rank, nranks, getpid());
  auto client = tessera::comm::TcpStoreClient::Connect(id.host, id.port, id.token, so);
  if (!client.ok()) {
    return client.status().WithContext(fmt::format("ncclCommInitRank: joining the rendezvous tcp://{}:{} (rank {} of {})",
                                                   id.host, id.port, rank, nranks));
  }
  c->store = *client;
  CommOptions o;
  o.name = "nccl";
  auto comm = Communicator::Create(c->store, rank, nranks, o);
  if (!comm.ok()) return comm.status().WithContext("ncclCommInitRank");
  c->comm = std::move(*comm);
  return Status();
}

void FinishInit(ncclComm* c, Status st) {
  std::lock_guard<std::mutex> lock(c->init_mu);
  c->init_status = std::move(st);
  c->ready.store(true, std::memory_order_release);
  c->init_cv.notify_all();
}

bool BlockingConfig(const ncclConfig_t* config, bool inherited) {
  if (config == nullptr || config->blocking == NCCL_CONFIG_UNDEF_INT) return inherited;
  return config->blocking != 0;
}

// Runs `init` now (blocking), on a thread (non-blocking), or at group end.
ncclResult_t StartInit(ncclComm* c, std::function<Status()> init) {
  if (InGroup()) {
    c->ready.store(false);
    GroupAddInit([c, init = std::move(init)] {
      Status st = init();
      FinishInit(c, st);
      return st;
    });
    return ncclSuccess;
  }
  if (c->blocking) return Fail(init());
  c->ready.store(false);
  c->init_thread = std::thread([c, init = std::move(init)] { FinishInit(c, init()); });
  return ncclInProgress;
}

}  // namespace

StatusOr<Communicator*> ncclComm::Get() {
  if (!ready.load(std::memory_order_acquire)) {
    std::unique_lock<std::mutex> lock(init_mu);
    if (!init_cv.wait_for(lock, WaitBound(), [&] { return ready.load(); })) {
      return tessera::DeadlineExceeded("communicator rank {} of {}: initialization did not finish within {} ms", rank,
                                       nranks, WaitBound().count());
    }
  }
  if (!init_status.ok()) return init_status;
  if (comm == nullptr) return tessera::FailedPrecondition("communicator rank {} of {} was finalized or aborted", rank, nranks);
  return comm.get();
}

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  ApplyEnvAliases();
  if (uniqueId == nullptr) return Fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  auto token = tessera::comm::GenerateJobToken();
  if (!token.ok()) return Fail(token.status());
  if (token->size() < kTokenBytes) return Fail(ncclInternalError, "ncclGetUniqueId: short job token");
  auto server = std::make_shared<tessera::comm::TcpStoreServer>(token->substr(0, kTokenBytes));
  auto port = server->Start("", 0);
  if (!port.ok()) return Fail(port.status().WithContext("ncclGetUniqueId: starting the rendezvous store"));
  std::string host = LocalAddress();
  if (host.size() >= kHostBytes) return Fail(ncclSystemError, "ncclGetUniqueId: host address too long: " + host);
  std::memset(uniqueId->internal, 0, sizeof(uniqueId->internal));
  std::memcpy(uniqueId->internal, kMagic, 4);
  uniqueId->internal[4] = static_cast<char>((*port >> 8) & 0xff);
  uniqueId->internal[5] = static_cast<char>(*port & 0xff);
  std::memcpy(uniqueId->internal + kHostOffset, host.data(), host.size());
  std::memcpy(uniqueId->internal + kTokenOffset, token->data(), kTokenBytes);
  std::lock_guard<std::mutex> lock(g_servers_mu);
  (*g_servers)[token->substr(0, kTokenBytes)] = HostedServer{server, server};
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  ApplyEnvAliases();
  if (comm == nullptr) return Fail(ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *comm = nullptr;
  if (nranks < 1) return Fail(ncclInvalidArgument, fmt::format("ncclCommInitRank: nranks {} < 1", nranks));
  if (rank < 0 || rank >= nranks) {
    return Fail(ncclInvalidArgument, fmt::format("ncclCommInitRank: rank {} outside [0, {})", rank, nranks));
  }
  auto id = Decode(commId);
  if (!id.ok()) return Fail(id.status());
  auto* c = new ncclComm();
  c->rank = rank;
  c->nranks = nranks;
  c->blocking = BlockingConfig(config, true);
  *comm = c;
  ncclResult_t r = StartInit(c, [c, d = *id, rank, nranks] { return InitFromId(c, d, rank, nranks); });
  if (r != ncclSuccess && r != ncclInProgress) {
    delete c;
    *comm = nullptr;
  }
  return r;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ApplyEnvAliases();
  if (comms == nullptr || ndev < 1) {
    return Fail(ncclInvalidArgument, fmt::format("ncclCommInitAll: comms is NULL or ndev {} < 1", ndev));
  }
  auto store = tessera::comm::MakeInMemoryStore();
  std::vector<Status> status(ndev);
  std::vector<ncclComm*> made(ndev);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    made[i] = new ncclComm();
    made[i]->rank = i;
    made[i]->nranks = ndev;
    made[i]->device = devlist != nullptr ? devlist[i] : i;
    made[i]->store = store;
    threads.emplace_back([&, i] {
      CommOptions o;
      o.name = "nccl-all";
      auto c = Communicator::Create(store, i, ndev, o);
      if (c.ok()) {
        made[i]->comm = std::move(*c);
      } else {
        status[i] = c.status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (!status[i].ok()) {
      for (ncclComm* c : made) delete c;
      for (int j = 0; j < ndev; ++j) comms[j] = nullptr;
      return Fail(status[i].WithContext(fmt::format("ncclCommInitAll: rank {} of {}", i, ndev)));
    }
  }
  for (int i = 0; i < ndev; ++i) comms[i] = made[i];
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (comm == nullptr || newcomm == nullptr) return Fail(ncclInvalidArgument, "ncclCommSplit: comm or newcomm is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return Fail(ncclInvalidArgument, fmt::format("ncclCommSplit: color {} is negative (only NCCL_SPLIT_NOCOLOR)", color));
  }
  auto parent = comm->Get();
  if (!parent.ok()) return Fail(parent.status().WithContext("ncclCommSplit"));
  auto* c = new ncclComm();
  c->rank = -1;
  c->device = comm->device;
  c->blocking = BlockingConfig(config, comm->blocking);
  c->keep_alive = comm->keep_alive;
  c->store = comm->store;
  Communicator* p = *parent;
  if (color == NCCL_SPLIT_NOCOLOR) {  // no communicator comes out: always blocking
    delete c;
    auto none = p->Split(Communicator::kNoColor, key);
    if (!none.ok()) return Fail(none.status().WithContext("ncclCommSplit (NCCL_SPLIT_NOCOLOR)"));
    return ncclSuccess;
  }
  ncclComm** out = newcomm;
  *newcomm = c;
  ncclResult_t r = StartInit(c, [c, p, color, key] {
    auto child = p->Split(color, key);
    if (!child.ok()) return child.status().WithContext("ncclCommSplit");
    c->comm = std::move(*child);
    c->rank = c->comm->rank();
    c->nranks = c->comm->size();
    return Status();
  });
  if (r != ncclSuccess && r != ncclInProgress) {
    delete c;
    *out = nullptr;
  }
  return r;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) {
    return Fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm or asyncError is NULL");
  }
  if (!comm->ready.load(std::memory_order_acquire)) {
    *asyncError = ncclInProgress;
    return ncclSuccess;
  }
  if (!comm->init_status.ok()) {
    *asyncError = Fail(comm->init_status);
  } else if (comm->comm != nullptr) {
    *asyncError = Fail(comm->comm->health());
  } else {
    *asyncError = ncclSuccess;  // finalized, or a NOCOLOR split
  }
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return Fail(ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
  auto c = comm->Get();
  if (!c.ok()) return Fail(c.status().WithContext("ncclCommFinalize"));
  // Waits for this rank's earlier operations (a no-op queued behind them).
  return Fail((*c)->RunCustom("nccl_finalize", [](tessera::comm::algo::AlgoEnv&) { return Status(); }));
}

static void Release(ncclComm_t comm, bool abort) {
  if (abort && comm->comm != nullptr) comm->comm->Abort("ncclCommAbort");
  if (comm->init_thread.joinable()) comm->init_thread.join();  // init is bounded by its timeouts
  if (abort && comm->comm != nullptr) comm->comm->Abort("ncclCommAbort");
  delete comm;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  Release(comm, false);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  Release(comm, true);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return Fail(ncclInvalidArgument, "ncclCommCount: comm or count is NULL");
  auto c = comm->Get();
  if (!c.ok()) return Fail(c.status());
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return Fail(ncclInvalidArgument, "ncclCommUserRank: comm or rank is NULL");
  auto c = comm->Get();
  if (!c.ok()) return Fail(c.status());
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) {
    return Fail(ncclInvalidArgument, "ncclCommCuDevice: comm or device is NULL");
  }
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t /*size*/, void** handle) {
  if (comm == nullptr || handle == nullptr) return Fail(ncclInvalidArgument, "ncclCommRegister: comm or handle is NULL");
  *handle = buff;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* /*handle*/) {
  if (comm == nullptr) return Fail(ncclInvalidArgument, "ncclCommDeregister: comm is NULL");
  return ncclSuccess;
}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return Fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  auto p = tessera::comm::AllocShared(size == 0 ? 1 : size);
  if (!p.ok()) return Fail(p.status().WithContext("ncclMemAlloc"));
  *ptr = *p;
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) { return Fail(tessera::comm::FreeShared(ptr)); }

}  // extern "C"
