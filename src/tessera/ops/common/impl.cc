#include "tessera/ops/common/impl.h"

namespace tessera::ops {
namespace {
thread_local Impl g_impl = Impl::kOptimized;
}  // namespace

Impl CurrentImpl() { return g_impl; }
ScopedImpl::ScopedImpl(Impl impl) : saved_(g_impl) { g_impl = impl; }
ScopedImpl::~ScopedImpl() { g_impl = saved_; }

}  // namespace tessera::ops
