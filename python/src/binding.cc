// distflow._distflow: the Python binding, on the public C++ API only
// (include/distflow/). Graph construction, shape inference, gradients,
// sessions and servers stay in C++; this file converts at the boundary:
// numpy arrays <-> Tensors (a fetched array shares the Tensor's memory and
// keeps it alive), Python values <-> attributes (by the kind the op registry
// declares), absl::Status -> the Python exception of its code.
//
// The GIL is released while a session runs a step and while a server joins,
// so other Python threads (and signal handlers) keep running.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distflow/cluster_spec.h"
#include "distflow/gradients.h"
#include "distflow/op_registry.h"
#include "distflow/ops.h"
#include "distflow/scope.h"
#include "distflow/server.h"
#include "distflow/session.h"
#include "distflow/step_stats.h"
#include "distflow/tensor.h"
#include "distflow/train/layers.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/replica_device_setter.h"
#include "distflow/train/saver.h"
#include "distflow/train/supervisor.h"
#include "distflow/train/sync_replicas_optimizer.h"
#include "distflow/version.h"

namespace py = pybind11;
namespace df = distflow;

void RegisterSummaryBindings(py::module_& m);  // summary_binding.cc

namespace {

// ---- errors --------------------------------------------------------------

// One Python exception class per status code, created at import
// (distflow.errors re-exports them with TensorFlow's names).
std::map<absl::StatusCode, py::object>& ErrorClasses() {
  static auto* classes = new std::map<absl::StatusCode, py::object>();
  return *classes;
}

struct StatusError {
  absl::Status status;
};

[[noreturn]] void Throw(const absl::Status& s) { throw StatusError{s}; }
void Check(const absl::Status& s) {
  if (!s.ok()) Throw(s);
}
template <typename T>
T Value(absl::StatusOr<T> v) {
  if (!v.ok()) Throw(v.status());
  return std::move(*v);
}

// ---- dtypes and numpy ------------------------------------------------------

py::dtype NumpyDtype(df::DataType dt) {
  switch (dt) {
    case df::DT_FLOAT: return py::dtype::of<float>();
    case df::DT_DOUBLE: return py::dtype::of<double>();
    case df::DT_INT32: return py::dtype::of<int32_t>();
    case df::DT_INT64: return py::dtype::of<int64_t>();
    case df::DT_UINT8: return py::dtype::of<uint8_t>();
    case df::DT_BOOL: return py::dtype::of<bool>();
    default: return py::dtype("O");
  }
}

// The array shares the tensor's buffer; the capsule keeps the tensor alive.
py::object TensorToNumpy(const df::Tensor& t) {
  std::vector<py::ssize_t> shape;
  for (int i = 0; i < t.dims(); ++i) shape.push_back(static_cast<py::ssize_t>(t.dim_size(i)));
  if (t.dtype() == df::DT_STRING) {
    py::array out(py::dtype("O"), shape);
    auto flat = t.flat<std::string>();
    auto* cells = static_cast<PyObject**>(out.mutable_data());
    for (size_t i = 0; i < flat.size(); ++i) {
      py::bytes b(flat[i]);
      cells[i] = b.release().ptr();
    }
    return std::move(out);
  }
  auto* keep = new df::Tensor(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<df::Tensor*>(p); });
  return py::array(NumpyDtype(t.dtype()), shape, keep->raw_data(), owner);
}

// ---- numpy memory lent to tensors ---------------------------------------------
//
// A fed array is not copied: its tensor borrows the array's memory
// (TensorBuffer::Borrow) and holds a reference to the array. The last tensor
// may go on an executor thread that does not hold the GIL; that thread must
// not take the GIL (the interpreter's thread may hold it while waiting on
// that very executor), so the reference is queued and dropped by the
// interpreter: through Py_AddPendingCall, and at the start of every run.
class LentArrays {
 public:
  static LentArrays& Get() {
    static auto* lent = new LentArrays();  // never destroyed: used by late releases
    return *lent;
  }

  void Release(PyObject* array) {
    if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing to free
    if (PyGILState_Check()) {
      Py_DECREF(array);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(array);
      if (scheduled_) return;
      scheduled_ = true;
    }
    // Py_AddPendingCall needs no GIL; if its queue is full, the next run drains.
    if (Py_AddPendingCall(&LentArrays::DrainCallback, nullptr) != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      scheduled_ = false;
    }
  }

  // With the GIL held.
  void Drain() {
    std::vector<PyObject*> arrays;
    {
      std::lock_guard<std::mutex> lock(mu_);
      arrays.swap(pending_);
      scheduled_ = false;
    }
    for (PyObject* a : arrays) Py_DECREF(a);
  }

  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
  }

 private:
  static int DrainCallback(void*) {
    Get().Drain();
    return 0;
  }

  std::mutex mu_;
  std::vector<PyObject*> pending_;
  bool scheduled_ = false;
};

