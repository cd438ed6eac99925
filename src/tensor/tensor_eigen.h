// Eigen TensorMap views of a Tensor's elements, for kernels that want Eigen
// expressions. Kept apart from tensor.h because Eigen's Tensor module is heavy
// to compile. Views are unaligned (a slice may start anywhere) and row-major.
#pragma once

#include <array>

#include "base/logging.h"
#include "distflow/tensor.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace distflow {

template <typename T, int N>
using EigenTensorMap = Eigen::TensorMap<Eigen::Tensor<T, N, Eigen::RowMajor, Eigen::DenseIndex>, Eigen::Unaligned>;

template <typename T>
EigenTensorMap<T, 1> EigenFlat(Tensor& t) {
  return EigenTensorMap<T, 1>(t.flat<T>().data(), t.NumElements());
}
template <typename T>
EigenTensorMap<const T, 1> EigenFlat(const Tensor& t) {
  return EigenTensorMap<const T, 1>(t.flat<T>().data(), t.NumElements());
}

template <typename T>
EigenTensorMap<T, 2> EigenMatrix(Tensor& t) {
  CHECK(t.dims() == 2) << "EigenMatrix on shape " << t.shape().DebugString();
  return EigenTensorMap<T, 2>(t.flat<T>().data(), t.dim_size(0), t.dim_size(1));
}
template <typename T>
EigenTensorMap<const T, 2> EigenMatrix(const Tensor& t) {
  CHECK(t.dims() == 2) << "EigenMatrix on shape " << t.shape().DebugString();
  return EigenTensorMap<const T, 2>(t.flat<T>().data(), t.dim_size(0), t.dim_size(1));
}

// The tensor viewed with rank N; its own rank must be N.
template <typename T, int N>
EigenTensorMap<T, N> EigenTensor(Tensor& t) {
  CHECK(t.dims() == N) << "EigenTensor<" << N << "> on shape " << t.shape().DebugString();
  std::array<Eigen::DenseIndex, N> d;
  for (int i = 0; i < N; ++i) d[static_cast<size_t>(i)] = t.dim_size(i);
  return EigenTensorMap<T, N>(t.flat<T>().data(), d);
}
template <typename T, int N>
EigenTensorMap<const T, N> EigenTensor(const Tensor& t) {
  CHECK(t.dims() == N) << "EigenTensor<" << N << "> on shape " << t.shape().DebugString();
  std::array<Eigen::DenseIndex, N> d;
  for (int i = 0; i < N; ++i) d[static_cast<size_t>(i)] = t.dim_size(i);
  return EigenTensorMap<const T, N>(t.flat<T>().data(), d);
}

// The tensor's elements viewed with the given dims (their product must equal
// the element count), e.g. to see an [N,H,W,C] tensor as [N*H*W, C].
template <typename T, int N>
EigenTensorMap<T, N> EigenShaped(Tensor& t, const std::array<Eigen::DenseIndex, N>& dims) {
  Eigen::DenseIndex n = 1;
  for (auto d : dims) n *= d;
  CHECK(n == t.NumElements()) << "EigenShaped: element count mismatch";
  return EigenTensorMap<T, N>(t.flat<T>().data(), dims);
}
template <typename T, int N>
EigenTensorMap<const T, N> EigenShaped(const Tensor& t, const std::array<Eigen::DenseIndex, N>& dims) {
  Eigen::DenseIndex n = 1;
  for (auto d : dims) n *= d;
  CHECK(n == t.NumElements()) << "EigenShaped: element count mismatch";
  return EigenTensorMap<const T, N>(t.flat<T>().data(), dims);
}

}  // namespace distflow
