// Input reading, activations and the sequence driver shared by RNN / GRU / LSTM.
#include "tessera/onnx/ops/rnn/rnn_common.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace tessera::onnx::rnn {
namespace {

struct ActSpec {
  const char* name;
  Activation::Kind kind;
  bool uses_alpha, uses_beta;
  double alpha, beta;  // defaults
};

constexpr ActSpec kActs[] = {
    {"relu", Activation::Kind::kRelu, false, false, 0, 0},
    {"tanh", Activation::Kind::kTanh, false, false, 0, 0},
    {"sigmoid", Activation::Kind::kSigmoid, false, false, 0, 0},
    {"affine", Activation::Kind::kAffine, true, true, 1.0, 0.0},
    {"leakyrelu", Activation::Kind::kLeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", Activation::Kind::kThresholdedRelu, true, false, 1.0, 0},
    {"scaledtanh", Activation::Kind::kScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", Activation::Kind::kHardSigmoid, true, true, 0.2, 0.5},
    {"elu", Activation::Kind::kElu, true, false, 1.0, 0},
    {"softsign", Activation::Kind::kSoftsign, false, false, 0, 0},
    {"softplus", Activation::Kind::kSoftplus, false, false, 0, 0},
};

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Activations named by the `activations` attribute (or the defaults), with
// activation_alpha / activation_beta consumed in order by the functions
// that take them.
StatusOr<std::vector<Activation>> ReadActivations(const OpContext& ctx, int64_t dirs,
                                                  const std::vector<std::string>& defaults) {
  const Node& n = ctx.node();
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> names, n.Strings("activations", {}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<float> alphas, n.Floats("activation_alpha", {}));
  TESSERA_ASSIGN_OR_RETURN(std::vector<float> betas, n.Floats("activation_beta", {}));
  const size_t per_dir = defaults.size(), total = per_dir * static_cast<size_t>(dirs);
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() == per_dir && dirs == 2) {
    names.insert(names.end(), names.begin(), names.end());
  } else if (names.size() != total) {
    return ctx.Error("'activations' has {} entries, expected {}", names.size(), total);
  }
  std::vector<Activation> acts;
  size_t ai = 0, bi = 0;
  for (const std::string& name : names) {
    const std::string low = Lower(name);
    const ActSpec* spec = nullptr;
    for (const ActSpec& s : kActs) {
      if (low == s.name) spec = &s;
    }
    if (spec == nullptr) return ctx.Error("activation '{}' is not supported", name);
    Activation a;
    a.kind = spec->kind;
    a.alpha = spec->alpha;
    a.beta = spec->beta;
    if (spec->uses_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (spec->uses_beta && bi < betas.size()) a.beta = betas[bi++];
    acts.push_back(a);
  }
  return acts;
}

// Input i as doubles, checked to be of `type` and `shape`; empty when absent.
StatusOr<std::vector<double>> ReadInput(const OpContext& ctx, size_t i, const char* what, ElemType type,
                                        const std::vector<int64_t>& shape) {
  if (!ctx.has_input(i)) return std::vector<double>();
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
  if (a.type() != type || a.shape() != shape) {
    return ctx.Error("{} must be {}{}, got {}{}", what, ElemName(type), fmt::format("[{}]", fmt::join(shape, ",")),
                     ElemName(a.type()), a.ShapeString());
  }
  std::vector<double> v(static_cast<size_t>(a.numel()));
  for (int64_t k = 0; k < a.numel(); ++k) v[static_cast<size_t>(k)] = a.GetDouble(k);
  return v;
}

// A [n0][n1][n2] block stored as [n1][n0][n2] (layout = 1), swapped to [n0][n1][n2].
std::vector<double> SwapLeading(const std::vector<double>& v, int64_t n0, int64_t n1, int64_t n2) {
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < n0; ++i) {
    for (int64_t j = 0; j < n1; ++j) {
      std::copy_n(v.begin() + (j * n0 + i) * n2, n2, out.begin() + (i * n1 + j) * n2);
    }
  }
  return out;
}

}  // namespace

double Activation::operator()(double x) const {
  switch (kind) {
    case Kind::kRelu: return x > 0 ? x : 0;
    case Kind::kTanh: return std::tanh(x);
    case Kind::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Kind::kAffine: return alpha * x + beta;
    case Kind::kLeakyRelu: return x >= 0 ? x : alpha * x;
    case Kind::kThresholdedRelu: return x > alpha ? x : 0;
    case Kind::kScaledTanh: return alpha * std::tanh(beta * x);
    case Kind::kHardSigmoid: return std::max(0.0, std::min(1.0, alpha * x + beta));
    case Kind::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
    case Kind::kSoftsign: return x / (1 + std::fabs(x));
    case Kind::kSoftplus: return x > 30 ? x : std::log1p(std::exp(x));
  }
  return x;
}

StatusOr<RnnProblem> ReadProblem(const OpContext& ctx, int64_t gates, bool lstm,
                                 const std::vector<std::string>& default_acts) {
  const Node& n = ctx.node();
  RnnProblem pb;
  pb.gates = gates;
  TESSERA_ASSIGN_OR_RETURN(std::string direction, n.String("direction", "forward"));
  if (direction == "bidirectional") {
    pb.dirs = 2;
  } else if (direction == "reverse") {
    pb.reverse_only = true;
  } else if (direction != "forward") {
    return ctx.Error("direction '{}' must be forward, reverse or bidirectional", direction);
  }
  TESSERA_ASSIGN_OR_RETURN(pb.layout, n.Int("layout", 0));
  if (pb.layout != 0 && pb.layout != 1) return ctx.Error("layout {} must be 0 or 1", pb.layout);
  TESSERA_ASSIGN_OR_RETURN(float clip, n.Float("clip", 0));
  if (n.Has("clip") && !(clip > 0)) return ctx.Error("clip {} must be positive", clip);
  pb.clip = clip;

  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!IsFloatType(x.type())) return ctx.Error("X must be a float tensor, got {}", ElemName(x.type()));
  if (x.rank() != 3) return ctx.Error("X must have rank 3, got {}", x.ShapeString());
  pb.type = x.type();
  pb.seq = x.dim(pb.layout == 0 ? 0 : 1);
  pb.batch = x.dim(pb.layout == 0 ? 1 : 0);
  pb.input = x.dim(2);
  TESSERA_ASSIGN_OR_RETURN(Array r, ctx.tensor(2));
  if (r.rank() != 3) return ctx.Error("R must have rank 3, got {}", r.ShapeString());
  const int64_t hidden_from_r = r.dim(2);
  TESSERA_ASSIGN_OR_RETURN(pb.hidden, n.Int("hidden_size", hidden_from_r));
  if (pb.hidden <= 0 || pb.hidden != hidden_from_r) {
    return ctx.Error("hidden_size {} must be positive and match R's last dimension {}", pb.hidden, hidden_from_r);
  }
  const int64_t dirs = pb.dirs, H = pb.hidden, B = pb.batch, G = gates;
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> xv, ReadInput(ctx, 0, "X", pb.type, x.shape()));
  pb.x = pb.layout == 0 ? std::move(xv) : SwapLeading(xv, pb.seq, B, pb.input);
  if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.Error("inputs W and R are required");
  TESSERA_ASSIGN_OR_RETURN(pb.w, ReadInput(ctx, 1, "W", pb.type, {dirs, G * H, pb.input}));
  TESSERA_ASSIGN_OR_RETURN(pb.r, ReadInput(ctx, 2, "R", pb.type, {dirs, G * H, H}));
  TESSERA_ASSIGN_OR_RETURN(pb.b, ReadInput(ctx, 3, "B", pb.type, {dirs, 2 * G * H}));
  if (pb.b.empty()) pb.b.assign(static_cast<size_t>(dirs * 2 * G * H), 0.0);

  pb.lens.assign(static_cast<size_t>(B), pb.seq);
  if (ctx.has_input(4)) {
    TESSERA_ASSIGN_OR_RETURN(Array sl, ctx.tensor(4));
    if (!IsIntegerType(sl.type()) || sl.rank() != 1 || sl.dim(0) != B) {
      return ctx.Error("sequence_lens must be an integer [{}] tensor, got {}{}", B, ElemName(sl.type()),
                       sl.ShapeString());
    }
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = sl.GetInt(b);
      if (len < 0 || len > pb.seq) return ctx.Error("sequence_lens[{}] = {} is out of range [0, {}]", b, len, pb.seq);
      pb.lens[static_cast<size_t>(b)] = len;
    }
  }
  const std::vector<int64_t> state_shape =
      pb.layout == 0 ? std::vector<int64_t>{dirs, B, H} : std::vector<int64_t>{B, dirs, H};
  TESSERA_ASSIGN_OR_RETURN(pb.h0, ReadInput(ctx, 5, "initial_h", pb.type, state_shape));
  if (pb.h0.empty()) pb.h0.assign(static_cast<size_t>(dirs * B * H), 0.0);
  if (pb.layout == 1) pb.h0 = SwapLeading(pb.h0, dirs, B, H);
  if (lstm) {
    TESSERA_ASSIGN_OR_RETURN(pb.c0, ReadInput(ctx, 6, "initial_c", pb.type, state_shape));
    if (pb.c0.empty()) pb.c0.assign(static_cast<size_t>(dirs * B * H), 0.0);
    if (pb.layout == 1) pb.c0 = SwapLeading(pb.c0, dirs, B, H);
    TESSERA_ASSIGN_OR_RETURN(pb.p, ReadInput(ctx, 7, "P", pb.type, {dirs, 3 * H}));
    pb.has_p = !pb.p.empty();
  } else {
    pb.c0.assign(static_cast<size_t>(dirs * B * H), 0.0);
  }
  TESSERA_ASSIGN_OR_RETURN(pb.acts, ReadActivations(ctx, dirs, default_acts));
  pb.acts_per_dir = default_acts.size();
  return pb;
}

