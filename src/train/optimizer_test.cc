#include "distflow/train/optimizer.h"

#include <cmath>
#include <string>
#include <vector>

#include "client/graph_state.h"
#include "distflow/distflow.h"
#include "distflow/gradients.h"
#include "gmock/gmock.h"
#include "graph/op_def.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

Output DVec(const Scope& s, const std::vector<double>& v) { return ops::Const(s, Tensor::FromVector<double>(v)); }
Output FVec(const Scope& s, const std::vector<float>& v) { return ops::Const(s, Tensor::FromVector<float>(v)); }

template <typename T>
std::vector<double> Fetch(Session* sess, const Output& o) {
  auto out = sess->Run({o});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto f = (*out)[0].flat<T>();
  return std::vector<double>(f.begin(), f.end());
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// The fused ops run inside a real graph and session, with Variable/Assign.
TEST(ApplyOpsInGraph, ApplyAdamDoubleTwoSteps) {
  Scope root = Scope::NewRootScope();
  auto w = ops::Variable(root.WithOpName("w"), {2}, DT_DOUBLE);
  auto m = ops::Variable(root.WithOpName("m"), {2}, DT_DOUBLE);
  auto v = ops::Variable(root.WithOpName("v"), {2}, DT_DOUBLE);
  auto init =
      ops::Group(root, {ops::Assign(root, w, DVec(root, {1, -2})).op(), ops::Assign(root, m, DVec(root, {0, 0})).op(),
                        ops::Assign(root, v, DVec(root, {0, 0})).op()});
  auto b1p = ops::Placeholder(root, DT_DOUBLE, PartialShape::Scalar());
  auto b2p = ops::Placeholder(root, DT_DOUBLE, PartialShape::Scalar());
  auto g = DVec(root, {0.3, -0.7});
  Operation apply = ops::Raw(root, "ApplyAdam",
                             {w, m, v, b1p, b2p, ops::Const(root, 0.01), ops::Const(root, 0.9), ops::Const(root, 0.999),
                              ops::Const(root, 1e-8), g});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(Output(apply, 0, root).shape(), PartialShape({2}));
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {init}).ok());
  std::vector<double> ww = {1, -2}, mm = {0, 0}, vv = {0, 0};
  double p1 = 0.9, p2 = 0.999;
  for (int step = 0; step < 2; ++step) {
    auto r = sess.Run({{b1p, Tensor::Scalar<double>(p1)}, {b2p, Tensor::Scalar<double>(p2)}}, {}, {apply});
    ASSERT_TRUE(r.ok()) << r.status();
    const double lr_t = 0.01 * std::sqrt(1 - p2) / (1 - p1);
    const double gg[2] = {0.3, -0.7};
    for (int i = 0; i < 2; ++i) {
      mm[i] += (gg[i] - mm[i]) * 0.1;
      vv[i] += (gg[i] * gg[i] - vv[i]) * 0.001;
      ww[i] -= lr_t * mm[i] / (std::sqrt(vv[i]) + 1e-8);
    }
    p1 *= 0.9;
    p2 *= 0.999;
    ExpectNear(Fetch<double>(&sess, w), ww, 1e-12);
  }
}

TEST(ApplyOpsInGraph, ShapeMismatchIsABuildError) {
  Scope root = Scope::NewRootScope();
  auto w = ops::Variable(root.WithOpName("w"), {2, 3}, DT_FLOAT);
  ops::Raw(root, "ApplyGradientDescent", {w, ops::Const(root, 0.1f), FVec(root, {1, 2})});
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("[2,3]"));
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("[2]"));
}

TEST(ApplyOpsInGraph, UninitializedVariableFailsNamingIt) {
  Scope root = Scope::NewRootScope();
  auto w = ops::Variable(root.WithOpName("never_set"), {2}, DT_FLOAT);
  Operation apply = ops::Raw(root, "ApplyGradientDescent", {w, ops::Const(root, 0.1f), FVec(root, {1, 2})});
  Session sess;
  auto r = sess.Run({}, {}, {apply});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("never_set"));
}

// --- Optimizers with hand-made gradients -----------------------------------

struct Fixture {
  Scope root = Scope::NewRootScope();
  Output w, b;
  Output gw, gb;
  Fixture() {
    w = ops::MakeVariable(root.WithOpName("w"), DVec(root, {1, -2}));
    b = ops::MakeVariable(root.WithOpName("b"), DVec(root, {0.5}));
    gw = DVec(root, {0.3, -0.7});
    gb = DVec(root, {2.0});
  }
};

