#include "tessera/parallel/mesh.h"

#include <fmt/format.h>

namespace tessera::parallel {

std::string MeshShape::ToString() const {
  std::string s = fmt::format("dp {} x pp {} x tp {}", dp, pp, tp);
  if (ep > 1) s += fmt::format(" (ep {})", ep);
  return s;
}

Status ValidateMeshShape(const MeshShape& shape, int world_size) {
  for (auto [name, v] : {std::pair{"parallel.dp", shape.dp}, std::pair{"parallel.pp", shape.pp},
                         std::pair{"parallel.tp", shape.tp}, std::pair{"parallel.ep", shape.ep}}) {
    if (v < 1) return InvalidArgument("{} = {} must be at least 1", name, v);
  }
  if (shape.dp % shape.ep != 0) {
    return InvalidArgument(
        "parallel.ep = {} must divide parallel.dp = {}: expert-parallel groups are carved out of the data-parallel "
        "ranks",
        shape.ep, shape.dp);
  }
  if (shape.world_size() != world_size) {
    return InvalidArgument(
        "the mesh {} has {} ranks but the job has {} (world size = dp x pp x tp; start it with `tessera launch "
        "--nproc {}` or change parallel.dp/pp/tp)",
        shape.ToString(), shape.world_size(), world_size, shape.world_size());
  }
  return Status::Ok();
}

MeshCoord CoordOf(const MeshShape& shape, int rank) {
  MeshCoord c;
  c.tp = rank % shape.tp;
  c.dp = (rank / shape.tp) % shape.dp;
  c.pp = rank / (shape.tp * shape.dp);
  c.ep = c.dp % shape.ep;
  c.expert_dp = c.dp / shape.ep;
  return c;
}

int RankOf(const MeshShape& shape, const MeshCoord& coord) {
  return coord.tp + shape.tp * (coord.dp + shape.dp * coord.pp);
}

StatusOr<std::unique_ptr<DeviceMesh>> DeviceMesh::Create(comm::Communicator& world, const MeshShape& shape) {
  TESSERA_RETURN_IF_ERROR(ValidateMeshShape(shape, world.size()));
  std::unique_ptr<DeviceMesh> mesh(new DeviceMesh());
  mesh->shape_ = shape;
  mesh->world_ = &world;
  const MeshCoord c = CoordOf(shape, world.rank());
  mesh->coord_ = c;
  // One Split per axis; the color names the fixed coordinates, the key
  // orders the group along the axis.
  auto split = [&](const char* axis, int color, int key) -> StatusOr<std::unique_ptr<comm::Communicator>> {
    auto sub = world.Split(color, key);
    if (!sub.ok()) return sub.status().WithContext(fmt::format("creating the {} groups of mesh {}", axis,
                                                               shape.ToString()));
    return std::move(sub).value();
  };
  TESSERA_ASSIGN_OR_RETURN(mesh->tp_, split("tp", c.pp * shape.dp + c.dp, c.tp));
  TESSERA_ASSIGN_OR_RETURN(mesh->dp_, split("dp", c.pp * shape.tp + c.tp, c.dp));
  TESSERA_ASSIGN_OR_RETURN(mesh->pp_, split("pp", c.dp * shape.tp + c.tp, c.pp));
  const int expert_groups = shape.dp / shape.ep;
  TESSERA_ASSIGN_OR_RETURN(mesh->ep_, split("ep", (c.pp * shape.tp + c.tp) * expert_groups + c.expert_dp, c.ep));
  TESSERA_ASSIGN_OR_RETURN(mesh->expert_dp_,
                           split("expert-dp", (c.pp * shape.tp + c.tp) * shape.ep + c.ep, c.expert_dp));
  return mesh;
}

}  // namespace tessera::parallel
