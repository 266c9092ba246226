// See tensor_util.h.
#include "python/torch_backend/tensor_util.h"

#include <c10/util/Exception.h>

namespace tessera::torch_backend {

using RedOp = ::c10d::ReduceOp;

std::optional<comm::DataType> ToCommType(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return comm::DataType::kFloat32;
    case at::kDouble: return comm::DataType::kFloat64;
    case at::kBFloat16: return comm::DataType::kBFloat16;
    case at::kHalf: return comm::DataType::kFloat16;
    case at::kChar: return comm::DataType::kInt8;
    case at::kByte: return comm::DataType::kUint8;
    case at::kInt: return comm::DataType::kInt32;
    case at::kLong: return comm::DataType::kInt64;
    default: return std::nullopt;
  }
}

std::optional<comm::ReduceOp> ToCommOp(const RedOp& op, at::ScalarType type) {
  if (!ToCommType(type)) return std::nullopt;
  switch (op.op_) {
    case RedOp::SUM: return comm::ReduceOp::kSum;
    case RedOp::PRODUCT: return comm::ReduceOp::kProd;
    case RedOp::MIN: return comm::ReduceOp::kMin;
    case RedOp::MAX: return comm::ReduceOp::kMax;
    case RedOp::AVG:
      if (at::isFloatingType(type)) return comm::ReduceOp::kAvg;
      return std::nullopt;
    default: return std::nullopt;
  }
}

void CheckReduceOp(const RedOp& op, at::ScalarType type, const char* what) {
  switch (op.op_) {
    case RedOp::SUM:
    case RedOp::PRODUCT:
    case RedOp::MIN:
    case RedOp::MAX:
      TORCH_CHECK(!at::isComplexType(type) || op.op_ == RedOp::SUM || op.op_ == RedOp::PRODUCT,
                  "tessera backend: ", what, ": MIN/MAX of complex tensors is not defined");
      return;
    case RedOp::AVG:
      TORCH_CHECK(at::isFloatingType(type) || at::isComplexType(type), "tessera backend: ", what,
                  ": ReduceOp.AVG needs a floating-point tensor, got ", type);
      return;
    case RedOp::BAND:
    case RedOp::BOR:
    case RedOp::BXOR:
      TORCH_CHECK(at::isIntegralType(type, /*includeBool=*/true), "tessera backend: ", what,
                  ": bitwise ReduceOps need an integer or bool tensor, got ", type);
      return;
    default:
      TORCH_CHECK(false, "tessera backend: ", what, ": ReduceOp ", static_cast<int>(op.op_),
                  " (PREMUL_SUM is NCCL-only in PyTorch 1.13) is not supported");
  }
}

void FoldInto(at::Tensor& acc, const at::Tensor& next, const RedOp& op) {
  switch (op.op_) {
    case RedOp::SUM: acc.add_(next); return;
    case RedOp::AVG: acc.add_(next); return;  // divided by the caller
    case RedOp::PRODUCT: acc.mul_(next); return;
    case RedOp::MIN: at::minimum_out(acc, acc, next); return;
    case RedOp::MAX: at::maximum_out(acc, acc, next); return;
    case RedOp::BAND: acc.bitwise_and_(next); return;
    case RedOp::BOR: acc.bitwise_or_(next); return;
    case RedOp::BXOR: acc.bitwise_xor_(next); return;
    default: TORCH_CHECK(false, "tessera backend: unsupported ReduceOp ", static_cast<int>(op.op_));
  }
}

at::Tensor& Single(std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "tessera backend: ", what, " takes one tensor per process, got ", tensors.size());
  CheckCpu(tensors[0], what);
  return tensors[0];
}

void CheckCpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "tessera backend: ", what, ": only CPU tensors are supported, got one on ",
              t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "tessera backend: ", what, ": only dense (strided) tensors are supported");
}

void CheckList(const std::vector<at::Tensor>& list, size_t expect, const at::Tensor& like, const char* what) {
  TORCH_CHECK(list.size() == expect, "tessera backend: ", what, ": expected a list of ", expect, " tensors, got ",
              list.size());
  for (const at::Tensor& t : list) {
    CheckCpu(t, what);
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "tessera backend: ", what, ": dtype ", t.scalar_type(),
                " differs from ", like.scalar_type());
    TORCH_CHECK(t.numel() == like.numel(), "tessera backend: ", what, ": a tensor of ", t.numel(),
                " elements where ", like.numel(), " are expected");
  }
}

at::Tensor Flatten(const std::vector<at::Tensor>& list) {
  int64_t total = 0;
  for (const at::Tensor& t : list) total += t.numel();
  at::Tensor flat = at::empty({total}, list.front().options().memory_format(at::MemoryFormat::Contiguous));
  int64_t offset = 0;
  for (const at::Tensor& t : list) {
    flat.narrow(0, offset, t.numel()).view(t.sizes()).copy_(t);
    offset += t.numel();
  }
  return flat;
}

void Unflatten(const at::Tensor& flat, std::vector<at::Tensor>& list) {
  int64_t offset = 0;
  for (at::Tensor& t : list) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace tessera::torch_backend
