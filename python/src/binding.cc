// distflow._distflow: the Python binding, on the public C++ API only
// (include/distflow/). Graph construction, shape inference, gradients,
// sessions and servers stay in C++; this file converts at the boundary:
// numpy arrays <-> Tensors (a fetched array shares the Tensor's memory and
// keeps it alive), Python values <-> attributes (by the kind the op registry
// declares), absl::Status -> the Python exception of its code.
//
// The GIL is released while a session runs a step and while a server joins,
// so other Python threads (and signal handlers) keep running.
#include "conversions.h"
#include "distflow/version.h"

void RegisterSummaryBindings(py::module_& m);  // summary_binding.cc
void RegisterDataBindings(py::module_& m);     // data_binding.cc

namespace distflow_py {
void BindGraph(py::module_& m);        // graph_binding.cc
void BindSession(py::module_& m);      // session_binding.cc
void BindTrain(py::module_& m);        // train_binding.cc
void BindControlFlow(py::module_& m);  // control_flow_binding.cc
}  // namespace distflow_py

using namespace distflow_py;  // NOLINT: this file only assembles the module

PYBIND11_MODULE(_distflow, m) {
  m.doc() = "distflow's C++ runtime (use distflow.compat.v1)";
  m.def("version", [] { return std::string(df::Version()); });
  m.def("kernel_isa", [] { return df::KernelIsaSummary(); });
  // For tests: references to fed arrays released off the interpreter thread, not dropped yet.
  m.def("_lent_arrays_pending", [] { return LentArrays::Get().pending(); });

  // Errors: one class per code, all subclasses of Error.
  py::object base =
      py::reinterpret_steal<py::object>(PyErr_NewException("distflow._distflow.Error", PyExc_RuntimeError, nullptr));
  m.attr("Error") = base;
  const std::vector<std::pair<absl::StatusCode, const char*>> codes = {
      {absl::StatusCode::kCancelled, "CancelledError"},
      {absl::StatusCode::kUnknown, "UnknownError"},
      {absl::StatusCode::kInvalidArgument, "InvalidArgumentError"},
      {absl::StatusCode::kDeadlineExceeded, "DeadlineExceededError"},
      {absl::StatusCode::kNotFound, "NotFoundError"},
      {absl::StatusCode::kAlreadyExists, "AlreadyExistsError"},
      {absl::StatusCode::kPermissionDenied, "PermissionDeniedError"},
      {absl::StatusCode::kResourceExhausted, "ResourceExhaustedError"},
      {absl::StatusCode::kFailedPrecondition, "FailedPreconditionError"},
      {absl::StatusCode::kAborted, "AbortedError"},
      {absl::StatusCode::kOutOfRange, "OutOfRangeError"},
      {absl::StatusCode::kUnimplemented, "UnimplementedError"},
      {absl::StatusCode::kInternal, "InternalError"},
      {absl::StatusCode::kUnavailable, "UnavailableError"},
      {absl::StatusCode::kDataLoss, "DataLossError"},
      {absl::StatusCode::kUnauthenticated, "UnauthenticatedError"},
  };
  for (const auto& [code, name] : codes) {
    std::string qualified = std::string("distflow._distflow.") + name;
    py::object cls = py::reinterpret_steal<py::object>(PyErr_NewException(qualified.c_str(), base.ptr(), nullptr));
    cls.attr("error_code") = static_cast<int>(code);
    m.attr(name) = cls;
    ErrorClasses()[code] = cls;
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      auto it = ErrorClasses().find(e.status.code());
      py::object cls = it != ErrorClasses().end() ? it->second : ErrorClasses()[absl::StatusCode::kUnknown];
      PyErr_SetString(cls.ptr(), std::string(e.status.message()).c_str());
    }
  });

  BindGraph(m);
  BindSession(m);
  BindTrain(m);
  BindControlFlow(m);
  RegisterSummaryBindings(m);
  RegisterDataBindings(m);
}
