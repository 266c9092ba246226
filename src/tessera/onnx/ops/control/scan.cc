// Scan: runs its body once per slice of the scan inputs, threading state
// variables and stacking per-iteration scan outputs. Scan-8 has a leading
// batch axis on every input and an optional sequence_lens input; Scan-9+
// has no batch axis and per-input / per-output axes and directions.
#include <algorithm>

#include "tessera/onnx/ops/control/control_util.h"
#include "tessera/onnx/ops/kernel_util.h"

namespace tessera::onnx::control {
namespace {

struct ScanResult {
  std::vector<Value> states;
  std::vector<std::vector<Array>> outs;  // per scan output, per iteration
};

// Runs `len` iterations; scan input j is sliced at t (or len-1-t when
// dirs[j] != 0) along axes[j].
StatusOr<ScanResult> RunScanBody(const OpContext& ctx, const Graph& body, std::vector<Value> states,
                                 const std::vector<Array>& xs, const std::vector<int64_t>& axes,
                                 const std::vector<int64_t>& dirs, int64_t len) {
  const size_t n_state = states.size();
  const size_t n_out = body.outputs.size() - n_state;
  ScanResult r;
  r.outs.resize(n_out);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Value> args = std::move(states);
    for (size_t j = 0; j < xs.size(); ++j) {
      args.push_back(Value::Tensor(SliceAxis(xs[j], axes[j], dirs[j] != 0 ? len - 1 - t : t)));
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.RunSubgraph(body, args));
    if (outs.size() != body.outputs.size()) return ctx.Error("the body returned {} values", outs.size());
    states.assign(std::make_move_iterator(outs.begin()), std::make_move_iterator(outs.begin() + n_state));
    for (size_t k = 0; k < n_out; ++k) {
      Value& v = outs[n_state + k];
      if (!v.is_tensor()) return ctx.Error("scan output {} of the body must be a tensor, got {}", k, v.Describe());
      r.outs[k].push_back(std::move(v.tensor));
    }
  }
  r.states = std::move(states);
  return r;
}

// Reads an ints attribute of exactly `n` entries (default `dflt` each).
StatusOr<std::vector<int64_t>> IntsAttr(const OpContext& ctx, const char* name, size_t n, int64_t dflt) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> v, ctx.node().Ints(name, std::vector<int64_t>(n, dflt)));
  if (v.size() != n) return ctx.Error("attribute '{}' has {} entries, expected {}", name, v.size(), n);
  return v;
}

