// Tensor: an n-dimensional strided view of a reference-counted Storage.
// Tensor is a cheap handle (shared_ptr to TensorImpl): copies alias the same
// impl, so autograd state (requires_grad, grad) is shared by all copies.
// View methods (Reshape of contiguous data, Transpose, Permute, Slice) make a
// new impl over the same storage; they are not recorded by autograd — the
// differentiable versions live in graph/. Not thread-safe for concurrent
// mutation of the same impl; distinct tensors may be used from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/check.h"
#include "tessera/base/status.h"
#include "tessera/hal/device.h"
#include "tessera/tensor/dtype.h"

namespace tessera {

using Shape = std::vector<int64_t>;

int64_t NumElements(const Shape& shape);
std::string ShapeString(const Shape& shape);  // "[2, 3, 4]"
Shape ContiguousStrides(const Shape& shape);
// Normalizes a possibly negative axis against `rank`; CHECKs range.
int NormalizeAxis(int axis, int rank);

class Storage {
 public:
  Storage(size_t bytes, hal::Device& device, hal::MemoryTier tier);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  hal::Device& device() const { return *device_; }
  hal::MemoryTier tier() const { return tier_; }

 private:
  void* data_;
  size_t bytes_;
  hal::Device* device_;
  hal::MemoryTier tier_;
};

struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;

  // Factories. Memory comes from the CPU device's allocator for `tier`.
  static Tensor Empty(const Shape& shape, DType dtype = DType::kF32,
                      hal::MemoryTier tier = hal::MemoryTier::kDevice);
  static Tensor Zeros(const Shape& shape, DType dtype = DType::kF32);
  static Tensor Full(const Shape& shape, double value, DType dtype = DType::kF32);
  // Values are converted to `dtype` (rounded to nearest even for bf16/fp16).
  static Tensor FromVector(const std::vector<float>& values, const Shape& shape,
                           DType dtype = DType::kF32);
  static Tensor FromInts(const std::vector<int64_t>& values, const Shape& shape,
                         DType dtype = DType::kI64);
  static Tensor Scalar(double value, DType dtype = DType::kF32);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;  // in elements
  int dim() const { return static_cast<int>(shape().size()); }
  int64_t size(int axis) const;  // negative axes count from the end
  int64_t numel() const;
  DType dtype() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;

  // Typed pointer to the first element; CHECKs that T matches dtype().
  template <typename T>
  T* data() const {
    TESSERA_CHECK(DTypeOf<T>::value == dtype(), "tensor is {}, accessed as {}", DTypeName(dtype()),
                  DTypeName(DTypeOf<T>::value));
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  // Views (share storage).
  Tensor View(const Shape& shape) const;       // requires contiguous; one -1 allowed
  Tensor Reshape(const Shape& shape) const;    // view if contiguous, else copy
  Tensor Transpose(int a, int b) const;
  Tensor Permute(const std::vector<int>& order) const;
  Tensor Slice(int axis, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor Unsqueeze(int axis) const;
  Tensor Squeeze(int axis) const;
  Tensor Expand(const Shape& shape) const;  // broadcast view (stride 0)

  // Copies.
  Tensor Contiguous() const;  // self if already contiguous
  Tensor Clone() const;       // always a fresh contiguous copy
  Tensor To(DType dtype) const;  // converts (copy; self if same dtype)
  void CopyFrom(const Tensor& src);  // same shape; converts dtype
  void Fill(double value);
  void ZeroFill() { Fill(0.0); }

  std::vector<float> ToFloatVector() const;    // any dtype
  std::vector<int64_t> ToIntVector() const;    // integer dtypes
  double Item() const;                         // one-element tensors
  std::string ToString(int max_elements = 16) const;

  // Autograd state (shared by all copies of this handle).
  bool requires_grad() const;
  Tensor& set_requires_grad(bool value);
  Tensor grad() const;          // undefined if none
  void set_grad(Tensor grad);
  void ZeroGrad();              // drops the gradient
  const std::string& name() const;
  Tensor& set_name(std::string name);

  // Identity of the underlying impl (autograd bookkeeping).
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Host reads of tensor data (Item, ToIntVector, ToFloatVector) call this
// thread's hook first when one is set: graph capture (graph/trace.h) uses it
// to notice code whose control flow may depend on tensor values.
using HostReadHook = void (*)(const char* what);
void SetHostReadHook(HostReadHook hook);  // this thread; null = none

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::kF32;
  // Autograd.
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::string name;
};

// Returns a clear InvalidArgument error if `t` does not have `shape`/`dtype`.
Status ExpectShape(const Tensor& t, const Shape& shape, std::string_view what);
Status ExpectDType(const Tensor& t, DType dtype, std::string_view what);
// Broadcast result of two shapes (numpy rules) or an error naming both.
StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b);

}  // namespace tessera
