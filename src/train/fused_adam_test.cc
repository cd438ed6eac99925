// AdamOptimizer's fused dense updates (one FusedApplyAdam per device and
// dtype) against one ApplyAdam per variable: the same numbers, bit for bit,
// after several steps; and the op's checks of its inputs.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"
#include "gmock/gmock.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

struct Model {
  Scope root = Scope::NewRootScope();
  std::vector<Output> vars;
  AdamOptimizer opt{0.05, 0.9, 0.999, 1e-7};
  Operation train;
};

// Variables of several shapes (one large enough for the intra-op pool to
// split it), on two ps tasks and in two dtypes, with gradients that change
// from step to step (g = w * w - 0.3); the same pseudo-random start for
// every call.
template <typename T>
Output RandomVariable(const Scope& s, const std::string& name, const TensorShape& shape, std::mt19937* rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> values(static_cast<size_t>(shape.num_elements()));
  for (T& x : values) x = static_cast<T>(u(*rng));
  return ops::MakeVariable(s.WithOpName(name), ops::Const(s, Tensor::FromVector<T>(values, shape)));
}

void Build(Model* m, bool fused) {
  std::mt19937 rng(7);
  Scope ps0 = m->root.WithDevice("/job:ps/task:0"), ps1 = m->root.WithDevice("/job:ps/task:1");
  m->vars = {RandomVariable<float>(ps0, "conv", TensorShape({5, 5, 1, 8}), &rng),
             RandomVariable<float>(ps0, "bias", TensorShape({8}), &rng),
             RandomVariable<float>(ps0, "fc", TensorShape({300, 400}), &rng),
             RandomVariable<float>(ps1, "logits", TensorShape({40, 10}), &rng),
             RandomVariable<float>(ps1, "logits_bias", TensorShape({10}), &rng),
             RandomVariable<double>(ps0, "scale", TensorShape({3}), &rng),
             RandomVariable<double>(ps0, "shift", TensorShape({2, 2}), &rng)};
  Optimizer::GradsAndVars gv;
  for (const Output& v : m->vars) {
    Scope w = m->root.WithDevice("/job:worker/task:0");
    Output c = v.dtype() == DT_FLOAT ? ops::Const(w, 0.3f) : ops::Const(w, 0.3);
    gv.emplace_back(ops::Sub(w, ops::Mul(w, v, v), c), v);
  }
  m->opt.SetFusedDenseUpdates(fused);
  absl::StatusOr<Operation> train = m->opt.ApplyGradients(m->root, gv);
  ASSERT_TRUE(train.ok()) << train.status();
  m->train = *train;
}

// Bytes of every value, so that -0.0 vs 0.0 or a differing NaN would show.
std::string Bytes(Session* sess, const Output& o) {
  auto out = sess->Run({o});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return "";
  const Tensor& t = (*out)[0];
  const size_t bytes = static_cast<size_t>(t.NumElements()) * (t.dtype() == DT_FLOAT ? 4 : 8);
  std::string s(bytes, '\0');
  if (t.dtype() == DT_FLOAT) {
    std::memcpy(s.data(), t.flat<float>().data(), bytes);
  } else {
    std::memcpy(s.data(), t.flat<double>().data(), bytes);
  }
  return s;
}

TEST(FusedAdam, MatchesOneApplyAdamPerVariableBitForBit) {
  Model fused, unfused;
  ASSERT_NO_FATAL_FAILURE(Build(&fused, true));
  ASSERT_NO_FATAL_FAILURE(Build(&unfused, false));
  Session a, b;
  ASSERT_TRUE(a.Run({}, {}, {ops::GlobalVariablesInitializer(fused.root)}).ok());
  ASSERT_TRUE(b.Run({}, {}, {ops::GlobalVariablesInitializer(unfused.root)}).ok());
  const std::string start = Bytes(&a, fused.vars[2]);
  for (int step = 0; step < 5; ++step) {
    ASSERT_TRUE(a.Run({}, {}, {fused.train}).ok());
    ASSERT_TRUE(b.Run({}, {}, {unfused.train}).ok());
  }
  EXPECT_NE(Bytes(&a, fused.vars[2]), start) << "the steps moved the weights";
  for (size_t i = 0; i < fused.vars.size(); ++i) {
    const std::string name = fused.vars[i].name();
    EXPECT_EQ(Bytes(&a, fused.vars[i]), Bytes(&b, unfused.vars[i])) << name;
    for (const char* slot : {"m", "v"}) {
      EXPECT_EQ(Bytes(&a, fused.opt.GetSlot(fused.vars[i], slot)),
                Bytes(&b, unfused.opt.GetSlot(unfused.vars[i], slot)))
          << name << " slot " << slot;
    }
  }
  auto [a1, a2] = fused.opt.GetBetaAccumulators();
  auto [b1, b2] = unfused.opt.GetBetaAccumulators();
  EXPECT_EQ(Bytes(&a, a1), Bytes(&b, b1)) << "beta1_power: updated once per step";
  EXPECT_EQ(Bytes(&a, a2), Bytes(&b, b2)) << "beta2_power: updated once per step";
}

