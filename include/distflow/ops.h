// Typed op wrappers and arithmetic operators for building graphs.
//
//   auto x = ops::Placeholder(root, DT_FLOAT, {-1, 784});
//   auto w = ops::Variable(ps.WithOpName("w"), {784, 10}, DT_FLOAT);
//   auto logits = ops::MatMul(worker, x, w) + b;
//
// Each returns an Output (or an Operation for ops without outputs). Type
// attributes are inferred from the inputs; errors go to the scope.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "distflow/scope.h"
#include "distflow/tensor.h"

namespace distflow {
namespace ops {

// Constants.
Output Const(const Scope& s, const Tensor& value);
Output Const(const Scope& s, float v);
Output Const(const Scope& s, double v);
Output Const(const Scope& s, int v);
Output Const(const Scope& s, int64_t v);
Output Const(const Scope& s, bool v);
Output Const(const Scope& s, const std::string& v);
Output Const(const Scope& s, const char* v);
Output Const(const Scope& s, std::initializer_list<float> v, const TensorShape& shape);
Output Const(const Scope& s, std::initializer_list<int> v);  // an int32 vector

Output Placeholder(const Scope& s, DataType dtype, const PartialShape& shape = PartialShape());
Output PlaceholderWithDefault(const Scope& s, const Output& def, const PartialShape& shape);
Output Identity(const Scope& s, const Output& x);
Output StopGradient(const Scope& s, const Output& x);
Operation NoOp(const Scope& s);
// A NoOp that runs after every op in `deps` (tf.group).
Operation Group(const Scope& s, const std::vector<Operation>& deps);

// Variables. Variable() is the raw op (a reference); MakeVariable also adds
// an initializer (Assign of `initial`) that GlobalVariablesInitializer runs.
struct VariableOptions {
  std::string container;
  std::string shared_name;
  bool trainable = true;  // MakeVariable adds it to Scope::TrainableVariables()
};
Output Variable(const Scope& s, const PartialShape& shape, DataType dtype, const VariableOptions& options = {});
Output MakeVariable(const Scope& s, const Output& initial, const VariableOptions& options = {});
Output Assign(const Scope& s, const Output& ref, const Output& value, bool validate_shape = true);
Output AssignAdd(const Scope& s, const Output& ref, const Output& value);
Output AssignSub(const Scope& s, const Output& ref, const Output& value);
Output IsVariableInitialized(const Scope& s, const Output& ref);
Operation GlobalVariablesInitializer(const Scope& s);

// Elementwise math (broadcasting where TensorFlow broadcasts).
Output Add(const Scope& s, const Output& a, const Output& b);
Output Sub(const Scope& s, const Output& a, const Output& b);
Output Mul(const Scope& s, const Output& a, const Output& b);
Output Div(const Scope& s, const Output& a, const Output& b);
Output Pow(const Scope& s, const Output& a, const Output& b);
Output Maximum(const Scope& s, const Output& a, const Output& b);
Output Minimum(const Scope& s, const Output& a, const Output& b);
Output Equal(const Scope& s, const Output& a, const Output& b);
Output NotEqual(const Scope& s, const Output& a, const Output& b);
Output Less(const Scope& s, const Output& a, const Output& b);
Output Greater(const Scope& s, const Output& a, const Output& b);
Output LogicalAnd(const Scope& s, const Output& a, const Output& b);
Output LogicalNot(const Scope& s, const Output& x);
Output Neg(const Scope& s, const Output& x);
Output Square(const Scope& s, const Output& x);
Output Sqrt(const Scope& s, const Output& x);
Output Rsqrt(const Scope& s, const Output& x);
Output Exp(const Scope& s, const Output& x);
Output Log(const Scope& s, const Output& x);
Output AddN(const Scope& s, const std::vector<Output>& xs);
Output Cast(const Scope& s, const Output& x, DataType dtype);
Output Select(const Scope& s, const Output& cond, const Output& t, const Output& e);
Output MatMul(const Scope& s, const Output& a, const Output& b, bool transpose_a = false, bool transpose_b = false);

// Reductions over `axes` (negative counts from the end).
Output Sum(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
Output Mean(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
Output Max(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
Output Min(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
Output Prod(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
Output ArgMax(const Scope& s, const Output& x, int axis);
Output ArgMin(const Scope& s, const Output& x, int axis);

// Shapes and arrays.
Output Reshape(const Scope& s, const Output& x, const std::vector<int64_t>& shape);
Output Reshape(const Scope& s, const Output& x, const Output& shape);
Output Shape(const Scope& s, const Output& x);
Output Size(const Scope& s, const Output& x);
Output Rank(const Scope& s, const Output& x);
Output Fill(const Scope& s, const std::vector<int64_t>& dims, const Output& value);
Output ZerosLike(const Scope& s, const Output& x);
Output OnesLike(const Scope& s, const Output& x);
Output Concat(const Scope& s, const std::vector<Output>& values, int axis);
Output Slice(const Scope& s, const Output& x, const std::vector<int64_t>& begin, const std::vector<int64_t>& size);
Output Pack(const Scope& s, const std::vector<Output>& values, int axis = 0);
std::vector<Output> Unpack(const Scope& s, const Output& x, int num, int axis = 0);
Output Transpose(const Scope& s, const Output& x, const std::vector<int>& perm);
Output Tile(const Scope& s, const Output& x, const std::vector<int64_t>& multiples);
Output Range(const Scope& s, const Output& start, const Output& limit, const Output& delta);
Output OneHot(const Scope& s, const Output& indices, int depth, const Output& on_value, const Output& off_value,
              int axis = -1);

// Random tensors; seed 0 with no graph seed means a fresh random seed.
Output RandomUniform(const Scope& s, const std::vector<int64_t>& shape, DataType dtype = DT_FLOAT, int64_t seed = 0);
Output RandomNormal(const Scope& s, const std::vector<int64_t>& shape, DataType dtype = DT_FLOAT, int64_t seed = 0);
Output TruncatedNormal(const Scope& s, const std::vector<int64_t>& shape, DataType dtype = DT_FLOAT,
                       int64_t seed = 0);

// An attribute value of a node, for Raw: a number, a bool, a string, a
// dtype, a shape, a tensor, or a list of numbers, dtypes or strings.
class Attr {
 public:
  using Value = std::variant<int64_t, double, bool, std::string, DataType, PartialShape, Tensor, std::vector<int64_t>,
                             std::vector<double>, std::vector<DataType>, std::vector<std::string>>;
  Attr(int v) : value_(int64_t{v}) {}
  Attr(int64_t v) : value_(v) {}
  Attr(float v) : value_(double{v}) {}
  Attr(double v) : value_(v) {}
  Attr(bool v) : value_(v) {}
  Attr(const char* v) : value_(std::string(v)) {}
  Attr(std::string v) : value_(std::move(v)) {}
  Attr(DataType v) : value_(v) {}
  Attr(PartialShape v) : value_(std::move(v)) {}
  Attr(Tensor v) : value_(std::move(v)) {}
  Attr(std::initializer_list<int64_t> v) : value_(std::vector<int64_t>(v)) {}
  Attr(std::vector<int64_t> v) : value_(std::move(v)) {}
  Attr(std::vector<double> v) : value_(std::move(v)) {}
  Attr(std::vector<DataType> v) : value_(std::move(v)) {}
  Attr(std::vector<std::string> v) : value_(std::move(v)) {}
  const Value& value() const { return value_; }

 private:
  Value value_;
};
using Attrs = std::vector<std::pair<std::string, Attr>>;

// Generic: any registered op by name, with `attrs` set; attributes the op
// can infer from its inputs (types, lengths) and those with defaults may be
// left out. The node is checked like every other (an unknown op, a missing
// or mistyped attribute, a bad input are errors in the scope, naming it).
//
//   auto y = ops::Raw(s, "Conv2D", {x, w}, {{"strides", {1, 1, 1, 1}}, {"padding", "SAME"}});
Operation Raw(const Scope& s, const std::string& op, const std::vector<Output>& inputs, const Attrs& attrs);
// For op wrappers, which include the internal graph/attr_value.h: `attrs`
// sets the attributes on the NodeDef directly.
Operation Raw(const Scope& s, const std::string& op, const std::vector<Output>& inputs,
              const std::function<void(proto::NodeDef*)>& attrs = nullptr);

}  // namespace ops

// Arithmetic on outputs, added in the left operand's scope.
Output operator+(const Output& a, const Output& b);
Output operator-(const Output& a, const Output& b);
Output operator*(const Output& a, const Output& b);
Output operator/(const Output& a, const Output& b);
Output operator-(const Output& a);

}  // namespace distflow
