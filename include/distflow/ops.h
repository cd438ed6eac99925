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

#include "distflow/export.h"
#include "distflow/scope.h"
#include "distflow/tensor.h"

namespace distflow {
namespace ops {

// Constants.
DISTFLOW_EXPORT Output Const(const Scope& s, const Tensor& value);
DISTFLOW_EXPORT Output Const(const Scope& s, float v);
DISTFLOW_EXPORT Output Const(const Scope& s, double v);
DISTFLOW_EXPORT Output Const(const Scope& s, int v);
DISTFLOW_EXPORT Output Const(const Scope& s, int64_t v);
DISTFLOW_EXPORT Output Const(const Scope& s, bool v);
DISTFLOW_EXPORT Output Const(const Scope& s, const std::string& v);
DISTFLOW_EXPORT Output Const(const Scope& s, const char* v);
DISTFLOW_EXPORT Output Const(const Scope& s, std::initializer_list<float> v, const TensorShape& shape);
DISTFLOW_EXPORT Output Const(const Scope& s, std::initializer_list<int> v);  // an int32 vector

DISTFLOW_EXPORT Output Placeholder(const Scope& s, DataType dtype, const PartialShape& shape = PartialShape());
DISTFLOW_EXPORT Output PlaceholderWithDefault(const Scope& s, const Output& def, const PartialShape& shape);
DISTFLOW_EXPORT Output Identity(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output StopGradient(const Scope& s, const Output& x);
DISTFLOW_EXPORT Operation NoOp(const Scope& s);
// A NoOp that runs after every op in `deps` (tf.group).
DISTFLOW_EXPORT Operation Group(const Scope& s, const std::vector<Operation>& deps);

// Variables. Variable() is the raw op (a reference); MakeVariable also adds
// an initializer (Assign of `initial`) that GlobalVariablesInitializer runs.
struct DISTFLOW_EXPORT VariableOptions {
  std::string container;
  std::string shared_name;
  bool trainable = true;  // MakeVariable adds it to Scope::TrainableVariables()
  // A variable of each task alone (TensorFlow's LOCAL_VARIABLES collection:
  // metrics' totals and counts, a reader's position). MakeVariable leaves it
  // out of the trainable variables and GlobalVariablesInitializer, and lists
  // it in LocalVariables; MonitoredSession initialises it on every task
  // (chief or not) and never saves it or waits for it.
  bool local = false;
};
DISTFLOW_EXPORT Output Variable(const Scope& s, const PartialShape& shape, DataType dtype,
                                const VariableOptions& options = {});
DISTFLOW_EXPORT Output MakeVariable(const Scope& s, const Output& initial, const VariableOptions& options = {});
DISTFLOW_EXPORT Output Assign(const Scope& s, const Output& ref, const Output& value, bool validate_shape = true);
DISTFLOW_EXPORT Output AssignAdd(const Scope& s, const Output& ref, const Output& value);
DISTFLOW_EXPORT Output AssignSub(const Scope& s, const Output& ref, const Output& value);
DISTFLOW_EXPORT Output IsVariableInitialized(const Scope& s, const Output& ref);
// Runs the initializers of every variable MakeVariable made but the local
// ones (tf.global_variables_initializer).
DISTFLOW_EXPORT Operation GlobalVariablesInitializer(const Scope& s);
// The variables made with VariableOptions::local, in the order made, and the
// group of their initializers (tf.local_variables(),
// tf.local_variables_initializer()).
DISTFLOW_EXPORT std::vector<Output> LocalVariables(const Scope& s);
DISTFLOW_EXPORT Operation LocalVariablesInitializer(const Scope& s);

// Elementwise math (broadcasting where TensorFlow broadcasts).
DISTFLOW_EXPORT Output Add(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Sub(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Mul(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Div(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Pow(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Maximum(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Minimum(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Equal(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output NotEqual(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Less(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output Greater(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output LogicalAnd(const Scope& s, const Output& a, const Output& b);
DISTFLOW_EXPORT Output LogicalNot(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Neg(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Square(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Sqrt(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Rsqrt(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Exp(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Log(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output AddN(const Scope& s, const std::vector<Output>& xs);
DISTFLOW_EXPORT Output Cast(const Scope& s, const Output& x, DataType dtype);
DISTFLOW_EXPORT Output Select(const Scope& s, const Output& cond, const Output& t, const Output& e);
DISTFLOW_EXPORT Output MatMul(const Scope& s, const Output& a, const Output& b, bool transpose_a = false,
                              bool transpose_b = false);

// Reductions over `axes` (negative counts from the end).
DISTFLOW_EXPORT Output Sum(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
DISTFLOW_EXPORT Output Mean(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
DISTFLOW_EXPORT Output Max(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
DISTFLOW_EXPORT Output Min(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
DISTFLOW_EXPORT Output Prod(const Scope& s, const Output& x, const std::vector<int>& axes, bool keep_dims = false);
DISTFLOW_EXPORT Output ArgMax(const Scope& s, const Output& x, int axis);
DISTFLOW_EXPORT Output ArgMin(const Scope& s, const Output& x, int axis);

// Shapes and arrays.
DISTFLOW_EXPORT Output Reshape(const Scope& s, const Output& x, const std::vector<int64_t>& shape);
DISTFLOW_EXPORT Output Reshape(const Scope& s, const Output& x, const Output& shape);
DISTFLOW_EXPORT Output Shape(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Size(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Rank(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Fill(const Scope& s, const std::vector<int64_t>& dims, const Output& value);
DISTFLOW_EXPORT Output ZerosLike(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output OnesLike(const Scope& s, const Output& x);
DISTFLOW_EXPORT Output Concat(const Scope& s, const std::vector<Output>& values, int axis);
DISTFLOW_EXPORT Output Slice(const Scope& s, const Output& x, const std::vector<int64_t>& begin,
                             const std::vector<int64_t>& size);
DISTFLOW_EXPORT Output Pack(const Scope& s, const std::vector<Output>& values, int axis = 0);
DISTFLOW_EXPORT std::vector<Output> Unpack(const Scope& s, const Output& x, int num, int axis = 0);
DISTFLOW_EXPORT Output Transpose(const Scope& s, const Output& x, const std::vector<int>& perm);
DISTFLOW_EXPORT Output Tile(const Scope& s, const Output& x, const std::vector<int64_t>& multiples);
DISTFLOW_EXPORT Output Range(const Scope& s, const Output& start, const Output& limit, const Output& delta);
DISTFLOW_EXPORT Output OneHot(const Scope& s, const Output& indices, int depth, const Output& on_value,
                              const Output& off_value, int axis = -1);

// Sparse ops: rows of a table by id, and rows of a variable updated in place
// (TF's tf.gather, tf.scatter_*, tf.unique, tf.unsorted_segment_sum,
// tf.dynamic_partition/stitch, tf.sparse_segment_*). Ids are int32 or int64;
// an id out of range is a run-time error naming the op, the id and the bound.
DISTFLOW_EXPORT Output Gather(const Scope& s, const Output& params, const Output& indices, int axis = 0);
DISTFLOW_EXPORT Output ScatterAdd(const Scope& s, const Output& ref, const Output& indices, const Output& updates);
DISTFLOW_EXPORT Output ScatterSub(const Scope& s, const Output& ref, const Output& indices, const Output& updates);
DISTFLOW_EXPORT Output ScatterUpdate(const Scope& s, const Output& ref, const Output& indices, const Output& updates);
// {y, idx}: the distinct values of x in order of first appearance, x == y[idx].
DISTFLOW_EXPORT std::vector<Output> Unique(const Scope& s, const Output& x, DataType out_idx = DT_INT32);
DISTFLOW_EXPORT Output UnsortedSegmentSum(const Scope& s, const Output& data, const Output& segment_ids,
                                          const Output& num_segments);
DISTFLOW_EXPORT std::vector<Output> DynamicPartition(const Scope& s, const Output& data, const Output& partitions,
                                                     int num_partitions);
DISTFLOW_EXPORT Output DynamicStitch(const Scope& s, const std::vector<Output>& indices,
                                     const std::vector<Output>& data);
DISTFLOW_EXPORT Output SparseSegmentSum(const Scope& s, const Output& data, const Output& indices,
                                        const Output& segment_ids);
DISTFLOW_EXPORT Output SparseSegmentMean(const Scope& s, const Output& data, const Output& indices,
                                         const Output& segment_ids);
// tf.gather_nd: with indices of shape [..., k] (int32 or int64), the slices
// of params that the index tuples (the last dimension) address; the result
// is indices.shape[:-1] + params.shape[k:]. tf.scatter_nd, its inverse and
// gradient: a zero tensor of `shape` with each slice of updates (of shape
// indices.shape[:-1] + shape[k:]) added at its tuple, duplicates summed.
// A tuple out of range is a run-time error naming the op, the tuple's
// position, the tuple and the shape; tuples longer than the rank, or
// updates of another shape, are errors in the scope when the shapes are
// known and at run time when they are not. Both are differentiable.
DISTFLOW_EXPORT Output GatherNd(const Scope& s, const Output& params, const Output& indices);
DISTFLOW_EXPORT Output ScatterNd(const Scope& s, const Output& indices, const Output& updates, const Output& shape);
// `shape` as a constant of the indices' dtype.
DISTFLOW_EXPORT Output ScatterNd(const Scope& s, const Output& indices, const Output& updates,
                                 const std::vector<int64_t>& shape);
// tf.nn.embedding_lookup: rows `ids` of a table stored whole (one params)
// or in parts; "mod": id i is row i / n of part i % n; "div": contiguous
// ranges, the first (rows % n) parts one row longer (needs the parts' row
// counts in their static shapes). Each part's Gather runs on that part's
// device, so only ids travel to it and rows back; the gradient of each part
// is an IndexedSlices (distflow/gradients.h).
DISTFLOW_EXPORT Output EmbeddingLookup(const Scope& s, const std::vector<Output>& params, const Output& ids,
                                       const std::string& partition_strategy = "mod");

// Random tensors; seed 0 with no graph seed means a fresh random seed.
DISTFLOW_EXPORT Output RandomUniform(const Scope& s, const std::vector<int64_t>& shape, DataType dtype = DT_FLOAT,
                                     int64_t seed = 0);
DISTFLOW_EXPORT Output RandomNormal(const Scope& s, const std::vector<int64_t>& shape, DataType dtype = DT_FLOAT,
                                    int64_t seed = 0);
DISTFLOW_EXPORT Output TruncatedNormal(const Scope& s, const std::vector<int64_t>& shape, DataType dtype = DT_FLOAT,
                                       int64_t seed = 0);

// An attribute value of a node, for Raw: a number, a bool, a string, a
// dtype, a shape, a tensor, or a list of numbers, dtypes or strings.
class DISTFLOW_EXPORT Attr {
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
DISTFLOW_EXPORT Operation Raw(const Scope& s, const std::string& op, const std::vector<Output>& inputs,
                              const Attrs& attrs);
// For op wrappers, which include the internal graph/attr_value.h: `attrs`
// sets the attributes on the NodeDef directly.
DISTFLOW_EXPORT Operation Raw(const Scope& s, const std::string& op, const std::vector<Output>& inputs,
                              const std::function<void(proto::NodeDef*)>& attrs = nullptr);

}  // namespace ops

// Arithmetic on outputs, added in the left operand's scope.
DISTFLOW_EXPORT Output operator+(const Output& a, const Output& b);
DISTFLOW_EXPORT Output operator-(const Output& a, const Output& b);
DISTFLOW_EXPORT Output operator*(const Output& a, const Output& b);
DISTFLOW_EXPORT Output operator/(const Output& a, const Output& b);
DISTFLOW_EXPORT Output operator-(const Output& a);

}  // namespace distflow
