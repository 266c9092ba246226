// The RNN, GRU and LSTM kernels: each defines its cell's time step (ONNX's
// equations, gate order RNN: i; GRU: z, r, h; LSTM: i, o, f, c) and runs it
// with the shared driver in rnn_common.
#include <vector>

#include "tessera/onnx/ops/rnn/rnn_common.h"

namespace tessera::onnx::rnn {
namespace {

// pre[0 .. n) = W rows [row0, row0+n) * x + R rows * h + Wb + Rb of direction d.
void Preactivations(const RnnProblem& pb, int64_t d, int64_t row0, int64_t n, const double* x, const double* h,
                    double* pre) {
  const int64_t GH = pb.gates * pb.hidden;
  const double* wb = pb.b.data() + d * 2 * GH;
  const double* rb = wb + GH;
  for (int64_t j = 0; j < n; ++j) pre[j] = wb[row0 + j] + rb[row0 + j];
  AddMatVec(pb.w.data() + d * GH * pb.input, row0, n, pb.input, x, pre);
  AddMatVec(pb.r.data() + d * GH * pb.hidden, row0, n, pb.hidden, h, pre);
}

}  // namespace

// Ht = f(Xt*Wi^T + Ht-1*Ri^T + Wbi + Rbi).
Status RnnKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(RnnProblem pb, ReadProblem(ctx, 1, false, {"Tanh"}));
  std::vector<double> pre(static_cast<size_t>(pb.hidden));
  RunAndSetOutputs(ctx, pb, false, [&](int64_t d, const double* x, double* h, double*) {
    Preactivations(pb, d, 0, pb.hidden, x, h, pre.data());
    const Activation& f = pb.act(d, 0);
    for (int64_t j = 0; j < pb.hidden; ++j) h[j] = f(pb.Clip(pre[static_cast<size_t>(j)]));
  });
  return Status::Ok();
}

// zt = f(..z), rt = f(..r), ht = g(Xt*Wh^T + (rt . Ht-1)*Rh^T + Rbh + Wbh) or, with
// linear_before_reset, g(Xt*Wh^T + rt . (Ht-1*Rh^T + Rbh) + Wbh); Ht = (1 - zt) . ht + zt . Ht-1.
Status GruKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(RnnProblem pb, ReadProblem(ctx, 3, false, {"Sigmoid", "Tanh"}));
  TESSERA_ASSIGN_OR_RETURN(int64_t lbr, ctx.node().Int("linear_before_reset", 0));
  const int64_t H = pb.hidden, GH = 3 * H;
  std::vector<double> zr(static_cast<size_t>(2 * H)), xh(static_cast<size_t>(H)), rh(static_cast<size_t>(H)),
      gated(static_cast<size_t>(H));
  RunAndSetOutputs(ctx, pb, false, [&](int64_t d, const double* x, double* h, double*) {
    const Activation& f = pb.act(d, 0);
    const Activation& g = pb.act(d, 1);
    Preactivations(pb, d, 0, 2 * H, x, h, zr.data());
    for (double& v : zr) v = f(pb.Clip(v));
    const double* z = zr.data();
    const double* r = zr.data() + H;
    const double* wb = pb.b.data() + d * 2 * GH;
    const double* rb = wb + GH;
    const double* rmat = pb.r.data() + d * GH * H;
    for (int64_t j = 0; j < H; ++j) {
      xh[static_cast<size_t>(j)] = wb[2 * H + j];
      rh[static_cast<size_t>(j)] = rb[2 * H + j];
    }
    AddMatVec(pb.w.data() + d * GH * pb.input, 2 * H, H, pb.input, x, xh.data());
    if (lbr != 0) {
      AddMatVec(rmat, 2 * H, H, H, h, rh.data());
      for (int64_t j = 0; j < H; ++j) xh[static_cast<size_t>(j)] += r[j] * rh[static_cast<size_t>(j)];
    } else {
      for (int64_t j = 0; j < H; ++j) gated[static_cast<size_t>(j)] = r[j] * h[j];
      AddMatVec(rmat, 2 * H, H, H, gated.data(), rh.data());
      for (int64_t j = 0; j < H; ++j) xh[static_cast<size_t>(j)] += rh[static_cast<size_t>(j)];
    }
    for (int64_t j = 0; j < H; ++j) {
      const double ht = g(pb.Clip(xh[static_cast<size_t>(j)]));
      h[j] = (1 - z[j]) * ht + z[j] * h[j];
    }
  });
  return Status::Ok();
}

// it = f(..i + Pi . Ct-1), ft = f(..f + Pf . Ct-1) (1 - it with input_forget), ct = g(..c),
// Ct = ft . Ct-1 + it . ct, ot = f(..o + Po . Ct), Ht = ot . h(Ct).
Status LstmKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(RnnProblem pb, ReadProblem(ctx, 4, true, {"Sigmoid", "Tanh", "Tanh"}));
  TESSERA_ASSIGN_OR_RETURN(int64_t input_forget, ctx.node().Int("input_forget", 0));
  const int64_t H = pb.hidden;
  std::vector<double> pre(static_cast<size_t>(4 * H));
  RunAndSetOutputs(ctx, pb, true, [&](int64_t d, const double* x, double* h, double* c) {
    const Activation& f = pb.act(d, 0);
    const Activation& g = pb.act(d, 1);
    const Activation& hf = pb.act(d, 2);
    Preactivations(pb, d, 0, 4 * H, x, h, pre.data());
    const double* p = pb.has_p ? pb.p.data() + d * 3 * H : nullptr;
    for (int64_t j = 0; j < H; ++j) {
      const double pi = pre[static_cast<size_t>(j)], po = pre[static_cast<size_t>(H + j)];
      const double pf = pre[static_cast<size_t>(2 * H + j)], pc = pre[static_cast<size_t>(3 * H + j)];
      const double it = f(pb.Clip(pi + (p ? p[j] * c[j] : 0)));
      const double ft = input_forget != 0 ? 1 - it : f(pb.Clip(pf + (p ? p[2 * H + j] * c[j] : 0)));
      const double ct = g(pb.Clip(pc));
      const double cell = ft * c[j] + it * ct;
      const double ot = f(pb.Clip(po + (p ? p[H + j] * cell : 0)));
      c[j] = cell;
      h[j] = ot * hf(cell);
    }
  });
  return Status::Ok();
}

}  // namespace tessera::onnx::rnn
