// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The Python module torch_mixccl._C: the ProcessGroupMixccl class, a subclass of torch's
// ProcessGroup (torch._C registered that base with intrusive_ptr holders; this module shares its
// pybind11 internals, so the base is found by C++ type).
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include "nccl.h"
#include "process_group.h"

namespace py = pybind11;
using mixccl::torch_backend::ProcessGroupMixccl;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mixccl's torch.distributed backend (import torch_mixccl to register it)";
  py::class_<ProcessGroupMixccl, c10::intrusive_ptr<ProcessGroupMixccl>, c10d::ProcessGroup>(m, "ProcessGroupMixccl")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeoutMs) {
             return c10::make_intrusive<ProcessGroupMixccl>(store, rank, size, std::chrono::milliseconds(timeoutMs));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
           // Joining the communicator blocks until every rank arrived: let other Python threads run.
           py::call_guard<py::gil_scoped_release>())
      .def(py::init([](ProcessGroupMixccl& parent, const std::vector<int64_t>& members, int64_t timeoutMs) {
             return c10::make_intrusive<ProcessGroupMixccl>(parent, members, std::chrono::milliseconds(timeoutMs));
           }),
           py::arg("parent"), py::arg("members"), py::arg("timeout_ms"),
           // A subgroup of `parent` (ranks of the parent, sorted), split or shrunk from its
           // communicator on the parent's worker; blocks until every member arrived.
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("origin", &ProcessGroupMixccl::origin,
                             "How the communicator was made: 'store', 'split' or 'shrink'")
      .def_property_readonly("timeout_ms", [](const ProcessGroupMixccl& pg) { return pg.timeout().count(); })
      .def("failure", &ProcessGroupMixccl::failure,
           "The first failure of the communicator (a dead peer, a timeout), '' while healthy");
  m.def("nccl_version", [] {
    int v = 0;
    ncclGetVersion(&v);
    return v;
  });
}
