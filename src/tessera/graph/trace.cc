#include "tessera/graph/trace.h"

namespace tessera::graph {
namespace {

thread_local Trace* g_trace = nullptr;
thread_local int g_kernel_depth = 0;

void OnHostRead(const char* what) {
  if (g_kernel_depth > 0) return;
  BreakTrace(std::string("a host read of tensor data (") + what +
             ") inside the captured function: what follows may depend on the data");
}

}  // namespace

TraceScope::TraceScope(Trace& trace) : saved_(g_trace) {
  g_trace = &trace;
  SetHostReadHook(&OnHostRead);
}

TraceScope::~TraceScope() {
  g_trace = saved_;
  SetHostReadHook(saved_ != nullptr ? &OnHostRead : nullptr);
}

Trace* ActiveTrace() { return g_trace; }

KernelScope::KernelScope() { ++g_kernel_depth; }
KernelScope::~KernelScope() { --g_kernel_depth; }

void BreakTrace(const std::string& why) {
  if (g_trace != nullptr && g_trace->broken.empty()) g_trace->broken = why;
}

}  // namespace tessera::graph
