// Conversions at the boundary of the Python binding (numpy <-> Tensor,
// Python values <-> attributes and options, absl::Status -> the Python
// exception of its code) and the small types the per-area binding files
// share (binding.cc, graph_binding.cc, session_binding.cc,
// train_binding.cc). Header-only: every function is inline, and the lent
// arrays and error classes are one instance per extension.
#pragma once
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
#include "distflow/scope_status.h"
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

namespace distflow_py {

// ---- errors --------------------------------------------------------------

// One Python exception class per status code, created at import
// (distflow.errors re-exports them with TensorFlow's names).
inline std::map<absl::StatusCode, py::object>& ErrorClasses() {
  static auto* classes = new std::map<absl::StatusCode, py::object>();
  return *classes;
}

struct StatusError {
  absl::Status status;
};

[[noreturn]] inline void Throw(const absl::Status& s) { throw StatusError{s}; }
inline void Check(const absl::Status& s) {
  if (!s.ok()) Throw(s);
}
template <typename T>
inline T Value(absl::StatusOr<T> v) {
  if (!v.ok()) Throw(v.status());
  return std::move(*v);
}

// Graph building. A failed op leaves its error in the scope's graph, where
// it would fail every later op (distflow/scope.h); Python raises it instead,
// once, and takes it out of the graph, so a program that catches the
// exception goes on building in the same graph, as in TensorFlow 1
// (distflow/scope_status.h).

// Raises the error building left in `s`, if any.
inline void CheckScope(const df::Scope& s) {
  if (absl::Status st = df::TakeScopeStatus(s); !st.ok()) Throw(st);
}
// `v`'s value; if building failed, raises `v`'s error (or the scope's)
// with the scope cleared.
template <typename T>
inline T ScopeValue(const df::Scope& s, absl::StatusOr<T> v) {
  absl::Status recorded = df::TakeScopeStatus(s);
  if (!v.ok()) Throw(v.status());
  if (!recorded.ok()) Throw(recorded);
  return std::move(*v);
}

// ---- dtypes and numpy ------------------------------------------------------

inline py::dtype NumpyDtype(df::DataType dt) {
  switch (dt) {
    case df::DT_FLOAT:
      return py::dtype::of<float>();
    case df::DT_DOUBLE:
      return py::dtype::of<double>();
    case df::DT_INT32:
      return py::dtype::of<int32_t>();
    case df::DT_INT64:
      return py::dtype::of<int64_t>();
    case df::DT_UINT8:
      return py::dtype::of<uint8_t>();
    case df::DT_BOOL:
      return py::dtype::of<bool>();
    default:
      return py::dtype("O");
  }
}

// The array shares the tensor's buffer; the capsule keeps the tensor alive.
inline py::object TensorToNumpy(const df::Tensor& t) {
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
inline df::Tensor NumpyToTensor(const py::handle& value, df::DataType dtype, bool borrow = false) {
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

inline py::object ShapeToPython(const df::PartialShape& s) {
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

inline df::PartialShape ShapeFromPython(const py::handle& h) {
  if (h.is_none()) return df::PartialShape();
  std::vector<int64_t> dims;
  for (py::handle d : h) dims.push_back(d.is_none() ? -1 : d.cast<int64_t>());
  return df::PartialShape(absl::MakeConstSpan(dims));
}

// ---- attributes ------------------------------------------------------------

inline df::DataType DtypeFromPython(const py::handle& h) {
  if (py::isinstance<df::DataType>(h)) return h.cast<df::DataType>();
  if (py::hasattr(h, "_distflow_dtype")) return h.attr("_distflow_dtype").cast<df::DataType>();
  throw py::type_error("expected a dtype, got " + py::repr(h).cast<std::string>());
}

inline df::ops::Attr AttrFromPython(const std::string& op, const df::OpAttrInfo& info, const py::handle& v) {
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

inline df::ClusterSpec ClusterFromPython(const py::dict& jobs) {
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

inline py::dict ClusterToPython(const df::ClusterSpec& spec) {
  py::dict out;
  for (const auto& [job, tasks] : spec.job_map()) {
    py::dict t;
    for (const auto& [index, address] : tasks) t[py::int_(index)] = address;
    out[py::str(job)] = t;
  }
  return out;
}

inline df::SessionOptions SessionOptionsFromPython(const py::dict& o) {
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
inline df::FeedDict ToFeedDict(const std::vector<std::pair<df::Output, py::object>>& feeds, bool lend = true) {
  LentArrays::Get().Drain();
  df::FeedDict feed_dict;
  for (const auto& [out, value] : feeds) feed_dict.emplace_back(out, NumpyToTensor(value, out.dtype(), lend));
  return feed_dict;
}

// A step's result as numpy arrays, or its status raised.
inline py::list ToNumpyList(absl::StatusOr<std::vector<df::Tensor>> result) {
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

// Checks what a C++ builder left in the scope (see CheckScope).
template <typename T>
inline T Built(const df::Scope& s, T out) {
  CheckScope(s);
  return out;
}

}  // namespace distflow_py
