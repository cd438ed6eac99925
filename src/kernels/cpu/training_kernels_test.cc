// Tests of the fused optimizer kernels. OpTest cannot feed Ref inputs, so each
// test builds the kernel from the registry and calls it with Vars directly,
// the way the executor does; each update is checked against a hand
// computation over two steps. (Graph-level tests of the same ops through a
// Session live in src/train/optimizer_test.cc.)
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "base/logging.h"
#include "gmock/gmock.h"
#include "graph/attr_value.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_test_util.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

template <typename T>
std::shared_ptr<Var> MakeVar(const std::string& name, const std::vector<T>& v) {
  auto var = std::make_shared<Var>(name, DataTypeToEnum<T>::value, PartialShape({static_cast<int64_t>(v.size())}));
  absl::MutexLock lock(var->mu());
  var->Set(Tensor::FromVector<T>(v));
  return var;
}

template <typename T>
std::vector<T> Value(const std::shared_ptr<Var>& var) {
  absl::StatusOr<Tensor> t = var->Read();
  CHECK(t.ok()) << t.status();
  auto f = t->flat<T>();
  return std::vector<T>(f.begin(), f.end());
}

// One kernel instance; Run feeds `refs` as the ref inputs and `values` as the rest.
class ApplyRunner {
 public:
  ApplyRunner(const std::string& op, DataType dt, int num_inputs, ThreadPool* pool = nullptr,
              const std::function<void(proto::NodeDef*)>& attrs = nullptr)
      : pool_(pool) {
    def_.set_name("apply");
    def_.set_op(op);
    SetAttrType(&def_, "T", dt);
    if (attrs) attrs(&def_);
    std::vector<DataType> in(static_cast<size_t>(num_inputs), dt);
    absl::StatusOr<std::unique_ptr<OpKernel>> k = KernelRegistry::Global()->CreateKernel(def_, in, {dt}, nullptr);
    CHECK(k.ok()) << k.status();
    kernel_ = std::move(*k);
  }

  absl::Status Run(const std::vector<std::shared_ptr<Var>>& refs, const std::vector<Tensor>& values) {
    OpKernelContext::Params p;
    p.kernel = kernel_.get();
    p.intra_op_pool = pool_;
    p.inputs.resize(refs.size());
    p.input_refs = refs;
    for (const Tensor& t : values) p.inputs.push_back(t);
    p.input_refs.resize(p.inputs.size());
    OpKernelContext ctx(std::move(p));
    absl::Status s = kernel_->Compute(&ctx);
    if (s.ok()) {
      EXPECT_EQ(ctx.output_ref(0).get(), refs[0].get()) << "the output is the variable reference";
    }
    return s;
  }

 private:
  proto::NodeDef def_;
  ThreadPool* pool_;
  std::unique_ptr<OpKernel> kernel_;
};

template <typename T>
Tensor S(double v) {
  return Tensor::Scalar<T>(static_cast<T>(v));
}
template <typename T>
Tensor V(const std::vector<double>& v) {
  std::vector<T> w(v.begin(), v.end());
  return Tensor::FromVector<T>(w);
}

template <typename T>
void ExpectNear(const std::vector<T>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(static_cast<double>(got[i]), want[i], tol) << "element " << i;
}

template <typename T>
class ApplyTest : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ApplyTest, Types);

constexpr double kTolF = 1e-5;

TYPED_TEST(ApplyTest, GradientDescentTwoSteps) {
  using T = TypeParam;
  auto var = MakeVar<T>("w", {1.0, 2.0, -3.0});
  ApplyRunner r("ApplyGradientDescent", DataTypeToEnum<T>::value, 3);
  std::vector<double> w = {1.0, 2.0, -3.0};
  const std::vector<double> g = {0.5, -1.0, 2.0};
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(r.Run({var}, {S<T>(0.1), V<T>(g)}).ok());
    for (size_t i = 0; i < w.size(); ++i) w[i] -= 0.1 * g[i];
    ExpectNear(Value<T>(var), w, kTolF);
  }
}

