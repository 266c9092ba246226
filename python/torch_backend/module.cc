// The extension module tessera.torch._c10d: ProcessGroupTessera for Python
// and its creator, which tessera/torch/__init__.py registers with
// torch.distributed.Backend.register_backend("tessera", ...).
#include <stdexcept>

#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/python.h>

#include "python/torch_backend/process_group.h"
#include "python/torch_backend/thp_allocator.h"

namespace py = pybind11;

PYBIND11_MODULE(_c10d, m) {
  using tessera::torch_backend::ProcessGroupTessera;
  m.doc() = "Tessera's torch.distributed backend (c10d ProcessGroup on Tessera's communicator)";
  // The base class must be known to pybind11 first.
  py::module::import("torch.distributed");
  py::class_<ProcessGroupTessera, ::c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupTessera>>(
      m, "ProcessGroupTessera")
      .def("describe", &ProcessGroupTessera::Describe,
           "Transport, algorithms and cost model of the group's collectives communicator")
      .def("zero_copy_ops", &ProcessGroupTessera::ZeroCopyOps,
           "How many collectives ran zero copy (every rank's tensors from tessera.torch.empty_shared)");
  m.def(
      "alloc_shared_bytes",
      [](int64_t nbytes) {
        if (nbytes <= 0) throw std::invalid_argument("alloc_shared_bytes: the size must be positive");
        auto p = tessera::comm::AllocShared(static_cast<size_t>(nbytes));
        if (!p.ok()) {
          throw std::runtime_error("tessera.torch.empty_shared: " + p.status().ToString());
        }
        return at::from_blob(
            *p, {nbytes}, [](void* ptr) { (void)tessera::comm::FreeShared(ptr); },
            at::TensorOptions().dtype(at::kByte));
      },
      py::arg("nbytes"),
      "A uint8 tensor of `nbytes` on memory from Tessera's AllocShared (zeroed; freed with the tensor)");
  m.def("thp_alloc_enabled", &tessera::torch_backend::MaybeInstallThpAllocator,
        "Whether large CPU tensors are 2 MiB aligned and advised for huge pages (THP_MEM_ALLOC_ENABLE=1, as in "
        "PyTorch >= 2.1); installs that allocator on first call when the variable asks for it");
  m.def("create_process_group", &tessera::torch_backend::CreateProcessGroupTessera, py::arg("store"),
        py::arg("rank"), py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Creates the 'tessera' process group over a c10d Store (collective over the group's ranks)");
}
