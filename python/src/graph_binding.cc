// The graph-building half of distflow._distflow: dtypes, operations and
// outputs, scopes (name, device and control-dependency stacks), the op
// registry, add_op, variables, gradients and device functions.
#include "conversions.h"
#include "distflow/function.h"
#include "distflow/graph_io.h"

namespace distflow_py {
namespace {

// A key naming the graph an Output or Operation belongs to.
std::uintptr_t GraphKey(const df::Operation& op) { return reinterpret_cast<std::uintptr_t>(op.graph_state().get()); }

df::Operation AddOp(const df::Scope& scope, const std::string& op_type, const std::vector<df::Output>& inputs,
                    const py::dict& attrs) {
  df::OpInfo info = Value(df::LookUpOp(op_type));
  df::ops::Attrs converted;
  for (auto [key, value] : attrs) {
    std::string name = py::str(key).cast<std::string>();
    if (name == "_class") {  // TensorFlow's colocation classes ("loc:@node"), on any op
      converted.emplace_back(name, df::ops::Attr(value.cast<std::vector<std::string>>()));
      continue;
    }
    const df::OpAttrInfo* a = nullptr;
    for (const df::OpAttrInfo& candidate : info.attrs) {
      if (candidate.name == name) a = &candidate;
    }
    if (a == nullptr) {
      std::string known;
      for (const df::OpAttrInfo& candidate : info.attrs) known += (known.empty() ? "" : ", ") + candidate.name;
      Throw(absl::InvalidArgumentError(op_type + " has no attribute '" + name +
                                       "' (it has: " + (known.empty() ? "none" : known) + ")"));
    }
    converted.emplace_back(name, AttrFromPython(op_type, *a, value));
  }
  return Built(scope, df::ops::Raw(scope, op_type, inputs, converted));
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

}  // namespace

void BindGraph(py::module_& m) {
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
  py::class_<DeviceFn>(m, "DeviceFunction").def("__call__", [](const DeviceFn& f, const df::NodeInfo& n) {
    return f.fn(n);
  });

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
      .def("check", [](const df::Scope& s) { CheckScope(s); })
      .def_property_readonly("num_nodes", &df::Scope::num_nodes)
      .def("find_operation",
           [](const df::Scope& s, const std::string& name) -> std::optional<df::Operation> {
             df::Operation op = s.FindOperation(name);
             if (!op.ok()) return std::nullopt;
             return op;
           })
      .def_property_readonly("graph_key",
                             [](const df::Scope& s) { return reinterpret_cast<std::uintptr_t>(s.graph_state().get()); })
      .def("set_graph_seed", &df::Scope::SetGraphSeed)
      .def("initializers", &df::Scope::Initializers)
      .def("trainable_variables", &df::Scope::TrainableVariables);

  m.def("registered_ops", [] {
    py::list out;
    for (const df::OpInfo& op : df::RegisteredOps()) out.append(OpInfoToPython(op));
    return out;
  });
  m.def(
      "import_graph_def",
      [](const df::Scope& s, const py::bytes& graph_def, const std::string& prefix, bool clear_devices) {
        return ScopeValue(s, df::ImportGraph(s, std::string(graph_def), prefix, clear_devices));
      },
      py::arg("scope"), py::arg("graph_def"), py::arg("prefix") = "", py::arg("clear_devices") = false);
  m.def("graph_def", [](const df::Scope& s) { return py::bytes(df::SerializeGraph(s)); });
  m.def("add_initializer", [](const df::Scope& s, const df::Operation& op) { s.AddInitializer(op); });
  m.def("add_trainable_variable", [](const df::Scope& s, const df::Output& v) { s.AddTrainableVariable(v); });
  m.def("add_op", &AddOp, py::arg("scope"), py::arg("op_type"), py::arg("inputs"), py::arg("attrs"));
  m.def(
      "make_variable",
      [](const df::Scope& s, const df::Output& initial, bool trainable) {
        df::ops::VariableOptions o;
        o.trainable = trainable;
        return Built(s, df::ops::MakeVariable(s, initial, o));
      },
      py::arg("scope"), py::arg("initial"), py::arg("trainable") = true);
  m.def("global_variables_initializer",
        [](const df::Scope& s) { return Built(s, df::ops::GlobalVariablesInitializer(s)); });
  m.def("gradients",
        [](const df::Scope& s, const std::vector<df::Output>& ys, const std::vector<df::Output>& xs,
           const std::vector<df::Output>& grad_ys) { return ScopeValue(s, df::Gradients(s, ys, xs, grad_ys)); });
  // IndexedSlices gradients (distflow/gradients.h): the parts of a marked
  // gradient as (values, indices, num_rows), None for a dense one; and the
  // marked dense form of given parts.
  m.def("as_indexed_slices", [](const df::Output& g) -> py::object {
    df::IndexedSlices s;
    if (!df::AsIndexedSlices(g, &s)) return py::none();
    return py::make_tuple(s.values, s.indices, s.num_rows);
  });
  m.def("indexed_slices_gradient",
        [](const df::Scope& s, const df::Output& values, const df::Output& indices, const df::Output& num_rows) {
          return Built(s, df::IndexedSlicesGradient(s, {values, indices, num_rows}));
        });
  // Graph functions: the serialized FunctionDef of a body graph, as bytes.
  m.def("make_function_def", [](const df::Scope& body, const std::string& name, const std::vector<df::Output>& args,
                                const std::vector<df::Output>& rets) {
    return py::bytes(ScopeValue(body, df::MakeFunctionDef(body, name, args, rets)));
  });
  m.def("make_gradient_function_def",
        [](const py::bytes& f) { return py::bytes(Value(df::MakeGradientFunctionDef(std::string(f)))); });
  m.def("replica_device_setter",
        [](const py::dict& cluster, const std::string& worker_device, const std::string& ps_job) {
          return DeviceFn{df::ReplicaDeviceSetter(ClusterFromPython(cluster), worker_device, ps_job)};
        });
}

}  // namespace distflow_py
