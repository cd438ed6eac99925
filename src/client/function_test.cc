// Graph functions in C++: a body built in its own Scope, serialized by
// MakeFunctionDef and run by Call nodes (in a sub-executor per function),
// checked against values computed by hand, with the gradient through the
// call checked numerically and bad function definitions named.
#include "distflow/function.h"

#include "client/gradient_test_util.h"
#include "distflow/session.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using grad_test::Op;

// f(x, w) = tanh(x @ w) * x[:, :1] summed over nothing: a 2-result function
// (the product and sum(w)).
std::string Body() {
  Scope b = Scope::NewRootScope();
  Output x = ops::Placeholder(b.WithOpName("x"), DT_DOUBLE, PartialShape({-1, 2}));
  Output w = ops::Placeholder(b.WithOpName("w"), DT_DOUBLE, PartialShape({2, 2}));
  Output h = Op(b, "Tanh", {Op(b, "MatMul", {x, w})});
  Output y = Op(b, "Mul", {h, x});
  Output total = Op(b, "Sum", {w, ops::Const(b, Tensor::FromVector<int32_t>({0, 1}))});
  absl::StatusOr<std::string> def = MakeFunctionDef(b, "tanh_layer", {x, w}, {y, total});
  EXPECT_TRUE(def.ok()) << def.status();
  return def.ok() ? *def : "";
}

std::vector<Output> Call(const Scope& s, const std::string& f, const std::vector<Output>& args, int n_out) {
  Operation op = ops::Raw(s, "Call", args, [&](proto::NodeDef* n) {
    std::vector<DataType> tin, tout(static_cast<size_t>(n_out), DT_DOUBLE);
    for (const Output& a : args) tin.push_back(a.dtype());
    SetAttrTypeList(n, "Tin", tin);
    SetAttrTypeList(n, "Tout", tout);
    SetAttrString(n, "f", f);
  });
  std::vector<Output> out;
  for (int i = 0; i < n_out; ++i) out.emplace_back(op, i, s);
  return out;
}

TEST(Function, CallComputesTheBodyAndTakesItsShapes) {
  const std::string f = Body();
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, Tensor::FromVector<double>({0.5, -1.0, 2.0, 0.25}, TensorShape({2, 2})));
  Output w = ops::Const(root, Tensor::FromVector<double>({1.0, 2.0, -0.5, 0.75}, TensorShape({2, 2})));
  std::vector<Output> out = Call(root, f, {x, w}, 2);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(out[0].shape().DebugString(), "[?,2]");
  EXPECT_EQ(out[1].shape().DebugString(), "[]");
  Session sess;
  absl::StatusOr<std::vector<Tensor>> r = sess.Run(out);
  ASSERT_TRUE(r.ok()) << r.status();
  const double xs[2][2] = {{0.5, -1.0}, {2.0, 0.25}}, ws[2][2] = {{1.0, 2.0}, {-0.5, 0.75}};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      const double h = std::tanh(xs[i][0] * ws[0][j] + xs[i][1] * ws[1][j]);
      EXPECT_NEAR((*r)[0].flat<double>()[static_cast<size_t>(i * 2 + j)], h * xs[i][j], 1e-12);
    }
  }
  EXPECT_NEAR((*r)[1].scalar<double>(), 3.25, 1e-12);
}

TEST(Function, GradientThroughCallMatchesFiniteDifferences) {
  const std::string f = Body();
  grad_test::CheckGradient(
      {grad_test::Random(grad_test::S({3, 2}), -1, 1, 1), grad_test::Random(grad_test::S({2, 2}), -1, 1, 2)},
      [&](const Scope& s, const std::vector<Output>& in) {
        std::vector<Output> out = Call(s, f, in, 2);
        return Op(s, "Add", {Op(s, "Sum", {out[0], ops::Const(s, Tensor::FromVector<int32_t>({0, 1}))}), out[1]});
      },
      "Call(tanh_layer)", grad_test::kTol, true);
}

TEST(Function, BadDefinitionsAreNamed) {
  Scope b = Scope::NewRootScope();
  Output x = ops::Placeholder(b.WithOpName("x"), DT_DOUBLE, PartialShape({2}));
  Output y = Op(b, "Neg", {x});
  absl::StatusOr<std::string> bad = MakeFunctionDef(b, "neg", {y}, {y});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("argument 'Neg:0' must be a Placeholder"), std::string::npos) << bad.status();
  Scope root = Scope::NewRootScope();
  Call(root, "not a function", {ops::Const(root, Tensor::Scalar<double>(1.0))}, 1);
  EXPECT_FALSE(root.ok());
  EXPECT_NE(root.status().message().find("not a serialized FunctionDef"), std::string::npos) << root.status();
  // A call whose argument types differ from the function's.
  Scope other = Scope::NewRootScope();
  absl::StatusOr<std::string> neg = MakeFunctionDef(b, "neg", {x}, {y});
  ASSERT_TRUE(neg.ok());
  Call(other, *neg, {ops::Const(other, Tensor::Scalar<float>(1.0f))}, 1);
  EXPECT_NE(other.status().message().find("argument 0 is float64, got float32"), std::string::npos) << other.status();
}

}  // namespace
}  // namespace distflow
