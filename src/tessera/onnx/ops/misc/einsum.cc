// Einsum: a general Einstein summation over any equation (explicit "->" or
// implicit output, "..." broadcast dims, repeated labels as diagonals /
// traces), computed as one loop over every label's index.
#include <algorithm>
#include <cctype>
#include <map>
#include <string>

#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {
namespace {

constexpr int kEllipsis = -1;  // stands for "..." in a parsed term

// A term's labels: letters as 0..51, "..." as kEllipsis (at most once).
StatusOr<std::vector<int>> ParseTerm(const OpContext& ctx, const std::string& term) {
  std::vector<int> labels;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == '.') {
      if (seen_ellipsis || term.compare(i, 3, "...") != 0) return ctx.Error("bad '...' in einsum term '{}'", term);
      seen_ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
    } else if (c >= 'a' && c <= 'z') {
      labels.push_back(c - 'a' + 26);
    } else if (c >= 'A' && c <= 'Z') {
      labels.push_back(c - 'A');
    } else {
      return ctx.Error("bad character '{}' in einsum term '{}'", c, term);
    }
  }
  return labels;
}

std::vector<std::string> SplitTerms(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// out[o] = sum over the summed labels of prod_k in[k][offset_k]; labels
// 0..n_out-1 are the output's (row-major), the rest are summed.
template <typename Acc>
void EinsumLoop(const std::vector<std::vector<Acc>>& in, const std::vector<std::vector<int64_t>>& strides,
                const std::vector<int64_t>& sizes, size_t n_out, std::vector<Acc>& out) {
  const size_t n_labels = sizes.size();
  int64_t inner = 1;
  for (size_t l = n_out; l < n_labels; ++l) inner *= sizes[l];
  std::fill(out.begin(), out.end(), Acc{});
  if (inner == 0) return;
  std::vector<int64_t> idx(n_labels, 0), off(in.size(), 0);
  for (size_t o = 0; o < out.size(); ++o) {
    Acc acc{};
    for (int64_t t = 0; t < inner; ++t) {
      Acc prod = Acc{1};
      for (size_t k = 0; k < in.size(); ++k) prod = static_cast<Acc>(prod * in[k][static_cast<size_t>(off[k])]);
      acc = static_cast<Acc>(acc + prod);
      // Advance the odometer over all labels (last fastest).
      for (size_t l = n_labels; l-- > 0;) {
        ++idx[l];
        for (size_t k = 0; k < in.size(); ++k) off[k] += strides[k][l];
        if (idx[l] < sizes[l]) break;
        for (size_t k = 0; k < in.size(); ++k) off[k] -= strides[k][l] * sizes[l];
        idx[l] = 0;
      }
    }
    out[o] = acc;
  }
}

template <typename T, typename Acc>
Array RunEinsum(const std::vector<Array>& inputs, const std::vector<std::vector<int64_t>>& strides,
                const std::vector<int64_t>& sizes, const std::vector<int64_t>& out_shape) {
  std::vector<std::vector<Acc>> in(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const T* p = inputs[k].data<T>();
    in[k].resize(static_cast<size_t>(inputs[k].numel()));
    for (size_t i = 0; i < in[k].size(); ++i) {
      if constexpr (std::is_floating_point_v<Acc>) {
        in[k][i] = ToDouble(p[i]);
      } else {
        in[k][i] = static_cast<Acc>(p[i]);
      }
    }
  }
  Array out(inputs[0].type(), out_shape);
  std::vector<Acc> acc(static_cast<size_t>(out.numel()));
  EinsumLoop(in, strides, sizes, out_shape.size(), acc);
  T* po = out.data<T>();
  for (size_t i = 0; i < acc.size(); ++i) {
    if constexpr (std::is_floating_point_v<Acc>) {
      po[i] = FromDouble<T>(acc[i]);
    } else {
      po[i] = static_cast<T>(acc[i]);
    }
  }
  return out;
}

}  // namespace

