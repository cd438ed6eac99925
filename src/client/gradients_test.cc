// Symbolic gradients: numeric checks of every differentiable (non-NN) op in
// float64, and the behaviour of Gradients() itself.
#include "distflow/gradients.h"

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "client/gradient_checker.h"
#include "client/gradient_test_util.h"
#include "client/graph_state.h"
#include "distflow/ops.h"
#include "distflow/session.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using namespace grad_test;  // NOLINT: the shared gradient-test helpers

// Values in [lo, hi] with a random sign, so never near zero.
Tensor RandomAwayFromZero(const TensorShape& shape, double lo, double hi, int seed) {
  std::mt19937 gen(static_cast<unsigned>(seed));
  std::uniform_real_distribution<double> u(lo, hi);
  std::bernoulli_distribution b(0.5);
  Tensor t(DT_DOUBLE, shape);
  for (double& v : t.flat<double>()) v = b(gen) ? u(gen) : -u(gen);
  return t;
}

struct In {
  TensorShape shape;
  Tensor value;
};

void Check(const std::vector<Tensor>& values, const Builder& f, const std::string& what, double tol = kTol) {
  CheckGradient(values, f, what, tol, /*require_gradient=*/true);
}

// ---------------------------------------------------------------------------
// Elementwise unary.

TEST(GradientCheck, Unary) {
  Tensor any = Random(S({2, 3}), -2, 2, 1);
  Tensor pos = Random(S({2, 3}), 0.5, 2, 2);
  Tensor nz = RandomAwayFromZero(S({2, 3}), 0.2, 2, 3);
  Check(
      {any}, [](const Scope& s, const std::vector<Output>& x) { return ops::Neg(s, x[0]); }, "Neg");
  Check(
      {any}, [](const Scope& s, const std::vector<Output>& x) { return ops::Square(s, x[0]); }, "Square");
  Check(
      {pos}, [](const Scope& s, const std::vector<Output>& x) { return ops::Sqrt(s, x[0]); }, "Sqrt");
  Check(
      {pos}, [](const Scope& s, const std::vector<Output>& x) { return ops::Rsqrt(s, x[0]); }, "Rsqrt");
  Check(
      {any}, [](const Scope& s, const std::vector<Output>& x) { return ops::Exp(s, x[0]); }, "Exp");
  Check(
      {pos}, [](const Scope& s, const std::vector<Output>& x) { return ops::Log(s, x[0]); }, "Log");
  Check(
      {any}, [](const Scope& s, const std::vector<Output>& x) { return ops::Identity(s, x[0]); }, "Identity");
  Check(
      {nz}, [](const Scope& s, const std::vector<Output>& x) { return Output(ops::Raw(s, "Abs", {x[0]}), 0, s); },
      "Abs");
}

// ---------------------------------------------------------------------------
// Elementwise binary with broadcasting.

struct BinaryCase {
  TensorShape a, b;
};
const std::vector<BinaryCase> kBroadcastCases = {
    {S({2, 3}), S({2, 3})}, {S({2, 3}), S({3})}, {S({3}), S({2, 3})}, {S({2, 1}), S({1, 3})},
    {S({2, 3}), S({})},     {S({}), S({2, 3})},  {S({}), S({})},      {S({2, 1, 3}), S({4, 1})},
};

void CheckBinary(const std::string& name, const std::function<Output(const Scope&, Output, Output)>& f, double a_lo,
                 double a_hi, bool b_away_from_zero) {
  int seed = 10;
  for (const BinaryCase& c : kBroadcastCases) {
    Tensor a = Random(c.a, a_lo, a_hi, seed++);
    Tensor b = b_away_from_zero ? RandomAwayFromZero(c.b, 0.5, 2, seed++) : Random(c.b, -2, 2, seed++);
    Check(
        {a, b}, [&](const Scope& s, const std::vector<Output>& x) { return f(s, x[0], x[1]); },
        name + " " + c.a.DebugString() + " " + c.b.DebugString());
  }
}

