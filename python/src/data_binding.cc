// TFRecord files for tf.python_io (distflow/python_io.py):
// distflow._distflow.TFRecordWriter and TFRecordIterator over the C++
// classes of distflow/data/tfrecord.h. The GIL is released while files are
// read and written; records cross as bytes.
#include <pybind11/pybind11.h>

#include <string>

#include "conversions.h"
#include "distflow/data/tfrecord.h"

namespace py = pybind11;
namespace df = distflow;

using distflow_py::Throw;
using distflow_py::Value;

void RegisterDataBindings(py::module_& m) {
  py::class_<df::data::TFRecordWriter>(m, "TFRecordWriter")
      .def(py::init([](const std::string& path, const std::string& compression) {
             return Value(df::data::TFRecordWriter::Open(path, compression));
           }),
           py::arg("path"), py::arg("compression") = "")
      .def("write",
           [](df::data::TFRecordWriter& w, const py::bytes& record) {
             std::string r = record;
             py::gil_scoped_release release;
             absl::Status s = w.Write(r);
             if (!s.ok()) Throw(s);
           })
      .def("flush",
           [](df::data::TFRecordWriter& w) {
             py::gil_scoped_release release;
             absl::Status s = w.Flush();
             if (!s.ok()) Throw(s);
           })
      .def("close", [](df::data::TFRecordWriter& w) {
        py::gil_scoped_release release;
        absl::Status s = w.Close();
        if (!s.ok()) Throw(s);
      });
  py::class_<df::data::TFRecordIterator>(m, "TFRecordIterator")
      .def(py::init([](const std::string& path, const std::string& compression) {
             return Value(df::data::TFRecordIterator::Open(path, compression));
           }),
           py::arg("path"), py::arg("compression") = "")
      // The next record as bytes, or None after the last.
      .def("next", [](df::data::TFRecordIterator& it) -> py::object {
        std::string record;
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = it.Next(&record);
        }
        if (absl::IsOutOfRange(s)) return py::none();
        if (!s.ok()) Throw(s);
        return py::bytes(record);
      });
}
