// Shape inference: each op's ShapeFn sees its inputs' partial shapes, dtypes
// and (for constant inputs) values, and sets its outputs' partial shapes. It
// runs as each node is added to a graph, so a mismatch is reported at build
// time. A ShapeFn returns plain messages ("Matrix size-incompatible: [2,3] vs
// [4,5]"); the graph prefixes the node's name and op.
//
// Not thread-safe; one context per node per inference.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "distflow/partial_shape.h"
#include "distflow/tensor.h"
#include "proto/graph.pb.h"

namespace distflow {

class InferenceContext {
 public:
  InferenceContext(const proto::NodeDef& node, std::vector<PartialShape> input_shapes,
                   std::vector<DataType> input_types, std::vector<const Tensor*> input_tensors, int num_outputs);

  const proto::NodeDef& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const PartialShape& input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  DataType input_type(int i) const { return input_types_[static_cast<size_t>(i)]; }
  // The input's value when it is known at build time (a Const), else nullptr.
  const Tensor* input_tensor(int i) const { return input_tensors_[static_cast<size_t>(i)]; }

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  void set_output(int i, PartialShape s) { outputs_[static_cast<size_t>(i)] = std::move(s); }
  const PartialShape& output(int i) const { return outputs_[static_cast<size_t>(i)]; }
  const std::vector<PartialShape>& outputs() const { return outputs_; }

  // `s` if its rank is `rank` (or unknown, then refined), else InvalidArgument.
  absl::StatusOr<PartialShape> WithRank(const PartialShape& s, int rank, absl::string_view what) const;
  absl::StatusOr<PartialShape> WithRankAtLeast(const PartialShape& s, int rank, absl::string_view what) const;
  // Merges two dimensions (-1 unknown); InvalidArgument naming both if they differ.
  absl::StatusOr<int64_t> MergeDim(int64_t a, int64_t b, absl::string_view what) const;

  // Reads an input that must be a known int32/int64 vector (e.g. Reshape's
  // shape); nullopt-like: returns false if unknown. Values land in `out`.
  bool ConstantInputAsInts(int i, std::vector<int64_t>* out) const;

 private:
  const proto::NodeDef& node_;
  std::vector<PartialShape> inputs_;
  std::vector<DataType> input_types_;
  std::vector<const Tensor*> input_tensors_;
  std::vector<PartialShape> outputs_;
};

// Shape functions shared by many ops.
absl::Status UnknownShape(InferenceContext* c);    // every output unknown
absl::Status ScalarShape(InferenceContext* c);     // output 0 is a scalar
absl::Status UnchangedShape(InferenceContext* c);  // output 0 = input 0
// Output 0 is inputs 0 and 1 broadcast numpy-style.
absl::Status BroadcastBinaryShape(InferenceContext* c);
// Every input merged into one shape (AddN, Select's same-shape case).
absl::Status MergeAllInputsShape(InferenceContext* c);

// Numpy broadcasting of two partial shapes; InvalidArgument naming both shapes.
absl::StatusOr<PartialShape> BroadcastShapes(const PartialShape& a, const PartialShape& b);

}  // namespace distflow
