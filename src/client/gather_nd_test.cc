// ops::GatherNd and ops::ScatterNd through the public API: values as NumPy
// gives them (p[tuple(idx.T)], np.add.at), shapes inferred when the inputs'
// are known, gradients checked numerically, and bad input (a tuple out of
// range or negative, tuples longer than the rank, updates of the wrong
// shape, indices of the wrong type) reported naming the op, the tuple and
// the shape, in the scope when it is known while building and from the step
// when only the values show it.
#include <string>
#include <vector>

#include "client/gradient_test_util.h"
#include "distflow/ops.h"
#include "distflow/session.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;
using namespace grad_test;  // NOLINT: the shared gradient-test helpers

Output Ids(const Scope& s, std::vector<int32_t> v, TensorShape shape) {
  return ops::Const(s, Tensor::FromVector<int32_t>(v, shape));
}

Output Table(const Scope& s) {  // [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
  return ops::Const(s, Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, TensorShape({3, 4})));
}

TEST(GatherNd, ElementsRowsAndBatchesOfTuples) {
  Scope root = Scope::NewRootScope();
  Output p = Table(root);
  Output elems = ops::GatherNd(root, p, Ids(root, {2, 1, 0, 3}, TensorShape({2, 2})));
  Output rows = ops::GatherNd(root, p, ops::Const(root, Tensor::FromVector<int64_t>({2, 0}, TensorShape({2, 1}))));
  // Indices [2, 1, 2]: a 2 x 1 batch of element tuples, so the result is 2 x 1.
  Output batched = ops::GatherNd(root.WithOpName("batched"), p, Ids(root, {0, 0, 2, 3}, TensorShape({2, 1, 2})));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(elems.shape().DebugString(), "[2]");
  EXPECT_EQ(rows.shape().DebugString(), "[2,4]");
  EXPECT_EQ(batched.shape().DebugString(), "[2,1]");
  EXPECT_EQ(batched.op().name(), "batched");
  Session sess;
  auto out = sess.Run({elems, rows, batched});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({9, 3}), (*out)[0]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({8, 9, 10, 11, 0, 1, 2, 3}, TensorShape({2, 4})), (*out)[1]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 11}, TensorShape({2, 1})), (*out)[2]);
}

TEST(ScatterNd, AddsDuplicatesIntoZerosOfTheShape) {
  Scope root = Scope::NewRootScope();
  // Rows 1 and 3 of a 5 x 2 result; row 1 twice, so its updates add up.
  Output rows = ops::ScatterNd(root, Ids(root, {1, 3, 1}, TensorShape({3, 1})),
                               ops::Const(root, {1, 2, 3, 4, 5, 6}, TensorShape({3, 2})), std::vector<int64_t>{5, 2});
  // Element tuples with int64 indices and the shape as a tensor.
  Output elems = ops::ScatterNd(root, ops::Const(root, Tensor::FromVector<int64_t>({0, 1, 1, 0}, TensorShape({2, 2}))),
                                ops::Const(root, Tensor::FromVector<int32_t>({7, -7})),
                                ops::Const(root, Tensor::FromVector<int64_t>({2, 2})));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(rows.shape().DebugString(), "[5,2]");
  Session sess;
  auto out = sess.Run({rows, elems});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 0, 6, 8, 0, 0, 3, 4, 0, 0}, TensorShape({5, 2})), (*out)[0]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<int32_t>({0, 7, -7, 0}, TensorShape({2, 2})), (*out)[1]);
}

TEST(GatherNdGradient, IsAScatterNdAndViceVersa) {
  auto check = [](const std::vector<Tensor>& values, const Builder& f, const std::string& what) {
    CheckGradient(values, f, what, kTol, /*require_gradient=*/true);
  };
  check(
      {Random(S({3, 4}), -1, 1, 11)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::GatherNd(s, x[0], Ids(s, {2, 1, 0, 3, 2, 1}, TensorShape({3, 2})));
      },
      "GatherNd elements, one repeated");
  check(
      {Random(S({3, 2, 2}), -1, 1, 12)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::GatherNd(s, x[0], Ids(s, {2, 1, 2, 1, 0, 0}, TensorShape({3, 2})));
      },
      "GatherNd slices of a rank-3 tensor");
  check(
      {Random(S({3, 2}), -1, 1, 13)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::ScatterNd(s, Ids(s, {1, 3, 1}, TensorShape({3, 1})), x[0], std::vector<int64_t>{4, 2});
      },
      "ScatterNd rows");
}

TEST(GatherNd, ATupleOutOfRangeNamesTheTupleAndTheShape) {
  Scope root = Scope::NewRootScope();
  Output p = Table(root);
  Output too_far = ops::GatherNd(root.WithOpName("lookup"), p, Ids(root, {0, 0, 1, 4}, TensorShape({2, 2})));
  Output negative = ops::GatherNd(root, p, Ids(root, {-1}, TensorShape({1, 1})));
  ASSERT_TRUE(root.ok()) << root.status();  // only the values are wrong
  Session sess;
  auto failed = sess.Run({too_far});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(failed.status().message());
  EXPECT_THAT(msg, HasSubstr("GatherNd (node 'lookup')"));
  EXPECT_THAT(msg, HasSubstr("index tuple 1 = [1, 4] is out of bounds: entry 1 is not in [0, 4)"));
  EXPECT_THAT(msg, HasSubstr("for shape [3, 4]"));
  auto neg = sess.Run({negative});
  ASSERT_FALSE(neg.ok());
  EXPECT_THAT(std::string(neg.status().message()), HasSubstr("index tuple 0 = [-1] is out of bounds"));
  // The session still serves good steps.
  auto good = sess.Run({ops::GatherNd(root, p, Ids(root, {1, 2}, TensorShape({1, 2})))});
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({6}), (*good)[0]);
}