TEST(Optimizer, GradientDescentTwoSteps) {
  Fixture f;
  GradientDescentOptimizer opt(0.1);
  auto train = opt.ApplyGradients(f.root, {{f.gw, f.w}, {f.gb, f.b}});
  ASSERT_TRUE(train.ok()) << train.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(f.root)}).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  ExpectNear(Fetch<double>(&sess, f.w), {1 - 0.06, -2 + 0.14}, 1e-12);
  ExpectNear(Fetch<double>(&sess, f.b), {0.5 - 0.4}, 1e-12);
}

// A gradient that reads a variable (as a MatMul's input gradient reads its
// weights) must see the value from before this step's updates: every update
// waits for every gradient. Here the gradient of `b` reads `w` only after a
// long chain, while `w`'s own gradient is ready at once; without the gate
// `w` was updated first and `b` moved by the updated `w`.
TEST(Optimizer, UpdatesWaitForEveryGradientThatReadsAVariable) {
  Scope root = Scope::NewRootScope();
  Output w = ops::MakeVariable(root.WithOpName("w"), DVec(root, {1, -2}));
  Output b = ops::MakeVariable(root.WithOpName("b"), DVec(root, {0.5, 0.25}));
  Output late = DVec(root, {1, 1});
  for (int i = 0; i < 64; ++i) late = ops::Identity(root, late);
  Output gb = ops::Mul(root, late, w);  // == w, read after the chain
  GradientDescentOptimizer opt(0.1);
  auto train = opt.ApplyGradients(root, {{DVec(root, {3, -7}), w}, {gb, b}});
  ASSERT_TRUE(train.ok()) << train.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  ExpectNear(Fetch<double>(&sess, w), {1 - 0.3, -2 + 0.7}, 1e-12);
  ExpectNear(Fetch<double>(&sess, b), {0.5 - 0.1 * 1, 0.25 - 0.1 * -2}, 1e-12);
}

TEST(Optimizer, MomentumTwoSteps) {
  Fixture f;
  MomentumOptimizer opt(0.1, 0.9);
  auto train = opt.ApplyGradients(f.root, {{f.gw, f.w}});
  ASSERT_TRUE(train.ok()) << train.status();
  Output slot = opt.GetSlot(f.w, "momentum");
  ASSERT_TRUE(slot.ok());
  EXPECT_EQ(slot.op().name(), "w/Momentum");
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(f.root)}).ok());
  std::vector<double> w = {1, -2}, a = {0, 0};
  const double g[2] = {0.3, -0.7};
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
    for (int i = 0; i < 2; ++i) {
      a[i] = 0.9 * a[i] + g[i];
      w[i] -= 0.1 * a[i];
    }
  }
  ExpectNear(Fetch<double>(&sess, f.w), w, 1e-12);
  ExpectNear(Fetch<double>(&sess, slot), a, 1e-12);
}

TEST(Optimizer, AdagradTwoSteps) {
  Fixture f;
  AdagradOptimizer opt(0.5);
  auto train = opt.ApplyGradients(f.root, {{f.gw, f.w}});
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(opt.GetSlot(f.w, "accumulator").op().name(), "w/Adagrad");
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(f.root)}).ok());
  std::vector<double> w = {1, -2}, a = {0.1, 0.1};
  const double g[2] = {0.3, -0.7};
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
    for (int i = 0; i < 2; ++i) {
      a[i] += g[i] * g[i];
      w[i] -= 0.5 * g[i] / std::sqrt(a[i]);
    }
  }
  ExpectNear(Fetch<double>(&sess, f.w), w, 1e-12);
}

TEST(Optimizer, RMSPropTwoSteps) {
  Fixture f;
  RMSPropOptimizer opt(0.01, 0.9, 0.5, 1e-10);
  auto train = opt.ApplyGradients(f.root, {{f.gw, f.w}});
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(opt.GetSlot(f.w, "rms").op().name(), "w/RMSProp");
  EXPECT_EQ(opt.GetSlot(f.w, "momentum").op().name(), "w/RMSProp_1");
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(f.root)}).ok());
  std::vector<double> w = {1, -2}, ms = {1, 1}, mom = {0, 0};
  const double g[2] = {0.3, -0.7};
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
    for (int i = 0; i < 2; ++i) {
      ms[i] = 0.9 * ms[i] + 0.1 * g[i] * g[i];
      mom[i] = 0.5 * mom[i] + 0.01 * g[i] / std::sqrt(ms[i] + 1e-10);
      w[i] -= mom[i];
    }
  }
  ExpectNear(Fetch<double>(&sess, f.w), w, 1e-12);
}

