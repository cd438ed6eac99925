#include <random>
#include <tuple>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/gemm.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

// A [rows, cols] tensor of small values (integers for the integer dtypes).
template <typename T>
Tensor RandomMatrix(int64_t rows, int64_t cols, std::mt19937* gen) {
  std::vector<T> v(static_cast<size_t>(rows * cols));
  std::uniform_int_distribution<int> d(-8, 8);
  for (T& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(d(*gen)) / T(4) + static_cast<T>(d(*gen)) / T(1024);
    } else {
      x = static_cast<T>(d(*gen));
    }
  }
  return Tensor::FromVector<T>(v, TensorShape({rows, cols}));
}

// op(a) * op(b) in double, converted back to T.
template <typename T>
Tensor Reference(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  auto am = a.matrix<T>();
  auto bm = b.matrix<T>();
  const int64_t m = ta ? am.cols : am.rows, k = ta ? am.rows : am.cols, n = tb ? bm.rows : bm.cols;
  std::vector<T> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = static_cast<double>(ta ? am(p, i) : am(i, p));
        const double y = static_cast<double>(tb ? bm(j, p) : bm(p, j));
        acc += x * y;
      }
      out[static_cast<size_t>(i * n + j)] = static_cast<T>(acc);
    }
  }
  return Tensor::FromVector<T>(out, TensorShape({m, n}));
}

absl::StatusOr<std::vector<Tensor>> RunMatMul(const Tensor& a, const Tensor& b, bool ta, bool tb, int threads = 0) {
  test::OpTest t("MatMul");
  t.Input(a).Input(b);
  SetAttrBool(t.def(), "transpose_a", ta);
  SetAttrBool(t.def(), "transpose_b", tb);
  if (threads > 0) t.IntraOpThreads(threads);
  return t.Run();
}

template <typename T>
void CheckAllTransposes(int64_t m, int64_t k, int64_t n, int threads) {
  std::mt19937 gen(static_cast<unsigned>(m * 1000003 + k * 1009 + n));
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "m=" << m << " k=" << k << " n=" << n << " ta=" << ta << " tb=" << tb
                                        << " threads=" << threads);
      Tensor a = ta ? RandomMatrix<T>(k, m, &gen) : RandomMatrix<T>(m, k, &gen);
      Tensor b = tb ? RandomMatrix<T>(n, k, &gen) : RandomMatrix<T>(k, n, &gen);
      auto out = RunMatMul(a, b, ta, tb, threads);
      ASSERT_TRUE(out.ok()) << out.status();
      Tensor expected = Reference<T>(a, b, ta, tb);
      if constexpr (std::is_floating_point_v<T>) {
        EXPECT_TRUE(test::TensorNear(expected, (*out)[0], 1e-3, 1e-4));
      } else {
        EXPECT_TENSOR_EQ(expected, (*out)[0]);
      }
    }
  }
}

template <typename T>
class MatMulTyped : public ::testing::Test {};
using MatMulTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(MatMulTyped, MatMulTypes);

TYPED_TEST(MatMulTyped, SmallShapesAllTransposes) {
  for (auto [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {2, 3, 4}, {5, 1, 7}, {7, 9, 3}, {16, 16, 16}, {33, 17, 65}}) {
    CheckAllTransposes<TypeParam>(m, k, n, 0);
  }
}

TYPED_TEST(MatMulTyped, ZeroSizedDims) {
  for (auto [m, k, n] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{0, 3, 4}, {3, 0, 4}, {3, 4, 0}, {0, 0, 0}}) {
    CheckAllTransposes<TypeParam>(m, k, n, 0);
    CheckAllTransposes<TypeParam>(m, k, n, 2);
  }
}