TYPED_TEST(ApplyTest, MomentumTwoSteps) {
  using T = TypeParam;
  for (bool nesterov : {false, true}) {
    auto var = MakeVar<T>("w", {1.0, -2.0});
    auto accum = MakeVar<T>("w/Momentum", {0.0, 0.0});
    ApplyRunner r("ApplyMomentum", DataTypeToEnum<T>::value, 5, nullptr,
                  [&](proto::NodeDef* n) { SetAttrBool(n, "use_nesterov", nesterov); });
    std::vector<double> w = {1.0, -2.0}, a = {0.0, 0.0};
    const std::vector<std::vector<double>> grads = {{0.3, -0.7}, {1.1, 0.2}};
    const double lr = 0.05, mom = 0.9;
    for (const auto& g : grads) {
      ASSERT_TRUE(r.Run({var, accum}, {S<T>(lr), V<T>(g), S<T>(mom)}).ok());
      for (size_t i = 0; i < w.size(); ++i) {
        a[i] = a[i] * mom + g[i];
        w[i] -= nesterov ? g[i] * lr + a[i] * mom * lr : lr * a[i];
      }
      ExpectNear(Value<T>(var), w, kTolF);
      ExpectNear(Value<T>(accum), a, kTolF);
    }
  }
}

TYPED_TEST(ApplyTest, AdagradTwoSteps) {
  using T = TypeParam;
  auto var = MakeVar<T>("w", {1.0, -2.0});
  auto accum = MakeVar<T>("w/Adagrad", {0.1, 0.1});
  ApplyRunner r("ApplyAdagrad", DataTypeToEnum<T>::value, 4);
  std::vector<double> w = {1.0, -2.0}, a = {0.1, 0.1};
  const std::vector<std::vector<double>> grads = {{0.3, -0.7}, {1.1, 0.2}};
  const double lr = 0.2;
  for (const auto& g : grads) {
    ASSERT_TRUE(r.Run({var, accum}, {S<T>(lr), V<T>(g)}).ok());
    for (size_t i = 0; i < w.size(); ++i) {
      a[i] += g[i] * g[i];
      w[i] -= lr * g[i] / std::sqrt(a[i]);
    }
    ExpectNear(Value<T>(var), w, kTolF);
    ExpectNear(Value<T>(accum), a, kTolF);
  }
}

TYPED_TEST(ApplyTest, RMSPropTwoSteps) {
  using T = TypeParam;
  auto var = MakeVar<T>("w", {1.0, -2.0});
  auto ms = MakeVar<T>("w/RMSProp", {1.0, 1.0});
  auto mom = MakeVar<T>("w/RMSProp_1", {0.0, 0.0});
  ApplyRunner r("ApplyRMSProp", DataTypeToEnum<T>::value, 8);
  std::vector<double> w = {1.0, -2.0}, m2 = {1.0, 1.0}, mo = {0.0, 0.0};
  const std::vector<std::vector<double>> grads = {{0.3, -0.7}, {1.1, 0.2}};
  const double lr = 0.01, rho = 0.9, momentum = 0.5, eps = 1e-6;
  for (const auto& g : grads) {
    ASSERT_TRUE(r.Run({var, ms, mom}, {S<T>(lr), S<T>(rho), S<T>(momentum), S<T>(eps), V<T>(g)}).ok());
    for (size_t i = 0; i < w.size(); ++i) {
      m2[i] = rho * m2[i] + (1 - rho) * g[i] * g[i];
      mo[i] = momentum * mo[i] + lr * g[i] / std::sqrt(m2[i] + eps);
      w[i] -= mo[i];
    }
    ExpectNear(Value<T>(var), w, kTolF);
    ExpectNear(Value<T>(ms), m2, kTolF);
    ExpectNear(Value<T>(mom), mo, kTolF);
  }
}

