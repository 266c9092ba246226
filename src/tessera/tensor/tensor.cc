#include "tessera/tensor/tensor.h"

#include "tessera/tensor/strided_copy.h"

#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tessera {

using internal::ReadAsDouble;
using internal::WriteFromDouble;

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Shape ContiguousStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

int NormalizeAxis(int axis, int rank) {
  int a = axis < 0 ? axis + rank : axis;
  TESSERA_CHECK(a >= 0 && a < rank, "axis {} out of range for rank {}", axis, rank);
  return a;
}

Storage::Storage(size_t bytes, hal::Device& device, hal::MemoryTier tier)
    : bytes_(bytes), device_(&device), tier_(tier) {
  data_ = device.allocator(tier).Allocate(bytes);
  TESSERA_CHECK(data_ != nullptr, "out of memory allocating {} bytes on {}", bytes, device.name());
}

Storage::~Storage() { device_->allocator(tier_).Free(data_, bytes_); }

namespace {

std::shared_ptr<TensorImpl> MakeImpl(const Shape& shape, DType dtype, hal::MemoryTier tier) {
  for (int64_t d : shape) TESSERA_CHECK(d >= 0, "negative dimension in shape {}", ShapeString(shape));
  auto impl = std::make_shared<TensorImpl>();
  size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  impl->storage = std::make_shared<Storage>(bytes, hal::CpuDevice(), tier);
  impl->shape = shape;
  impl->strides = ContiguousStrides(shape);
  impl->dtype = dtype;
  return impl;
}

std::shared_ptr<TensorImpl> ViewImpl(const TensorImpl& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype;
  return impl;
}

// Visits every element of `shape` in row-major order, passing the element
// offsets in two strided layouts.
template <typename F>
void ForEachIndex2(const Shape& shape, const Shape& sa, int64_t oa, const Shape& sb, int64_t ob, F&& f) {
  int64_t n = NumElements(shape);
  if (n == 0) return;
  int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    f(oa, ob);
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  int64_t inner = shape[rank - 1];
  int64_t ia = sa[rank - 1], ib = sb[rank - 1];
  for (int64_t done = 0; done < n; done += inner) {
    int64_t pa = oa, pb = ob;
    for (int d = 0; d < rank - 1; ++d) {
      pa += idx[d] * sa[d];
      pb += idx[d] * sb[d];
    }
    for (int64_t i = 0; i < inner; ++i) f(pa + i * ia, pb + i * ib);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

Tensor Tensor::Empty(const Shape& shape, DType dtype, hal::MemoryTier tier) {
  return Tensor(MakeImpl(shape, dtype, tier));
}

Tensor Tensor::Zeros(const Shape& shape, DType dtype) {
  Tensor t = Empty(shape, dtype);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::Full(const Shape& shape, double value, DType dtype) {
  Tensor t = Empty(shape, dtype);
  t.Fill(value);
  return t;
}

Tensor Tensor::FromVector(const std::vector<float>& values, const Shape& shape, DType dtype) {
  TESSERA_CHECK(static_cast<int64_t>(values.size()) == NumElements(shape), "{} values for shape {}",
                values.size(), ShapeString(shape));
  Tensor t = Empty(shape, dtype);
  char* p = static_cast<char*>(t.raw_data());
  size_t es = DTypeSize(dtype);
  for (size_t i = 0; i < values.size(); ++i) WriteFromDouble(p + i * es, dtype, values[i]);
  return t;
}

Tensor Tensor::FromInts(const std::vector<int64_t>& values, const Shape& shape, DType dtype) {
  TESSERA_CHECK(static_cast<int64_t>(values.size()) == NumElements(shape), "{} values for shape {}",
                values.size(), ShapeString(shape));
  Tensor t = Empty(shape, dtype);
  char* p = static_cast<char*>(t.raw_data());
  size_t es = DTypeSize(dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kI64) {
      reinterpret_cast<int64_t*>(p)[i] = values[i];
    } else {
      WriteFromDouble(p + i * es, dtype, static_cast<double>(values[i]));
    }
  }
  return t;
}

Tensor Tensor::Scalar(double value, DType dtype) { return Full({}, value, dtype); }

const Shape& Tensor::shape() const {
  TESSERA_CHECK(impl_, "undefined tensor");
  return impl_->shape;
}
const Shape& Tensor::strides() const {
  TESSERA_CHECK(impl_, "undefined tensor");
  return impl_->strides;
}
int64_t Tensor::offset() const { return impl_->offset; }
int64_t Tensor::size(int axis) const { return shape()[NormalizeAxis(axis, dim())]; }
int64_t Tensor::numel() const { return NumElements(shape()); }
DType Tensor::dtype() const {
  TESSERA_CHECK(impl_, "undefined tensor");
  return impl_->dtype;
}
const std::shared_ptr<Storage>& Tensor::storage() const { return impl_->storage; }

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (s[i] != 1 && impl_->strides[i] != expected) return false;
    expected *= s[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  TESSERA_CHECK(impl_, "undefined tensor");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(DTypeSize(impl_->dtype));
}

Tensor Tensor::View(const Shape& new_shape) const {
  TESSERA_CHECK(is_contiguous(), "View of a non-contiguous tensor {}; use Reshape", ShapeString(shape()));
  Shape s = new_shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      TESSERA_CHECK(infer < 0, "more than one -1 in shape {}", ShapeString(new_shape));
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    TESSERA_CHECK(known > 0 && numel() % known == 0, "cannot view {} as {}", ShapeString(shape()),
                  ShapeString(new_shape));
    s[infer] = numel() / known;
  }
  TESSERA_CHECK(NumElements(s) == numel(), "cannot view {} ({} elements) as {}", ShapeString(shape()), numel(),
                ShapeString(new_shape));
  return Tensor(ViewImpl(*impl_, s, ContiguousStrides(s), impl_->offset));
}

Tensor Tensor::Reshape(const Shape& new_shape) const {
  if (is_contiguous()) return View(new_shape);
  return Contiguous().View(new_shape);
}

Tensor Tensor::Transpose(int a, int b) const {
  std::vector<int> order(dim());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[NormalizeAxis(a, dim())], order[NormalizeAxis(b, dim())]);
  return Permute(order);
}

Tensor Tensor::Permute(const std::vector<int>& order) const {
  TESSERA_CHECK(static_cast<int>(order.size()) == dim(), "permute order has {} axes, tensor has {}",
                order.size(), dim());
  Shape s(dim()), st(dim());
  std::vector<bool> seen(dim(), false);
  for (int i = 0; i < dim(); ++i) {
    int src = NormalizeAxis(order[i], dim());
    TESSERA_CHECK(!seen[src], "axis {} repeated in permute", src);
    seen[src] = true;
    s[i] = impl_->shape[src];
    st[i] = impl_->strides[src];
  }
  return Tensor(ViewImpl(*impl_, s, st, impl_->offset));
}

Tensor Tensor::Slice(int axis, int64_t start, int64_t end, int64_t step) const {
  int a = NormalizeAxis(axis, dim());
  int64_t n = impl_->shape[a];
  if (start < 0) start += n;
  if (end < 0) end += n;
  end = std::min(end, n);
  TESSERA_CHECK(step > 0 && start >= 0 && start <= end, "bad slice [{}:{}:{}] of axis {} (size {})", start, end,
                step, a, n);
  Shape s = impl_->shape, st = impl_->strides;
  s[a] = (end - start + step - 1) / step;
  st[a] = impl_->strides[a] * step;
  return Tensor(ViewImpl(*impl_, s, st, impl_->offset + start * impl_->strides[a]));
}

Tensor Tensor::Unsqueeze(int axis) const {
  int a = NormalizeAxis(axis, dim() + 1);
  Shape s = impl_->shape, st = impl_->strides;
  int64_t stride = a < dim() ? impl_->strides[a] * impl_->shape[a] : 1;
  s.insert(s.begin() + a, 1);
  st.insert(st.begin() + a, stride);
  return Tensor(ViewImpl(*impl_, s, st, impl_->offset));
}

Tensor Tensor::Squeeze(int axis) const {
  int a = NormalizeAxis(axis, dim());
  TESSERA_CHECK(impl_->shape[a] == 1, "squeeze of axis {} with size {}", a, impl_->shape[a]);
  Shape s = impl_->shape, st = impl_->strides;
  s.erase(s.begin() + a);
  st.erase(st.begin() + a);
  return Tensor(ViewImpl(*impl_, s, st, impl_->offset));
}

Tensor Tensor::Expand(const Shape& target) const {
  TESSERA_CHECK(target.size() >= shape().size(), "cannot expand {} to {}", ShapeString(shape()),
                ShapeString(target));
  size_t lead = target.size() - shape().size();
  Shape st(target.size(), 0);
  for (size_t i = 0; i < shape().size(); ++i) {
    int64_t d = impl_->shape[i];
    TESSERA_CHECK(d == target[lead + i] || d == 1, "cannot expand {} to {}", ShapeString(shape()),
                  ShapeString(target));
    st[lead + i] = d == target[lead + i] ? impl_->strides[i] : 0;
  }
  return Tensor(ViewImpl(*impl_, target, st, impl_->offset));
}

Tensor Tensor::Contiguous() const {
  if (is_contiguous()) return *this;
  return Clone();
}

Tensor Tensor::Clone() const {
  Tensor out = Empty(shape(), dtype());
  out.CopyFrom(*this);
  return out;
}

Tensor Tensor::To(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = Empty(shape(), target);
  out.CopyFrom(*this);
  return out;
}

void Tensor::CopyFrom(const Tensor& src) {
  TESSERA_CHECK(src.shape() == shape(), "CopyFrom shape {} into {}", ShapeString(src.shape()),
                ShapeString(shape()));
  if (numel() == 0) return;
  if (impl_->storage == src.impl_->storage) {
    const bool same_view = impl_->strides == src.impl_->strides && impl_->offset == src.impl_->offset;
    if (same_view && dtype() == src.dtype()) return;  // copying a view onto itself
    CopyFrom(src.Clone());  // views of one storage may overlap: copy through a fresh buffer
    return;
  }
  char* dst_base = static_cast<char*>(impl_->storage->data());
  const char* src_base = static_cast<const char*>(src.impl_->storage->data());
  internal::CopyStrided(shape().data(), dim(),
                        internal::StridedBuffer{dst_base, impl_->strides.data(), impl_->offset, dtype()},
                        internal::StridedBuffer{const_cast<char*>(src_base), src.impl_->strides.data(),
                                                src.impl_->offset, src.dtype()});
}

void Tensor::Fill(double value) {
  char* base = static_cast<char*>(impl_->storage->data());
  size_t es = DTypeSize(dtype());
  DType dt = dtype();
  ForEachIndex2(shape(), impl_->strides, impl_->offset, impl_->strides, impl_->offset,
                [&](int64_t o, int64_t) { WriteFromDouble(base + o * es, dt, value); });
}

namespace {
thread_local HostReadHook g_host_read_hook = nullptr;
void NoteHostRead(const char* what) {
  if (g_host_read_hook != nullptr) g_host_read_hook(what);
}
}  // namespace

void SetHostReadHook(HostReadHook hook) { g_host_read_hook = hook; }

std::vector<float> Tensor::ToFloatVector() const {
  NoteHostRead("ToFloatVector");
  std::vector<float> out;
  out.reserve(numel());
  const char* base = static_cast<const char*>(impl_->storage->data());
  size_t es = DTypeSize(dtype());
  DType dt = dtype();
  ForEachIndex2(shape(), impl_->strides, impl_->offset, impl_->strides, impl_->offset, [&](int64_t o, int64_t) {
    out.push_back(static_cast<float>(ReadAsDouble(base + o * es, dt)));
  });
  return out;
}

std::vector<int64_t> Tensor::ToIntVector() const {
  NoteHostRead("ToIntVector");
  std::vector<int64_t> out;
  out.reserve(numel());
  const char* base = static_cast<const char*>(impl_->storage->data());
  size_t es = DTypeSize(dtype());
  DType dt = dtype();
  ForEachIndex2(shape(), impl_->strides, impl_->offset, impl_->strides, impl_->offset, [&](int64_t o, int64_t) {
    if (dt == DType::kI64) {
      out.push_back(*reinterpret_cast<const int64_t*>(base + o * es));
    } else {
      out.push_back(static_cast<int64_t>(ReadAsDouble(base + o * es, dt)));
    }
  });
  return out;
}

double Tensor::Item() const {
  TESSERA_CHECK(numel() == 1, "Item() of a tensor with {} elements", numel());
  NoteHostRead("Item");
  return ReadAsDouble(raw_data(), dtype());
}

std::string Tensor::ToString(int max_elements) const {
  if (!defined()) return "Tensor(undefined)";
  std::vector<float> v = ToFloatVector();
  if (static_cast<int>(v.size()) > max_elements) v.resize(max_elements);
  return fmt::format("Tensor({}, {}, [{}{}])", DTypeName(dtype()), ShapeString(shape()), fmt::join(v, ", "),
                     numel() > max_elements ? ", ..." : "");
}

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
Tensor& Tensor::set_requires_grad(bool value) {
  impl_->requires_grad = value;
  return *this;
}
Tensor Tensor::grad() const { return impl_->grad ? Tensor(impl_->grad) : Tensor(); }
void Tensor::set_grad(Tensor grad) { impl_->grad = grad.impl_; }
void Tensor::ZeroGrad() { impl_->grad.reset(); }
const std::string& Tensor::name() const { return impl_->name; }
Tensor& Tensor::set_name(std::string name) {
  impl_->name = std::move(name);
  return *this;
}

Status ExpectShape(const Tensor& t, const Shape& shape, std::string_view what) {
  if (!t.defined()) return InvalidArgument("{}: tensor is undefined", what);
  if (t.shape() != shape) {
    return InvalidArgument("{}: expected shape {}, got {}", what, ShapeString(shape), ShapeString(t.shape()));
  }
  return Status::Ok();
}

Status ExpectDType(const Tensor& t, DType dtype, std::string_view what) {
  if (!t.defined()) return InvalidArgument("{}: tensor is undefined", what);
  if (t.dtype() != dtype) {
    return InvalidArgument("{}: expected dtype {}, got {}", what, DTypeName(dtype), DTypeName(t.dtype()));
  }
  return Status::Ok();
}

StatusOr<Shape> BroadcastShapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      return InvalidArgument("shapes {} and {} cannot be broadcast together (axis {}: {} vs {})", ShapeString(a),
                             ShapeString(b), i, da, db);
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace tessera