TYPED_TEST(MatMulTyped, LargeMultiThreadedMatchesReferenceAndSingleThread) {
  CheckAllTransposes<TypeParam>(300, 200, 100, 2);
  std::mt19937 gen(7);
  Tensor a = RandomMatrix<TypeParam>(300, 200, &gen);
  Tensor b = RandomMatrix<TypeParam>(200, 100, &gen);
  auto single = RunMatMul(a, b, false, false, 0);
  auto multi = RunMatMul(a, b, false, false, 2);
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_TRUE(multi.ok()) << multi.status();
  if constexpr (std::is_floating_point_v<TypeParam>) {
    EXPECT_TRUE(test::TensorNear((*single)[0], (*multi)[0], 1e-4, 1e-5));
  } else {
    EXPECT_TENSOR_EQ((*single)[0], (*multi)[0]);
  }
}

TEST(MatMul, WideProductsSplitByColumnsMultiThreaded) {
  CheckAllTransposes<float>(4, 200, 300, 2);
  CheckAllTransposes<float>(17, 64, 900, 3);
}

TEST(Sgemm, BothThreadingModesWithLeadingDimsAndBeta) {
  ThreadPool pool("gemm", 1);
  std::mt19937 gen(3);
  // Big enough (> 1 MFLOP per thread) to be split: by rows, then by columns.
  for (auto [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{150, 90, 120}, {20, 300, 200}}) {
    const int64_t ld_pad = 5;
    Tensor a = RandomMatrix<float>(m, k + ld_pad, &gen);
    Tensor b = RandomMatrix<float>(k, n + ld_pad, &gen);
    Tensor c0 = RandomMatrix<float>(m, n + ld_pad, &gen);
    for (GemmThreading mode : {GemmThreading::kOmp, GemmThreading::kPool}) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        Tensor c = c0.DeepCopy();
        DF_ASSERT_OK(Sgemm(false, false, m, n, k, 2.0f, a.flat<float>().data(), k + ld_pad, b.flat<float>().data(),
                           n + ld_pad, 0.5f, c.flat<float>().data(), n + ld_pad, p, mode));
        auto am = a.matrix<float>(), bm = b.matrix<float>(), cm = c.matrix<float>(), c0m = c0.matrix<float>();
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n + ld_pad; ++j) {
            double want = c0m(i, j);
            if (j < n) {
              double acc = 0;
              for (int64_t q = 0; q < k; ++q) acc += double(am(i, q)) * double(bm(q, j));
              want = 2.0 * acc + 0.5 * want;
            }
            ASSERT_NEAR(want, cm(i, j), 1e-3) << i << "," << j;
          }
        }
      }
    }
  }
}

TEST(MatMul, KnownValues) {
  Tensor a = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  Tensor b = Tensor::FromVector<float>({7, 8, 9, 10, 11, 12}, TensorShape({3, 2}));
  auto out = RunMatMul(a, b, false, false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({58, 64, 139, 154}, TensorShape({2, 2})), (*out)[0]);
}

TEST(MatMul, SizeMismatchNamesBothShapes) {
  Tensor a = Tensor::FromVector<float>(std::vector<float>(6, 1.0f), TensorShape({2, 3}));
  Tensor b = Tensor::FromVector<float>(std::vector<float>(20, 1.0f), TensorShape({4, 5}));
  auto out = RunMatMul(a, b, false, false);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Matrix size-incompatible: In[0]: [2,3], In[1]: [4,5]"), std::string::npos)
      << out.status();
}

TEST(MatMul, TransposeMakesShapesCompatible) {
  Tensor a = Tensor::FromVector<double>(std::vector<double>(6, 1.0), TensorShape({3, 2}));
  Tensor b = Tensor::FromVector<double>(std::vector<double>(12, 1.0), TensorShape({3, 4}));
  EXPECT_FALSE(RunMatMul(a, b, false, false).ok());
  auto out = RunMatMul(a, b, true, false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({2, 4}));
}

TEST(MatMul, RejectsNonMatrices) {
  Tensor a = Tensor::FromVector<float>({1, 2, 3});
  Tensor b = Tensor::FromVector<float>({1, 2, 3}, TensorShape({3, 1}));
  EXPECT_FALSE(RunMatMul(a, b, false, false).ok());
}

}  // namespace
}  // namespace distflow