TYPED_TEST(ApplyTest, AdamTwoSteps) {
  using T = TypeParam;
  for (bool nesterov : {false, true}) {
    auto var = MakeVar<T>("w", {1.0, -2.0});
    auto m = MakeVar<T>("w/Adam", {0.0, 0.0});
    auto v = MakeVar<T>("w/Adam_1", {0.0, 0.0});
    ApplyRunner r("ApplyAdam", DataTypeToEnum<T>::value, 10, nullptr,
                  [&](proto::NodeDef* n) { SetAttrBool(n, "use_nesterov", nesterov); });
    std::vector<double> w = {1.0, -2.0}, mm = {0.0, 0.0}, vv = {0.0, 0.0};
    const std::vector<std::vector<double>> grads = {{0.3, -0.7}, {1.1, 0.2}};
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    double b1p = b1, b2p = b2;
    for (const auto& g : grads) {
      ASSERT_TRUE(r.Run({var, m, v}, {S<T>(b1p), S<T>(b2p), S<T>(lr), S<T>(b1), S<T>(b2), S<T>(eps), V<T>(g)}).ok());
      const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
      for (size_t i = 0; i < w.size(); ++i) {
        mm[i] += (g[i] - mm[i]) * (1 - b1);
        vv[i] += (g[i] * g[i] - vv[i]) * (1 - b2);
        const double num = nesterov ? mm[i] * b1 + (1 - b1) * g[i] : mm[i];
        w[i] -= lr_t * num / (std::sqrt(vv[i]) + eps);
      }
      b1p *= b1;
      b2p *= b2;
      ExpectNear(Value<T>(var), w, kTolF);
      ExpectNear(Value<T>(m), mm, kTolF);
      ExpectNear(Value<T>(v), vv, kTolF);
    }
  }
}