TEST(GradientCheck, Add) {
  CheckBinary(
      "Add", [](const Scope& s, Output a, Output b) { return ops::Add(s, a, b); }, -2, 2, false);
}
TEST(GradientCheck, Sub) {
  CheckBinary(
      "Sub", [](const Scope& s, Output a, Output b) { return ops::Sub(s, a, b); }, -2, 2, false);
}
TEST(GradientCheck, Mul) {
  CheckBinary(
      "Mul", [](const Scope& s, Output a, Output b) { return ops::Mul(s, a, b); }, -2, 2, false);
}
TEST(GradientCheck, Div) {
  CheckBinary(
      "Div", [](const Scope& s, Output a, Output b) { return ops::Div(s, a, b); }, -2, 2, true);
}
TEST(GradientCheck, Pow) {
  CheckBinary(
      "Pow", [](const Scope& s, Output a, Output b) { return ops::Pow(s, a, b); }, 0.5, 2, false);
}
TEST(GradientCheck, Maximum) {
  CheckBinary(
      "Maximum", [](const Scope& s, Output a, Output b) { return ops::Maximum(s, a, b); }, -2, 2, false);
}
TEST(GradientCheck, Minimum) {
  CheckBinary(
      "Minimum", [](const Scope& s, Output a, Output b) { return ops::Minimum(s, a, b); }, -2, 2, false);
}

TEST(GradientCheck, AddNAndSelect) {
  Tensor a = Random(S({2, 3}), -1, 1, 30), b = Random(S({2, 3}), -1, 1, 31);
  Check(
      {a, b},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::AddN(s, {x[0], x[1], x[0]});
      },
      "AddN");
  Tensor cond = Tensor::FromVector<bool>({true, false, true, false, false, true}, S({2, 3}));
  Check(
      {a, b},
      [&](const Scope& s, const std::vector<Output>& x) { return ops::Select(s, ops::Const(s, cond), x[0], x[1]); },
      "Select");
  Tensor vcond = Tensor::FromVector<bool>({false, true}, S({2}));
  Check(
      {a, b},
      [&](const Scope& s, const std::vector<Output>& x) { return ops::Select(s, ops::Const(s, vcond), x[0], x[1]); },
      "Select with a vector condition");
}

TEST(GradientCheck, MatMul) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a = Random(ta ? S({4, 2}) : S({2, 4}), -1, 1, 40);
      Tensor b = Random(tb ? S({3, 4}) : S({4, 3}), -1, 1, 41);
      Check(
          {a, b}, [&](const Scope& s, const std::vector<Output>& x) { return ops::MatMul(s, x[0], x[1], ta, tb); },
          "MatMul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    }
  }
}

// ---------------------------------------------------------------------------
// Reductions.

struct ReduceCase {
  TensorShape shape;
  std::vector<int> axes;
  bool keep_dims;
};
const std::vector<ReduceCase> kReduceCases = {
    {S({2, 3}), {0}, false},      {S({2, 3}), {1}, true},     {S({2, 3}), {0, 1}, false}, {S({2, 3}), {-1}, false},
    {S({2, 3, 2}), {0, 2}, true}, {S({2, 3, 2}), {1}, false}, {S({4}), {0}, false},       {S({2, 3}), {}, false},
};

void CheckReduce(const std::string& name,
                 const std::function<Output(const Scope&, Output, const std::vector<int>&, bool)>& f, double lo,
                 double hi) {
  int seed = 50;
  for (const ReduceCase& c : kReduceCases) {
    Tensor x = Random(c.shape, lo, hi, seed++);
    std::string axes;
    for (int a : c.axes) axes += std::to_string(a) + ",";
    Check(
        {x}, [&](const Scope& s, const std::vector<Output>& in) { return f(s, in[0], c.axes, c.keep_dims); },
        name + " " + c.shape.DebugString() + " axes " + axes + " keep_dims=" + std::to_string(c.keep_dims));
  }
}

