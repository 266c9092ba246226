// Test support for the tensor- and expert-parallel tests (header only):
// thread ranks over an in-memory store, random leaves, sharding of reference
// tensors, and tolerance comparisons. Not used by the library itself.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/comm/api/comm_test_util.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/tensor_parallel/collectives.h"
#include "tessera/tensor/rng.h"

namespace tessera::parallel::testing {

// Runs fn(rank, communicator) on `size` thread ranks. An exception in a
// rank is a test failure (not a crash) and aborts the communicator, so the
// other ranks fail promptly instead of waiting for the timeout; the tape of
// the failed rank is cleared.
inline void RunRanks(int size, const std::function<void(int, comm::Communicator&)>& fn) {
  comm::testing::RunRanks(size, comm::testing::TestOptions("", "tp"), [&](int rank, comm::Communicator& c) {
    try {
      fn(rank, c);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << rank << ": " << e.what();
      graph::ClearTape();
      c.Abort(e.what());
    }
  });
}

// Uniform values in [-1, 1), rounded to `dtype`; a leaf with requires_grad.
inline Tensor RandomLeaf(const Shape& shape, uint64_t seed, DType dtype = DType::kF32) {
  Tensor t = Tensor::Empty(shape);
  FillUniform(t, seed, -1.0f, 1.0f);
  t = t.To(dtype);
  t.set_requires_grad(true);
  return t;
}

// A fresh leaf holding `value`'s data (its own gradient).
inline Tensor LeafCopy(const Tensor& value) {
  Tensor t = value.Clone();
  t.set_requires_grad(true);
  return t;
}

// Scalar Σ out ⊙ weight (weight converted to out's dtype): every output
// element gets its own gradient.
inline Tensor Project(const Tensor& out, const Tensor& weight) {
  return graph::Sum(graph::Mul(out, graph::Detach(weight).To(out.dtype())));
}

// Relative tolerance per activation dtype (against fp32 references).
inline double Tolerance(DType dtype) { return dtype == DType::kF32 ? 1e-5 : dtype == DType::kBF16 ? 3e-2 : 5e-3; }

// max |got - want| <= rel · max(max |want|, floor), elementwise over equal
// shapes (the floor absorbs rounding noise in gradients that are zero in
// exact arithmetic; pass the magnitude of related tensors to compare them on
// a common scale).
inline void ExpectClose(const Tensor& got, const Tensor& want, double rel, const std::string& what,
                        double floor = 1e-2) {
  ASSERT_TRUE(got.defined()) << what << ": undefined";
  ASSERT_TRUE(want.defined()) << what << ": reference undefined";
  ASSERT_EQ(ShapeString(got.shape()), ShapeString(want.shape())) << what;
  const std::vector<float> g = got.ToFloatVector(), w = want.ToFloatVector();
  double scale = floor, err = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(w[i])));
    const double e = std::fabs(static_cast<double>(g[i]) - w[i]);
    if (!(e <= err)) {  // also catches NaN
      err = std::isnan(e) ? INFINITY : e;
      worst = i;
    }
  }
  EXPECT_LE(err, rel * scale) << what << ": max error " << err << " at " << worst << " (got "
                              << (g.empty() ? 0.0f : g[worst]) << ", want " << (w.empty() ? 0.0f : w[worst])
                              << "), scale " << scale;
}

// f() throws OpError whose message contains `text`.
inline void ExpectOpError(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected: " << text;
  } catch (const OpError& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// max |x| over the elements of several tensors.
inline double MaxAbs(const std::vector<Tensor>& xs) {
  double m = 0.0;
  for (const Tensor& x : xs) {
    for (float v : x.ToFloatVector()) m = std::max(m, static_cast<double>(std::fabs(v)));
  }
  return m;
}

// Block r of `size` of x along axis (a reference shard).
inline Tensor Shard(const Tensor& x, int axis, int rank, int size) { return TensorShard(x, axis, rank, size); }

}  // namespace tessera::parallel::testing