Status Scan9(OpContext& ctx, const Graph& body, size_t n_scan_in) {
  const size_t n_in = ctx.node().inputs.size();
  if (n_scan_in < 1 || n_scan_in > n_in) return ctx.Error("num_scan_inputs {} is out of range", n_scan_in);
  const size_t n_state = n_in - n_scan_in;
  if (body.inputs.size() != n_in || body.outputs.size() < n_state) {
    return ctx.Error("the body takes {} inputs and gives {} outputs, the node has {} state and {} scan inputs",
                     body.inputs.size(), body.outputs.size(), n_state, n_scan_in);
  }
  const size_t n_scan_out = body.outputs.size() - n_state;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> in_axes, IntsAttr(ctx, "scan_input_axes", n_scan_in, 0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> in_dirs, IntsAttr(ctx, "scan_input_directions", n_scan_in, 0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> out_axes, IntsAttr(ctx, "scan_output_axes", n_scan_out, 0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> out_dirs, IntsAttr(ctx, "scan_output_directions", n_scan_out, 0));
  std::vector<Value> states;
  for (size_t i = 0; i < n_state; ++i) {
    if (!ctx.has_input(i)) return ctx.Error("state input {} is missing", i);
    states.push_back(ctx.input(i));
  }
  std::vector<Array> xs;
  int64_t len = -1;
  for (size_t j = 0; j < n_scan_in; ++j) {
    TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(n_state + j));
    if (x.rank() == 0) return ctx.Error("scan input {} must have rank >= 1", j);
    TESSERA_ASSIGN_OR_RETURN(in_axes[j], NormalizeAxis(ctx, in_axes[j], static_cast<int64_t>(x.rank())));
    const int64_t d = x.dim(static_cast<size_t>(in_axes[j]));
    if (len >= 0 && d != len) return ctx.Error("scan input {} has {} iterations along its axis, not {}", j, d, len);
    len = d;
    xs.push_back(std::move(x));
  }
  TESSERA_ASSIGN_OR_RETURN(ScanResult r, RunScanBody(ctx, body, std::move(states), xs, in_axes, in_dirs, len));
  for (size_t i = 0; i < n_state && i < ctx.num_outputs(); ++i) ctx.set_value(i, std::move(r.states[i]));
  for (size_t k = 0; k < n_scan_out && n_state + k < ctx.num_outputs(); ++k) {
    std::vector<Array>& items = r.outs[k];
    if (out_dirs[k] != 0) std::reverse(items.begin(), items.end());
    const ValueInfo& info = body.outputs[n_state + k];
    const int64_t item_rank = items.empty() ? static_cast<int64_t>(info.dims.size()) : items[0].rank();
    TESSERA_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(ctx, out_axes[k], item_rank + 1));
    if (items.empty()) {
      Array e = EmptyStacked(info);
      std::vector<int64_t> shape(e.shape().begin() + 1, e.shape().end());
      shape.insert(shape.begin() + std::min<int64_t>(axis, static_cast<int64_t>(shape.size())), 0);
      ctx.set_output(n_state + k, Array(e.type(), shape));
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(Array out, Stack(ctx, items, axis, "iteration's scan output"));
    ctx.set_output(n_state + k, std::move(out));
  }
  return Status::Ok();
}

// Scan-8: inputs (sequence_lens?, states..., scan inputs...), each with a
// leading batch axis; scan inputs' sequence axis is 1.
Status Scan8(OpContext& ctx, const Graph& body, size_t n_scan_in) {
  const size_t n_in = ctx.node().inputs.size();
  if (n_scan_in < 1 || n_scan_in + 1 > n_in) return ctx.Error("num_scan_inputs {} is out of range", n_scan_in);
  const size_t n_state = n_in - 1 - n_scan_in;
  if (body.inputs.size() != n_in - 1 || body.outputs.size() < n_state) {
    return ctx.Error("the body takes {} inputs and gives {} outputs, the node has {} state and {} scan inputs",
                     body.inputs.size(), body.outputs.size(), n_state, n_scan_in);
  }
  const size_t n_scan_out = body.outputs.size() - n_state;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> dirs, IntsAttr(ctx, "directions", n_scan_in, 0));
  std::vector<Array> states, xs;
  int64_t batch = -1, max_len = -1;
  for (size_t i = 0; i < n_state + n_scan_in; ++i) {
    TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(1 + i));
    const bool is_scan = i >= n_state;
    if (a.rank() < (is_scan ? 2u : 1u)) return ctx.Error("input {} has too low a rank: {}", 1 + i, a.ShapeString());
    if (batch >= 0 && a.dim(0) != batch) return ctx.Error("input {} has batch size {}, not {}", 1 + i, a.dim(0), batch);
    batch = a.dim(0);
    if (is_scan) {
      if (max_len >= 0 && a.dim(1) != max_len)
        return ctx.Error("scan input {} has sequence length {}", 1 + i, a.dim(1));
      max_len = a.dim(1);
      xs.push_back(std::move(a));
    } else {
      states.push_back(std::move(a));
    }
  }
  std::vector<int64_t> lens(static_cast<size_t>(batch), max_len);
  if (ctx.has_input(0)) {
    TESSERA_ASSIGN_OR_RETURN(Array sl, ctx.tensor(0));
    if (!IsIntegerType(sl.type()) || sl.numel() != batch) {
      return ctx.Error("sequence_lens must hold {} integers, got {}{}", batch, ElemName(sl.type()), sl.ShapeString());
    }
    for (int64_t b = 0; b < batch; ++b) {
      lens[static_cast<size_t>(b)] = sl.GetInt(b);
      if (lens[static_cast<size_t>(b)] < 0 || lens[static_cast<size_t>(b)] > max_len) {
        return ctx.Error("sequence_lens[{}] = {} is out of range [0, {}]", b, lens[static_cast<size_t>(b)], max_len);
      }
    }
  }
  const std::vector<int64_t> axes(n_scan_in, 0);
  std::vector<std::vector<Array>> final_states(n_state), scan_outs(n_scan_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Value> st;
    for (const Array& s : states) st.push_back(Value::Tensor(SliceAxis(s, 0, b)));
    std::vector<Array> xb;
    for (const Array& x : xs) xb.push_back(SliceAxis(x, 0, b));
    TESSERA_ASSIGN_OR_RETURN(ScanResult r,
                             RunScanBody(ctx, body, std::move(st), xb, axes, dirs, lens[static_cast<size_t>(b)]));
    for (size_t i = 0; i < n_state; ++i) {
      if (!r.states[i].is_tensor()) return ctx.Error("state output {} must be a tensor", i);
      final_states[i].push_back(std::move(r.states[i].tensor));
    }
    for (size_t k = 0; k < n_scan_out; ++k) {
      std::vector<Array>& items = r.outs[k];
      Array padded;
      if (items.empty()) {  // no iteration for this batch entry: zeros shaped after the body's declared output
        const Array e = EmptyStacked(body.outputs[n_state + k]);
        std::vector<int64_t> shape = e.shape();
        shape[0] = max_len;
        padded = Array(e.type(), shape);
      } else {
        TESSERA_ASSIGN_OR_RETURN(Array stacked, Stack(ctx, items, 0, "iteration's scan output"));
        std::vector<int64_t> shape = stacked.shape();
        shape[0] = max_len;
        padded = Array(stacked.type(), shape);
        CopyElems(stacked, 0, padded, 0, stacked.numel());
      }
      scan_outs[k].push_back(std::move(padded));
    }
  }
  for (size_t i = 0; i < n_state && i < ctx.num_outputs(); ++i) {
    if (batch == 0) return ctx.Error("batch size 0 is not supported");
    TESSERA_ASSIGN_OR_RETURN(Array out, Stack(ctx, final_states[i], 0, "batch entry's state"));
    ctx.set_output(i, std::move(out));
  }
  for (size_t k = 0; k < n_scan_out && n_state + k < ctx.num_outputs(); ++k) {
    if (batch == 0) return ctx.Error("batch size 0 is not supported");
    TESSERA_ASSIGN_OR_RETURN(Array out, Stack(ctx, scan_outs[k], 0, "batch entry's scan output"));
    ctx.set_output(n_state + k, std::move(out));
  }
  return Status::Ok();
}

}  // namespace

Status ScanKernel(OpContext& ctx) {
  const Graph* body = ctx.node().Subgraph("body");
  if (body == nullptr) return ctx.Error("attribute 'body' (a graph) is required");
  TESSERA_ASSIGN_OR_RETURN(int64_t n_scan_in, ctx.node().Int("num_scan_inputs", -1));
  if (n_scan_in < 1) return ctx.Error("attribute 'num_scan_inputs' must be >= 1");
  if (ctx.opset() < 9) return Scan8(ctx, *body, static_cast<size_t>(n_scan_in));
  return Scan9(ctx, *body, static_cast<size_t>(n_scan_in));
}

}  // namespace tessera::onnx::control
