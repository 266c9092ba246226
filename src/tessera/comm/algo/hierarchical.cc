#include "tessera/comm/algo/hierarchical.h"

#include <cstring>

#include "tessera/comm/algo/reduce_kernels.h"
#include "tessera/comm/api/communicator.h"

namespace tessera::comm::algo {

HierarchyContext::HierarchyContext(std::unique_ptr<Communicator> local, std::unique_ptr<Communicator> cross,
                                   std::vector<std::vector<int>> hosts)
    : local_(std::move(local)), cross_(std::move(cross)), hosts_(std::move(hosts)) {}

HierarchyContext::~HierarchyContext() = default;

void HierarchyContext::Abort(const std::string& reason) {
  local_->Abort(reason);
  cross_->Abort(reason);
}

Status HierarchyContext::Run(const CollectiveArgs& a, AlgoEnv& env) {
  const int nl = local_->size();
  const int nh = cross_->size();
  const size_t elem = a.ElementSize();
  const ReduceOp op = a.op == ReduceOp::kAvg ? ReduceOp::kSum : a.op;
  switch (a.kind) {
    case CollectiveKind::kAllReduce: {
      if (a.count == 0) return Status::Ok();
      const size_t g = 64 / elem;
      const size_t shard = ((a.count + g - 1) / g + nl - 1) / nl * g;
      uint8_t* full = env.scratch->Get(2, shard * nl * elem);
      uint8_t* part = env.scratch->Get(3, shard * elem);
      std::memcpy(full, a.send, a.count * elem);
      std::memset(full + a.count * elem, 0, (shard * nl - a.count) * elem);
      TESSERA_RETURN_IF_ERROR(local_->ReduceScatter(full, part, shard, a.dtype, op));
      TESSERA_RETURN_IF_ERROR(cross_->AllReduce(part, part, shard, a.dtype, op));
      if (a.op == ReduceOp::kAvg) DivideBy(part, shard, a.dtype, env.size);
      TESSERA_RETURN_IF_ERROR(local_->AllGather(part, full, shard, a.dtype));
      std::memcpy(a.recv, full, a.count * elem);
      return Status::Ok();
    }
    case CollectiveKind::kAllGather: {
      const size_t bytes = a.count * elem;
      if (bytes == 0) return Status::Ok();
      uint8_t* column = env.scratch->Get(2, nh * bytes);        // [host]
      uint8_t* everything = env.scratch->Get(3, nl * nh * bytes);  // [local][host]
      TESSERA_RETURN_IF_ERROR(cross_->AllGather(a.send, column, a.count, a.dtype));
      TESSERA_RETURN_IF_ERROR(local_->AllGather(column, everything, a.count * nh, a.dtype));
      auto* recv = static_cast<uint8_t*>(a.recv);
      for (int l = 0; l < nl; ++l) {
        for (int h = 0; h < nh; ++h) {
          std::memcpy(recv + hosts_[h][l] * bytes, everything + (l * nh + h) * bytes, bytes);
        }
      }
      return Status::Ok();
    }
    case CollectiveKind::kReduceScatter: {
      const size_t bytes = a.count * elem;
      if (bytes == 0) return Status::Ok();
      uint8_t* ordered = env.scratch->Get(2, nl * nh * bytes);  // [local][host]
      uint8_t* mine = env.scratch->Get(3, nh * bytes);          // [host], summed over the host
      const auto* send = static_cast<const uint8_t*>(a.send);
      for (int l = 0; l < nl; ++l) {
        for (int h = 0; h < nh; ++h) {
          std::memcpy(ordered + (l * nh + h) * bytes, send + hosts_[h][l] * bytes, bytes);
        }
      }
      TESSERA_RETURN_IF_ERROR(local_->ReduceScatter(ordered, mine, a.count * nh, a.dtype, op));
      TESSERA_RETURN_IF_ERROR(cross_->ReduceScatter(mine, a.recv, a.count, a.dtype, op));
      if (a.op == ReduceOp::kAvg) DivideBy(a.recv, a.count, a.dtype, env.size);
      return Status::Ok();
    }
    default:
      return Internal("hierarchical algorithm called for {}", CollectiveName(a.kind));
  }
}

}  // namespace tessera::comm::algo