TEST(ApplyErrors, UninitializedVariableIsFailedPreconditionNamingIt) {
  auto var = std::make_shared<Var>("layer/weights", DT_FLOAT, PartialShape({2}));
  ApplyRunner r("ApplyGradientDescent", DT_FLOAT, 3);
  absl::Status s = r.Run({var}, {S<float>(0.1), V<float>({1, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("layer/weights"));
}

TEST(ApplyErrors, UninitializedSlotIsFailedPreconditionNamingIt) {
  auto var = MakeVar<float>("w", {1, 2});
  auto accum = std::make_shared<Var>("w/Momentum", DT_FLOAT, PartialShape({2}));
  ApplyRunner r("ApplyMomentum", DT_FLOAT, 5);
  absl::Status s = r.Run({var, accum}, {S<float>(0.1), V<float>({1, 2}), S<float>(0.9)});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("w/Momentum"));
}

TEST(ApplyErrors, GradShapeMismatchNamesBothShapes) {
  auto var = MakeVar<float>("w", {1, 2, 3});
  ApplyRunner r("ApplyGradientDescent", DT_FLOAT, 3);
  absl::Status s = r.Run({var}, {S<float>(0.1), V<float>({1, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("[3]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("[2]"));
  ExpectNear(Value<float>(var), {1, 2, 3}, 0);
}

TEST(ApplyErrors, SlotShapeMismatchNamesBothShapes) {
  auto var = MakeVar<float>("w", {1, 2, 3});
  auto accum = MakeVar<float>("w/Adagrad", {1, 1});
  ApplyRunner r("ApplyAdagrad", DT_FLOAT, 4);
  absl::Status s = r.Run({var, accum}, {S<float>(0.1), V<float>({1, 2, 3})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("[3]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("[2]"));
}

TEST(ApplyErrors, NonScalarHyperParameterIsInvalidArgument) {
  auto var = MakeVar<float>("w", {1, 2});
  ApplyRunner r("ApplyGradientDescent", DT_FLOAT, 3);
  absl::Status s = r.Run({var}, {V<float>({0.1, 0.1}), V<float>({1, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("alpha"));
}

TEST(ApplyParallel, LargeAdamMatchesSerialOnPool) {
  const int n = 1 << 18;
  std::vector<float> w0(n), g(n);
  for (int i = 0; i < n; ++i) {
    w0[static_cast<size_t>(i)] = std::sin(0.001f * static_cast<float>(i));
    g[static_cast<size_t>(i)] = std::cos(0.003f * static_cast<float>(i));
  }
  ThreadPool pool("apply_test", 4);
  std::vector<std::vector<float>> results;
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    auto var = MakeVar<float>("w", w0);
    auto m = MakeVar<float>("m", std::vector<float>(n, 0.f));
    auto v = MakeVar<float>("v", std::vector<float>(n, 0.f));
    ApplyRunner r("ApplyAdam", DT_FLOAT, 10, p);
    Tensor gt = Tensor::FromVector<float>(g);
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(r.Run({var, m, v}, {S<float>(0.9), S<float>(0.999), S<float>(0.01), S<float>(0.9), S<float>(0.999),
                                      S<float>(1e-8), gt})
                      .ok());
    }
    results.push_back(Value<float>(var));
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    ASSERT_NEAR(results[0][i], results[1][i], 1e-6f) << "element " << i;
  }
}

TEST(ApplyCopyOnWrite, SnapshotIsNotChangedByUpdate) {
  auto var = MakeVar<float>("w", {1, 2});
  absl::StatusOr<Tensor> snap = var->Read();
  ASSERT_TRUE(snap.ok());
  ApplyRunner r("ApplyGradientDescent", DT_FLOAT, 3);
  ASSERT_TRUE(r.Run({var}, {S<float>(1), V<float>({1, 1})}).ok());
  EXPECT_EQ(snap->flat<float>()[0], 1.f);
  ExpectNear(Value<float>(var), {0, 1}, 0);
}

// The shape functions run when a node is added to a graph.
TEST(ApplyShapes, ShapeFunctionsCheckGradAndScalars) {
  Graph g;
  auto add = [&g](const std::string& name, const std::string& op, const std::vector<std::string>& inputs,
                  const std::string& dtype_attr, const PartialShape& shape) {
    proto::NodeDef d;
    d.set_name(name);
    d.set_op(op);
    for (const auto& in : inputs) d.add_input(in);
    if (op == "Variable") {
      SetAttrShape(&d, "shape", shape);
      SetAttrType(&d, "dtype", DT_FLOAT);
    } else if (op == "Placeholder") {
      SetAttrShape(&d, "shape", shape);
      SetAttrType(&d, "dtype", DT_FLOAT);
    }
    (void)dtype_attr;
    return g.AddNode(std::move(d));
  };
  ASSERT_TRUE(add("w", "Variable", {}, "", PartialShape({2, 3})).ok());
  ASSERT_TRUE(add("lr", "Placeholder", {}, "", PartialShape({})).ok());
  ASSERT_TRUE(add("g_ok", "Placeholder", {}, "", PartialShape({2, -1})).ok());
  ASSERT_TRUE(add("g_bad", "Placeholder", {}, "", PartialShape({3, 2})).ok());
  ASSERT_TRUE(add("vec", "Placeholder", {}, "", PartialShape({2})).ok());
  absl::StatusOr<const Node*> ok = add("apply", "ApplyGradientDescent", {"w", "lr", "g_ok"}, "", PartialShape());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->output_shape(0).DebugString(), PartialShape({2, 3}).DebugString());
  absl::StatusOr<const Node*> bad = add("apply2", "ApplyGradientDescent", {"w", "lr", "g_bad"}, "", PartialShape());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("[2,3]"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("[3,2]"));
  absl::StatusOr<const Node*> nonscalar =
      add("apply3", "ApplyGradientDescent", {"w", "vec", "g_ok"}, "", PartialShape());
  ASSERT_FALSE(nonscalar.ok());
  EXPECT_THAT(std::string(nonscalar.status().message()), HasSubstr("alpha"));
}

}  // namespace
}  // namespace distflow
