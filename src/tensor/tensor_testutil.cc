#include "tensor/tensor_testutil.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace distflow {
namespace test {
namespace {

::testing::AssertionResult Compare(const Tensor& e, const Tensor& a, bool near, double atol, double rtol) {
  if (e.dtype() != a.dtype()) {
    return ::testing::AssertionFailure() << "dtype differs: expected " << DataTypeName(e.dtype()) << ", got "
                                         << DataTypeName(a.dtype());
  }
  if (e.shape() != a.shape()) {
    return ::testing::AssertionFailure() << "shape differs: expected " << e.shape().DebugString() << ", got "
                                         << a.shape().DebugString() << "\nexpected: " << e.DebugString()
                                         << "\nactual:   " << a.DebugString();
  }
  int64_t bad = -1;
  std::string detail;
  VisitDataType(e.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto ef = e.flat<T>();
    auto af = a.flat<T>();
    for (size_t i = 0; i < ef.size(); ++i) {
      bool ok;
      if constexpr (std::is_floating_point_v<T>) {
        double x = ef[i], y = af[i];
        if (near) {
          ok = (std::isnan(x) && std::isnan(y)) || (x == y) || std::fabs(x - y) <= atol + rtol * std::fabs(x);
        } else {
          ok = x == y;
        }
        if (!ok) detail = absl::StrCat("expected ", x, ", got ", y);
      } else {
        ok = ef[i] == af[i];
        if (!ok) detail = "elements differ";
      }
      if (!ok) {
        bad = static_cast<int64_t>(i);
        return;
      }
    }
  });
  if (bad < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << bad << " differs (" << detail
                                       << ")\nexpected: " << e.DebugString() << "\nactual:   " << a.DebugString();
}

}  // namespace

::testing::AssertionResult TensorEqual(const Tensor& expected, const Tensor& actual) {
  return Compare(expected, actual, false, 0, 0);
}

::testing::AssertionResult TensorNear(const Tensor& expected, const Tensor& actual, double atol, double rtol) {
  return Compare(expected, actual, true, atol, rtol);
}

}  // namespace test
}  // namespace distflow