TEST(Optimizer, AdamThreeStepsMatchFloat64Reference) {
  Fixture f;
  AdamOptimizer opt(0.1, 0.9, 0.999, 1e-8);
  // A gradient that changes from step to step: 2 * w (d/dw of w^2) built by hand.
  Output gw = ops::Mul(f.root, f.w, ops::Const(f.root, 2.0));
  auto train = opt.ApplyGradients(f.root, {{gw, f.w}, {f.gb, f.b}});
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(opt.GetSlot(f.w, "m").op().name(), "w/Adam");
  EXPECT_EQ(opt.GetSlot(f.w, "v").op().name(), "w/Adam_1");
  EXPECT_EQ(opt.GetSlot(f.b, "m").op().name(), "b/Adam");
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(f.root)}).ok());
  std::vector<double> w = {1, -2}, m = {0, 0}, v = {0, 0};
  double bb = 0.5, bm = 0, bv = 0;
  double p1 = 0.9, p2 = 0.999;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
    const double lr_t = 0.1 * std::sqrt(1 - p2) / (1 - p1);
    for (int i = 0; i < 2; ++i) {
      const double g = 2 * w[static_cast<size_t>(i)];
      m[i] = m[i] + (g - m[i]) * (1 - 0.9);
      v[i] = v[i] + (g * g - v[i]) * (1 - 0.999);
      w[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-8);
    }
    bm = bm + (2.0 - bm) * 0.1;
    bv = bv + (4.0 - bv) * 0.001;
    bb -= lr_t * bm / (std::sqrt(bv) + 1e-8);
    p1 *= 0.9;
    p2 *= 0.999;
    ExpectNear(Fetch<double>(&sess, f.w), w, 1e-12);
    ExpectNear(Fetch<double>(&sess, f.b), {bb}, 1e-12);
  }
  ExpectNear(Fetch<double>(&sess, opt.GetSlot(f.w, "m")), m, 1e-12);
  ExpectNear(Fetch<double>(&sess, opt.GetSlot(f.w, "v")), v, 1e-12);
  auto [b1, b2] = opt.GetBetaAccumulators();
  ExpectNear(Fetch<double>(&sess, b1), {std::pow(0.9, 4)}, 1e-12);
  ExpectNear(Fetch<double>(&sess, b2), {std::pow(0.999, 4)}, 1e-12);
}

TEST(Optimizer, AdamFloatVariables) {
  Scope root = Scope::NewRootScope();
  auto w = ops::MakeVariable(root.WithOpName("w"), FVec(root, {1.f, -2.f}));
  AdamOptimizer opt(0.1);
  auto train = opt.ApplyGradients(root, {{FVec(root, {0.5f, 0.5f}), w}});
  ASSERT_TRUE(train.ok()) << train.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  // The first Adam step moves each weight by about lr against the gradient's sign.
  ExpectNear(Fetch<float>(&sess, w), {0.9, -2.1}, 1e-4);
}