// `value` (any array-like) as a tensor of `dtype`; numpy does the conversion
// (int lists to float32, ...) and refuses what it cannot convert. With
// `borrow`, a C-contiguous, aligned array of the right dtype is not copied:
// the tensor reads the array's memory (for feeds, which live for one step;
// never for constants, which the graph keeps).
df::Tensor NumpyToTensor(const py::handle& value, df::DataType dtype, bool borrow = false) {
  py::module_ np = py::module_::import("numpy");
  std::vector<int64_t> dims;
  if (dtype == df::DT_STRING) {
    py::array arr = np.attr("asarray")(value, py::arg("dtype") = "O");
    for (py::ssize_t i = 0; i < arr.ndim(); ++i) dims.push_back(arr.shape(i));
    df::Tensor t(df::DT_STRING, df::TensorShape(dims));
    auto flat = t.flat<std::string>();
    py::list items = arr.attr("ravel")().attr("tolist")();
    for (size_t i = 0; i < flat.size(); ++i) {
      py::handle item = items[i];
      if (py::isinstance<py::bytes>(item)) {
        flat[i] = item.cast<std::string>();
      } else if (py::isinstance<py::str>(item)) {
        flat[i] = item.cast<std::string>();
      } else {
        throw py::type_error("a string tensor takes str or bytes, not " +
                             py::str(item.get_type().attr("__name__")).cast<std::string>());
      }
    }
    return t;
  }
  // asarray(order="C"), not ascontiguousarray, which makes a scalar 1-d.
  py::array arr = np.attr("asarray")(value, py::arg("dtype") = NumpyDtype(dtype), py::arg("order") = "C");
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) dims.push_back(arr.shape(i));
  const size_t bytes = static_cast<size_t>(arr.nbytes());
  const bool aligned = (arr.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0;
  if (borrow && aligned && bytes > 0) {
    PyObject* owner = arr.ptr();
    Py_INCREF(owner);
    auto buffer = df::TensorBuffer::Borrow(arr.data(), bytes, [owner] { LentArrays::Get().Release(owner); });
    return Value(df::Tensor::FromBuffer(dtype, df::TensorShape(dims), std::move(buffer), 0));
  }
  absl::StatusOr<df::Tensor> t = df::Tensor::Allocate(dtype, df::TensorShape(dims));
  Check(t.status());
  if (t->TotalBytes() > 0) std::memcpy(t->raw_data(), arr.data(), t->TotalBytes());
  return *t;
}

py::object ShapeToPython(const df::PartialShape& s) {
  if (s.unknown_rank()) return py::none();
  py::list dims;
  for (int i = 0; i < s.rank(); ++i) {
    if (s.dim(i) < 0) {
      dims.append(py::none());
    } else {
      dims.append(s.dim(i));
    }
  }
  return std::move(dims);
}

df::PartialShape ShapeFromPython(const py::handle& h) {
  if (h.is_none()) return df::PartialShape();
  std::vector<int64_t> dims;
  for (py::handle d : h) dims.push_back(d.is_none() ? -1 : d.cast<int64_t>());
  return df::PartialShape(absl::MakeConstSpan(dims));
}

// ---- attributes ------------------------------------------------------------

df::DataType DtypeFromPython(const py::handle& h) {
  if (py::isinstance<df::DataType>(h)) return h.cast<df::DataType>();
  if (py::hasattr(h, "_distflow_dtype")) return h.attr("_distflow_dtype").cast<df::DataType>();
  throw py::type_error("expected a dtype, got " + py::repr(h).cast<std::string>());
}

df::ops::Attr AttrFromPython(const std::string& op, const df::OpAttrInfo& info, const py::handle& v) {
  const std::string& k = info.kind;
  try {
    if (k == "int") return df::ops::Attr(v.cast<int64_t>());
    if (k == "float") return df::ops::Attr(v.cast<double>());
    if (k == "bool") return df::ops::Attr(v.cast<bool>());
    if (k == "string") {
      if (py::isinstance<py::bytes>(v)) return df::ops::Attr(v.cast<std::string>());
      return df::ops::Attr(py::str(v).cast<std::string>());
    }
    if (k == "type") return df::ops::Attr(DtypeFromPython(v));
    if (k == "shape") return df::ops::Attr(ShapeFromPython(v));
    if (k == "list(int)") return df::ops::Attr(v.cast<std::vector<int64_t>>());
    if (k == "list(float)") return df::ops::Attr(v.cast<std::vector<double>>());
    if (k == "list(string)") return df::ops::Attr(v.cast<std::vector<std::string>>());
    if (k == "list(type)") {
      std::vector<df::DataType> types;
      for (py::handle t : v) types.push_back(DtypeFromPython(t));
      return df::ops::Attr(types);
    }
    if (k == "tensor") {
      if (py::isinstance<py::tuple>(v) && py::len(v) == 2) {  // (value, dtype) from the Python layer
        py::tuple pair = v.cast<py::tuple>();
        return df::ops::Attr(NumpyToTensor(pair[0], DtypeFromPython(pair[1])));
      }
      throw py::type_error("a tensor attribute takes (value, dtype)");
    }
  } catch (const py::cast_error&) {
    throw py::type_error("attribute '" + info.name + "' of " + op + " is a " + k + ", not " +
                         py::str(v.get_type().attr("__name__")).cast<std::string>() + " (" +
                         py::repr(v).cast<std::string>() + ")");
  }
  throw py::type_error("attribute '" + info.name + "' of " + op + " has kind " + k +
                       ", which the Python client cannot set yet");
}

