// Unique: distinct elements (or distinct slices along an axis), sorted or in
// order of first occurrence, with first-occurrence indices, inverse indices
// and counts.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <type_traits>

#include "tessera/onnx/ops/index/index_kernels.h"
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_kernels.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

namespace {

// A strict weak order: NaNs sort after every number and equal each other.
template <typename T>
bool Less(const T& a, const T& b) {
  if constexpr (std::is_integral_v<T> || std::is_same_v<T, std::string>) {
    return a < b;
  } else {
    const double x = ToDouble(a), y = ToDouble(b);
    if (std::isnan(y)) return !std::isnan(x);
    return x < y;
  }
}

// Groups the n rows of m elements at `p`: `first` gets the first row of each distinct value (in sorted or
// first-occurrence order), `inverse` each row's group, `counts` each group's size.
template <typename T>
void GroupRows(const T* p, int64_t n, int64_t m, bool sorted, std::vector<int64_t>& first,
               std::vector<int64_t>& inverse, std::vector<int64_t>& counts) {
  auto row_less = [&](int64_t a, int64_t b) {
    for (int64_t j = 0; j < m; ++j) {
      if (Less(p[a * m + j], p[b * m + j])) return true;
      if (Less(p[b * m + j], p[a * m + j])) return false;
    }
    return false;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), row_less);
  // Groups in sorted order: their first row (the smallest index, as the sort is stable) and members.
  std::vector<int64_t> group_of(static_cast<size_t>(n));
  std::vector<int64_t> group_first, group_count;
  for (size_t s = 0; s < order.size(); ++s) {
    if (s == 0 || row_less(order[s - 1], order[s])) {
      group_first.push_back(order[s]);
      group_count.push_back(0);
    }
    group_of[static_cast<size_t>(order[s])] = static_cast<int64_t>(group_first.size() - 1);
    ++group_count.back();
  }
  const size_t u = group_first.size();
  std::vector<int64_t> rank(u);  // output position of each group
  std::vector<size_t> groups(u);
  std::iota(groups.begin(), groups.end(), size_t{0});
  if (!sorted)
    std::sort(groups.begin(), groups.end(), [&](size_t a, size_t b) { return group_first[a] < group_first[b]; });
  first.clear();
  counts.clear();
  for (size_t i = 0; i < u; ++i) {
    rank[groups[i]] = static_cast<int64_t>(i);
    first.push_back(group_first[groups[i]]);
    counts.push_back(group_count[groups[i]]);
  }
  inverse.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    inverse[static_cast<size_t>(i)] = rank[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
}

}  // namespace

Status UniqueKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(int64_t sorted, ctx.node().Int("sorted", 1));
  const bool has_axis = ctx.node().Has("axis");
  if (!has_axis) x = x.Reshaped({x.numel()});
  if (x.rank() == 0) return ctx.Error("input must have rank >= 1 when axis is given");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis64, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(x.rank())));
  const size_t axis = static_cast<size_t>(axis64);
  // Rows: the slices along `axis`, made contiguous by moving the axis to the front.
  std::vector<int64_t> perm = {axis64};
  for (size_t d = 0; d < x.rank(); ++d) {
    if (d != axis) perm.push_back(static_cast<int64_t>(d));
  }
  const Array rows = TransposeArray(x, perm);
  const int64_t n = x.dim(axis);
  const int64_t m = n == 0 ? 0 : x.numel() / n;
  std::vector<int64_t> first, inverse, counts;
  if (x.type() == ElemType::kString) {
    GroupRows(rows.data<std::string>(), n, m, sorted != 0, first, inverse, counts);
  } else {
    TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), "Unique", [&](auto t) {
      using T = decltype(t);
      GroupRows(rows.data<T>(), n, m, sorted != 0, first, inverse, counts);
    }));
  }
  // Y: the selected slices, in place along the axis.
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.dim(d);
    if (d > axis) inner *= x.dim(d);
  }
  std::vector<int64_t> shape = x.shape();
  const int64_t u = static_cast<int64_t>(first.size());
  shape[axis] = u;
  Array y(x.type(), shape);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < u; ++j) {
      CopyElems(x, (o * n + first[static_cast<size_t>(j)]) * inner, y, (o * u + j) * inner, inner);
    }
  }
  ctx.set_output(0, y);
  if (ctx.num_outputs() > 1) ctx.set_output(1, Array::Vector(first));
  if (ctx.num_outputs() > 2) ctx.set_output(2, Array::Vector(inverse));
  if (ctx.num_outputs() > 3) ctx.set_output(3, Array::Vector(counts));
  return Status::Ok();
}

}  // namespace tessera::onnx
