// DeviceMesh: coordinates, validation, and that every axis group holds
// exactly the ranks the layout promises (checked by all-gathering world
// ranks over each group, with the ranks as threads).
#include "tessera/parallel/mesh.h"

#include <gtest/gtest.h>

#include <set>

#include "tessera/comm/api/comm_test_util.h"

namespace tessera::parallel {
namespace {

TEST(Mesh, CoordinatesRoundTrip) {
  const MeshShape shape{.dp = 4, .pp = 2, .tp = 2, .ep = 2};
  std::set<std::tuple<int, int, int>> seen;
  for (int r = 0; r < shape.world_size(); ++r) {
    MeshCoord c = CoordOf(shape, r);
    EXPECT_EQ(RankOf(shape, c), r);
    EXPECT_EQ(c.ep, c.dp % 2);
    EXPECT_EQ(c.expert_dp, c.dp / 2);
    seen.insert({c.dp, c.pp, c.tp});
  }
  EXPECT_EQ(seen.size(), 16u);
  // tp fastest, then dp, then pp.
  EXPECT_EQ(CoordOf(shape, 1).tp, 1);
  EXPECT_EQ(CoordOf(shape, 2).dp, 1);
  EXPECT_EQ(CoordOf(shape, 8).pp, 1);
}

TEST(Mesh, ValidationNamesTheKeys) {
  auto msg = [](const MeshShape& s, int world) { return ValidateMeshShape(s, world).ToString(); };
  EXPECT_TRUE(ValidateMeshShape({.dp = 2, .pp = 2, .tp = 2, .ep = 2}, 8).ok());
  EXPECT_NE(msg({.dp = 2, .pp = 2, .tp = 2, .ep = 1}, 4).find("has 8 ranks but the job has 4"), std::string::npos);
  EXPECT_NE(msg({.dp = 2, .pp = 1, .tp = 1, .ep = 4}, 2).find("parallel.ep = 4 must divide parallel.dp = 2"),
            std::string::npos);
  EXPECT_NE(msg({.dp = 0, .pp = 1, .tp = 1, .ep = 1}, 1).find("parallel.dp = 0"), std::string::npos);
}

// World ranks of the members of `group`, in group order.
std::vector<int> Members(comm::Communicator& group, int world_rank) {
  std::vector<int> out(group.size());
  int32_t me = world_rank;
  EXPECT_TRUE(group.AllGather(&me, out.data(), 1, comm::DataType::kInt32).ok());
  return out;
}

TEST(Mesh, GroupsHoldTheRanksOfTheirAxis) {
  const MeshShape shape{.dp = 2, .pp = 2, .tp = 2, .ep = 2};
  comm::testing::RunRanks(8, comm::testing::TestOptions(), [&](int rank, comm::Communicator& world) {
    auto mesh = DeviceMesh::Create(world, shape);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    const MeshCoord c = (*mesh)->coord();
    auto expect_axis = [&](comm::Communicator& group, auto vary, int size, int index, const char* axis) {
      ASSERT_EQ(group.size(), size) << axis;
      EXPECT_EQ(group.rank(), index) << axis;
      std::vector<int> members = Members(group, rank);
      for (int i = 0; i < size; ++i) {
        MeshCoord m = c;
        vary(m, i);
        EXPECT_EQ(members[i], RankOf(shape, m)) << axis << " member " << i << " of rank " << rank;
      }
    };
    expect_axis((*mesh)->tp(), [](MeshCoord& m, int i) { m.tp = i; }, 2, c.tp, "tp");
    expect_axis((*mesh)->dp(), [](MeshCoord& m, int i) { m.dp = i; }, 2, c.dp, "dp");
    expect_axis((*mesh)->pp(), [](MeshCoord& m, int i) { m.pp = i; }, 2, c.pp, "pp");
    expect_axis((*mesh)->ep(), [&](MeshCoord& m, int i) { m.dp = c.expert_dp * 2 + i; }, 2, c.ep, "ep");
    expect_axis((*mesh)->expert_dp(), [&](MeshCoord& m, int i) { m.dp = i * 2 + c.ep; }, 1, c.expert_dp,
                "expert-dp");
  });
}

TEST(Mesh, MismatchedWorldIsAnError) {
  comm::testing::RunRanks(2, comm::testing::TestOptions(), [&](int, comm::Communicator& world) {
    auto mesh = DeviceMesh::Create(world, {.dp = 1, .pp = 1, .tp = 4, .ep = 1});
    ASSERT_FALSE(mesh.ok());
    EXPECT_NE(mesh.status().ToString().find("--nproc 4"), std::string::npos) << mesh.status().ToString();
  });
}

}  // namespace
}  // namespace tessera::parallel