// ---- graph building --------------------------------------------------------

// A key naming the graph an Output or Operation belongs to.
std::uintptr_t GraphKey(const df::Operation& op) {
  return reinterpret_cast<std::uintptr_t>(op.graph_state().get());
}

df::Operation AddOp(const df::Scope& scope, const std::string& op_type, const std::vector<df::Output>& inputs,
                    const py::dict& attrs) {
  df::OpInfo info = Value(df::LookUpOp(op_type));
  df::ops::Attrs converted;
  for (auto [key, value] : attrs) {
    std::string name = py::str(key).cast<std::string>();
    const df::OpAttrInfo* a = nullptr;
    for (const df::OpAttrInfo& candidate : info.attrs) {
      if (candidate.name == name) a = &candidate;
    }
    if (a == nullptr) {
      std::string known;
      for (const df::OpAttrInfo& candidate : info.attrs) known += (known.empty() ? "" : ", ") + candidate.name;
      Throw(absl::InvalidArgumentError(op_type + " has no attribute '" + name + "' (it has: " +
                                       (known.empty() ? "none" : known) + ")"));
    }
    converted.emplace_back(name, AttrFromPython(op_type, *a, value));
  }
  df::Operation op = df::ops::Raw(scope, op_type, inputs, converted);
  if (!op.ok()) Check(scope.status());
  return op;
}

py::dict OpInfoToPython(const df::OpInfo& op) {
  auto args = [](const std::vector<df::OpArgInfo>& list) {
    py::list out;
    for (const df::OpArgInfo& a : list) {
      py::dict d;
      d["name"] = a.name;
      d["type"] = a.type;
      d["type_attr"] = a.type_attr;
      d["number_attr"] = a.number_attr;
      d["type_list_attr"] = a.type_list_attr;
      d["is_ref"] = a.is_ref;
      out.append(d);
    }
    return out;
  };
  py::dict d;
  d["name"] = op.name;
  d["inputs"] = args(op.inputs);
  d["outputs"] = args(op.outputs);
  py::list attrs;
  for (const df::OpAttrInfo& a : op.attrs) {
    py::dict ad;
    ad["name"] = a.name;
    ad["kind"] = a.kind;
    ad["has_default"] = a.has_default;
    ad["default"] = a.default_value;
    ad["inferred"] = a.inferred;
    py::list allowed;
    for (df::DataType t : a.allowed_types) allowed.append(t);
    ad["allowed_types"] = allowed;
    attrs.append(ad);
  }
  d["attrs"] = attrs;
  d["is_stateful"] = op.is_stateful;
  return d;
}

df::ClusterSpec ClusterFromPython(const py::dict& jobs) {
  df::ClusterSpec::JobMap map;
  for (auto [job, tasks] : jobs) {
    std::string name = py::str(job).cast<std::string>();
    if (py::isinstance<py::dict>(tasks)) {
      for (auto [index, address] : tasks.cast<py::dict>()) {
        map[name][index.cast<int>()] = py::str(address).cast<std::string>();
      }
    } else if (py::isinstance<py::str>(tasks)) {
      map[name][0] = tasks.cast<std::string>();
    } else {
      int i = 0;
      for (py::handle address : tasks) {
        if (!py::isinstance<py::str>(address)) {
          Throw(absl::InvalidArgumentError("job '" + name + "': task " + std::to_string(i) +
                                           " must be a \"host:port\" string, not " +
                                           py::repr(address).cast<std::string>()));
        }
        map[name][i++] = address.cast<std::string>();
      }
    }
  }
  return Value(df::ClusterSpec::FromJobs(std::move(map)));
}

py::dict ClusterToPython(const df::ClusterSpec& spec) {
  py::dict out;
  for (const auto& [job, tasks] : spec.job_map()) {
    py::dict t;
    for (const auto& [index, address] : tasks) t[py::int_(index)] = address;
    out[py::str(job)] = t;
  }
  return out;
}

df::SessionOptions SessionOptionsFromPython(const py::dict& o) {
  df::SessionOptions options;
  if (o.contains("inter_op_threads")) options.inter_op_threads = o["inter_op_threads"].cast<int>();
  if (o.contains("intra_op_threads")) options.intra_op_threads = o["intra_op_threads"].cast<int>();
  if (o.contains("operation_timeout_ms")) options.operation_timeout_ms = o["operation_timeout_ms"].cast<int64_t>();
  if (o.contains("allow_soft_placement")) options.allow_soft_placement = o["allow_soft_placement"].cast<bool>();
  if (o.contains("log_device_placement")) options.log_device_placement = o["log_device_placement"].cast<bool>();
  if (o.contains("device_filters")) options.device_filters = o["device_filters"].cast<std::vector<std::string>>();
  if (o.contains("wait_for_cluster_ms")) options.wait_for_cluster_ms = o["wait_for_cluster_ms"].cast<int64_t>();
  return options;
}

