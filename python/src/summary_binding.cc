// The event-file writer for tf.summary.FileWriter (distflow/summary.py):
// distflow._distflow.EventWriter over the C++ EventWriter
// (distflow/train/event_writer.h). Summaries cross as the serialized bytes
// sess.run returns, so nothing is parsed twice. The GIL is released while
// the file is written.
#include <pybind11/pybind11.h>

#include <string>

#include "distflow/scope.h"
#include "distflow/train/event_writer.h"

namespace py = pybind11;
namespace df = distflow;

namespace {

// Raises the Python exception of the status's code: the classes
// distflow._distflow defines (each has error_code) before this runs.
[[noreturn]] void Raise(const py::module_& m, const absl::Status& s) {
  py::object cls = m.attr("UnknownError");
  for (py::handle name : py::list(m.attr("__dict__").attr("keys")())) {
    py::object candidate = m.attr(name);
    if (py::hasattr(candidate, "error_code") &&
        candidate.attr("error_code").cast<int>() == static_cast<int>(s.code())) {
      cls = candidate;
      break;
    }
  }
  PyErr_SetString(cls.ptr(), std::string(s.message()).c_str());
  throw py::error_already_set();
}

}  // namespace

void RegisterSummaryBindings(py::module_& m) {
  auto check = [m](const absl::Status& s) {
    if (!s.ok()) Raise(m, s);
  };
  py::class_<df::EventWriter>(m, "EventWriter")
      .def(py::init([m](const std::string& logdir, const std::string& suffix, int max_queue, double flush_secs) {
             df::EventWriterOptions o{
                 .filename_suffix = suffix, .max_queue = max_queue, .flush_every = absl::Seconds(flush_secs)};
             absl::StatusOr<std::unique_ptr<df::EventWriter>> w;
             {
               py::gil_scoped_release release;
               w = df::EventWriter::Open(logdir, o);
             }
             if (!w.ok()) Raise(m, w.status());
             return std::move(*w);
           }),
           py::arg("logdir"), py::arg("filename_suffix") = "", py::arg("max_queue") = 10, py::arg("flush_secs") = 120.0)
      .def_property_readonly("path", &df::EventWriter::path)
      .def_property_readonly("logdir", &df::EventWriter::logdir)
      .def("write_event",
           [check](df::EventWriter& w, const py::bytes& event) {
             std::string e = event;
             absl::Status s;
             {
               py::gil_scoped_release release;
               s = w.WriteEvent(e);
             }
             check(s);
           })
      .def(
          "write_summary",
          [check](df::EventWriter& w, int64_t step, const py::bytes& summary, double wall_time) {
            std::string bytes = summary;
            absl::Status s;
            {
              py::gil_scoped_release release;
              s = w.WriteSummary(step, bytes, wall_time);
            }
            check(s);
          },
          py::arg("step"), py::arg("summary"), py::arg("wall_time") = -1.0)
      .def(
          "write_scalar",
          [check](df::EventWriter& w, int64_t step, const std::string& tag, float value) {
            check(w.WriteScalar(step, tag, value));
          },
          py::arg("step"), py::arg("tag"), py::arg("value"))
      .def(
          "write_graph",
          [check](df::EventWriter& w, const df::Scope& scope, int64_t step) { check(w.WriteGraph(scope, step)); },
          py::arg("scope"), py::arg("step") = 0)
      .def("write_run_metadata",
           [check](df::EventWriter& w, int64_t step, const std::string& tag, const py::bytes& run_metadata) {
             check(w.WriteRunMetadata(step, tag, std::string(run_metadata)));
           })
      .def("flush",
           [check](df::EventWriter& w) {
             absl::Status s;
             {
               py::gil_scoped_release release;
               s = w.Flush();
             }
             check(s);
           })
      .def("close", [check](df::EventWriter& w) {
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = w.Close();
        }
        check(s);
      });
}
