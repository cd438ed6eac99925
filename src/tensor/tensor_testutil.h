// Comparisons of tensors for tests: exact equality and closeness with absolute
// and relative tolerances. Each returns an AssertionResult whose message names
// the first differing element and prints both tensors.
#pragma once

#include "distflow/tensor.h"
#include "gtest/gtest.h"

namespace distflow {
namespace test {

// Same dtype, same shape, and every element equal (NaN never equals NaN).
::testing::AssertionResult TensorEqual(const Tensor& expected, const Tensor& actual);

// Same dtype and shape; for floating types |a - e| <= atol + rtol * |e| for
// every element, NaN matching NaN; other types must be equal.
::testing::AssertionResult TensorNear(const Tensor& expected, const Tensor& actual, double atol = 1e-5,
                                      double rtol = 1e-5);

}  // namespace test
}  // namespace distflow

#define EXPECT_TENSOR_EQ(expected, actual) EXPECT_TRUE(::distflow::test::TensorEqual(expected, actual))
#define EXPECT_TENSOR_NEAR(expected, actual, atol) \
  EXPECT_TRUE(::distflow::test::TensorNear(expected, actual, atol, atol))
