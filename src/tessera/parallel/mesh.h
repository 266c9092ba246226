// DeviceMesh: the ranks of a job arranged on named axes dp × pp × tp, with
// expert parallelism (ep) carved out of the data-parallel axis, as in
// Megatron-Core and DeepSeek-V3.
//
// Rank order (tp fastest, then dp, then pp):
//   rank = tp_rank + tp · (dp_rank + dp · pp_rank)
// so a tensor-parallel group is tp consecutive ranks (one host's fast
// links), and pipeline neighbours are dp·tp ranks apart. Inside the
// data-parallel axis, ep_rank = dp_rank mod ep and
// expert_dp_rank = dp_rank / ep: an expert-parallel group is ep consecutive
// data-parallel ranks that split the experts between them, and the
// expert-data-parallel group (size dp/ep) holds the replicas of one expert
// shard, whose gradients it averages.
//
// Create() splits the world communicator into one sub-communicator per axis
// (collective: every rank of the world calls it with the same shape).
// Groups of size 1 are still real communicators (operations are local).
// Thread-safety: as Communicator (the mesh itself is immutable).
#pragma once

#include <memory>
#include <string>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"

namespace tessera::parallel {

struct MeshShape {
  int dp = 1;
  int pp = 1;
  int tp = 1;
  int ep = 1;  // divides dp

  int world_size() const { return dp * pp * tp; }
  std::string ToString() const;  // "dp 2 × pp 2 × tp 2 (ep 2)"
};

struct MeshCoord {
  int dp = 0;
  int pp = 0;
  int tp = 0;
  int ep = 0;         // dp mod ep
  int expert_dp = 0;  // dp / ep
};

// Checks degrees ≥ 1, ep | dp and dp·pp·tp == world_size; errors name the
// keys (parallel.dp, ...) and the numbers.
Status ValidateMeshShape(const MeshShape& shape, int world_size);

MeshCoord CoordOf(const MeshShape& shape, int rank);
int RankOf(const MeshShape& shape, const MeshCoord& coord);  // uses dp, pp, tp

class DeviceMesh {
 public:
  // `world` must outlive the mesh.
  static StatusOr<std::unique_ptr<DeviceMesh>> Create(comm::Communicator& world, const MeshShape& shape);

  const MeshShape& shape() const { return shape_; }
  const MeshCoord& coord() const { return coord_; }
  int rank() const { return world_->rank(); }

  comm::Communicator& world() const { return *world_; }
  comm::Communicator& dp() const { return *dp_; }
  comm::Communicator& pp() const { return *pp_; }
  comm::Communicator& tp() const { return *tp_; }
  comm::Communicator& ep() const { return *ep_; }
  comm::Communicator& expert_dp() const { return *expert_dp_; }

  bool is_first_stage() const { return coord_.pp == 0; }
  bool is_last_stage() const { return coord_.pp == shape_.pp - 1; }

 private:
  DeviceMesh() = default;

  MeshShape shape_;
  MeshCoord coord_;
  comm::Communicator* world_ = nullptr;
  std::unique_ptr<comm::Communicator> dp_, pp_, tp_, ep_, expert_dp_;
};

}  // namespace tessera::parallel