TEST(FusedAdam, OneOpPerDeviceAndDtype) {
  Model fused, unfused;
  ASSERT_NO_FATAL_FAILURE(Build(&fused, true));
  ASSERT_NO_FATAL_FAILURE(Build(&unfused, false));
  proto::GraphDef gd;
  fused.root.ToGraphDef(&gd);
  std::vector<std::string> groups;  // device, dtype and N of each fused op
  int apply_adam = 0;
  for (const proto::NodeDef& n : gd.node()) {
    if (n.op() == "ApplyAdam") ++apply_adam;
    if (n.op() != "FusedApplyAdam") continue;
    groups.push_back(absl::StrCat(n.device(), " ", DataTypeName(*GetAttrType(n, "T")), " ", *GetAttrInt(n, "N")));
  }
  EXPECT_THAT(groups, ::testing::UnorderedElementsAre("/job:ps/task:0 float32 3", "/job:ps/task:1 float32 2",
                                                      "/job:ps/task:0 float64 2"));
  EXPECT_EQ(apply_adam, 0);

  unfused.root.ToGraphDef(&gd);
  apply_adam = 0;
  for (const proto::NodeDef& n : gd.node()) {
    EXPECT_NE(n.op(), "FusedApplyAdam") << n.name();
    if (n.op() == "ApplyAdam") ++apply_adam;
  }
  EXPECT_EQ(apply_adam, 7);
}

TEST(FusedAdam, GradientOfTheWrongShapeFailsNamingTheVariable) {
  Scope root = Scope::NewRootScope();
  Output w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, Tensor::FromVector<float>({1, 2})));
  Output u = ops::MakeVariable(root.WithOpName("u"), ops::Const(root, Tensor::FromVector<float>({3, 4, 5})));
  // Shapes known only when the step runs: the kernel checks them.
  Output gw_in = ops::Placeholder(root.WithOpName("gw"), DT_FLOAT);
  Output gu_in = ops::Placeholder(root.WithOpName("gu"), DT_FLOAT);
  Output gw = ops::Identity(root, gw_in), gu = ops::Identity(root, gu_in);
  AdamOptimizer opt(0.1);
  absl::StatusOr<Operation> train = opt.ApplyGradients(root, {{gw, w}, {gu, u}});
  ASSERT_TRUE(train.ok()) << train.status();
  Session sess;
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  auto r =
      sess.Run({{gw_in, Tensor::FromVector<float>({1, 1})}, {gu_in, Tensor::FromVector<float>({1, 1})}}, {}, {*train});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'u'"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("grad has shape [2]"));
  ASSERT_TRUE(sess.Run({{gw_in, Tensor::FromVector<float>({1, 1})}, {gu_in, Tensor::FromVector<float>({1, 1, 1})}}, {},
                       {*train})
                  .ok());
}

TEST(FusedAdam, BuildChecksShapesAndScalars) {
  Scope root = Scope::NewRootScope();
  auto w = ops::Variable(root.WithOpName("w"), {2}, DT_FLOAT);
  auto m = ops::Variable(root.WithOpName("m"), {2}, DT_FLOAT);
  auto v = ops::Variable(root.WithOpName("v"), {3}, DT_FLOAT);
  auto s = ops::Const(root, 0.5f);
  ops::Raw(root, "FusedApplyAdam", {w, m, v, s, s, s, s, s, s, ops::Const(root, Tensor::FromVector<float>({1, 2}))},
           [](proto::NodeDef* d) { SetAttrInt(d, "N", 1); });
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(std::string(root.status().message()), HasSubstr("var[0] and v[0] do not have the same shape"));

  Scope root2 = Scope::NewRootScope();
  auto w2 = ops::Variable(root2.WithOpName("w"), {2}, DT_FLOAT);
  auto s2 = ops::Const(root2, 0.5f);
  auto g2 = ops::Const(root2, Tensor::FromVector<float>({1, 2}));
  ops::Raw(root2, "FusedApplyAdam", {w2, w2, w2, s2, s2, g2, s2, s2, s2, g2},
           [](proto::NodeDef* d) { SetAttrInt(d, "N", 1); });
  ASSERT_FALSE(root2.ok());
  EXPECT_THAT(std::string(root2.status().message()), HasSubstr("lr is not a scalar"));
}

}  // namespace
}  // namespace distflow
