#include "tessera/graph/apply.h"

#include <utility>

#include "tessera/base/check.h"
#include "tessera/graph/tape.h"
#include "tessera/graph/trace.h"

namespace tessera::graph {
namespace {

thread_local bool g_inside_apply = false;

std::vector<Tensor> Masked(const std::vector<Tensor>& ts, uint32_t mask) {
  std::vector<Tensor> out(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i < 32 && (mask & SaveBit(static_cast<int>(i))) != 0) out[i] = ts[i];
  }
  return out;
}

}  // namespace

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kInjective: return "injective";
    case OpKind::kReduction: return "reduction";
    case OpKind::kOutFusable: return "out-fusable";
    case OpKind::kOpaque: return "opaque";
    case OpKind::kCommunication: return "communication";
  }
  return "?";
}

bool InsideApply() { return g_inside_apply; }

Tensor AliasOf(const Tensor& x) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.storage();
  impl->shape = x.shape();
  impl->strides = x.strides();
  impl->offset = x.offset();
  impl->dtype = x.dtype();
  return Tensor(std::move(impl));
}

std::vector<Tensor> Apply(const OpSpec& spec, const std::vector<Tensor>& inputs, const ForwardFn& forward,
                          const GradFn& grad) {
  std::vector<Tensor> outputs;
  {
    KernelScope kernel;
    outputs = forward(inputs);
  }
  const size_t visible = spec.visible_outputs < 0 ? outputs.size() : static_cast<size_t>(spec.visible_outputs);
  TESSERA_CHECK(visible <= outputs.size(), "{}: {} visible outputs of {}", spec.name, visible, outputs.size());
  if (grad && ShouldRecord(inputs)) {
    std::vector<Tensor> saved_in = Masked(inputs, spec.saved_inputs);
    std::vector<Tensor> saved_out = Masked(outputs, spec.saved_outputs);
    std::vector<Tensor> recorded(outputs.begin(), outputs.begin() + static_cast<std::ptrdiff_t>(visible));
    g_inside_apply = true;
    Record(spec.name, inputs, std::move(recorded),
           [grad, saved_in = std::move(saved_in), saved_out = std::move(saved_out)](const std::vector<Tensor>& g,
                                                                                    const std::vector<bool>& needs) {
             return grad(g, saved_in, saved_out, needs);
           });
    g_inside_apply = false;
  }
  if (Trace* trace = ActiveTrace()) trace->nodes.push_back({spec, inputs, outputs, forward, grad});
  return outputs;
}

Tensor Apply1(const OpSpec& spec, const std::vector<Tensor>& inputs, const ForwardFn& forward, const GradFn& grad) {
  std::vector<Tensor> out = Apply(spec, inputs, forward, grad);
  TESSERA_CHECK(!out.empty(), "{}: no output", spec.name);
  return out[0];
}

}  // namespace tessera::graph
