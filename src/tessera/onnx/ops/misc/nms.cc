// NonMaxSuppression: greedy per-(batch, class) box selection by score,
// dropping boxes whose IoU with a kept box exceeds iou_threshold.
#include <algorithm>
#include <cmath>

#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {
namespace {

struct Box {
  double y1, x1, y2, x2;
  double area() const { return (y2 - y1) * (x2 - x1); }
};

double Iou(const Box& a, const Box& b) {
  const double ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return 0;
  const double inter = ih * iw;
  const double uni = a.area() + b.area() - inter;
  return uni > 0 ? inter / uni : 0;
}

}  // namespace

Status NonMaxSuppressionKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array boxes, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array scores, ctx.tensor(1));
  if (!IsFloatType(boxes.type()) || !IsFloatType(scores.type())) return ctx.Error("boxes and scores must be float");
  if (boxes.rank() != 3 || boxes.dim(2) != 4) return ctx.Error("boxes must be [B, N, 4], got {}", boxes.ShapeString());
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1)) {
    return ctx.Error("scores {} do not match boxes {}", scores.ShapeString(), boxes.ShapeString());
  }
  int64_t max_out = 0;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(Array m, ctx.tensor(2));
    if (m.numel() > 1 || !IsIntegerType(m.type())) return ctx.Error("max_output_boxes_per_class must be one integer");
    if (m.numel() == 1) max_out = m.GetInt(0);
  }
  double iou_threshold = 0;
  if (ctx.has_input(3)) {
    TESSERA_ASSIGN_OR_RETURN(iou_threshold, ScalarInput(ctx, 3));
  }
  bool use_score = false;
  double score_threshold = 0;
  if (ctx.has_input(4)) {
    TESSERA_ASSIGN_OR_RETURN(score_threshold, ScalarInput(ctx, 4));
    use_score = true;
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t center, ctx.node().Int("center_point_box", 0));
  const int64_t nb = boxes.dim(0), nbox = boxes.dim(1), nc = scores.dim(1);
  std::vector<Box> all(static_cast<size_t>(nb * nbox));
  for (int64_t i = 0; i < nb * nbox; ++i) {
    const double a = boxes.GetDouble(i * 4), b = boxes.GetDouble(i * 4 + 1);
    const double c = boxes.GetDouble(i * 4 + 2), d = boxes.GetDouble(i * 4 + 3);
    Box& box = all[static_cast<size_t>(i)];
    if (center != 0) {  // [x_center, y_center, width, height]
      box = {b - d / 2, a - c / 2, b + d / 2, a + c / 2};
    } else {  // [y1, x1, y2, x2], either diagonal
      box = {std::min(a, c), std::min(b, d), std::max(a, c), std::max(b, d)};
    }
  }
  std::vector<int64_t> selected;  // triples
  std::vector<int64_t> order;
  std::vector<int64_t> kept;
  for (int64_t b = 0; b < nb && max_out > 0; ++b) {
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t sbase = (b * nc + c) * nbox;
      order.clear();
      for (int64_t i = 0; i < nbox; ++i) {
        const double s = scores.GetDouble(sbase + i);
        if (!std::isnan(s) && (!use_score || s > score_threshold)) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t p, int64_t q) { return scores.GetDouble(sbase + p) > scores.GetDouble(sbase + q); });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Box& cand = all[static_cast<size_t>(b * nbox + i)];
        bool keep = true;
        for (int64_t k : kept) {
          if (Iou(cand, all[static_cast<size_t>(b * nbox + k)]) > iou_threshold) {
            keep = false;
            break;
          }
        }
        if (!keep) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const int64_t n_sel = static_cast<int64_t>(selected.size() / 3);
  Array out(ElemType::kInt64, {n_sel, 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx
