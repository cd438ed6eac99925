// ops::Cond and ops::WhileLoop built in C++ and run in a Session: results
// checked against the same computation in plain C++, nested loops,
// maximum_iterations, shape invariants, the errors for branches of different
// structure and loop variables that change shape, and the gradients of a
// Cond and of a WhileLoop checked numerically.
#include "distflow/control_flow.h"

#include <cmath>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "client/gradient_test_util.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/session.h"
#include "distflow/step_stats.h"
#include "gtest/gtest.h"
#include "kernels/cpu/tensor_array.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using Outs = std::vector<Output>;
using StatusOrOuts = absl::StatusOr<Outs>;

TEST(Cond, TakesTheBranchThePredicateSays) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  Output pred = ops::Placeholder(root, DT_BOOL, PartialShape({}));
  auto y = ops::Cond(
      root, pred, {x},
      [](const Scope& s, const Outs& in) -> StatusOrOuts {
        // A constant inside a branch runs only with the branch.
        return Outs{ops::Add(s, ops::Mul(s, in[0], in[0]), ops::Const(s, 3.0))};
      },
      [](const Scope& s, const Outs& in) -> StatusOrOuts { return Outs{ops::Neg(s, in[0])}; });
  ASSERT_TRUE(y.ok()) << y.status();
  Session sess;
  Tensor xv = Tensor::FromVector<double>({1.5, -2.0, 0.25});
  for (bool p : {true, false}) {
    auto out = sess.Run({{x, xv}, {pred, Tensor::Scalar<bool>(p)}}, {(*y)[0]});
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<double> want;
    for (double v : xv.flat<double>()) want.push_back(p ? v * v + 3.0 : -v);
    EXPECT_TENSOR_NEAR(Tensor::FromVector<double>(want), (*out)[0], 1e-12);
  }
}

TEST(Cond, BranchesOfDifferentStructureAreAnErrorNamingTheCond) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, 1.0);
  Output pred = ops::Const(root, true);
  auto two = [](const Scope& s, const Outs& in) -> StatusOrOuts { return Outs{in[0], in[0]}; };
  auto one = [](const Scope& s, const Outs& in) -> StatusOrOuts { return Outs{in[0]}; };
  auto y = ops::Cond(root, pred, {x}, two, one);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("Cond 'cond': the true branch returns 2 outputs and the false branch 1"),
            std::string::npos)
      << y.status();
  EXPECT_FALSE(root.ok()) << "the error is in the scope too";

  Scope r2 = Scope::NewRootScope();
  auto as_int = [](const Scope& s, const Outs& in) -> StatusOrOuts { return Outs{ops::Const(s, 1)}; };
  auto z = ops::Cond(r2, ops::Const(r2, false), {ops::Const(r2, 1.0)}, one, as_int);
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("output 0 is float64 in the true branch and int32 in the false branch"),
            std::string::npos)
      << z.status();
}

TEST(Cond, SideEffectsRunOnlyOnTheTakenBranch) {
  Scope root = Scope::NewRootScope();
  Output v = ops::MakeVariable(root.WithOpName("counter"), ops::Const(root, 0));
  Output pred = ops::Placeholder(root, DT_BOOL, PartialShape({}));
  auto y = ops::Cond(
      root, pred, {},
      [&v](const Scope& s, const Outs&) -> StatusOrOuts { return Outs{ops::AssignAdd(s, v, ops::Const(s, 10))}; },
      [&v](const Scope& s, const Outs&) -> StatusOrOuts { return Outs{ops::AssignAdd(s, v, ops::Const(s, 1))}; });
  ASSERT_TRUE(y.ok()) << y.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  int want = 0;
  for (bool p : {true, false, false, true, false}) {
    auto r = sess.Run({{pred, Tensor::Scalar<bool>(p)}}, {(*y)[0]});
    ASSERT_TRUE(r.ok()) << r.status();
    want += p ? 10 : 1;
    EXPECT_EQ((*r)[0].scalar<int32_t>(), want) << "only the taken branch's AssignAdd ran";
  }
}