TEST(GradientCheck, Sum) {
  CheckReduce(
      "Sum", [](const Scope& s, Output x, const std::vector<int>& a, bool k) { return ops::Sum(s, x, a, k); }, -2, 2);
}
TEST(GradientCheck, Mean) {
  CheckReduce(
      "Mean", [](const Scope& s, Output x, const std::vector<int>& a, bool k) { return ops::Mean(s, x, a, k); }, -2, 2);
}
TEST(GradientCheck, Max) {
  CheckReduce(
      "Max", [](const Scope& s, Output x, const std::vector<int>& a, bool k) { return ops::Max(s, x, a, k); }, -2, 2);
}
TEST(GradientCheck, Min) {
  CheckReduce(
      "Min", [](const Scope& s, Output x, const std::vector<int>& a, bool k) { return ops::Min(s, x, a, k); }, -2, 2);
}
TEST(GradientCheck, Prod) {
  CheckReduce(
      "Prod", [](const Scope& s, Output x, const std::vector<int>& a, bool k) { return ops::Prod(s, x, a, k); }, 0.5,
      1.5);
}

TEST(GradientCheck, ProdWithZero) {
  Tensor x = Tensor::FromVector<double>({1.5, 0.0, 2.0, 0.5, 3.0, 1.0}, S({2, 3}));
  Check(
      {x}, [](const Scope& s, const std::vector<Output>& in) { return ops::Prod(s, in[0], {1}); }, "Prod zero");
}

TEST(GradientCheck, MaxSplitsTiesEvenly) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({4}));
  auto y = ops::Max(root, x, {0});
  auto g = Gradients(root, {y}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  Session sess;
  auto out = sess.Run({{x, Tensor::FromVector<double>({1, 3, 3, 2})}}, {(*g)[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  auto v = (*out)[0].flat<double>();
  EXPECT_EQ(std::vector<double>(v.begin(), v.end()), (std::vector<double>{0, 0.5, 0.5, 0}));
}

// ---------------------------------------------------------------------------
// Array ops.

TEST(GradientCheck, ArrayOps) {
  Tensor a = Random(S({2, 3, 2}), -1, 1, 60);
  Tensor b = Random(S({2, 3}), -1, 1, 61);
  Tensor c = Random(S({2, 1}), -1, 1, 62);
  Tensor d = Random(S({2, 3}), -1, 1, 63);
  Check(
      {a},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Reshape(s, x[0], {3, -1});
      },
      "Reshape");
  Check(
      {a},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Transpose(s, x[0], {2, 0, 1});
      },
      "Transpose");
  Check(
      {b, c, d}, [](const Scope& s, const std::vector<Output>& x) { return ops::Concat(s, x, 1); }, "Concat axis 1");
  Check(
      {b, d}, [](const Scope& s, const std::vector<Output>& x) { return ops::Concat(s, x, 0); }, "Concat axis 0");
  Check(
      {b, d}, [](const Scope& s, const std::vector<Output>& x) { return ops::Concat(s, x, -1); }, "Concat axis -1");
  Check(
      {b}, [](const Scope& s, const std::vector<Output>& x) { return ops::Concat(s, {x[0]}, 0); }, "Concat of one");
  Check(
      {a},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Slice(s, x[0], {1, 1, 0}, {1, -1, 2});
      },
      "Slice");
  Check(
      {b, d}, [](const Scope& s, const std::vector<Output>& x) { return ops::Pack(s, x, 0); }, "Pack axis 0");
  Check(
      {b, d}, [](const Scope& s, const std::vector<Output>& x) { return ops::Pack(s, x, 2); }, "Pack axis 2");
  Check(
      {b},
      [](const Scope& s, const std::vector<Output>& x) {
        std::vector<Output> parts = ops::Unpack(s, x[0], 3, 1);
        return ops::Mul(s, parts[0], parts[2]);  // parts[1] unused: its gradient is zeros
      },
      "Unpack");
  Check(
      {b},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Tile(s, x[0], {2, 3});
      },
      "Tile");
  Check(
      {c},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Tile(s, x[0], {1, 4});
      },
      "Tile 2");
  Tensor scalar = Tensor::Scalar<double>(0.7);
  Check(
      {scalar},
      [](const Scope& s, const std::vector<Output>& x) {
        return ops::Fill(s, {2, 3}, x[0]);
      },
      "Fill");
}

