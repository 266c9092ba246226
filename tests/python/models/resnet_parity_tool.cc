// resnet_parity_tool IN OUT [--reference]: runs Tessera's ResNet on what
// tests/python/models/resnet_parity.py saved from PyTorch and writes what
// that script compares.
//   IN (safetensors): metadata "layers" ("3,4,6,3"), "width", "bottleneck"
//     (0/1), "small_stem" (0/1), "num_classes", "layout" (NCHW/NHWC);
//     tensors "input" [N, 3, H, W] (NCHW whatever the layout), "labels" I64
//     [N], and every parameter and buffer under torchvision's names.
//   OUT (safetensors): "logits", "loss" (training-mode forward), "grad.<p>"
//     for every parameter, "buffer.<b>" after the step's running-stat
//     update, and "eval_logits" (inference-mode forward afterwards).
// --reference runs the plain reference kernels (ops::UseReference) instead
// of the optimized ones. Exit status 0 on success; a clear message and 1 on any mismatch of names,
// shapes or dtypes between the file and the model.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/models/resnet.h"
#include "tessera/ops/common/impl.h"
#include "tessera/parallel/checkpoint/safetensors.h"

namespace {

using tessera::Shape;
using tessera::Tensor;
namespace ckpt = tessera::parallel::checkpoint;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "resnet_parity_tool: %s\n", what.c_str());
  std::exit(1);
}

// A metadata integer, or a clear failure naming the key and the text.
int64_t MetaInt(const ckpt::SafetensorsFile& file, const std::string& key, const std::string& text) {
  try {
    size_t used = 0;
    const int64_t v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  Fail(fmt::format("{}: metadata '{}' = '{}' is not an integer", file.name(), key, text));
}

std::string Meta(const ckpt::SafetensorsFile& file, const std::string& key) {
  auto it = file.metadata().find(key);
  if (it == file.metadata().end()) Fail(fmt::format("{}: metadata '{}' missing", file.name(), key));
  return it->second;
}

Tensor Load(const ckpt::SafetensorsFile& file, const std::string& name, ckpt::StorageDtype dtype) {
  const ckpt::SafetensorsFile::Entry* entry = file.Find(name);
  if (entry == nullptr) Fail(fmt::format("{}: no tensor '{}'", file.name(), name));
  if (entry->spec.dtype != dtype) Fail(fmt::format("{}: '{}' has dtype {}", file.name(), name,
                                                   ckpt::StorageDtypeName(entry->spec.dtype)));
  Shape shape(entry->spec.shape.begin(), entry->spec.shape.end());
  Tensor t = Tensor::Empty(shape, dtype == ckpt::StorageDtype::kI64 ? tessera::DType::kI64 : tessera::DType::kF32);
  auto bytes = file.TensorBytes(*entry);
  if (bytes.size() != t.nbytes()) Fail(fmt::format("{}: '{}' has {} bytes", file.name(), name, bytes.size()));
  std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

void Assign(const ckpt::SafetensorsFile& file, const std::string& name, Tensor& dst) {
  Tensor src = Load(file, name, ckpt::StorageDtype::kF32);
  if (src.shape() != dst.shape()) {
    Fail(fmt::format("'{}': file has {}, model expects {}", name, tessera::ShapeString(src.shape()),
                     tessera::ShapeString(dst.shape())));
  }
  dst.CopyFrom(src);
}

}  // namespace

int main(int argc, char** argv) {
  const bool reference = argc == 4 && std::string(argv[3]) == "--reference";
  if (argc != 3 && !reference) Fail("usage: resnet_parity_tool IN.safetensors OUT.safetensors [--reference]");
  tessera::ops::ScopedImpl impl(reference ? tessera::ops::Impl::kReference : tessera::ops::Impl::kOptimized);
  auto in = ckpt::SafetensorsFile::Open(argv[1]);
  if (!in.ok()) Fail(in.status().ToString());
  tessera::models::ResNetConfig config;
  config.layers.clear();
  for (const std::string& part : [&] {
         std::vector<std::string> parts;
         std::string s = Meta(*in, "layers");
         for (size_t pos = 0; pos <= s.size();) {
           size_t comma = s.find(',', pos);
           if (comma == std::string::npos) comma = s.size();
           parts.push_back(s.substr(pos, comma - pos));
           pos = comma + 1;
         }
         return parts;
       }()) {
    config.layers.push_back(MetaInt(*in, "layers", part));
  }
  config.width = MetaInt(*in, "width", Meta(*in, "width"));
  config.bottleneck = Meta(*in, "bottleneck") == "1";
  config.small_stem = Meta(*in, "small_stem") == "1";
  config.num_classes = MetaInt(*in, "num_classes", Meta(*in, "num_classes"));
  const std::string layout = Meta(*in, "layout");
  if (layout != "NCHW" && layout != "NHWC") Fail("layout must be NCHW or NHWC, got " + layout);
  config.layout = layout == "NCHW" ? tessera::ops::ImageLayout::kNCHW : tessera::ops::ImageLayout::kNHWC;

  tessera::models::ResNet model(config);
  size_t expected = 0;
  for (auto& [name, p] : model.NamedParameters()) Assign(*in, name, p), ++expected;
  for (auto& [name, b] : model.NamedBuffers()) Assign(*in, name, b), ++expected;
  // Every tensor but input/labels (and torch's num_batches_tracked) is used.
  size_t offered = 0;
  for (const auto& e : in->tensors()) {
    if (e.spec.name != "input" && e.spec.name != "labels") ++offered;
  }
  if (offered != expected) Fail(fmt::format("the file has {} model tensors, the model {}", offered, expected));

  Tensor images = Load(*in, "input", ckpt::StorageDtype::kF32);
  if (config.layout == tessera::ops::ImageLayout::kNHWC) images = images.Permute({0, 2, 3, 1}).Contiguous();
  Tensor labels = Load(*in, "labels", ckpt::StorageDtype::kI64);

  std::vector<std::pair<std::string, Tensor>> out;
  try {
    model.SetTraining(true);
    Tensor logits = model.Forward(images);
    Tensor loss = tessera::graph::CrossEntropy(logits, labels);
    tessera::graph::Backward(loss);
    out.emplace_back("logits", logits.Contiguous());
    out.emplace_back("loss", loss.Contiguous());
    for (auto& [name, p] : model.NamedParameters()) {
      if (!p.grad().defined()) Fail("no gradient for " + name);
      out.emplace_back("grad." + name, p.grad().Contiguous());
    }
    for (auto& [name, b] : model.NamedBuffers()) out.emplace_back("buffer." + name, b.Clone());
    model.SetTraining(false);
    tessera::graph::NoGradGuard no_grad;
    out.emplace_back("eval_logits", model.Forward(images).Contiguous());
  } catch (const tessera::OpError& e) {
    Fail(e.what());
  }

  std::vector<ckpt::TensorToWrite> writes;
  for (auto& [name, t] : out) {
    ckpt::TensorToWrite w;
    w.spec.name = name;
    w.spec.dtype = ckpt::StorageDtype::kF32;
    w.spec.shape.assign(t.shape().begin(), t.shape().end());
    w.data = t.raw_data();
    writes.push_back(w);
  }
  tessera::Status st = ckpt::WriteSafetensorsFile(argv[2], writes, {});
  if (!st.ok()) Fail(st.ToString());
  return 0;
}