TEST(ScatterNd, ATupleOutOfRangeNamesTheTupleAndTheShape) {
  Scope root = Scope::NewRootScope();
  Output out = ops::ScatterNd(root.WithOpName("scatter"), Ids(root, {1, 5}, TensorShape({2, 1})),
                              ops::Const(root, {1, 2, 3, 4}, TensorShape({2, 2})), std::vector<int64_t>{4, 2});
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  auto failed = sess.Run({out});
  ASSERT_FALSE(failed.ok());
  const std::string msg(failed.status().message());
  EXPECT_THAT(msg, HasSubstr("ScatterNd (node 'scatter')"));
  EXPECT_THAT(msg, HasSubstr("index tuple 1 = [5] is out of bounds: entry 0 is not in [0, 4) for shape [4, 2]"));
}

// Tuples longer than the rank: when the shapes are known the scope says so
// while building; when they are not, the step does.
TEST(GatherNd, TuplesLongerThanTheRankAreErrors) {
  {
    Scope root = Scope::NewRootScope();
    ops::GatherNd(root, Table(root), Ids(root, {0, 0, 0}, TensorShape({1, 3})));
    ASSERT_FALSE(root.ok());
    const std::string msg(root.status().message());
    EXPECT_THAT(msg, HasSubstr("index tuples of length 3"));
    EXPECT_THAT(msg, HasSubstr("params of shape [3,4]"));
  }
  Scope root = Scope::NewRootScope();
  Output params = ops::Placeholder(root, DT_FLOAT);
  Output indices = ops::Placeholder(root, DT_INT32);
  Output y = ops::GatherNd(root.WithOpName("g"), params, indices);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  auto failed = sess.Run({{params, Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2}))},
                          {indices, Tensor::FromVector<int32_t>({0, 0, 0}, TensorShape({1, 3}))}},
                         {y});
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("GatherNd (node 'g'): index tuples of length 3 address more dimensions than the shape "
                        "[2, 2] has"));
  // Scalar indices hold no tuple at all.
  auto scalar = sess.Run(
      {{params, Tensor::FromVector<float>({1, 2}, TensorShape({2}))}, {indices, Tensor::Scalar<int32_t>(0)}}, {y});
  ASSERT_FALSE(scalar.ok());
  EXPECT_THAT(std::string(scalar.status().message()), HasSubstr("indices must be at least a vector"));
}

TEST(ScatterNd, UpdatesOfTheWrongShapeAndLongTuplesAreErrors) {
  {
    Scope root = Scope::NewRootScope();
    // Two row tuples of a [4, 2] result need updates [2, 2], not [2, 3].
    ops::ScatterNd(root, Ids(root, {0, 1}, TensorShape({2, 1})),
                   ops::Const(root, {1, 2, 3, 4, 5, 6}, TensorShape({2, 3})), std::vector<int64_t>{4, 2});
    ASSERT_FALSE(root.ok());
    const std::string msg(root.status().message());
    EXPECT_THAT(msg, HasSubstr("updates of shape [2,3] do not match indices.shape[:-1] + shape[k:] = [2,2]"));
  }
  {
    Scope root = Scope::NewRootScope();
    ops::ScatterNd(root, Ids(root, {0, 1, 1}, TensorShape({1, 3})), ops::Const(root, {1.0f}, TensorShape({1})),
                   std::vector<int64_t>{4, 2});
    ASSERT_FALSE(root.ok());
    EXPECT_THAT(std::string(root.status().message()),
                HasSubstr("index tuples of length 3 address more dimensions than the output shape [4,2] has"));
  }
  // Unknown at build time: the step checks the updates.
  Scope root = Scope::NewRootScope();
  Output updates = ops::Placeholder(root, DT_FLOAT);
  Output y =
      ops::ScatterNd(root.WithOpName("s"), Ids(root, {0, 1}, TensorShape({2, 1})), updates, std::vector<int64_t>{4, 2});
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  auto failed = sess.Run({{updates, Tensor::FromVector<float>({1, 2, 3}, TensorShape({3}))}}, {y});
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("ScatterNd (node 's'): updates of shape [3] do not match indices.shape[:-1] + shape[k:] = "
                        "[2, 2]"));
}

TEST(GatherNd, IndicesMustBeIntegers) {
  Scope root = Scope::NewRootScope();
  ops::GatherNd(root, Table(root), ops::Const(root, {0.0f, 1.0f}, TensorShape({1, 2})));
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("Tindices"));
}

TEST(ScatterNd, AShapeTooLargeForInt32IndicesIsAnError) {
  Scope root = Scope::NewRootScope();
  ops::ScatterNd(root, Ids(root, {0}, TensorShape({1, 1})), ops::Const(root, {1.0f}, TensorShape({1})),
                 std::vector<int64_t>{int64_t{1} << 33});
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("shape entry 8589934592 does not fit the int32 type"));
}

}  // namespace
}  // namespace distflow