TEST(Optimizer, SlotsAreColocatedWithTheirVariableAndNotTrainable) {
  Scope root = Scope::NewRootScope();
  auto w = ops::MakeVariable(root.WithDevice("/job:ps/task:0").WithOpName("w"), DVec(root, {1, 2}));
  auto b = ops::MakeVariable(root.WithDevice("/job:ps/task:1").WithOpName("b"), DVec(root, {3}));
  Scope worker = root.WithDevice("/job:worker/task:0");
  auto gw = DVec(worker, {1, 1});
  auto gb = DVec(worker, {1});
  const size_t trainable_before = root.TrainableVariables().size();
  Output step = CreateGlobalStep(root.WithDevice("/job:ps/task:1"));
  AdamOptimizer opt(0.1);
  auto train = opt.ApplyGradients(worker, {{gw, w}, {gb, b}}, &step);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(root.TrainableVariables().size(), trainable_before);

  for (const char* s : {"m", "v"}) {
    EXPECT_EQ(opt.GetSlot(w, s).node()->def().device(), "/job:ps/task:0") << s;
    EXPECT_EQ(opt.GetSlot(b, s).node()->def().device(), "/job:ps/task:1") << s;
  }
  auto [b1, b2] = opt.GetBetaAccumulators();
  EXPECT_EQ(b1.op().name(), "beta1_power");
  EXPECT_EQ(b1.node()->def().device(), "/job:ps/task:0") << "colocated with the first variable";
  EXPECT_EQ(b2.node()->def().device(), "/job:ps/task:0");

  // Every op of the graph: updates on their variable's device, initializers too.
  proto::GraphDef gd;
  root.ToGraphDef(&gd);
  int applies = 0;
  for (const proto::NodeDef& n : gd.node()) {
    if (n.op() == "ApplyAdam") {
      ++applies;
      const std::string want = n.input(0) == "w:0" || n.input(0) == "w" ? "/job:ps/task:0" : "/job:ps/task:1";
      EXPECT_EQ(n.device(), want) << n.name() << " input " << n.input(0);
    }
    if (n.name() == "w/Adam/Assign" || n.name() == "w/Adam/Initializer/zeros") {
      EXPECT_EQ(n.device(), "/job:ps/task:0") << n.name();
    }
    if (n.op() == "AssignAdd") {
      EXPECT_EQ(n.device(), "/job:ps/task:1") << "global step increment";
    }
  }
  EXPECT_EQ(applies, 2);

  // A local session ignores the requested devices.
  Session sess;
  auto init = sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)});
  ASSERT_TRUE(init.ok()) << init.status();
  ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  ExpectNear(Fetch<double>(&sess, w), {0.9, 1.9}, 1e-6);
  ExpectNear(Fetch<int64_t>(&sess, step), {1}, 0);
}

TEST(Optimizer, GlobalStepIncrementsOncePerRun) {
  Fixture f;
  Output step = CreateGlobalStep(f.root);
  EXPECT_EQ(step.op().name(), "global_step");
  EXPECT_EQ(step.dtype(), DT_INT64);
  GradientDescentOptimizer opt(0.1);
  auto train = opt.ApplyGradients(f.root, {{f.gw, f.w}, {f.gb, f.b}}, &step);
  ASSERT_TRUE(train.ok()) << train.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(f.root)}).ok());
  ExpectNear(Fetch<int64_t>(&sess, step), {0}, 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  ExpectNear(Fetch<int64_t>(&sess, step), {3}, 0);
}

TEST(Optimizer, GlobalStepMayBeAFloatOrInt32AsInTensorFlowPrograms) {
  // The book's program: get_variable('global_step', [], constant_initializer(0)) is float32.
  Fixture f;
  ops::VariableOptions counter;
  counter.trainable = false;
  Output fstep = ops::MakeVariable(f.root.WithOpName("fstep"), ops::Const(f.root, 0.f), counter);
  Output istep = ops::MakeVariable(f.root.WithOpName("istep"), ops::Const(f.root, 0), counter);
  Output sstep = ops::MakeVariable(f.root.WithOpName("sstep"), ops::Const(f.root, "x"), counter);
  GradientDescentOptimizer opt(0.1);
  auto ftrain = opt.ApplyGradients(f.root, {{f.gw, f.w}}, &fstep);
  auto itrain = opt.ApplyGradients(f.root, {{f.gb, f.b}}, &istep);
  ASSERT_TRUE(ftrain.ok()) << ftrain.status();
  ASSERT_TRUE(itrain.ok()) << itrain.status();
  auto bad = opt.ApplyGradients(f.root, {{f.gb, f.b}}, &sstep);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sstep"), std::string::npos) << bad.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(f.root)}).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(sess.Run({}, {}, {*ftrain, *itrain}).ok());
  auto out = sess.Run({fstep, istep});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 2.f);
  EXPECT_EQ((*out)[1].scalar<int32_t>(), 2);
}

TEST(Optimizer, PairsWithoutGradientAreSkipped) {
  Fixture f;
  MomentumOptimizer opt(0.1, 0.9);
  auto train = opt.ApplyGradients(f.root, {{Output(), f.w}, {f.gb, f.b}});
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_FALSE(opt.GetSlot(f.w, "momentum").ok());
  EXPECT_TRUE(opt.GetSlot(f.b, "momentum").ok());
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(f.root)}).ok());
  ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  ExpectNear(Fetch<double>(&sess, f.w), {1, -2}, 0);
  ExpectNear(Fetch<double>(&sess, f.b), {0.5 - 0.2}, 1e-12);
}

