#include "client/gradient_checker.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/session.h"

namespace distflow {

absl::StatusOr<GradientCheckResult> CheckGradients(const Scope& scope, const std::vector<Output>& xs,
                                                   const std::vector<Tensor>& x_values, const std::vector<Output>& ys,
                                                   double delta) {
  if (xs.size() != x_values.size()) {
    return absl::InvalidArgumentError(absl::StrCat(xs.size(), " xs but ", x_values.size(), " values"));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].ok() || xs[i].dtype() != DT_DOUBLE || x_values[i].dtype() != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat("x ", i, " must be a valid double tensor"));
    }
  }
  for (size_t i = 0; i < ys.size(); ++i) {
    if (!ys[i].ok() || ys[i].dtype() != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat("y ", i, " must be a valid double tensor"));
    }
  }
  RETURN_IF_ERROR(scope.status());
  Session sess;
  FeedDict feeds;
  for (size_t i = 0; i < xs.size(); ++i) feeds.push_back({xs[i], x_values[i]});
  ASSIGN_OR_RETURN(std::vector<Tensor> y0, sess.Run(feeds, ys));

  std::vector<Output> dys;
  for (size_t k = 0; k < ys.size(); ++k) {
    dys.push_back(ops::Placeholder(scope, DT_DOUBLE, PartialShape(y0[k].shape())));
  }
  ASSIGN_OR_RETURN(std::vector<Output> grads, Gradients(scope, ys, xs, dys));
  RETURN_IF_ERROR(scope.status());

  int64_t nx = 0, ny = 0;
  for (const Tensor& t : x_values) nx += t.NumElements();
  for (const Tensor& t : y0) ny += t.NumElements();
  GradientCheckResult r;
  r.theoretical.assign(static_cast<size_t>(nx), std::vector<double>(static_cast<size_t>(ny), 0.0));
  r.numeric = r.theoretical;

  std::vector<Output> fetch;
  std::vector<size_t> fetch_x;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (grads[i].ok()) {
      fetch.push_back(grads[i]);
      fetch_x.push_back(i);
    }
  }
  std::vector<int64_t> x_offset(xs.size(), 0);
  for (size_t i = 1; i < xs.size(); ++i) x_offset[i] = x_offset[i - 1] + x_values[i - 1].NumElements();

  // Theoretical: one run per y element.
  int64_t col = 0;
  for (size_t k = 0; k < ys.size(); ++k) {
    for (int64_t j = 0; j < y0[k].NumElements(); ++j, ++col) {
      if (fetch.empty()) continue;
      FeedDict f = feeds;
      for (size_t m = 0; m < ys.size(); ++m) {
        Tensor dy(DT_DOUBLE, y0[m].shape());
        auto d = dy.flat<double>();
        std::fill(d.begin(), d.end(), 0.0);
        if (m == k) d[static_cast<size_t>(j)] = 1.0;
        f.push_back({dys[m], dy});
      }
      ASSIGN_OR_RETURN(std::vector<Tensor> out, sess.Run(f, fetch));
      for (size_t q = 0; q < fetch.size(); ++q) {
        const Tensor& gt = out[q];
        const size_t xi = fetch_x[q];
        if (gt.NumElements() != x_values[xi].NumElements()) {
          return absl::InternalError(absl::StrCat("the gradient of x ", xi, " has shape ", gt.shape().DebugString(),
                                                  ", x has shape ", x_values[xi].shape().DebugString()));
        }
        auto gv = gt.flat<double>();
        for (int64_t e = 0; e < gt.NumElements(); ++e) {
          r.theoretical[static_cast<size_t>(x_offset[xi] + e)][static_cast<size_t>(col)] = gv[static_cast<size_t>(e)];
        }
      }
    }
  }

  // Numeric: two runs per x element.
  for (size_t i = 0; i < xs.size(); ++i) {
    for (int64_t e = 0; e < x_values[i].NumElements(); ++e) {
      std::vector<double> plus, minus;
      for (double sign : {1.0, -1.0}) {
        FeedDict f = feeds;
        Tensor xv(DT_DOUBLE, x_values[i].shape());
        auto src = x_values[i].flat<double>();
        auto dst = xv.flat<double>();
        std::copy(src.begin(), src.end(), dst.begin());
        dst[static_cast<size_t>(e)] += sign * delta;
        f[i].second = xv;
        ASSIGN_OR_RETURN(std::vector<Tensor> out, sess.Run(f, ys));
        std::vector<double>& v = sign > 0 ? plus : minus;
        for (const Tensor& t : out) {
          for (double d : t.flat<double>()) v.push_back(d);
        }
      }
      for (int64_t j = 0; j < ny; ++j) {
        r.numeric[static_cast<size_t>(x_offset[i] + e)][static_cast<size_t>(j)] =
            (plus[static_cast<size_t>(j)] - minus[static_cast<size_t>(j)]) / (2 * delta);
      }
    }
  }
  for (int64_t a = 0; a < nx; ++a) {
    for (int64_t b = 0; b < ny; ++b) {
      const double t = r.theoretical[static_cast<size_t>(a)][static_cast<size_t>(b)];
      const double n = r.numeric[static_cast<size_t>(a)][static_cast<size_t>(b)];
      const double err = std::fabs(t - n);
      r.max_abs_error = std::max(r.max_abs_error, err);
      r.max_rel_error = std::max(r.max_rel_error, err / std::max({1.0, std::fabs(t), std::fabs(n)}));
    }
  }
  return r;
}

absl::StatusOr<double> ComputeGradientError(const Scope& scope, const std::vector<Output>& xs,
                                            const std::vector<Tensor>& x_values, const std::vector<Output>& ys,
                                            double delta) {
  ASSIGN_OR_RETURN(GradientCheckResult r, CheckGradients(scope, xs, x_values, ys, delta));
  return r.max_abs_error;
}

}  // namespace distflow
