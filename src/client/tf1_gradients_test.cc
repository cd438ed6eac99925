// Numeric gradient checks (float64) of the ops added for TF1's everyday
// surface: the float unary functions, the slicing and shaping ops, Pad,
// Split, TopK, LRN and the softmax cross-entropy's labels gradient.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "client/gradient_checker.h"
#include "client/gradient_test_util.h"
#include "client/graph_state.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using namespace grad_test;  // NOLINT: the shared gradient-test helpers

void Check(const std::vector<Tensor>& values, const Builder& f, const std::string& what, double tol = kTol) {
  CheckGradient(values, f, what, tol, /*require_gradient=*/true);
}

Builder Unary(const std::string& op) {
  return [op](const Scope& s, const std::vector<Output>& x) { return Op(s, op, {x[0]}); };
}

TEST(Tf1GradientCheck, UnaryFunctions) {
  Check({Random(S({2, 3}), -0.5, 2, 1)}, Unary("Log1p"), "Log1p");
  Check({Random(S({2, 3}), -2, 2, 2)}, Unary("Expm1"), "Expm1");
  Check({Random(S({2, 3}), 0.5, 2, 3)}, Unary("Reciprocal"), "Reciprocal");
  Check({Random(S({2, 3}), -3, 3, 4)}, Unary("Sin"), "Sin");
  Check({Random(S({2, 3}), -3, 3, 5)}, Unary("Cos"), "Cos");
}

TEST(Tf1GradientCheck, FloorCeilRoundPassNoGradient) {
  for (const char* op : {"Floor", "Ceil", "Round"}) {
    SCOPED_TRACE(op);
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
    Output y = ops::Add(root, Op(root, op, {x}), x);
    absl::StatusOr<std::vector<Output>> g = Gradients(root, {y}, {x});
    ASSERT_TRUE(g.ok()) << g.status();
  }
}

Output IntVec(const Scope& s, std::vector<int64_t> v) {
  return ops::Const(s, Tensor::FromVector<int32_t>(std::vector<int32_t>(v.begin(), v.end())));
}

// x[begin:end:strides] with masks, as Tensor.__getitem__ builds it.
Builder StridedSlice(std::vector<int64_t> b, std::vector<int64_t> e, std::vector<int64_t> st, int64_t begin_mask = 0,
                     int64_t end_mask = 0, int64_t ellipsis = 0, int64_t new_axis = 0, int64_t shrink = 0) {
  return [=](const Scope& s, const std::vector<Output>& x) {
    return Op(s, "StridedSlice", {x[0], IntVec(s, b), IntVec(s, e), IntVec(s, st)}, [=](proto::NodeDef* n) {
      SetAttrInt(n, "begin_mask", begin_mask);
      SetAttrInt(n, "end_mask", end_mask);
      SetAttrInt(n, "ellipsis_mask", ellipsis);
      SetAttrInt(n, "new_axis_mask", new_axis);
      SetAttrInt(n, "shrink_axis_mask", shrink);
    });
  };
}

TEST(Tf1GradientCheck, StridedSlice) {
  Tensor x = Random(S({3, 4, 2}), -1, 1, 10);
  Check({x}, StridedSlice({0, 1}, {0, 3}, {1, 1}, 1, 1), "x[:, 1:3]");
  Check({x}, StridedSlice({1}, {2}, {1}, 0, 0, 0, 0, 1), "x[1]");
  Check({x}, StridedSlice({0, -1}, {0, 0}, {1, -2}, 1, 3, 1), "x[..., ::-2]");
  Check({x}, StridedSlice({0, 0, 2}, {0, 0, 3}, {1, 1, 1}, 1, 1, 0, 2, 4), "x[:, None, 2]");
}

TEST(Tf1GradientCheck, SplitAndSplitV) {
  Tensor x = Random(S({2, 6}), -1, 1, 11);
  Check(
      {x},
      [](const Scope& s, const std::vector<Output>& x) {
        Operation split = ops::Raw(s, "Split", {ops::Const(s, 1), x[0]}, {{"num_split", 3}});
        // Part 1 unused: its gradient is zeros.
        return ops::Add(s, Output(split, 0, s), ops::Mul(s, Output(split, 2, s), Output(split, 2, s)));
      },
      "Split");
  Check(
      {x},
      [&](const Scope& s, const std::vector<Output>& x) {
        Operation split = ops::Raw(s, "SplitV", {x[0], IntVec(s, {1, -1, 2}), ops::Const(s, 1)}, {{"num_split", 3}});
        return ops::Sum(s, ops::Mul(s, Output(split, 1, s), Output(split, 1, s)), {1});
      },
      "SplitV");
}

