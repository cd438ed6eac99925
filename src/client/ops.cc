#include "distflow/ops.h"

#include <algorithm>
#include <type_traits>
#include <variant>

#include "client/graph_state.h"
#include "graph/attr_value.h"

namespace distflow {
namespace ops {
namespace {

// Outputs keep their scope (minus an explicit op name) for operators like a + b.
Output Out(const Scope& s, const Operation& op, int i = 0) { return Output(op, i, s.WithOpName("")); }

// Helper constants (shapes, axes) must not take the op name meant for the op itself.
Scope Aux(const Scope& s) { return s.WithOpName(""); }

Output Build(const Scope& s, const std::string& op, const std::vector<Output>& inputs,
             const std::function<void(proto::NodeDef*)>& attrs = nullptr) {
  return Out(s, Raw(s, op, inputs, attrs));
}

Output IntVector(const Scope& s, const std::vector<int64_t>& v) {
  return Const(Aux(s), Tensor::FromVector<int64_t>(v));
}

Output Int32Vector(const Scope& s, const std::vector<int>& v) {
  std::vector<int32_t> w(v.begin(), v.end());
  return Const(Aux(s), Tensor::FromVector<int32_t>(w));
}

void SetSeeds(const Scope& s, proto::NodeDef* n, int64_t seed) {
  GraphState& g = *s.graph_state();
  absl::MutexLock lock(&g.mu);
  if (seed != 0) {
    SetAttrInt(n, "seed", g.graph_seed != 0 ? g.graph_seed : seed);
    SetAttrInt(n, "seed2", seed);
  } else if (g.graph_seed != 0) {
    SetAttrInt(n, "seed", g.graph_seed);
    SetAttrInt(n, "seed2", g.next_op_seed++);
  }
}

Output RandomOp(const Scope& s, const std::string& op, const std::vector<int64_t>& shape, DataType dtype,
                int64_t seed) {
  Output sh = IntVector(s, shape);
  return Build(s, op, {sh}, [&](proto::NodeDef* n) {
    SetAttrType(n, "dtype", dtype);
    SetSeeds(s, n, seed);
  });
}

}  // namespace

Operation Raw(const Scope& s, const std::string& op, const std::vector<Output>& inputs,
              const std::function<void(proto::NodeDef*)>& attrs) {
  proto::NodeDef def;
  def.set_op(op);
  if (attrs) attrs(&def);
  return s.AddNode(std::move(def), inputs);
}

Operation Raw(const Scope& s, const std::string& op, const std::vector<Output>& inputs, const Attrs& attrs) {
  return Raw(s, op, inputs, [&attrs](proto::NodeDef* n) {
    for (const auto& [name, attr] : attrs) {
      std::visit(
          [n, &name = name](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, int64_t>)
              SetAttrInt(n, name, v);
            else if constexpr (std::is_same_v<T, double>)
              SetAttrFloat(n, name, v);
            else if constexpr (std::is_same_v<T, bool>)
              SetAttrBool(n, name, v);
            else if constexpr (std::is_same_v<T, std::string>)
              SetAttrString(n, name, v);
            else if constexpr (std::is_same_v<T, DataType>)
              SetAttrType(n, name, v);
            else if constexpr (std::is_same_v<T, PartialShape>)
              SetAttrShape(n, name, v);
            else if constexpr (std::is_same_v<T, Tensor>)
              SetAttrTensor(n, name, v);
            else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
              SetAttrIntList(n, name, v);
            else if constexpr (std::is_same_v<T, std::vector<double>>)
              SetAttrFloatList(n, name, v);
            else if constexpr (std::is_same_v<T, std::vector<DataType>>)
              SetAttrTypeList(n, name, v);
            else
              SetAttrStringList(n, name, v);
          },
          attr.value());
    }
  });
}

Output Const(const Scope& s, const Tensor& value) {
  return Build(s, "Const", {}, [&](proto::NodeDef* n) {
    SetAttrTensor(n, "value", value);
    SetAttrType(n, "dtype", value.dtype());
  });
}
Output Const(const Scope& s, float v) { return Const(s, Tensor::Scalar<float>(v)); }
Output Const(const Scope& s, double v) { return Const(s, Tensor::Scalar<double>(v)); }
Output Const(const Scope& s, int v) { return Const(s, Tensor::Scalar<int32_t>(v)); }
Output Const(const Scope& s, int64_t v) { return Const(s, Tensor::Scalar<int64_t>(v)); }
Output Const(const Scope& s, bool v) { return Const(s, Tensor::Scalar<bool>(v)); }
Output Const(const Scope& s, const std::string& v) { return Const(s, Tensor::Scalar<std::string>(v)); }
Output Const(const Scope& s, const char* v) { return Const(s, std::string(v)); }
Output Const(const Scope& s, std::initializer_list<float> v, const TensorShape& shape) {
  if (static_cast<int64_t>(v.size()) != shape.num_elements()) {
    s.UpdateStatus(
        absl::InvalidArgumentError(absl::StrCat("Const: ", v.size(), " values for shape ", shape.DebugString())));
    return Output();
  }
  return Const(s, Tensor::FromVector<float>(std::vector<float>(v), shape));
}
Output Const(const Scope& s, std::initializer_list<int> v) {
  return Const(s, Tensor::FromVector<int32_t>(std::vector<int32_t>(v.begin(), v.end())));
}

Output Placeholder(const Scope& s, DataType dtype, const PartialShape& shape) {
  return Build(s, "Placeholder", {}, [&](proto::NodeDef* n) {
    SetAttrType(n, "dtype", dtype);
    SetAttrShape(n, "shape", shape);
  });
}
Output PlaceholderWithDefault(const Scope& s, const Output& def, const PartialShape& shape) {
  return Build(s, "PlaceholderWithDefault", {def}, [&](proto::NodeDef* n) { SetAttrShape(n, "shape", shape); });
}
Output Identity(const Scope& s, const Output& x) { return Build(s, "Identity", {x}); }
Output StopGradient(const Scope& s, const Output& x) { return Build(s, "StopGradient", {x}); }
Operation NoOp(const Scope& s) { return Raw(s, "NoOp", {}); }
Operation Group(const Scope& s, const std::vector<Operation>& deps) { return NoOp(s.WithControlDependencies(deps)); }

Output Variable(const Scope& s, const PartialShape& shape, DataType dtype, const VariableOptions& options) {
  Output v = Build(s, "Variable", {}, [&](proto::NodeDef* n) {
    SetAttrShape(n, "shape", shape);
    SetAttrType(n, "dtype", dtype);
    if (!options.container.empty()) SetAttrString(n, "container", options.container);
    if (!options.shared_name.empty()) SetAttrString(n, "shared_name", options.shared_name);
  });
  if (v.ok() && options.local) {
    absl::MutexLock lock(&s.graph_state()->mu);
    s.graph_state()->local_variables.push_back(v.node());
  }
  return v;
}
Output MakeVariable(const Scope& s, const Output& initial, const VariableOptions& options) {
  if (!initial.ok()) {
    s.UpdateStatus(absl::InvalidArgumentError("MakeVariable: the initial value is invalid"));
    return Output();
  }
  Output v = Variable(s, initial.shape(), initial.dtype(), options);
  if (!v.ok()) return v;
  Scope init_scope = s.WithFullOpName(v.op().name() + "/Assign").WithNoControlDependencies();
  Output a = Assign(init_scope, v, initial);
  if (!a.ok()) return Output();  // not listed: a graph that goes on building never sees it
  s.AddInitializer(a.op());
  if (options.trainable && !options.local) s.AddTrainableVariable(v);
  return v;
}
Output Assign(const Scope& s, const Output& ref, const Output& value, bool validate_shape) {
  return Build(s, "Assign", {ref, value}, [&](proto::NodeDef* n) { SetAttrBool(n, "validate_shape", validate_shape); });
}
Output AssignAdd(const Scope& s, const Output& ref, const Output& value) { return Build(s, "AssignAdd", {ref, value}); }
Output AssignSub(const Scope& s, const Output& ref, const Output& value) { return Build(s, "AssignSub", {ref, value}); }
Output IsVariableInitialized(const Scope& s, const Output& ref) { return Build(s, "IsVariableInitialized", {ref}); }
namespace {
// The initializers of the local variables (`local`) or of the others.
std::vector<Operation> InitializersOf(const Scope& s, bool local) {
  std::vector<const Node*> locals;
  {
    absl::MutexLock lock(&s.graph_state()->mu);
    locals = s.graph_state()->local_variables;
  }
  std::vector<Operation> out;
  for (const Operation& init : s.Initializers()) {
    const Node* target = init.node()->num_inputs() > 0 ? init.node()->input(0).node : nullptr;
    const bool is_local = std::find(locals.begin(), locals.end(), target) != locals.end();
    if (is_local == local) out.push_back(init);
  }
  return out;
}
}  // namespace

Operation GlobalVariablesInitializer(const Scope& s) {
  return Group(s.WithOpName(s.GetUniqueName("init")), InitializersOf(s, /*local=*/false));
}
std::vector<Output> LocalVariables(const Scope& s) {
  std::vector<const Node*> locals;
  {
    absl::MutexLock lock(&s.graph_state()->mu);
    locals = s.graph_state()->local_variables;
  }
  std::vector<Output> out;
  for (const Node* n : locals) out.emplace_back(Operation(n, s.graph_state()), 0, s.WithOpName(""));
  return out;
}
Operation LocalVariablesInitializer(const Scope& s) {
  return Group(s.WithFullOpName(s.GetUniqueName("local_init")), InitializersOf(s, /*local=*/true));
}

#define DF_BINARY(NAME) \
  Output NAME(const Scope& s, const Output& a, const Output& b) { return Build(s, #NAME, {a, b}); }
DF_BINARY(Add)
DF_BINARY(Sub)
DF_BINARY(Mul)
DF_BINARY(Div)
DF_BINARY(Pow)
DF_BINARY(Maximum)
DF_BINARY(Minimum)
DF_BINARY(Equal)
DF_BINARY(NotEqual)
DF_BINARY(Less)
DF_BINARY(Greater)
DF_BINARY(LogicalAnd)
#undef DF_BINARY
#define DF_UNARY(NAME) \
  Output NAME(const Scope& s, const Output& x) { return Build(s, #NAME, {x}); }
DF_UNARY(LogicalNot)
DF_UNARY(Neg)
DF_UNARY(Square)
DF_UNARY(Sqrt)
DF_UNARY(Rsqrt)
DF_UNARY(Exp)
DF_UNARY(Log)
DF_UNARY(Shape)
DF_UNARY(Size)
DF_UNARY(Rank)
DF_UNARY(ZerosLike)
DF_UNARY(OnesLike)
#undef DF_UNARY

Output AddN(const Scope& s, const std::vector<Output>& xs) { return Build(s, "AddN", xs); }
Output Cast(const Scope& s, const Output& x, DataType dtype) {
  return Build(s, "Cast", {x}, [&](proto::NodeDef* n) { SetAttrType(n, "DstT", dtype); });
}
Output Select(const Scope& s, const Output& c, const Output& t, const Output& e) {
  return Build(s, "Select", {c, t, e});
}
Output MatMul(const Scope& s, const Output& a, const Output& b, bool transpose_a, bool transpose_b) {
  return Build(s, "MatMul", {a, b}, [&](proto::NodeDef* n) {
    SetAttrBool(n, "transpose_a", transpose_a);
    SetAttrBool(n, "transpose_b", transpose_b);
  });
}

#define DF_REDUCE(NAME)                                                                                  \
  Output NAME(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims) {           \
    Output ax = Int32Vector(s, axes);                                                                    \
    return Build(s, #NAME, {x, ax}, [&](proto::NodeDef* n) { SetAttrBool(n, "keep_dims", keep_dims); }); \
  }
DF_REDUCE(Sum)
DF_REDUCE(Mean)
DF_REDUCE(Max)
DF_REDUCE(Min)
DF_REDUCE(Prod)
#undef DF_REDUCE
Output ArgMax(const Scope& s, const Output& x, int axis) { return Build(s, "ArgMax", {x, Const(Aux(s), axis)}); }
Output ArgMin(const Scope& s, const Output& x, int axis) { return Build(s, "ArgMin", {x, Const(Aux(s), axis)}); }

Output Reshape(const Scope& s, const Output& x, const std::vector<int64_t>& shape) {
  return Reshape(s, x, IntVector(s, shape));
}
Output Reshape(const Scope& s, const Output& x, const Output& shape) { return Build(s, "Reshape", {x, shape}); }
Output Fill(const Scope& s, const std::vector<int64_t>& dims, const Output& value) {
  return Build(s, "Fill", {IntVector(s, dims), value});
}
Output Concat(const Scope& s, const std::vector<Output>& values, int axis) {
  std::vector<Output> in = values;
  in.push_back(Const(Aux(s), axis));
  return Build(s, "Concat", in);
}
Output Slice(const Scope& s, const Output& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size) {
  return Build(s, "Slice", {x, IntVector(s, begin), IntVector(s, size)});
}
Output Pack(const Scope& s, const std::vector<Output>& values, int axis) {
  return Build(s, "Pack", values, [&](proto::NodeDef* n) { SetAttrInt(n, "axis", axis); });
}
std::vector<Output> Unpack(const Scope& s, const Output& x, int num, int axis) {
  Operation op = Raw(s, "Unpack", {x}, [&](proto::NodeDef* n) {
    SetAttrInt(n, "num", num);
    SetAttrInt(n, "axis", axis);
  });
  std::vector<Output> out;
  for (int i = 0; i < num; ++i) out.push_back(Out(s, op, i));
  return out;
}
Output Transpose(const Scope& s, const Output& x, const std::vector<int>& perm) {
  return Build(s, "Transpose", {x, Int32Vector(s, perm)});
}
Output Tile(const Scope& s, const Output& x, const std::vector<int64_t>& multiples) {
  return Build(s, "Tile", {x, IntVector(s, multiples)});
}
Output Range(const Scope& s, const Output& start, const Output& limit, const Output& delta) {
  return Build(s, "Range", {start, limit, delta});
}
Output OneHot(const Scope& s, const Output& indices, int depth, const Output& on_value, const Output& off_value,
              int axis) {
  return Build(s, "OneHot", {indices, Const(Aux(s), depth), on_value, off_value},
               [&](proto::NodeDef* n) { SetAttrInt(n, "axis", axis); });
}

Output RandomUniform(const Scope& s, const std::vector<int64_t>& shape, DataType dtype, int64_t seed) {
  return RandomOp(s, "RandomUniform", shape, dtype, seed);
}
Output RandomNormal(const Scope& s, const std::vector<int64_t>& shape, DataType dtype, int64_t seed) {
  return RandomOp(s, "RandomStandardNormal", shape, dtype, seed);
}
Output TruncatedNormal(const Scope& s, const std::vector<int64_t>& shape, DataType dtype, int64_t seed) {
  return RandomOp(s, "TruncatedNormal", shape, dtype, seed);
}

}  // namespace ops

Output operator+(const Output& a, const Output& b) { return ops::Add(a.scope(), a, b); }
Output operator-(const Output& a, const Output& b) { return ops::Sub(a.scope(), a, b); }
Output operator*(const Output& a, const Output& b) { return ops::Mul(a.scope(), a, b); }
Output operator/(const Output& a, const Output& b) { return ops::Div(a.scope(), a, b); }
Output operator-(const Output& a) { return ops::Neg(a.scope(), a); }

}  // namespace distflow
