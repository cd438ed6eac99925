// A numeric gradient checker: compares the Jacobian that Gradients() builds
// with central finite differences of the forward graph.
//
//   auto x = ops::Placeholder(root, DT_DOUBLE, {2, 3});
//   auto y = ops::Square(root, x);
//   absl::StatusOr<double> err = ComputeGradientError(root, {x}, {x_value}, {y});
//   EXPECT_LT(*err, 1e-6);
//
// The xs must be feedable (Placeholders) and every x and y of dtype double so
// that differences are computed in float64. Each y element's row of the
// Jacobian is obtained by running the gradient graph with a one-hot grad_ys;
// each x element's column numerically by running ys at x +- delta. An x that
// gets no gradient (an invalid Output) counts as a zero gradient.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "distflow/scope.h"
#include "distflow/tensor.h"

namespace distflow {

struct GradientCheckResult {
  double max_abs_error = 0;  // max |theoretical - numeric| over the Jacobian
  double max_rel_error = 0;  // max |t - n| / max(1, |t|, |n|)
  // Jacobians, [x element][y element] over all xs and ys concatenated.
  std::vector<std::vector<double>> theoretical;
  std::vector<std::vector<double>> numeric;
};

absl::StatusOr<GradientCheckResult> CheckGradients(const Scope& scope, const std::vector<Output>& xs,
                                                   const std::vector<Tensor>& x_values, const std::vector<Output>& ys,
                                                   double delta = 1e-5);

// The max abs error of CheckGradients.
absl::StatusOr<double> ComputeGradientError(const Scope& scope, const std::vector<Output>& xs,
                                            const std::vector<Tensor>& x_values, const std::vector<Output>& ys,
                                            double delta = 1e-5);

}  // namespace distflow
