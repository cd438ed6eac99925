// ops::ScatterNdUpdate, ops::ScatterNdAdd (on variables) and
// ops::TensorScatterUpdate through the public API: values as NumPy gives
// them (v[tuple(idx.T)] = u, np.add.at), TensorScatterUpdate's gradient
// checked numerically (also where tuples repeat: only the update written
// last gets one), and a tuple out of range reported naming the op, the tuple
// and its bound, with the variable left as it was.
#include "distflow/scatter_nd.h"

#include <string>
#include <vector>

#include "client/gradient_test_util.h"
#include "distflow/gradients.h"
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

Tensor Table() {  // [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
  return Tensor::FromVector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8}, TensorShape({3, 3}));
}

TEST(ScatterNdUpdate, AssignsRowsAndElementsInPlaceTheLastDuplicateWinning) {
  Scope root = Scope::NewRootScope();
  Output v = ops::MakeVariable(root.WithOpName("v"), ops::Const(root, Table()));
  // Row 2 twice: the second update wins. Then elements (0, 1) and (1, 0).
  Output rows = ops::ScatterNdUpdate(
      root, v, Ids(root, {2, 0, 2}, TensorShape({3, 1})),
      ops::Const(root, {10.f, 11.f, 12.f, 20.f, 21.f, 22.f, 30.f, 31.f, 32.f}, TensorShape({3, 3})));
  Output elems = ops::ScatterNdUpdate(root, v, Ids(root, {0, 1, 1, 0}, TensorShape({2, 2})),
                                      ops::Const(root, Tensor::FromVector<float>({-1, -2})));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(rows.shape().DebugString(), "[3,3]");
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  auto after_rows = sess.Run({rows});
  ASSERT_TRUE(after_rows.ok()) << after_rows.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({20, 21, 22, 3, 4, 5, 30, 31, 32}, TensorShape({3, 3})), (*after_rows)[0]);
  auto after_elems = sess.Run({elems});
  ASSERT_TRUE(after_elems.ok()) << after_elems.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({20, -1, 22, -2, 4, 5, 30, 31, 32}, TensorShape({3, 3})),
                   (*after_elems)[0]);
}

TEST(ScatterNdAdd, AddsDuplicatesUp) {
  Scope root = Scope::NewRootScope();
  Output v = ops::MakeVariable(root.WithOpName("v"), ops::Const(root, Table()));
  Output add =
      ops::ScatterNdAdd(root, v, ops::Const(root, Tensor::FromVector<int64_t>({1, 1, 1, 1, 2, 0}, TensorShape({3, 2}))),
                        ops::Const(root, Tensor::FromVector<float>({1, 10, 100})));
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  auto out = sess.Run({add});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 1, 2, 3, 15, 5, 106, 7, 8}, TensorShape({3, 3})), (*out)[0]);
}

TEST(TensorScatterUpdate, CopiesTheTensorAndAssignsSlices) {
  Scope root = Scope::NewRootScope();
  Output t = ops::Const(root, Table());
  Output out =
      ops::TensorScatterUpdate(root, t, Ids(root, {1, 1, 1}, TensorShape({3, 1})),
                               ops::Const(root, {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}, TensorShape({3, 3})));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(out.shape().DebugString(), "[3,3]");
  Session sess;
  auto got = sess.Run({out, t});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 1, 2, 7, 8, 9, 6, 7, 8}, TensorShape({3, 3})), (*got)[0]);
  EXPECT_TENSOR_EQ(Table(), (*got)[1]) << "the input is not changed";
}

