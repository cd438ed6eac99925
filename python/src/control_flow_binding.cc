// tf.cond and tf.while_loop's half in C++: ops::Cond and ops::WhileLoop
// (distflow/control_flow.h) with Python functions as branches, condition and
// body, and CaptureIntoLoop for the tensors a body reads from outside. The
// Python side (distflow/control_flow_ops.py) flattens structures and keeps
// the capture maps; here a Python exception raised by a branch or body ends
// the C++ call and is raised again, as it was, to the caller.
#include <exception>

#include "conversions.h"
#include "distflow/control_flow.h"

namespace distflow_py {
namespace {

// A Python function that C++ may keep (a loop's body, for Gradients) and
// drop on any thread: it is released under the GIL.
std::shared_ptr<py::function> Keep(py::function f) {
  return std::shared_ptr<py::function>(new py::function(std::move(f)), [](py::function* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

// The first exception a callback raised, to rethrow once C++ has returned.
using Raised = std::shared_ptr<std::exception_ptr>;

absl::Status Caught(const Raised& raised) {
  *raised = std::current_exception();
  return absl::InvalidArgumentError("a Python control-flow function raised an exception");
}

std::vector<df::Output> Outputs(const py::object& r) { return r.cast<std::vector<df::Output>>(); }

// A failed build leaves the scope usable (see ScopeValue).
template <typename T>
T Finish(const df::Scope& s, absl::StatusOr<T> r, const Raised& raised) {
  if (*raised) {
    (void)df::TakeScopeStatus(s);
    std::rethrow_exception(*raised);
  }
  return ScopeValue(s, std::move(r));
}

}  // namespace

void BindControlFlow(py::module_& m) {
  m.def("cond", [](const df::Scope& s, const df::Output& pred, py::function true_fn, py::function false_fn) {
    Raised raised = std::make_shared<std::exception_ptr>();
    auto branch = [raised](std::shared_ptr<py::function> f) {
      return
          [f, raised](const df::Scope& b, const std::vector<df::Output>&) -> absl::StatusOr<std::vector<df::Output>> {
            py::gil_scoped_acquire gil;
            try {
              return Outputs((*f)(b));
            } catch (...) {
              return Caught(raised);
            }
          };
    };
    return Finish(s, df::ops::Cond(s, pred, {}, branch(Keep(true_fn)), branch(Keep(false_fn))), raised);
  });
  m.def(
      "while_loop",
      [](const df::Scope& s, const std::vector<df::Output>& vars, py::function cond, py::function body,
         const py::object& shape_invariants, int64_t maximum_iterations, int parallel_iterations, bool back_prop,
         const std::string& name, const py::object& history_not_needed, const std::vector<bool>& shape_varies) {
        Raised raised = std::make_shared<std::exception_ptr>();
        df::ops::WhileOptions o;
        o.name = name;
        o.parallel_iterations = parallel_iterations;
        o.maximum_iterations = maximum_iterations;
        o.back_prop = back_prop;
        if (!shape_invariants.is_none()) {
          for (py::handle h : shape_invariants) o.shape_invariants.push_back(ShapeFromPython(h));
        }
        o.shape_varies = shape_varies;
        if (!history_not_needed.is_none()) {
          // Called once, while this call holds the GIL, after the body is built.
          py::function f = history_not_needed.cast<py::function>();
          o.history_not_needed = [f](int var) {
            py::gil_scoped_acquire gil;
            return f(var).cast<bool>();
          };
        }
        auto c = Keep(std::move(cond));
        auto b = Keep(std::move(body));
        // The body outlives this call (Gradients rebuilds it): it keeps `raised` too.
        auto cond_fn = [c, raised](const df::Scope& sc,
                                   const std::vector<df::Output>& v) -> absl::StatusOr<df::Output> {
          py::gil_scoped_acquire gil;
          try {
            return (*c)(sc, v).cast<df::Output>();
          } catch (...) {
            return Caught(raised);
          }
        };
        auto body_fn = [b, raised](const df::Scope& sc,
                                   const std::vector<df::Output>& v) -> absl::StatusOr<std::vector<df::Output>> {
          py::gil_scoped_acquire gil;
          try {
            return Outputs((*b)(sc, v));
          } catch (...) {
            *raised = std::current_exception();
            // Rebuilt by Gradients: the error reaches Python as a status.
            try {
              throw;
            } catch (const StatusError& e) {
              return e.status;
            } catch (const py::error_already_set& e) {
              return absl::InvalidArgumentError(std::string("the while_loop body raised: ") + e.what());
            } catch (...) {
              return absl::InvalidArgumentError("the while_loop body raised an exception");
            }
          }
        };
        return Finish(s, df::ops::WhileLoop(s, vars, cond_fn, body_fn, o), raised);
      },
      py::arg("scope"), py::arg("loop_vars"), py::arg("cond"), py::arg("body"), py::arg("shape_invariants"),
      py::arg("maximum_iterations"), py::arg("parallel_iterations"), py::arg("back_prop"), py::arg("name"),
      py::arg("history_not_needed") = py::none(), py::arg("shape_varies") = std::vector<bool>());
  m.def("capture_into_loop",
        [](const df::Scope& s, const df::Output& x) { return ScopeValue(s, df::ops::CaptureIntoLoop(s, x)); });
}

}  // namespace distflow_py