// Feeds from (Output, array-like) pairs, each converted to its placeholder's
// dtype; arrays that allow it are lent, not copied. Also drops the arrays
// earlier steps' tensors released off the interpreter's thread.
df::FeedDict ToFeedDict(const std::vector<std::pair<df::Output, py::object>>& feeds) {
  LentArrays::Get().Drain();
  df::FeedDict feed_dict;
  for (const auto& [out, value] : feeds) feed_dict.emplace_back(out, NumpyToTensor(value, out.dtype(), true));
  return feed_dict;
}

// A step's result as numpy arrays, or its status raised.
py::list ToNumpyList(absl::StatusOr<std::vector<df::Tensor>> result) {
  std::vector<df::Tensor> tensors = Value(std::move(result));
  py::list out;
  for (const df::Tensor& t : tensors) out.append(TensorToNumpy(t));
  return out;
}

// A device function made in C++ (replica_device_setter).
struct DeviceFn {
  df::DeviceFunction fn;
};

// A session and whether it was closed (running a closed one is an error
// here, not a crash).
struct PySession {
  std::unique_ptr<df::Session> session;
  bool closed = false;
};

// Checks what a C++ builder left in the scope: an invalid result means the
// scope holds the error.
df::Output Built(const df::Scope& s, df::Output out) {
  if (!out.ok()) Check(s.status());
  return out;
}

// An optimizer from its TensorFlow name and hyperparameters.
std::unique_ptr<df::Optimizer> MakeConstantRateOptimizer(const std::string& kind, const py::dict& a);

std::unique_ptr<df::Optimizer> MakeOptimizer(const std::string& kind, const py::dict& a) {
  std::unique_ptr<df::Optimizer> opt = MakeConstantRateOptimizer(kind, a);
  // A learning rate computed by the graph (tf.train.exponential_decay, ...).
  if (a.contains("learning_rate") && py::isinstance<df::Output>(a["learning_rate"])) {
    opt->SetLearningRate(a["learning_rate"].cast<df::Output>());
  }
  return opt;
}

std::unique_ptr<df::Optimizer> MakeConstantRateOptimizer(const std::string& kind, const py::dict& a) {
  auto get = [&a](const char* k, double d) {
    return a.contains(k) && !py::isinstance<df::Output>(a[k]) ? a[k].cast<double>() : d;
  };
  const double lr = get("learning_rate", 0.001);
  if (kind == "GradientDescent") return std::make_unique<df::GradientDescentOptimizer>(lr);
  if (kind == "Momentum") {
    return std::make_unique<df::MomentumOptimizer>(lr, get("momentum", 0.0),
                                                   a.contains("use_nesterov") && a["use_nesterov"].cast<bool>());
  }
  if (kind == "Adagrad") return std::make_unique<df::AdagradOptimizer>(lr, get("initial_accumulator_value", 0.1));
  if (kind == "RMSProp") {
    return std::make_unique<df::RMSPropOptimizer>(lr, get("decay", 0.9), get("momentum", 0.0), get("epsilon", 1e-10));
  }
  if (kind == "Adam") {
    return std::make_unique<df::AdamOptimizer>(lr, get("beta1", 0.9), get("beta2", 0.999), get("epsilon", 1e-8));
  }
  throw py::value_error("unknown optimizer " + kind);
}

}  // namespace