TEST(Cond, GradientMatchesFiniteDifferences) {
  for (bool p : {true, false}) {
    grad_test::CheckGradient(
        {grad_test::Random(grad_test::S({2, 3}), -1, 1, 7), grad_test::Random(grad_test::S({2, 3}), -1, 1, 8)},
        [p](const Scope& s, const Outs& xs) {
          // The true branch uses both inputs, the false one only the first: the
          // second's gradient is zero there, not dead.
          auto y = ops::Cond(
              s, ops::Const(s, p), xs,
              [](const Scope& b, const Outs& in) -> StatusOrOuts { return Outs{ops::Mul(b, in[0], in[1])}; },
              [](const Scope& b, const Outs& in) -> StatusOrOuts {
                return Outs{ops::Mul(b, ops::Square(b, in[0]), ops::Const(b, 2.0))};
              });
          // x0 is also used outside the cond.
          return ops::Sum(s, ops::Add(s, (*y)[0], xs[0]), {0, 1});
        },
        p ? "cond true branch" : "cond false branch", grad_test::kTol, /*require_gradient=*/true);
  }
}

// acc = 0; for (i = 0; i < n; ++i) acc += i * step
TEST(WhileLoop, SumsWithInvariants) {
  Scope root = Scope::NewRootScope();
  Output n = ops::Placeholder(root, DT_INT32, PartialShape({}));
  Output step = ops::Const(root, 3);
  ops::WhileOptions opts;
  opts.invariants = {n, step};
  opts.parallel_iterations = 4;
  auto out = ops::WhileLoop(
      root, {ops::Const(root, 0), ops::Const(root, 0)},
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], v[2]); },
      [](const Scope& s, const Outs& v) -> StatusOrOuts {
        return Outs{ops::Add(s, v[0], ops::Const(s, 1)), ops::Add(s, v[1], ops::Mul(s, v[0], v[3]))};
      },
      opts);
  ASSERT_TRUE(out.ok()) << out.status();
  Session sess;
  for (int nv : {0, 1, 10, 100}) {
    auto r = sess.Run({{n, Tensor::Scalar<int32_t>(nv)}}, {(*out)[0], (*out)[1]});
    ASSERT_TRUE(r.ok()) << r.status();
    int want = 0;
    for (int i = 0; i < nv; ++i) want += i * 3;
    EXPECT_EQ((*r)[0].scalar<int32_t>(), nv);
    EXPECT_EQ((*r)[1].scalar<int32_t>(), want);
  }
}

TEST(WhileLoop, MaximumIterationsStopsTheLoop) {
  Scope root = Scope::NewRootScope();
  ops::WhileOptions opts;
  opts.maximum_iterations = 5;
  auto out = ops::WhileLoop(
      root, {ops::Const(root, 1.0)},
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], ops::Const(s, 1e9)); },
      [](const Scope& s, const Outs& v) -> StatusOrOuts { return Outs{ops::Mul(s, v[0], ops::Const(s, 2.0))}; }, opts);
  ASSERT_TRUE(out.ok()) << out.status();
  Session sess;
  auto r = sess.Run({(*out)[0]});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<double>(), 32.0);
}

TEST(WhileLoop, NestedLoopsRunPerOuterIteration) {
  // total = sum over i < n of (sum over j < i of j)
  Scope root = Scope::NewRootScope();
  Output n = ops::Placeholder(root, DT_INT32, PartialShape({}));
  ops::WhileOptions outer;
  outer.invariants = {n};
  auto out = ops::WhileLoop(
      root, {ops::Const(root, 0), ops::Const(root, 0)},
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], v[2]); },
      [](const Scope& s, const Outs& v) -> StatusOrOuts {
        ops::WhileOptions inner;
        inner.name = "inner";
        inner.invariants = {v[0]};
        auto in = ops::WhileLoop(
            s, {ops::Const(s, 0), ops::Const(s, 0)},
            [](const Scope& t, const Outs& w) -> absl::StatusOr<Output> { return ops::Less(t, w[0], w[2]); },
            [](const Scope& t, const Outs& w) -> StatusOrOuts {
              return Outs{ops::Add(t, w[0], ops::Const(t, 1)), ops::Add(t, w[1], w[0])};
            },
            inner);
        RETURN_IF_ERROR(in.status());
        return Outs{ops::Add(s, v[0], ops::Const(s, 1)), ops::Add(s, v[1], (*in)[1])};
      },
      outer);
  ASSERT_TRUE(out.ok()) << out.status();
  Session sess;
  for (int nv : {0, 1, 6, 20}) {
    auto r = sess.Run({{n, Tensor::Scalar<int32_t>(nv)}}, {(*out)[1]});
    ASSERT_TRUE(r.ok()) << r.status();
    int want = 0;
    for (int i = 0; i < nv; ++i)
      for (int j = 0; j < i; ++j) want += j;
    EXPECT_EQ((*r)[0].scalar<int32_t>(), want) << "n=" << nv;
  }
}

