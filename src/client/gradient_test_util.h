// Helpers the gradient tests share (gradients_test, nn_gradients_test,
// tf1_gradients_test): float64 random inputs, shapes, raw ops, and the
// numeric check of an op's gradient against finite differences. Test-only.
#pragma once

#include <cmath>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "client/gradient_checker.h"
#include "distflow/ops.h"
#include "gtest/gtest.h"

namespace distflow::grad_test {

constexpr double kTol = 1e-6;

inline Tensor Random(const TensorShape& shape, double lo, double hi, int seed) {
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(DT_DOUBLE, shape);
  for (double& v : t.flat<double>()) v = u(gen);
  return t;
}

inline TensorShape S(std::initializer_list<int64_t> d) { return TensorShape(d); }

inline Output Op(const Scope& s, const std::string& name, const std::vector<Output>& in,
                 const std::function<void(proto::NodeDef*)>& attrs = nullptr, int index = 0) {
  return Output(ops::Raw(s, name, in, attrs), index, s);
}

using Builder = std::function<Output(const Scope&, const std::vector<Output>&)>;

// Builds y = f(placeholders fed `values`) and checks dy/dx against finite
// differences; with require_gradient, every check must see a non-zero
// Jacobian entry somewhere (a gradient that is silently zero fails).
inline void CheckGradient(const std::vector<Tensor>& values, const Builder& f, const std::string& what, double tol,
                          bool require_gradient) {
  SCOPED_TRACE(what);
  Scope root = Scope::NewRootScope();
  std::vector<Output> xs;
  for (const Tensor& v : values) xs.push_back(ops::Placeholder(root, DT_DOUBLE, PartialShape(v.shape())));
  Output y = f(root, xs);
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<GradientCheckResult> r = CheckGradients(root, xs, values, {y});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->max_rel_error, tol);
  if (!require_gradient) return;
  double max_abs = 0;
  for (const auto& row : r->theoretical) {
    for (double v : row) max_abs = std::max(max_abs, std::fabs(v));
  }
  EXPECT_GT(max_abs, 0.0) << "all-zero Jacobian";
}

}  // namespace distflow::grad_test
