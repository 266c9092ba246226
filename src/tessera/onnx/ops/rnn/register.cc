// The rnn family's kernels: RNN, GRU and LSTM (forward / reverse /
// bidirectional, both layouts, sequence_lens, clip, custom activations).
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/rnn/rnn_common.h"

namespace tessera::onnx {

void RegisterRnnOps(OpRegistry& r) {
  r.Register("RNN", rnn::RnnKernel);
  r.Register("GRU", rnn::GruKernel);
  r.Register("LSTM", rnn::LstmKernel);
}

}  // namespace tessera::onnx
