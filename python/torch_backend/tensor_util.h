// Helpers shared by ProcessGroupTessera's operations: dtype and operator
// mapping, argument checks that raise c10::Error naming the operation, and
// staging of non-contiguous tensors. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "tessera/comm/api/types.h"

namespace tessera::torch_backend {

// Tessera's element type for `type`, if its reduction kernels cover it.
std::optional<comm::DataType> ToCommType(at::ScalarType type);
// Tessera's operator for `op` on `type`, if the communicator reduces it
// itself (else the caller folds locally, see FoldInto).
std::optional<comm::ReduceOp> ToCommOp(const ::c10d::ReduceOp& op, at::ScalarType type);
// Throws for operators no path supports (PREMUL_SUM, AVG of integers,
// bitwise operators of floating types), naming `what`.
void CheckReduceOp(const ::c10d::ReduceOp& op, at::ScalarType type, const char* what);
// acc = acc (op) next, in torch's arithmetic (the local fold).
void FoldInto(at::Tensor& acc, const at::Tensor& next, const ::c10d::ReduceOp& op);

// Exactly one CPU tensor (the one-tensor-per-process form); returns it.
at::Tensor& Single(std::vector<at::Tensor>& tensors, const char* what);
void CheckCpu(const at::Tensor& t, const char* what);
// `expect.size()` tensors, each with `like`'s dtype and number of elements.
void CheckList(const std::vector<at::Tensor>& list, size_t expect, const at::Tensor& like, const char* what);

inline size_t Bytes(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }
inline void* Ptr(const at::Tensor& t) { return t.numel() == 0 ? nullptr : t.data_ptr(); }

// `t` itself when contiguous, else a contiguous copy (to copy back later).
inline at::Tensor ContiguousOrCopy(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
// One flat contiguous tensor of the list's elements, in order.
at::Tensor Flatten(const std::vector<at::Tensor>& list);
// Copies consecutive blocks of `flat` (each the size of the list entry) into the list.
void Unflatten(const at::Tensor& flat, std::vector<at::Tensor>& list);

}  // namespace tessera::torch_backend