Output DoublingLoop(const Scope& root, const std::vector<PartialShape>& invariants, absl::Status* st) {
  ops::WhileOptions opts;
  opts.name = "grow";
  opts.shape_invariants = invariants;
  auto out = ops::WhileLoop(
      root, {ops::Const(root, 0), ops::Const(root, {1.f, 2.f}, TensorShape({2}))},
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], ops::Const(s, 3)); },
      [](const Scope& s, const Outs& v) -> StatusOrOuts {
        return Outs{ops::Add(s, v[0], ops::Const(s, 1)), ops::Concat(s, {v[1], v[1]}, 0)};
      },
      opts);
  *st = out.status();
  return out.ok() ? (*out)[1] : Output();
}

TEST(WhileLoop, ShapeChangeNeedsAnInvariant) {
  Scope root = Scope::NewRootScope();
  absl::Status st;
  DoublingLoop(root, {}, &st);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("WhileLoop 'grow': loop variable 1"), std::string::npos) << st;
  EXPECT_NE(st.message().find("has shape [2] entering the loop but the body returns shape [4]"), std::string::npos)
      << st;
  EXPECT_NE(st.message().find("shape invariant"), std::string::npos) << st;

  Scope ok_root = Scope::NewRootScope();
  Output grown = DoublingLoop(ok_root, {PartialShape({}), PartialShape({-1})}, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(grown.shape().DebugString(), "[?]");
  Session sess;
  auto r = sess.Run({grown});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ((*r)[0].NumElements(), 16);
  for (int i = 0; i < 16; ++i) EXPECT_EQ((*r)[0].flat<float>()[static_cast<size_t>(i)], i % 2 == 0 ? 1.f : 2.f);
}

TEST(WhileLoop, CondInsideALoopBody) {
  // x = 0; for i < 10: x += (i even ? i : -1), with the parity as a loop variable.
  Scope root = Scope::NewRootScope();
  auto out = ops::WhileLoop(
      root, {ops::Const(root, 0), ops::Const(root, 0), ops::Const(root, 0)},
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], ops::Const(s, 10)); },
      [](const Scope& s, const Outs& v) -> StatusOrOuts {
        Output even = ops::Equal(s, v[2], ops::Const(s, 0));
        auto c = ops::Cond(
            s, even, {v[0]}, [](const Scope& b, const Outs& in) -> StatusOrOuts { return Outs{in[0]}; },
            [](const Scope& b, const Outs& in) -> StatusOrOuts { return Outs{ops::Const(b, -1)}; });
        RETURN_IF_ERROR(c.status());
        return Outs{ops::Add(s, v[0], ops::Const(s, 1)), ops::Add(s, v[1], (*c)[0]),
                    ops::Sub(s, ops::Const(s, 1), v[2])};
      });
  ASSERT_TRUE(out.ok()) << out.status();
  Session sess;
  auto r = sess.Run({(*out)[1]});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<int32_t>(), 0 + 2 + 4 + 6 + 8 - 5);
}

TEST(WhileLoop, GradientThroughRepeatedSquaring) {
  // y = x^(2^3): three iterations of v = v * v.
  grad_test::CheckGradient(
      {grad_test::Random(grad_test::S({}), 0.5, 1.0, 3)},
      [](const Scope& s, const Outs& xs) {
        ops::WhileOptions opts;
        opts.maximum_iterations = 3;
        auto out = ops::WhileLoop(
            s, {xs[0]}, [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Const(c, true); },
            [](const Scope& b, const Outs& v) -> StatusOrOuts { return Outs{ops::Mul(b, v[0], v[0])}; }, opts);
        EXPECT_TRUE(out.ok()) << out.status();
        return (*out)[0];
      },
      "while x*x", grad_test::kTol, /*require_gradient=*/true);
}