TEST(Tf1GradientCheck, PadExpandDimsSqueeze) {
  Tensor x = Random(S({2, 3}), -1, 1, 12);
  Check(
      {x},
      [](const Scope& s, const std::vector<Output>& x) {
        Output p = ops::Const(s, Tensor::FromVector<int32_t>({1, 0, 2, 1}, TensorShape({2, 2})));
        return ops::Square(s, Op(s, "Pad", {x[0], p}));
      },
      "Pad");
  Check(
      {x},
      [](const Scope& s, const std::vector<Output>& x) {
        Output e = Op(s, "ExpandDims", {ops::Square(s, x[0]), ops::Const(s, -1)});
        return Op(s, "Squeeze", {ops::Mul(s, e, e)}, [](proto::NodeDef* n) { SetAttrIntList(n, "squeeze_dims", {2}); });
      },
      "ExpandDims, Squeeze");
}

TEST(Tf1GradientCheck, SoftmaxCrossEntropyReachesLabels) {
  // Rows of labels that sum to 1, as the op's logits gradient assumes.
  Tensor labels = Tensor::FromVector<double>({0.1, 0.2, 0.3, 0.4, 0.7, 0.1, 0.1, 0.1, 0, 0, 0.5, 0.5}, S({3, 4}));
  Check(
      {Random(S({3, 4}), -2, 2, 13), labels},
      [](const Scope& s, const std::vector<Output>& x) {
        return Op(s, "SoftmaxCrossEntropyWithLogits", {x[0], x[1]});
      },
      "SoftmaxCrossEntropyWithLogits labels");
}

TEST(Tf1GradientCheck, Conv2DTranspose) {
  for (const char* padding : {"SAME", "VALID"}) {
    SCOPED_TRACE(padding);
    const bool same = std::string(padding) == "SAME";
    // out_backprop [1, 2, 2, 3] to an input of [1, 4, 4, 2] (stride 2, 3x3
    // filter: 4 -> 2 with SAME, 5 -> 2 with VALID).
    const int64_t side = same ? 4 : 5;
    Check(
        {Random(S({1, 2, 2, 3}), -1, 1, 16), Random(S({3, 3, 2, 3}), -1, 1, 17)},
        [&](const Scope& s, const std::vector<Output>& x) {
          Output sizes = ops::Const(
              s, Tensor::FromVector<int32_t>({1, static_cast<int32_t>(side), static_cast<int32_t>(side), 2}));
          return Op(s, "Conv2DBackpropInput", {sizes, x[1], x[0]}, [&](proto::NodeDef* n) {
            SetAttrIntList(n, "strides", {1, 2, 2, 1});
            SetAttrString(n, "padding", padding);
          });
        },
        "Conv2DBackpropInput");
  }
}

TEST(Tf1GradientCheck, TopKAndLrn) {
  // Distinct values, so that the chosen indices do not move under the
  // finite differences.
  Tensor x(DT_DOUBLE, S({2, 5}));
  const double v[] = {0.3, -1.2, 2.5, 0.9, -0.4, 1.7, 0.2, -2.2, 1.1, 0.6};
  for (int i = 0; i < 10; ++i) x.flat<double>()[i] = v[i];
  Check(
      {x},
      [](const Scope& s, const std::vector<Output>& x) {
        Output top = Op(s, "TopKV2", {x[0], ops::Const(s, 3)});
        return ops::Square(s, top);
      },
      "TopKV2");
  Check(
      {Random(S({1, 2, 2, 5}), -1, 1, 15)},
      [](const Scope& s, const std::vector<Output>& x) {
        return Op(s, "LRN", {x[0]}, [](proto::NodeDef* n) {
          SetAttrInt(n, "depth_radius", 1);
          SetAttrFloat(n, "bias", 1.5);
          SetAttrFloat(n, "alpha", 0.3);
          SetAttrFloat(n, "beta", 0.75);
        });
      },
      "LRN");
}

}  // namespace
}  // namespace distflow