void AddMatVec(const double* m, int64_t row0, int64_t n, int64_t cols, const double* v, double* out) {
  for (int64_t j = 0; j < n; ++j) {
    const double* row = m + (row0 + j) * cols;
    double s = 0;
    for (int64_t k = 0; k < cols; ++k) s += row[k] * v[k];
    out[j] += s;
  }
}

void RunAndSetOutputs(OpContext& ctx, const RnnProblem& pb, bool lstm, const StepFn& step) {
  const int64_t S = pb.seq, D = pb.dirs, B = pb.batch, H = pb.hidden;
  std::vector<double> y(static_cast<size_t>(S * D * B * H), 0.0);  // [seq][dir][batch][hidden]
  std::vector<double> yh(static_cast<size_t>(D * B * H)), yc(yh.size());
  std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H));
  for (int64_t d = 0; d < D; ++d) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t state = (d * B + b) * H, len = pb.lens[static_cast<size_t>(b)];
      std::copy_n(pb.h0.begin() + state, H, h.begin());
      std::copy_n(pb.c0.begin() + state, H, c.begin());
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = pb.reversed(d) ? len - 1 - s : s;
        step(d, pb.x.data() + (t * B + b) * pb.input, h.data(), c.data());
        std::copy(h.begin(), h.end(), y.begin() + ((t * D + d) * B + b) * H);
      }
      std::copy(h.begin(), h.end(), yh.begin() + state);
      std::copy(c.begin(), c.end(), yc.begin() + state);
    }
  }
  if (ctx.output_wanted(0)) {
    const std::vector<int64_t> shape =
        pb.layout == 0 ? std::vector<int64_t>{S, D, B, H} : std::vector<int64_t>{B, S, D, H};
    Array out(pb.type, shape);
    for (int64_t t = 0; t < S; ++t) {
      for (int64_t d = 0; d < D; ++d) {
        for (int64_t b = 0; b < B; ++b) {
          const int64_t src = ((t * D + d) * B + b) * H;
          const int64_t dst = pb.layout == 0 ? src : ((b * S + t) * D + d) * H;
          for (int64_t j = 0; j < H; ++j) out.SetDouble(dst + j, y[static_cast<size_t>(src + j)]);
        }
      }
    }
    ctx.set_output(0, std::move(out));
  }
  const size_t n_states = lstm ? 2 : 1;
  for (size_t o = 0; o < n_states; ++o) {
    if (!ctx.output_wanted(1 + o)) continue;
    const std::vector<double>& st = o == 0 ? yh : yc;
    const std::vector<int64_t> shape = pb.layout == 0 ? std::vector<int64_t>{D, B, H} : std::vector<int64_t>{B, D, H};
    Array out(pb.type, shape);
    for (int64_t d = 0; d < D; ++d) {
      for (int64_t b = 0; b < B; ++b) {
        const int64_t src = (d * B + b) * H, dst = pb.layout == 0 ? src : (b * D + d) * H;
        for (int64_t j = 0; j < H; ++j) out.SetDouble(dst + j, st[static_cast<size_t>(src + j)]);
      }
    }
    ctx.set_output(1 + o, std::move(out));
  }
}

}  // namespace tessera::onnx::rnn