PYBIND11_MODULE(_distflow, m) {
  m.doc() = "distflow's C++ runtime (use distflow.compat.v1)";
  m.def("version", [] { return std::string(df::Version()); });
  // For tests: references to fed arrays released off the interpreter thread, not dropped yet.
  m.def("_lent_arrays_pending", [] { return LentArrays::Get().pending(); });

  // Errors: one class per code, all subclasses of Error.
  py::object base = py::reinterpret_steal<py::object>(
      PyErr_NewException("distflow._distflow.Error", PyExc_RuntimeError, nullptr));
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

  py::enum_<df::DataType>(m, "DataType")
      .value("DT_INVALID", df::DT_INVALID)
      .value("DT_FLOAT", df::DT_FLOAT)
      .value("DT_DOUBLE", df::DT_DOUBLE)
      .value("DT_INT32", df::DT_INT32)
      .value("DT_UINT8", df::DT_UINT8)
      .value("DT_STRING", df::DT_STRING)
      .value("DT_INT64", df::DT_INT64)
      .value("DT_BOOL", df::DT_BOOL);
  m.def("dtype_name", [](df::DataType t) { return df::DataTypeName(t); });

  py::class_<df::NodeInfo>(m, "NodeInfo")
      .def_readonly("name", &df::NodeInfo::name)
      .def_readonly("type", &df::NodeInfo::op)
      .def_readonly("device", &df::NodeInfo::device)
      .def_readonly("dtype", &df::NodeInfo::dtype)
      .def_property_readonly("shape", [](const df::NodeInfo& n) { return ShapeToPython(n.shape); });

  // A device function made in C++ (replica_device_setter): callable from
  // Python too, and given to Scope.with_device_function as is.
  py::class_<DeviceFn>(m, "DeviceFunction")
      .def("__call__", [](const DeviceFn& f, const df::NodeInfo& n) { return f.fn(n); });

  py::class_<df::Operation>(m, "Operation")
      .def_property_readonly("name", &df::Operation::name)
      .def_property_readonly("type", &df::Operation::op_type)
      .def_property_readonly("device", &df::Operation::device)
      .def_property_readonly("num_outputs", &df::Operation::num_outputs)
      .def_property_readonly("graph_key", [](const df::Operation& op) { return GraphKey(op); })
      .def("__eq__", [](const df::Operation& a, const df::Operation& b) { return a.node() == b.node(); })
      .def("__hash__", [](const df::Operation& a) { return reinterpret_cast<std::uintptr_t>(a.node()); });

  py::class_<df::Output>(m, "Output")
      .def(py::init([](const df::Operation& op, int index, const df::Scope& scope) {
        if (index < 0 || index >= op.num_outputs()) {
          throw py::index_error(op.name() + " has " + std::to_string(op.num_outputs()) + " outputs, not " +
                                std::to_string(index + 1));
        }
        return df::Output(op, index, scope);
      }))
      .def_property_readonly("op", &df::Output::op)
      .def_property_readonly("index", &df::Output::index)
      .def_property_readonly("name", &df::Output::name)
      .def_property_readonly("dtype", &df::Output::dtype)
      .def_property_readonly("shape", [](const df::Output& o) { return ShapeToPython(o.shape()); })
      .def_property_readonly("graph_key", [](const df::Output& o) { return GraphKey(o.op()); })
      .def_property_readonly("ok", &df::Output::ok);  // false: no gradient reached this input

  py::class_<df::Scope>(m, "Scope")
      .def_static("new_root", &df::Scope::NewRootScope)
      .def("new_sub_scope", &df::Scope::NewSubScope)
      .def("with_op_name", &df::Scope::WithOpName)
      .def("with_device", &df::Scope::WithDevice)
      .def("with_device_function", [](const df::Scope& s, const DeviceFn& f) { return s.WithDeviceFunction(f.fn); })
      .def("with_device_function",
           [](const df::Scope& s, py::function fn) {
             // Called while a node is added, i.e. from Python code holding the GIL.
             return s.WithDeviceFunction([fn](const df::NodeInfo& n) -> std::string {
               py::object d = fn(n);
               return d.is_none() ? std::string() : py::str(d).cast<std::string>();
             });
           })
      .def("with_control_dependencies", &df::Scope::WithControlDependencies)
      .def("with_no_control_dependencies", &df::Scope::WithNoControlDependencies)
      .def("unique_name", &df::Scope::GetUniqueName)
      .def("check", [](const df::Scope& s) { Check(s.status()); })
      .def_property_readonly("num_nodes", &df::Scope::num_nodes)
      .def("find_operation",
           [](const df::Scope& s, const std::string& name) -> std::optional<df::Operation> {
             df::Operation op = s.FindOperation(name);
             if (!op.ok()) return std::nullopt;
             return op;
           })
      .def_property_readonly("graph_key", [](const df::Scope& s) {
        return reinterpret_cast<std::uintptr_t>(s.graph_state().get());
      })
      .def("set_graph_seed", &df::Scope::SetGraphSeed)
      .def("initializers", &df::Scope::Initializers)
      .def("trainable_variables", &df::Scope::TrainableVariables);

  m.def("registered_ops", [] {
    py::list out;
    for (const df::OpInfo& op : df::RegisteredOps()) out.append(OpInfoToPython(op));
    return out;
  });
  m.def("add_op", &AddOp, py::arg("scope"), py::arg("op_type"), py::arg("inputs"), py::arg("attrs"));
  m.def(
      "make_variable",
      [](const df::Scope& s, const df::Output& initial, bool trainable) {
        df::ops::VariableOptions o;
        o.trainable = trainable;
        df::Output v = df::ops::MakeVariable(s, initial, o);
        if (!v.ok()) Check(s.status());
        return v;
      },
      py::arg("scope"), py::arg("initial"), py::arg("trainable") = true);
  m.def("global_variables_initializer", [](const df::Scope& s) {
    df::Operation op = df::ops::GlobalVariablesInitializer(s);
    if (!op.ok()) Check(s.status());
    return op;
  });
  m.def("gradients", [](const df::Scope& s, const std::vector<df::Output>& ys, const std::vector<df::Output>& xs,
                        const std::vector<df::Output>& grad_ys) { return Value(df::Gradients(s, ys, xs, grad_ys)); });
  m.def("replica_device_setter", [](const py::dict& cluster, const std::string& worker_device,
                                    const std::string& ps_job) {
    return DeviceFn{df::ReplicaDeviceSetter(ClusterFromPython(cluster), worker_device, ps_job)};
  });

  m.def("cluster_spec", [](const py::dict& jobs) { return ClusterToPython(ClusterFromPython(jobs)); },
        "Validates a {job: [addresses] or {index: address}} dict; returns it as {job: {index: address}}.");

  py::class_<PySession>(m, "Session")
      .def(py::init([](const std::string& target, const py::dict& options) {
             auto s = std::make_unique<PySession>();
             s->session = std::make_unique<df::Session>(target, SessionOptionsFromPython(options));
             return s;
           }),
           py::arg("target") = "", py::arg("options") = py::dict())
      .def(
          "run",
          [](PySession& self, const std::vector<std::pair<df::Output, py::object>>& feeds,
             const std::vector<df::Output>& fetches, const std::vector<df::Operation>& targets, int64_t timeout_ms,
             bool trace) -> py::object {
            if (self.closed) Throw(absl::FailedPreconditionError("Attempted to use a closed Session."));
            df::FeedDict feed_dict = ToFeedDict(feeds);
            df::RunOptions options;
            options.timeout_ms = timeout_ms;
            df::StepStats stats;
            if (trace) options.trace = &stats;
            absl::StatusOr<std::vector<df::Tensor>> result;
            {
              py::gil_scoped_release release;
              result = self.session->Run(feed_dict, fetches, targets, options);
            }
            py::object values = ToNumpyList(std::move(result));
            if (!trace) return values;
            // The step's timeline (Chrome trace-event JSON) for RunMetadata.
            return py::make_tuple(values, py::bytes(df::ChromeTraceJson(stats)));
          },
          py::arg("feeds"), py::arg("fetches"), py::arg("targets"), py::arg("timeout_ms") = 0,
          py::arg("trace") = false)
      .def("close",
           [](PySession& self) {
             if (self.closed) return;
             self.closed = true;
             absl::Status s;
             {
               py::gil_scoped_release release;
               s = self.session->Close();
             }
             Check(s);
           })
      .def_property_readonly("closed", [](const PySession& s) { return s.closed; });

  py::class_<df::Server>(m, "Server")
      .def(py::init([](const py::dict& cluster, const std::string& job, int task, int status_port) {
             df::ServerOptions options;
             options.status_port = status_port;
             return Value(df::Server::Create(ClusterFromPython(cluster), job, task, options));
           }),
           py::arg("cluster"), py::arg("job_name"), py::arg("task_index"), py::arg("status_port") = -1)
      .def("start", [](df::Server& s) { Check(s.Start()); })
      .def("join", &df::Server::Join, py::call_guard<py::gil_scoped_release>())
      .def("stop", &df::Server::Stop, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("target", &df::Server::target)
      .def_property_readonly("task_name", &df::Server::task_name)
      .def_property_readonly("port", &df::Server::port)
      .def_property_readonly("cluster", [](const df::Server& s) { return ClusterToPython(s.cluster()); });
  m.def("local_cluster_spec", [](int num_ps, int num_workers) {
    return ClusterToPython(Value(df::MakeLocalClusterSpec(num_ps, num_workers)));
  });

  // ---- training: layers, optimizers, the monitored session -----------------
  py::module_ layers = m.def_submodule("layers", "TF-slim layers (C++ train/layers.h)");
  layers.def(
      "conv2d",
      [](const df::Scope& s, const df::Output& x, int64_t n, std::array<int64_t, 2> kernel, int64_t stride,
         const std::string& padding, bool relu, const std::string& name) {
        return Built(s, df::layers::conv2d(s, x, n, kernel, stride, padding,
                                           relu ? df::layers::kRelu : df::layers::kNoActivation, name));
      },
      py::arg("scope"), py::arg("x"), py::arg("num_outputs"), py::arg("kernel"), py::arg("stride") = 1,
      py::arg("padding") = "SAME", py::arg("relu") = true, py::arg("name") = "Conv");
  layers.def(
      "max_pool2d",
      [](const df::Scope& s, const df::Output& x, std::array<int64_t, 2> kernel, int64_t stride,
         const std::string& padding, const std::string& name) {
        return Built(s, df::layers::max_pool2d(s, x, kernel, stride, padding, name));
      },
      py::arg("scope"), py::arg("x"), py::arg("kernel"), py::arg("stride") = 2, py::arg("padding") = "VALID",
      py::arg("name") = "");
  layers.def(
      "flatten", [](const df::Scope& s, const df::Output& x, const std::string& name) {
        return Built(s, df::layers::flatten(s, x, name));
      },
      py::arg("scope"), py::arg("x"), py::arg("name") = "");
  layers.def(
      "fully_connected",
      [](const df::Scope& s, const df::Output& x, int64_t n, bool relu, const std::string& name) {
        return Built(s, df::layers::fully_connected(s, x, n, relu ? df::layers::kRelu : df::layers::kNoActivation,
                                                    name));
      },
      py::arg("scope"), py::arg("x"), py::arg("num_outputs"), py::arg("relu") = true,
      py::arg("name") = "fully_connected");

  // Optimizers: made from a name and its hyperparameters; minimize adds the
  // gradients and the update (and increments global_step, if given).
  py::class_<df::Optimizer>(m, "Optimizer")
      .def_static("create", &MakeOptimizer)
      .def("minimize", [](df::Optimizer& opt, const df::Scope& s, const df::Output& loss,
                          std::optional<df::Output> global_step) {
        return Value(opt.Minimize(s, loss, global_step ? &*global_step : nullptr));
      })
      .def("apply_gradients",
           [](df::Optimizer& opt, const df::Scope& s, const std::vector<std::pair<df::Output, df::Output>>& gv,
              std::optional<df::Output> global_step) {
             return Value(opt.ApplyGradients(s, gv, global_step ? &*global_step : nullptr));
           })
      .def("compute_gradients", [](df::Optimizer& opt, const df::Scope& s, const df::Output& loss) {
        return Value(opt.ComputeGradients(s, loss));
      });

  // Synchronous replicas around an optimizer made like the ones above; its
  // hook goes to MonitoredSession (sync_hooks).
  py::class_<df::SyncReplicasOptimizer>(m, "SyncReplicasOptimizer")
      .def_static("create",
                  [](const std::string& kind, const py::dict& hyper, int replicas_to_aggregate, int total_num_replicas,
                     int replica_id, double step_timeout_secs) {
                    df::SyncReplicasOptions o;
                    o.replicas_to_aggregate = replicas_to_aggregate;
                    o.total_num_replicas = total_num_replicas;
                    o.replica_id = replica_id;
                    o.step_timeout = absl::Seconds(step_timeout_secs);
                    return Value(df::SyncReplicasOptimizer::Create(MakeOptimizer(kind, hyper), o));
                  })
      .def("minimize", [](df::SyncReplicasOptimizer& opt, const df::Scope& s, const df::Output& loss,
                          std::optional<df::Output> global_step) {
        return Value(opt.Minimize(s, loss, global_step ? &*global_step : nullptr));
      })
      .def("apply_gradients",
           [](df::SyncReplicasOptimizer& opt, const df::Scope& s,
              const std::vector<std::pair<df::Output, df::Output>>& gv, std::optional<df::Output> global_step) {
             return Value(opt.ApplyGradients(s, gv, global_step ? &*global_step : nullptr));
           })
      .def("compute_gradients", [](df::SyncReplicasOptimizer& opt, const df::Scope& s, const df::Output& loss) {
        return Value(opt.ComputeGradients(s, loss));
      })
      .def_property_readonly("steps_applied",
                             [](const df::SyncReplicasOptimizer& o) { return o.stats().steps_applied.load(); })
      .def_property_readonly("stale_gradients_dropped", [](const df::SyncReplicasOptimizer& o) {
        return o.stats().stale_gradients_dropped.load();
      });

  py::class_<df::MonitoredSession>(m, "MonitoredSession")
      .def(py::init([](const df::Scope& scope, const std::string& target, bool is_chief, const std::string& logdir,
                       std::optional<df::Output> global_step, std::optional<df::Operation> init_op,
                       int64_t save_checkpoint_secs, std::vector<df::Output> coordination_vars, const py::dict& options,
                       const std::vector<std::pair<df::SyncReplicasOptimizer*, bool>>& sync_hooks,
                       std::vector<df::Output> local_variables, std::optional<df::Operation> local_init_op,
                       int64_t save_checkpoint_steps, int max_to_keep, std::optional<df::Output> summary_op,
                       int64_t save_summaries_steps, int64_t save_summaries_secs, int64_t log_step_count_steps) {
             df::SupervisorOptions o;
             if (summary_op) o.summary_op = *summary_op;
             o.save_summaries_steps = save_summaries_steps;
             o.save_summaries_secs = save_summaries_secs;
             o.log_step_count_steps = log_step_count_steps;
             o.local_variables = std::move(local_variables);
             if (local_init_op) o.local_init_op = *local_init_op;
             o.save_checkpoint_steps = save_checkpoint_steps;
             o.max_to_keep = max_to_keep;
             o.is_chief = is_chief;
             o.logdir = logdir;
             if (global_step) o.global_step = *global_step;
             if (init_op) o.init_op = *init_op;
             o.save_checkpoint_secs = save_checkpoint_secs;
             o.coordination_vars = std::move(coordination_vars);
             o.session_options = SessionOptionsFromPython(options);
             std::vector<std::unique_ptr<df::SessionRunHook>> hooks;
             for (const auto& [sync, is_chief_hook] : sync_hooks) hooks.push_back(sync->MakeSessionRunHook(is_chief_hook));
             absl::StatusOr<std::unique_ptr<df::MonitoredSession>> s;
             {
               py::gil_scoped_release release;
               s = df::MonitoredSession::Create(scope, target, o, std::move(hooks));
             }
             return Value(std::move(s));
           }),
           py::arg("scope"), py::arg("target"), py::arg("is_chief"), py::arg("logdir"), py::arg("global_step"),
           py::arg("init_op"), py::arg("save_checkpoint_secs"), py::arg("coordination_vars"), py::arg("options"),
           py::arg("sync_hooks") = std::vector<std::pair<df::SyncReplicasOptimizer*, bool>>{},
           py::arg("local_variables") = std::vector<df::Output>{}, py::arg("local_init_op") = std::nullopt,
           py::arg("save_checkpoint_steps") = 0, py::arg("max_to_keep") = 5, py::arg("summary_op") = std::nullopt,
           py::arg("save_summaries_steps") = 100, py::arg("save_summaries_secs") = 0,
           py::arg("log_step_count_steps") = 100,
           py::keep_alive<1, 11>())  // the optimizers outlive their hooks
      .def("run",
           [](df::MonitoredSession& self, const std::vector<std::pair<df::Output, py::object>>& feeds,
              const std::vector<df::Output>& fetches, const std::vector<df::Operation>& targets,
              bool trace) -> py::object {
             df::FeedDict feed_dict = ToFeedDict(feeds);
             df::RunOptions options;
             df::StepStats stats;
             if (trace) options.trace = &stats;
             absl::StatusOr<std::vector<df::Tensor>> result;
             {
               py::gil_scoped_release release;
               result = self.Run(feed_dict, fetches, targets, options);
             }
             py::object values = ToNumpyList(std::move(result));
             if (!trace) return values;
             return py::make_tuple(values, py::bytes(df::ChromeTraceJson(stats)));
           },
           py::arg("feeds"), py::arg("fetches"), py::arg("targets"), py::arg("trace") = false)
      .def("should_stop", &df::MonitoredSession::ShouldStop)
      .def("request_stop", &df::MonitoredSession::RequestStop)
      .def("close", [](df::MonitoredSession& self) {
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = self.Close();
        }
        Check(s);
      })
      .def_property_readonly("global_step", &df::MonitoredSession::global_step)
      .def_property_readonly("restored_from", &df::MonitoredSession::restored_from);

  m.def(
      "shutdown_cluster",
      [](const py::dict& cluster, const std::string& reason, const std::vector<std::string>& except) {
        df::ClusterSpec spec = ClusterFromPython(cluster);
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = df::ShutdownCluster(spec, reason, except);
        }
        Check(s);
      },
      py::arg("cluster"), py::arg("reason"), py::arg("except_tasks") = std::vector<std::string>());

  // Checkpoints: each task holding variables writes its own shard.
  py::class_<df::Saver>(m, "Saver")
      .def(py::init([](const df::Scope& scope, const std::vector<df::Output>& var_list, int max_to_keep,
                       const std::string& basename, const std::vector<df::Output>& exclude) {
             df::SaverOptions o;
             o.var_list = var_list;
             o.exclude = exclude;
             o.max_to_keep = max_to_keep;
             o.basename = basename;
             return Value(df::Saver::Create(scope, o));
           }),
           py::arg("scope"), py::arg("var_list"), py::arg("max_to_keep"), py::arg("basename"),
           py::arg("exclude") = std::vector<df::Output>{})
      .def("save",
           [](df::Saver& self, PySession& sess, const std::string& logdir, std::optional<int64_t> step) {
             if (sess.closed) Throw(absl::FailedPreconditionError("Attempted to use a closed Session."));
             absl::StatusOr<std::string> prefix;
             {
               py::gil_scoped_release release;
               prefix = step ? self.Save(sess.session.get(), logdir, *step)
                             : self.SaveUnnumbered(sess.session.get(), logdir);
             }
             return Value(std::move(prefix));
           })
      .def("restore", [](df::Saver& self, PySession& sess, const std::string& prefix) {
        if (sess.closed) Throw(absl::FailedPreconditionError("Attempted to use a closed Session."));
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = self.Restore(sess.session.get(), prefix);
        }
        Check(s);
      })
      // The same through a monitored session (a Supervisor's saver.save(sess, ...)).
      .def("save",
           [](df::Saver& self, df::MonitoredSession& sess, const std::string& logdir, std::optional<int64_t> step) {
             absl::StatusOr<std::string> prefix;
             {
               py::gil_scoped_release release;
               prefix = step ? self.Save(sess.raw_session(), logdir, *step)
                             : self.SaveUnnumbered(sess.raw_session(), logdir);
             }
             return Value(std::move(prefix));
           })
      .def("restore", [](df::Saver& self, df::MonitoredSession& sess, const std::string& prefix) {
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = self.Restore(sess.raw_session(), prefix);
        }
        Check(s);
      });
  m.def("latest_checkpoint", [](const std::string& logdir) -> py::object {
    absl::StatusOr<std::string> p = df::LatestCheckpoint(logdir);
    if (absl::IsNotFound(p.status())) return py::none();
    return py::str(Value(std::move(p)));
  });

  RegisterSummaryBindings(m);
}
