#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::OpTest;

Tensor I32(const std::vector<int32_t>& v) { return Tensor::FromVector<int32_t>(v); }
Tensor I64(const std::vector<int64_t>& v) { return Tensor::FromVector<int64_t>(v); }
Tensor D(const std::vector<double>& v, std::initializer_list<int64_t> dims) {
  return Tensor::FromVector<double>(v, TensorShape(dims));
}
std::vector<int64_t> Ints(const Tensor& t) {
  std::vector<int64_t> out;
  if (t.dtype() == DT_INT32) {
    for (int32_t v : t.flat<int32_t>()) out.push_back(v);
  } else {
    for (int64_t v : t.flat<int64_t>()) out.push_back(v);
  }
  return out;
}
std::vector<double> Doubles(const Tensor& t) {
  auto f = t.flat<double>();
  return std::vector<double>(f.begin(), f.end());
}
using V = std::vector<int64_t>;
using DV = std::vector<double>;

std::pair<V, V> Bga(const Tensor& a, const Tensor& b) {
  OpTest t("BroadcastGradientArgs");
  t.Input(a).Input(b);
  auto out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  return {Ints((*out)[0]), Ints((*out)[1])};
}

TEST(BroadcastGradientArgs, Cases) {
  EXPECT_EQ(Bga(I32({2, 3}), I32({3})), std::make_pair(V{}, V{0}));
  EXPECT_EQ(Bga(I32({2, 1}), I32({1, 3})), std::make_pair(V{1}, V{0}));
  EXPECT_EQ(Bga(I32({}), I32({4, 5})), std::make_pair(V{0, 1}, V{}));
  EXPECT_EQ(Bga(I32({4, 5}), I32({4, 5})), std::make_pair(V{}, V{}));
  EXPECT_EQ(Bga(I64({2, 1, 5}), I64({1})), std::make_pair(V{1}, V{0, 1, 2}));
  OpTest bad("BroadcastGradientArgs");
  bad.Input(I32({2, 3})).Input(I32({4}));
  auto out = bad.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(std::string(out.status().message()).find("Incompatible shapes"), std::string::npos) << out.status();
}

TEST(ReducedShape, SetsReducedAxesToOne) {
  OpTest t("ReducedShape");
  t.Input(I32({2, 3, 4})).Input(I32({0, -1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Ints((*out)[0]), (V{1, 3, 1}));
  OpTest bad("ReducedShape");
  bad.Input(I32({2, 3})).Input(I32({2}));
  EXPECT_FALSE(bad.Run().ok());
}

TEST(BroadcastTo, Broadcasts) {
  OpTest t("BroadcastTo");
  t.Input(D({1, 2, 3}, {3})).Input(I32({2, 3}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({2, 3}));
  EXPECT_EQ(Doubles((*out)[0]), (DV{1, 2, 3, 1, 2, 3}));

  OpTest t2("BroadcastTo");
  t2.Input(D({1, 2}, {2, 1})).Input(I64({2, 2, 3}));
  out = t2.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Doubles((*out)[0]), (DV{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}));

  OpTest t3("BroadcastTo");
  t3.Input(Tensor::Scalar<double>(7)).Input(I32({2}));
  out = t3.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Doubles((*out)[0]), (DV{7, 7}));

  OpTest bad("BroadcastTo");
  bad.Input(D({1, 2, 3}, {3})).Input(I32({2, 2}));
  EXPECT_FALSE(bad.Run().ok());
}

// out[i] = in[the index of i with the broadcast dimensions at 0], one element at a time.
std::vector<double> NaiveBroadcast(const std::vector<double>& in, const V& in_dims, const V& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> out;
  for (int64_t o = 0; o < n; ++o) {
    int64_t rest = o, off = 0, stride = 1;
    for (int k = static_cast<int>(dims.size()) - 1; k >= 0; --k) {
      const size_t u = static_cast<size_t>(k);
      const int64_t i = rest % dims[u];
      rest /= dims[u];
      const int64_t in_dim = u + in_dims.size() >= dims.size() ? in_dims[u + in_dims.size() - dims.size()] : 1;
      if (in_dim != 1) off += i * stride;
      stride *= in_dim;
    }
    out.push_back(in[static_cast<size_t>(off)]);
  }
  return out;
}

TEST(BroadcastTo, MatchesAnElementwiseReferenceWhateverDimensionsBroadcast) {
  // Runs of copied and of broadcast dimensions, size-1 dimensions, a lower
  // input rank and empty outputs: the kernel copies or fills a block at a time.
  const std::vector<std::pair<V, V>> cases = {{{64, 1, 64}, {64, 8, 64}},
                                              {{3, 1}, {3, 4}},
                                              {{1, 4}, {3, 4}},
                                              {{2, 1, 3, 1}, {2, 4, 3, 5}},
                                              {{1, 3, 1, 2}, {2, 3, 4, 2}},
                                              {{4}, {2, 3, 4}},
                                              {{3, 1, 1}, {3, 2, 2}},
                                              {{1, 1}, {1, 1}},
                                              {{2, 3}, {2, 3}},
                                              {{1, 2, 1}, {1, 2, 1}},
                                              {{2, 0}, {3, 2, 0}},
                                              {{1}, {0}}};
  for (const auto& [in_dims, dims] : cases) {
    int64_t n = 1;
    for (int64_t d : in_dims) n *= d;
    std::vector<double> in;
    for (int64_t i = 0; i < n; ++i) in.push_back(static_cast<double>(i) + 0.5);
    OpTest t("BroadcastTo");
    t.Input(Tensor::FromVector<double>(in, TensorShape(in_dims))).Input(I64(dims));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].shape(), TensorShape(dims));
    EXPECT_EQ(Doubles((*out)[0]), NaiveBroadcast(in, in_dims, dims))
        << "[" << absl::StrJoin(in_dims, ",") << "] to [" << absl::StrJoin(dims, ",") << "]";
  }
}