// A composite: a softmax written with primitive ops.
TEST(GradientCheck, CompositeSoftmaxCrossEntropy) {
  Tensor logits = Random(S({3, 4}), -2, 2, 70);
  Tensor labels = Tensor::FromVector<double>({1, 0, 0, 0, 0, 0, 1, 0, 0, 0.5, 0, 0.5}, S({3, 4}));
  Check(
      {logits},
      [&](const Scope& s, const std::vector<Output>& x) {
        Output m = ops::Max(s, x[0], {1}, true);
        Output e = ops::Exp(s, ops::Sub(s, x[0], m));
        Output p = ops::Div(s, e, ops::Sum(s, e, {1}, true));
        Output ce = ops::Neg(s, ops::Sum(s, ops::Mul(s, ops::Const(s, labels), ops::Log(s, p)), {1}));
        return ops::Mean(s, ce, {0});
      },
      "softmax cross entropy");
}

// The checker itself catches a wrong gradient (Neg's replaced by identity).
TEST(GradientCheck, CheckerDetectsAWrongGradient) {
  GradientRegistry* reg = GradientRegistry::Global();
  bool no_grad = false;
  const GradFunc* fn = reg->Find("Neg", &no_grad);
  ASSERT_NE(fn, nullptr);
  GradFunc saved = *fn;
  reg->Register("Neg", [](const Scope& s, const Operation& op, const std::vector<Output>& g, std::vector<Output>* out) {
    *out = {g[0]};
    return absl::OkStatus();
  });
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  auto y = ops::Neg(root, x);
  absl::StatusOr<double> err = ComputeGradientError(root, {x}, {Random(S({3}), -1, 1, 99)}, {y});
  reg->Register("Neg", saved);
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_NEAR(*err, 2.0, 1e-6);
}

// ---------------------------------------------------------------------------
// Gradients() behaviour.

absl::StatusOr<std::vector<Tensor>> RunGrads(const std::vector<Output>& fetch, const FeedDict& feeds = {},
                                             const std::vector<Operation>& init = {}) {
  Session sess;
  if (!init.empty()) {
    RETURN_IF_ERROR(sess.Run({}, {}, init).status());
  }
  return sess.Run(feeds, fetch);
}

std::vector<double> Values(const Tensor& t) {
  auto f = t.flat<double>();
  return std::vector<double>(f.begin(), f.end());
}

TEST(Gradients, FanOutIsSummed) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  auto y = x * x + x;
  auto g = Gradients(root, {y}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = RunGrads({(*g)[0]}, {{x, Tensor::FromVector<double>({1, 2, -3})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{3, 5, -5}));
  // Fan-out is aggregated with AddN.
  bool has_addn = false;
  {
    absl::MutexLock lock(&root.graph_state()->mu);
    for (const auto& n : root.graph_state()->graph.nodes()) has_addn |= n->op() == "AddN";
  }
  EXPECT_TRUE(has_addn);
}

TEST(Gradients, UnreachableXGetsInvalidOutput) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  auto z = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  auto unrelated = ops::Square(root, z);
  auto y = ops::Square(root, x);
  auto g = Gradients(root, {y}, {x, z});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE((*g)[0].ok());
  EXPECT_FALSE((*g)[1].ok());
  (void)unrelated;
}

TEST(Gradients, StopGradientBlocks) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2}));
  auto y = ops::StopGradient(root, x) * x;
  auto g = Gradients(root, {y}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = RunGrads({(*g)[0]}, {{x, Tensor::FromVector<double>({2, 5})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{2, 5}));  // not 2x
  auto only = Gradients(root, {ops::StopGradient(root, x)}, {x});
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_FALSE((*only)[0].ok());
}

TEST(Gradients, MissingGradientNamesTheOp) {
  OpRegistry::Global()
      ->Register(
          OpDefBuilder("GradTestNoGradOp").Input("x: T").Output("y: T").Attr("T: type").SetShapeFn(UnchangedShape))
      .IgnoreError();
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2}));
  Output h(ops::Raw(root.WithOpName("mystery"), "GradTestNoGradOp", {x}), 0, root);
  auto y = ops::Square(root, h);
  ASSERT_TRUE(root.ok()) << root.status();
  auto g = Gradients(root, {y}, {x});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(g.status().message()).find("No gradient defined for op 'GradTestNoGradOp' (node 'mystery')"),
            std::string::npos)
      << g.status();
  // Not on the path: no error.
  auto g2 = Gradients(root, {ops::Square(root, x) + ops::Sum(root, h, {0})}, {h});
  EXPECT_TRUE(g2.ok()) << g2.status();
}