Status EinsumKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(std::string eq_raw, ctx.node().String("equation", ""));
  std::string eq;
  for (char c : eq_raw) {
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  }
  const size_t arrow = eq.find("->");
  const bool explicit_out = arrow != std::string::npos;
  const std::vector<std::string> terms = SplitTerms(explicit_out ? eq.substr(0, arrow) : eq);
  if (terms.size() != ctx.num_inputs()) {
    return ctx.Error("equation '{}' has {} input terms but the node has {} inputs", eq_raw, terms.size(),
                     ctx.num_inputs());
  }
  std::vector<Array> inputs;
  for (size_t k = 0; k < terms.size(); ++k) {
    TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(k));
    if (a.type() == ElemType::kString || a.type() == ElemType::kBool) {
      return ctx.Error("unsupported element type {}", ElemName(a.type()));
    }
    if (k > 0 && a.type() != inputs[0].type()) return ctx.Error("inputs must share one element type");
    inputs.push_back(std::move(a));
  }
  // Per input: the label of each axis. Ellipsis dims get labels 52 + j where
  // j counts the broadcast ellipsis dims right-aligned.
  std::vector<std::vector<int>> axis_labels(inputs.size());
  int64_t ell_rank = 0;
  std::vector<std::vector<int>> parsed(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    TESSERA_ASSIGN_OR_RETURN(parsed[k], ParseTerm(ctx, terms[k]));
    const bool has_ell = std::count(parsed[k].begin(), parsed[k].end(), kEllipsis) > 0;
    const int64_t letters = static_cast<int64_t>(parsed[k].size()) - (has_ell ? 1 : 0);
    const int64_t rank = static_cast<int64_t>(inputs[k].rank());
    if (has_ell ? rank < letters : rank != letters) {
      return ctx.Error("einsum term '{}' does not fit input {} of shape {}", terms[k], k, inputs[k].ShapeString());
    }
    if (has_ell) ell_rank = std::max(ell_rank, rank - letters);
  }
  constexpr int kEllBase = 52;
  std::vector<int64_t> label_size(kEllBase + static_cast<size_t>(ell_rank), -1);
  std::vector<int> count(label_size.size(), 0);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int64_t rank = static_cast<int64_t>(inputs[k].rank());
    const int64_t n_ell = rank - (static_cast<int64_t>(parsed[k].size()) - 1);
    for (int l : parsed[k]) {
      if (l == kEllipsis) {
        for (int64_t j = 0; j < n_ell; ++j) axis_labels[k].push_back(kEllBase + static_cast<int>(ell_rank - n_ell + j));
      } else {
        axis_labels[k].push_back(l);
      }
    }
    for (size_t ax = 0; ax < axis_labels[k].size(); ++ax) {
      const int l = axis_labels[k][ax];
      const int64_t d = inputs[k].dim(ax);
      int64_t& s = label_size[static_cast<size_t>(l)];
      if (s == -1 || s == 1) {
        s = d;
      } else if (d != s && d != 1) {
        return ctx.Error("einsum label dims disagree ({} vs {}) in '{}'", s, d, eq_raw);
      }
      ++count[static_cast<size_t>(l)];
    }
  }
  for (int64_t j = 0; j < ell_rank; ++j) {
    if (label_size[static_cast<size_t>(kEllBase + j)] == -1) label_size[static_cast<size_t>(kEllBase + j)] = 1;
  }
  // Output labels.
  std::vector<int> out_labels;
  if (explicit_out) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int> rhs, ParseTerm(ctx, eq.substr(arrow + 2)));
    for (int l : rhs) {
      if (l == kEllipsis) {
        for (int64_t j = 0; j < ell_rank; ++j) out_labels.push_back(kEllBase + static_cast<int>(j));
        continue;
      }
      if (label_size[static_cast<size_t>(l)] == -1) return ctx.Error("output label not in any input of '{}'", eq_raw);
      if (std::count(out_labels.begin(), out_labels.end(), l) > 0) {
        return ctx.Error("repeated output label in '{}'", eq_raw);
      }
      out_labels.push_back(l);
    }
  } else {
    for (int64_t j = 0; j < ell_rank; ++j) out_labels.push_back(kEllBase + static_cast<int>(j));
    for (int l = 0; l < kEllBase; ++l) {
      if (count[static_cast<size_t>(l)] == 1) out_labels.push_back(l);
    }
  }
  std::vector<int> all_labels = out_labels;
  for (size_t l = 0; l < label_size.size(); ++l) {
    if (label_size[l] != -1 && std::count(out_labels.begin(), out_labels.end(), static_cast<int>(l)) == 0) {
      all_labels.push_back(static_cast<int>(l));
    }
  }
  std::vector<int64_t> sizes, out_shape;
  int64_t work = 1;
  for (int l : all_labels) {
    const int64_t s = label_size[static_cast<size_t>(l)];
    sizes.push_back(s);
    if (s > 0 && work > (int64_t{1} << 50) / s) return ctx.Error("einsum '{}' is too large to compute", eq_raw);
    work *= s;
  }
  for (size_t i = 0; i < out_labels.size(); ++i) out_shape.push_back(sizes[i]);
  std::vector<std::vector<int64_t>> strides(inputs.size(), std::vector<int64_t>(all_labels.size(), 0));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::vector<int64_t> st = Strides(inputs[k].shape());
    for (size_t ax = 0; ax < axis_labels[k].size(); ++ax) {
      if (inputs[k].dim(ax) == 1) continue;  // broadcast (or a single index)
      const auto pos = std::find(all_labels.begin(), all_labels.end(), axis_labels[k][ax]) - all_labels.begin();
      strides[k][static_cast<size_t>(pos)] += st[ax];
    }
  }
  Array out;
  TESSERA_RETURN_IF_ERROR(VisitNumeric(inputs[0].type(), "Einsum", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      out = RunEinsum<T, uint64_t>(inputs, strides, sizes, out_shape);
    } else {
      out = RunEinsum<T, double>(inputs, strides, sizes, out_shape);
    }
  }));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
