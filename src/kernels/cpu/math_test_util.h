// Helpers shared by the math kernel tests (math_kernels_test.cc,
// math_kernels_more_test.cc): run one op on given inputs, build small
// tensors, and check an error message.
#pragma once

#include <string>
#include <vector>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace math_test {

using ::distflow::test::OpTest;

inline absl::StatusOr<Tensor> RunBinary(const std::string& op, const Tensor& a, const Tensor& b, int threads = 0) {
  OpTest t(op);
  t.Input(a).Input(b);
  if (threads > 0) t.IntraOpThreads(threads);
  ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  return out[0];
}

inline absl::StatusOr<Tensor> RunUnary(const std::string& op, const Tensor& a, int threads = 0) {
  OpTest t(op);
  t.Input(a);
  if (threads > 0) t.IntraOpThreads(threads);
  ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  return out[0];
}

template <typename T>
Tensor V(std::vector<T> v, TensorShape s) {
  return Tensor::FromVector<T>(v, s);
}
template <typename T>
Tensor V(std::vector<T> v) {
  return Tensor::FromVector<T>(v);
}
inline Tensor B(std::vector<bool> v, TensorShape s) {
  Tensor t(DT_BOOL, s);
  for (size_t i = 0; i < v.size(); ++i) t.flat<bool>()[i] = v[i];
  return t;
}
inline Tensor B(std::vector<bool> v) { return B(v, TensorShape({static_cast<int64_t>(v.size())})); }

#define EXPECT_ERROR_CONTAINS(status_or, text)                                                        \
  do {                                                                                                \
    auto df_r_ = (status_or);                                                                         \
    ASSERT_FALSE(df_r_.ok());                                                                         \
    EXPECT_NE(std::string(df_r_.status().message()).find(text), std::string::npos) << df_r_.status(); \
  } while (0)

}  // namespace math_test
}  // namespace distflow