TEST(Gradients, IntegerPathsCarryNone) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  auto through_int = ops::Cast(root, ops::Cast(root, x, DT_INT32), DT_DOUBLE);
  auto g = Gradients(root, {ops::Sum(root, through_int, {0})}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE((*g)[0].ok());
  auto argmax = ops::Cast(root, ops::ArgMax(root, x, 0), DT_DOUBLE);
  auto mixed = x * argmax + through_int;
  auto g2 = Gradients(root, {mixed}, {x});
  ASSERT_TRUE(g2.ok()) << g2.status();
  ASSERT_TRUE((*g2)[0].ok());
  auto out = RunGrads({(*g2)[0]}, {{x, Tensor::FromVector<double>({1, 7, 2})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{1, 1, 1}));  // argmax = 1
  // Float <-> float casts pass the gradient through.
  auto f = ops::Cast(root, ops::Cast(root, x, DT_FLOAT), DT_DOUBLE);
  auto g3 = Gradients(root, {ops::Mul(root, f, ops::Const(root, 2.0))}, {x});
  ASSERT_TRUE(g3.ok()) << g3.status();
  out = RunGrads({(*g3)[0]}, {{x, Tensor::FromVector<double>({1, 7, 2})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{2, 2, 2}));
}

TEST(Gradients, GradYsAndMultipleYs) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2}));
  auto y1 = x * ops::Const(root, 2.0);
  auto y2 = x * ops::Const(root, 3.0);
  auto g = Gradients(root, {y1, y2}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  auto gy = Gradients(root, {y1}, {x}, {ops::Const(root, Tensor::FromVector<double>({10, 20}))});
  ASSERT_TRUE(gy.ok()) << gy.status();
  auto self = Gradients(root, {x}, {x});
  ASSERT_TRUE(self.ok()) << self.status();
  auto out = RunGrads({(*g)[0], (*gy)[0], (*self)[0]}, {{x, Tensor::FromVector<double>({1, 1})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{5, 5}));
  EXPECT_EQ(Values((*out)[1]), (std::vector<double>{20, 40}));
  EXPECT_EQ(Values((*out)[2]), (std::vector<double>{1, 1}));
  EXPECT_FALSE(Gradients(root, {y1, y2}, {x}, {ops::Const(root, 1.0)}).ok());
}

TEST(Gradients, ChainedXs) {
  Scope root = Scope::NewRootScope();
  auto a = ops::Placeholder(root, DT_DOUBLE, PartialShape({}));
  auto b = a * ops::Const(root, 2.0);
  auto y = b * ops::Const(root, 3.0);
  auto g = Gradients(root, {y}, {a, b});
  ASSERT_TRUE(g.ok()) << g.status();
  auto out = RunGrads({(*g)[0], (*g)[1]}, {{a, Tensor::Scalar<double>(1)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<double>(), 6);
  EXPECT_EQ((*out)[1].scalar<double>(), 3);
}

TEST(Gradients, VariablesAsXs) {
  Scope root = Scope::NewRootScope();
  auto w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, Tensor::FromVector<double>({1, 2, 3})));
  auto raw = ops::Variable(root.WithOpName("raw"), PartialShape({3}), DT_DOUBLE);
  auto init_raw = ops::Assign(root, raw, ops::Const(root, Tensor::FromVector<double>({4, 5, 6})));
  auto y = ops::Sum(root, ops::Square(root, w) * raw, {0});
  auto g = Gradients(root, {y}, {w, raw});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE((*g)[0].ok() && (*g)[1].ok());
  EXPECT_EQ((*g)[0].dtype(), DT_DOUBLE);
  auto out = RunGrads({(*g)[0], (*g)[1]}, {}, {ops::GlobalVariablesInitializer(root), init_raw.op()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values((*out)[0]), (std::vector<double>{8, 20, 36}));  // 2 w raw
  EXPECT_EQ(Values((*out)[1]), (std::vector<double>{1, 4, 9}));    // w^2
}

TEST(Gradients, ColocatedWithForwardOps) {
  Scope root = Scope::NewRootScope();
  Scope ps = root.WithDevice("/job:ps/task:0");
  Scope worker = root.WithDevice("/job:worker/task:1");
  auto w = ops::Variable(ps.WithOpName("w"), PartialShape({3, 2}), DT_FLOAT);
  auto x = ops::Placeholder(worker, DT_FLOAT, PartialShape({4, 3}));
  auto h = ops::MatMul(worker.WithOpName("mm"), x, w);
  auto loss = ops::Sum(worker, ops::Square(worker, h), {0, 1});
  ASSERT_TRUE(root.ok()) << root.status();
  auto g = Gradients(root, {loss}, {w});
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE((*g)[0].ok());
  EXPECT_EQ((*g)[0].node()->op(), "MatMul");
  EXPECT_EQ((*g)[0].node()->def().device(), "/job:worker/task:1");
  EXPECT_NE((*g)[0].node()->name().find("gradients/mm_grad/"), std::string::npos) << (*g)[0].node()->name();

  auto g2 = Gradients(root.WithDevice("/job:chief/task:0"), {loss}, {w}, {}, GradientOptions{false});
  ASSERT_TRUE(g2.ok()) << g2.status();
  EXPECT_EQ((*g2)[0].node()->def().device(), "/job:chief/task:0");
}

TEST(Gradients, NoControlDependenciesInherited) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2}));
  Operation dep = ops::NoOp(root);
  Scope with_deps = root.WithControlDependencies({dep});
  auto y = ops::Square(with_deps, x);
  auto g = Gradients(with_deps, {y}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE((*g)[0].node()->control_inputs().empty());
}