TEST(WhileLoop, GradientReachesInitialValuesAndInvariants) {
  // h = h0; for i < n: h = (h w)^2 * 0.3 + b, with w and b loop invariants
  // and n fed as one too (an int: no gradient).
  for (int n : {0, 1, 4}) {
    grad_test::CheckGradient(
        {grad_test::Random(grad_test::S({1, 2}), -1, 1, 11), grad_test::Random(grad_test::S({2, 2}), -1, 1, 12),
         grad_test::Random(grad_test::S({2}), -1, 1, 13)},
        [n](const Scope& s, const Outs& xs) {
          ops::WhileOptions opts;
          opts.invariants = {xs[1], xs[2], ops::Const(s, n)};
          opts.parallel_iterations = 2;
          auto out = ops::WhileLoop(
              s, {ops::Const(s, 0), xs[0]},
              [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(c, v[0], v[4]); },
              [](const Scope& b, const Outs& v) -> StatusOrOuts {
                Output hw = ops::MatMul(b, v[1], v[2]);
                return Outs{ops::Add(b, v[0], ops::Const(b, 1)),
                            ops::Add(b, ops::Mul(b, ops::Square(b, hw), ops::Const(b, 0.3)), v[3])};
              },
              opts);
          EXPECT_TRUE(out.ok()) << out.status();
          return ops::Sum(s, ops::Mul(s, (*out)[1], (*out)[1]), {0, 1});
        },
        "while with invariants, n=" + std::to_string(n), grad_test::kTol, /*require_gradient=*/true);
  }
}

TEST(WhileLoop, GradientThroughNestedLoops) {
  // Two outer iterations, each squaring twice in an inner loop: y = x^16.
  grad_test::CheckGradient(
      {grad_test::Random(grad_test::S({2}), 0.8, 1.0, 5)},
      [](const Scope& s, const Outs& xs) {
        ops::WhileOptions outer;
        outer.maximum_iterations = 2;
        auto out = ops::WhileLoop(
            s, {xs[0]}, [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Const(c, true); },
            [](const Scope& b, const Outs& v) -> StatusOrOuts {
              ops::WhileOptions inner;
              inner.name = "inner";
              inner.maximum_iterations = 2;
              return ops::WhileLoop(
                  b, {v[0]},
                  [](const Scope& c, const Outs& w) -> absl::StatusOr<Output> { return ops::Const(c, true); },
                  [](const Scope& d, const Outs& w) -> StatusOrOuts { return Outs{ops::Mul(d, w[0], w[0])}; }, inner);
            },
            outer);
        EXPECT_TRUE(out.ok()) << out.status();
        return ops::Sum(s, (*out)[0], {0});
      },
      "nested while", grad_test::kTol, /*require_gradient=*/true);
}

TEST(WhileLoop, GradientReachesATensorMadeOutsideWhileTheBodyIsBuilt) {
  // The body makes w = 2 x at the graph's top on its first build (as Python
  // makes a variable first created in a body) and captures it; w's node comes
  // after the loop's exits, and its gradient must still reach x. Rebuilt for
  // the gradient, the body gets the captured value as its last input.
  grad_test::CheckGradient(
      {grad_test::Random(grad_test::S({2}), 0.3, 0.6, 21), grad_test::Random(grad_test::S({2}), 0.5, 1.0, 22)},
      [](const Scope& s, const Outs& xs) {
        ops::WhileOptions opts;
        opts.maximum_iterations = 3;
        Output x1 = xs[1];
        auto out = ops::WhileLoop(
            s, {xs[0]}, [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Const(c, true); },
            [s, x1](const Scope& b, const Outs& v) -> StatusOrOuts {
              Output w;
              if (v.size() > 1) {
                w = v[1];
              } else {
                ASSIGN_OR_RETURN(w, ops::CaptureIntoLoop(b, ops::Mul(s, x1, ops::Const(s, 2.0))));
              }
              return Outs{ops::Mul(b, ops::Square(b, v[0]), w)};
            },
            opts);
        EXPECT_TRUE(out.ok()) << out.status();
        return ops::Sum(s, (*out)[0], {0});
      },
      "while capturing a tensor made during the body's build", grad_test::kTol, /*require_gradient=*/true);
}