TEST(TensorScatterUpdateGradient, ChecksNumericallyAndOnlyTheLastDuplicateGetsOne) {
  auto check = [](const std::vector<Tensor>& values, const Builder& f, const std::string& what) {
    CheckGradient(values, f, what, kTol, /*require_gradient=*/true);
  };
  check(
      {Random(S({3, 2}), -1, 1, 21), Random(S({2, 2}), -1, 1, 22)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Square(s, ops::TensorScatterUpdate(s, x[0], Ids(s, {2, 0}, TensorShape({2, 1})), x[1]));
      },
      "TensorScatterUpdate rows");
  check(
      {Random(S({3, 2}), -1, 1, 23), Random(S({3}), -1, 1, 24)},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Square(s, ops::TensorScatterUpdate(s, x[0], Ids(s, {1, 1, 0, 0, 1, 1}, TensorShape({3, 2})), x[1]));
      },
      "TensorScatterUpdate elements, one tuple repeated");
  Scope root = Scope::NewRootScope();
  Output t = ops::Const(root, Tensor::FromVector<float>({1, 2, 3, 4}));
  Output u = ops::Const(root, Tensor::FromVector<float>({10, 20, 30}));
  Output out = ops::TensorScatterUpdate(root, t, Ids(root, {3, 0, 3}, TensorShape({3, 1})), u);  // [20, 2, 3, 30]
  Output weights = ops::Const(root, Tensor::FromVector<float>({1, 2, 3, 4}));
  auto grads = Gradients(root, {ops::Sum(root, ops::Mul(root, out, weights), {0})}, {t, u});
  ASSERT_TRUE(grads.ok()) << grads.status();
  Session sess;
  auto got = sess.Run({out, (*grads)[0], (*grads)[1]});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({20, 2, 3, 30}), (*got)[0]);
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 2, 3, 0}), (*got)[1]);
  // u[0] was written at 3 and then overwritten by u[2]: no gradient.
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({0, 1, 4}), (*got)[2]);
}

TEST(ScatterNdUpdate, ATupleOutOfRangeNamesTheOpTheTupleAndTheBoundAndWritesNothing) {
  Scope root = Scope::NewRootScope();
  Output v = ops::MakeVariable(root.WithOpName("v"), ops::Const(root, Table()));
  Output bad = ops::ScatterNdUpdate(root.WithOpName("write"), v, Ids(root, {0, 0, 1, 3}, TensorShape({2, 2})),
                                    ops::Const(root, Tensor::FromVector<float>({-1, -2})));
  Output bad_add = ops::ScatterNdAdd(root.WithOpName("add"), v, Ids(root, {-1}, TensorShape({1, 1})),
                                     ops::Const(root, Tensor::FromVector<float>({1, 1, 1}, TensorShape({1, 3}))));
  Output bad_copy =
      ops::TensorScatterUpdate(root.WithOpName("copy"), ops::Const(root, Table()), Ids(root, {4}, TensorShape({1, 1})),
                               ops::Const(root, Tensor::FromVector<float>({1, 1, 1}, TensorShape({1, 3}))));
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  auto failed = sess.Run({bad});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("ScatterNdUpdate (node 'write')"));
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("index tuple 1 = [1, 3] is out of bounds: entry 1 is not in [0, 3) for shape [3, 3]"));
  auto failed_add = sess.Run({bad_add});
  ASSERT_FALSE(failed_add.ok());
  EXPECT_THAT(std::string(failed_add.status().message()), HasSubstr("ScatterNdAdd (node 'add')"));
  EXPECT_THAT(std::string(failed_add.status().message()), HasSubstr("index tuple 0 = [-1] is out of bounds"));
  auto failed_copy = sess.Run({bad_copy});
  ASSERT_FALSE(failed_copy.ok());
  EXPECT_THAT(std::string(failed_copy.status().message()),
              HasSubstr("TensorScatterUpdate (node 'copy'): index tuple 0 = [4] is out of bounds: entry 0 is not in "
                        "[0, 3)"));
  auto value = sess.Run({v});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_TENSOR_EQ(Table(), (*value)[0]) << "nothing was written";
}

TEST(ScatterNdUpdate, UpdatesOfTheWrongShapeAreAnErrorInTheScope) {
  Scope root = Scope::NewRootScope();
  Output v = ops::MakeVariable(root.WithOpName("v"), ops::Const(root, Table()));
  ops::ScatterNdUpdate(root, v, Ids(root, {0, 2}, TensorShape({2, 1})),
                       ops::Const(root, Tensor::FromVector<float>({1, 2, 3}, TensorShape({1, 3}))));
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("ScatterNdUpdate: updates of shape [1,3]"));
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("[2,3]"));
}

}  // namespace
}  // namespace distflow