TEST(Gradients, ErrorsOnInvalidArguments) {
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2}));
  EXPECT_FALSE(Gradients(root, {Output()}, {x}).ok());
  Scope other = Scope::NewRootScope();
  auto z = ops::Placeholder(other, DT_DOUBLE, PartialShape({2}));
  EXPECT_FALSE(Gradients(root, {ops::Square(root, x)}, {z}).ok());
}

// Trains y = tanh-free 2-feature linear regression plus a squared feature
// with Gradients() and plain gradient descent.
TEST(Gradients, TrainsAModelByGradientDescent) {
  const int n = 128;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> xs(n * 2), ys(n);
  for (int i = 0; i < n; ++i) {
    xs[2 * i] = u(gen);
    xs[2 * i + 1] = u(gen);
    ys[i] = 2.f * xs[2 * i] - 3.f * xs[2 * i + 1] + 0.5f;
  }
  Scope root = Scope::NewRootScope();
  auto x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 2}));
  auto y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, PartialShape({-1, 1}));
  auto w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, {0.f, 0.f}, TensorShape({2, 1})));
  auto b = ops::MakeVariable(root.WithOpName("b"), ops::Const(root, {0.f}, TensorShape({1})));
  auto pred = ops::MatMul(root, x, w) + b;
  auto loss = ops::Mean(root, ops::Square(root, pred - y), {0, 1});
  auto grads = Gradients(root, {loss}, {w, b});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto lr = ops::Const(root, 0.3f);
  auto train = ops::Group(
      root, {ops::AssignSub(root, w, (*grads)[0] * lr).op(), ops::AssignSub(root, b, (*grads)[1] * lr).op()});
  auto init = ops::GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {init}).ok());
  FeedDict feeds = {{x, Tensor::FromVector<float>(xs, TensorShape({n, 2}))},
                    {y, Tensor::FromVector<float>(ys, TensorShape({n, 1}))}};
  auto first = sess.Run(feeds, {loss});
  ASSERT_TRUE(first.ok()) << first.status();
  for (int step = 0; step < 300; ++step) ASSERT_TRUE(sess.Run(feeds, {}, {train}).ok());
  auto out = sess.Run(feeds, {w, b, loss});
  ASSERT_TRUE(out.ok()) << out.status();
  auto wv = (*out)[0].flat<float>();
  EXPECT_NEAR(wv[0], 2.f, 0.01f);
  EXPECT_NEAR(wv[1], -3.f, 0.01f);
  EXPECT_NEAR((*out)[1].flat<float>()[0], 0.5f, 0.01f);
  EXPECT_LT((*out)[2].scalar<float>(), 1e-4f);
}

}  // namespace
}  // namespace distflow