TEST(WhileLoop, KeepsEachIterationsValueOnceForTheGradient) {
  // v = v * 1.01 + 0.5 over n iterations, v a vector of kWidth doubles, and
  // its gradient: the forward loop writes each iteration's v to an array
  // once (no Concat of a growing history: that copied n^2 / 2 rows), and
  // neither the writes nor the backward loop's reads copy a byte.
  constexpr int64_t kWidth = 512;
  for (int n : {16, 64}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({kWidth}));
    ops::WhileOptions opts;
    opts.maximum_iterations = n;
    auto out = ops::WhileLoop(
        root, {x}, [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Const(c, true); },
        [](const Scope& b, const Outs& v) -> StatusOrOuts {
          return Outs{ops::Add(b, ops::Mul(b, v[0], ops::Const(b, 1.01)), ops::Const(b, 0.5))};
        },
        opts);
    ASSERT_TRUE(out.ok()) << out.status();
    auto g = Gradients(root, {ops::Sum(root, ops::Square(root, (*out)[0]), {0})}, {x});
    ASSERT_TRUE(g.ok()) << g.status();
    Session sess;
    StepStats trace;
    RunOptions run;
    run.trace = &trace;
    Tensor xv(DT_DOUBLE, TensorShape({kWidth}));
    for (int64_t i = 0; i < kWidth; ++i) xv.flat<double>()[static_cast<size_t>(i)] = 0.001 * static_cast<double>(i);
    const int64_t before = TensorArray::BytesCopied();
    auto r = sess.Run({{x, xv}}, {(*out)[0], (*g)[0]}, {}, run);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(TensorArray::BytesCopied() - before, 0) << "n = " << n;
    int writes = 0, reads = 0, concats = 0;
    for (const DeviceStepStats& d : trace.devices) {
      for (const NodeExecStats& e : d.nodes) {
        writes += e.op == "TensorArrayWriteV3" ? 1 : 0;
        reads += e.op == "TensorArrayReadV3" ? 1 : 0;
        concats += e.op.find("Concat") != std::string::npos ? 1 : 0;
      }
    }
    EXPECT_EQ(writes, n);
    EXPECT_EQ(reads, n);
    EXPECT_EQ(concats, 0);
    // d sum(v_n^2) / dx = 2 v_n 1.01^n.
    const double scale = std::pow(1.01, n);
    for (size_t i : {size_t{3}, size_t{500}}) {
      double v = xv.flat<double>()[i];
      for (int t = 0; t < n; ++t) v = v * 1.01 + 0.5;
      EXPECT_NEAR((*r)[0].flat<double>()[i], v, 1e-9 * v);
      EXPECT_NEAR((*r)[1].flat<double>()[i], 2 * v * scale, 1e-9 * v * scale);
    }
  }
}

TEST(WhileLoop, NoHistoryMeansAGradientErrorNamingTheExit) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({}));
  ops::WhileOptions opts;
  opts.maximum_iterations = 3;
  opts.back_prop = false;
  auto out = ops::WhileLoop(
      root, {x}, [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Const(s, true); },
      [](const Scope& s, const Outs& v) -> StatusOrOuts { return Outs{ops::Mul(s, v[0], v[0])}; }, opts);
  ASSERT_TRUE(out.ok()) << out.status();
  Session sess;
  auto r = sess.Run({{x, Tensor::Scalar<double>(2.0)}}, {(*out)[0]});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].scalar<double>(), 256.0);
  auto g = Gradients(root, {(*out)[0]}, {x});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("No gradient defined for op 'Exit'"), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find("back_prop=false, or imported"), std::string::npos) << g.status();
}

}  // namespace
}  // namespace distflow