TEST(BroadcastTo, EstimatesItsWorkFromTheShapeItIsGiven) {
  // The shapes alone do not tell the output's size; the `shape` value does,
  // so the executor runs a small broadcast inline instead of on its pool.
  OpTest t("BroadcastTo");
  t.Input(D({1, 2}, {2, 1})).Input(I64({64, 2, 512}));
  DF_ASSERT_OK_AND_ASSIGN(int64_t w, t.EstimatedWork());
  EXPECT_EQ(w, 64 * 2 * 512);
  OpTest negative("BroadcastTo");
  negative.Input(D({1}, {1})).Input(I64({-1, 2}));
  DF_ASSERT_OK_AND_ASSIGN(int64_t unknown, negative.EstimatedWork());
  EXPECT_EQ(unknown, -1);
}

TEST(InvertPermutation, Inverts) {
  OpTest t("InvertPermutation");
  t.Input(I32({2, 0, 1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Ints((*out)[0]), (V{1, 2, 0}));
  OpTest bad("InvertPermutation");
  bad.Input(I32({0, 0}));
  EXPECT_FALSE(bad.Run().ok());
}

TEST(ConcatOffset, Offsets) {
  OpTest t("ConcatOffset");
  t.Input(Tensor::Scalar<int32_t>(1)).Input(I32({2, 3})).Input(I32({2, 5})).Input(I32({2, 1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ(Ints((*out)[0]), (V{0, 0}));
  EXPECT_EQ(Ints((*out)[1]), (V{0, 3}));
  EXPECT_EQ(Ints((*out)[2]), (V{0, 8}));
  OpTest bad("ConcatOffset");
  bad.Input(Tensor::Scalar<int32_t>(1)).Input(I32({2, 3})).Input(I32({3, 5}));
  EXPECT_FALSE(bad.Run().ok());
}

TEST(SliceGrad, PadsWithZeros) {
  OpTest t("SliceGrad");
  t.Input(I32({3, 3})).Input(I32({1, 1})).Input(D({1, 2, 3, 4}, {2, 2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({3, 3}));
  EXPECT_EQ(Doubles((*out)[0]), (DV{0, 0, 0, 0, 1, 2, 0, 3, 4}));
  OpTest bad("SliceGrad");
  bad.Input(I32({3, 3})).Input(I32({2, 2})).Input(D({1, 2, 3, 4}, {2, 2}));
  EXPECT_FALSE(bad.Run().ok());
}

TEST(ReduceProdGrad, ProductOfOthersWithZeros) {
  OpTest t("ReduceProdGrad");
  t.Input(D({1, 2, 3, 4, 0, 6}, {2, 3})).Input(I32({1}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Doubles((*out)[0]), (DV{6, 3, 2, 0, 24, 0}));
  OpTest t2("ReduceProdGrad");
  t2.Input(D({1, 2, 3, 4}, {2, 2})).Input(I32({0}));
  out = t2.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Doubles((*out)[0]), (DV{3, 4, 1, 2}));
}

}  // namespace
}  // namespace distflow