TEST(Optimizer, NoGradientsAtAllIsAnError) {
  Fixture f;
  GradientDescentOptimizer opt(0.1);
  auto train = opt.ApplyGradients(f.root, {{Output(), f.w}});
  ASSERT_FALSE(train.ok());
  EXPECT_THAT(std::string(train.status().message()), HasSubstr("No gradients"));
  EXPECT_THAT(std::string(train.status().message()), HasSubstr("w:0"));
}

TEST(Optimizer, MismatchedGradientIsAnError) {
  Fixture f;
  GradientDescentOptimizer opt(0.1);
  auto bad_shape = opt.ApplyGradients(f.root, {{DVec(f.root, {1, 2, 3}), f.w}});
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_THAT(std::string(bad_shape.status().message()), HasSubstr("[3]"));
  auto bad_type = opt.ApplyGradients(f.root, {{FVec(f.root, {1, 2}), f.w}});
  ASSERT_FALSE(bad_type.ok());
  EXPECT_THAT(std::string(bad_type.status().message()), HasSubstr("float"));
  auto not_var = opt.ApplyGradients(f.root, {{f.gw, f.gw}});
  ASSERT_FALSE(not_var.ok());
  EXPECT_THAT(std::string(not_var.status().message()), HasSubstr("not a variable"));
}

TEST(Optimizer, SecondApplyGradientsReusesSlots) {
  Fixture f;
  AdamOptimizer opt(0.1);
  auto t1 = opt.ApplyGradients(f.root, {{f.gw, f.w}});
  ASSERT_TRUE(t1.ok()) << t1.status();
  Output m = opt.GetSlot(f.w, "m");
  auto t2 = opt.ApplyGradients(f.root, {{f.gw, f.w}});
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_EQ(opt.GetSlot(f.w, "m").name(), m.name());
  EXPECT_NE(t1->name(), t2->name());
}

// --- Minimize (needs symbolic gradients) ------------------------------------

TEST(Minimize, QuadraticConverges) {
  for (int which = 0; which < 5; ++which) {
    Scope root = Scope::NewRootScope();
    auto w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, {0.f, 0.f}, TensorShape({2})));
    auto target = ops::Const(root, {3.f, -1.f}, TensorShape({2}));
    auto loss = ops::Sum(root, ops::Square(root, w - target), {0});
    std::unique_ptr<Optimizer> opt;
    int steps = 200;
    switch (which) {
      case 0:
        opt = std::make_unique<GradientDescentOptimizer>(0.1);
        break;
      case 1:
        opt = std::make_unique<MomentumOptimizer>(0.05, 0.9);
        break;
      case 2:
        opt = std::make_unique<AdagradOptimizer>(1.0);
        break;
      case 3:
        opt = std::make_unique<RMSPropOptimizer>(0.05);
        steps = 400;
        break;
      default:
        opt = std::make_unique<AdamOptimizer>(0.1);
        steps = 400;
        break;
    }
    Output step = CreateGlobalStep(root);
    auto train = opt->Minimize(root, loss, &step);
    ASSERT_TRUE(train.ok()) << opt->name() << ": " << train.status();
    Session sess;
    ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
    for (int i = 0; i < steps; ++i) ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
    auto out = sess.Run({w, loss, step});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].flat<float>()[0], 3.f, 0.05f) << opt->name();
    EXPECT_NEAR((*out)[0].flat<float>()[1], -1.f, 0.05f) << opt->name();
    EXPECT_LT((*out)[1].scalar<float>(), 1e-2f) << opt->name();
    EXPECT_EQ((*out)[2].scalar<int64_t>(), steps);
  }
}

TEST(Minimize, ComputeGradientsDefaultsToTrainableVariables) {
  Scope root = Scope::NewRootScope();
  auto w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, 2.f));
  auto unused = ops::MakeVariable(root.WithOpName("unused"), ops::Const(root, 2.f));
  auto loss = ops::Square(root, w);
  GradientDescentOptimizer opt(0.1);
  auto gv = opt.ComputeGradients(root, loss);
  ASSERT_TRUE(gv.ok()) << gv.status();
  ASSERT_EQ(gv->size(), 2u);
  EXPECT_TRUE((*gv)[0].first.ok());
  EXPECT_FALSE((*gv)[1].first.ok()) << "the loss does not depend on 'unused'";
}

}  // namespace
}  // namespace distflow
