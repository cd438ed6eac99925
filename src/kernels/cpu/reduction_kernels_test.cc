#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::OpTest;

template <typename T>
Tensor V(const std::vector<T>& v, std::initializer_list<int64_t> dims) {
  return Tensor::FromVector<T>(v, TensorShape(dims));
}
Tensor I32(const std::vector<int32_t>& v) { return Tensor::FromVector<int32_t>(v); }
Tensor I64(const std::vector<int64_t>& v) { return Tensor::FromVector<int64_t>(v); }

absl::StatusOr<std::vector<Tensor>> Reduce(const std::string& op, const Tensor& x, const Tensor& axes,
                                           bool keep_dims = false, int threads = 0) {
  OpTest t(op);
  t.Input(x).Input(axes);
  SetAttrBool(t.def(), "keep_dims", keep_dims);
  if (threads > 0) t.IntraOpThreads(threads);
  return t.Run();
}

void ExpectError(const absl::StatusOr<std::vector<Tensor>>& out, const std::string& needle) {
  ASSERT_FALSE(out.ok()) << "expected an error containing '" << needle << "'";
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_NE(std::string(out.status().message()).find(needle), std::string::npos) << out.status();
}

// [[1,2,3],[4,5,6]]
Tensor M23f() { return V<float>({1, 2, 3, 4, 5, 6}, {2, 3}); }

TEST(ReductionKernels, SumOverRowsAndColumns) {
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, Reduce("Sum", M23f(), I32({0})));
  EXPECT_TENSOR_EQ(V<float>({5, 7, 9}, {3}), a[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, Reduce("Sum", M23f(), I32({1})));
  EXPECT_TENSOR_EQ(V<float>({6, 15}, {2}), b[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> c, Reduce("Sum", M23f(), I32({0, 1})));
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(21), c[0]);
}

TEST(ReductionKernels, SumKeepDimsAndNegativeAxis) {
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, Reduce("Sum", M23f(), I64({-1}), true));
  EXPECT_TENSOR_EQ(V<float>({6, 15}, {2, 1}), a[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, Reduce("Sum", M23f(), Tensor::Scalar<int32_t>(-2), true));
  EXPECT_TENSOR_EQ(V<float>({5, 7, 9}, {1, 3}), b[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> c, Reduce("Sum", M23f(), I32({1, 0}), true));
  EXPECT_TENSOR_EQ(V<float>({21}, {1, 1}), c[0]);
}

TEST(ReductionKernels, EmptyAxesMeansNoReduction) {
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, Reduce("Sum", M23f(), I32({})));
  EXPECT_TENSOR_EQ(M23f(), a[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> m, Reduce("Mean", V<int32_t>({3, 5}, {2}), I32({})));
  EXPECT_TENSOR_EQ(V<int32_t>({3, 5}, {2}), m[0]);
}

TEST(ReductionKernels, MeanMaxMinProdFloat) {
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> mean, Reduce("Mean", M23f(), I32({1})));
  EXPECT_TENSOR_NEAR(V<float>({2, 5}, {2}), mean[0], 1e-6);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> mx, Reduce("Max", M23f(), I32({0})));
  EXPECT_TENSOR_EQ(V<float>({4, 5, 6}, {3}), mx[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> mn, Reduce("Min", M23f(), I32({1}), true));
  EXPECT_TENSOR_EQ(V<float>({1, 4}, {2, 1}), mn[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> pr, Reduce("Prod", M23f(), I32({0, 1})));
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(720), pr[0]);
}

TEST(ReductionKernels, IntegerMeanUsesIntegerDivision) {
  Tensor x = V<int32_t>({1, 2, 4, -7, 0, 0}, {2, 3});
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, Reduce("Mean", x, I32({1})));
  EXPECT_TENSOR_EQ(V<int32_t>({2, -2}, {2}), a[0]);  // 7/3 = 2, -7/3 = -2 (truncation)
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, Reduce("Mean", V<int64_t>({1, 2}, {2}), I64({0})));
  EXPECT_TENSOR_EQ(Tensor::Scalar<int64_t>(1), b[0]);
}

TEST(ReductionKernels, IntAndDoubleTypes) {
  Tensor xi = V<int32_t>({1, -2, 3, 4, 5, -6}, {3, 2});
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> s, Reduce("Sum", xi, I32({0})));
  EXPECT_TENSOR_EQ(V<int32_t>({9, -4}, {2}), s[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> mx, Reduce("Max", xi, I32({1})));
  EXPECT_TENSOR_EQ(V<int32_t>({1, 4, 5}, {3}), mx[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> mn, Reduce("Min", V<int64_t>({5, -9, 2}, {3}), I32({0})));
  EXPECT_TENSOR_EQ(Tensor::Scalar<int64_t>(-9), mn[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> pr, Reduce("Prod", V<double>({0.5, 4, 3}, {3}), I32({0})));
  EXPECT_TENSOR_EQ(Tensor::Scalar<double>(6), pr[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> md, Reduce("Mean", V<double>({1, 2, 3, 5}, {2, 2}), I32({0})));
  EXPECT_TENSOR_EQ(V<double>({2, 3.5}, {2}), md[0]);
}

// Brute-force reference over a rank-4 tensor for every subset of axes.
template <typename T>
Tensor ReferenceReduce(const std::string& op, const Tensor& x, const std::vector<bool>& mask, bool keep) {
  std::vector<int64_t> d(x.shape().dim_sizes().begin(), x.shape().dim_sizes().end());
  std::vector<int64_t> out_dims;
  for (size_t i = 0; i < d.size(); ++i) {
    if (!mask[i])
      out_dims.push_back(d[i]);
    else if (keep)
      out_dims.push_back(1);
  }
  int64_t n_out = 1, count = 1;
  for (size_t i = 0; i < d.size(); ++i) (mask[i] ? count : n_out) *= d[i];
  std::vector<T> acc(static_cast<size_t>(n_out));
  std::vector<bool> seen(acc.size(), false);
  auto f = x.flat<T>();
  for (int64_t e = 0; e < x.NumElements(); ++e) {
    int64_t rem = e, o = 0, mul = 1;
    for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
      int64_t idx = rem % d[i];
      rem /= d[i];
      if (!mask[i]) {
        o += idx * mul;
        mul *= d[i];
      }
    }
    T v = f[e];
    T& a = acc[o];
    if (!seen[o]) {
      a = v;
      seen[o] = true;
    } else if (op == "Sum" || op == "Mean") {
      a += v;
    } else if (op == "Prod") {
      a *= v;
    } else if (op == "Max") {
      a = std::max(a, v);
    } else {
      a = std::min(a, v);
    }
  }
  if (op == "Mean") {
    for (T& a : acc) a /= static_cast<T>(count);
  }
  return Tensor::FromVector<T>(acc, TensorShape(absl::MakeConstSpan(out_dims)));
}

TEST(ReductionKernels, EverySubsetOfAxesMatchesReference) {
  const std::vector<int64_t> dims = {3, 1, 4, 5};
  std::vector<int64_t> vi(60);
  std::vector<double> vd(60);
  for (int i = 0; i < 60; ++i) {
    vi[i] = (i * 37) % 11 - 5;
    vd[i] = 0.5 + ((i * 13) % 7) * 0.25;
  }
  Tensor xi = Tensor::FromVector<int64_t>(vi, TensorShape({3, 1, 4, 5}));
  Tensor xd = Tensor::FromVector<double>(vd, TensorShape({3, 1, 4, 5}));
  for (const std::string op : {"Sum", "Mean", "Max", "Min", "Prod"}) {
    for (int m = 0; m < 16; ++m) {
      std::vector<bool> mask(4);
      std::vector<int32_t> axes;
      for (int i = 0; i < 4; ++i) {
        mask[i] = (m >> i) & 1;
        if (mask[i]) axes.push_back(i % 2 == 0 ? i : i - 4);  // mix positive and negative
      }
      for (bool keep : {false, true}) {
        SCOPED_TRACE(op + " mask " + std::to_string(m) + (keep ? " keep" : ""));
        if (op != "Prod") {
          DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> oi, Reduce(op, xi, I32(axes), keep));
          EXPECT_TENSOR_EQ(ReferenceReduce<int64_t>(op, xi, mask, keep), oi[0]);
        }
        DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> od, Reduce(op, xd, I32(axes), keep));
        EXPECT_TENSOR_NEAR(ReferenceReduce<double>(op, xd, mask, keep), od[0], 1e-9);
      }
    }
  }
  (void)dims;
}

TEST(ReductionKernels, LargeReductionsWithThreads) {
  const int64_t rows = 513, cols = 1030;
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7);
  Tensor x = Tensor::FromVector<float>(v, TensorShape({rows, cols}));
  std::vector<bool> m0 = {true, false}, m1 = {false, true}, mall = {true, true};
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, Reduce("Sum", x, I32({0}), false, 2));
  EXPECT_TENSOR_NEAR(ReferenceReduce<float>("Sum", x, m0, false), a[0], 1e-3);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, Reduce("Max", x, I32({1}), false, 2));
  EXPECT_TENSOR_EQ(ReferenceReduce<float>("Max", x, m1, false), b[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> c, Reduce("Sum", x, I32({0, 1}), false, 2));
  double total = 0;
  for (float f : v) total += f;
  EXPECT_NEAR(c[0].scalar<float>(), total, 1e-6 * total);
}

TEST(ReductionKernels, EmptyInputsGiveIdentities) {
  Tensor x = V<float>({}, {0, 3});
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> s, Reduce("Sum", x, I32({0})));
  EXPECT_TENSOR_EQ(V<float>({0, 0, 0}, {3}), s[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> p, Reduce("Prod", x, I32({0}), true));
  EXPECT_TENSOR_EQ(V<float>({1, 1, 1}, {1, 3}), p[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> mx, Reduce("Max", x, I32({0})));
  EXPECT_TENSOR_EQ(V<float>({-INFINITY, -INFINITY, -INFINITY}, {3}), mx[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> mi, Reduce("Min", V<int32_t>({}, {0}), I32({0})));
  EXPECT_TENSOR_EQ(Tensor::Scalar<int32_t>(std::numeric_limits<int32_t>::max()), mi[0]);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> k, Reduce("Sum", x, I32({1})));
  EXPECT_EQ(k[0].shape(), TensorShape({0}));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> mean, Reduce("Mean", V<int32_t>({}, {0}), I32({0})));
  EXPECT_TENSOR_EQ(Tensor::Scalar<int32_t>(0), mean[0]);  // no division by zero
}

TEST(ReductionKernels, ScalarInputWithNoAxes) {
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> s, Reduce("Sum", Tensor::Scalar<int32_t>(4), I32({})));
  EXPECT_TENSOR_EQ(Tensor::Scalar<int32_t>(4), s[0]);
}

TEST(ReductionKernels, AxisOutOfRangeIsAnError) {
  ExpectError(Reduce("Sum", M23f(), I32({2})), "Invalid reduction dimension 2 for input with 2 dimensions");
  ExpectError(Reduce("Max", M23f(), I64({-3})), "Invalid reduction dimension -3 for input with 2 dimensions");
}

// ------------------------------------------------------------ ArgMax/ArgMin

TEST(ReductionKernels, ArgMaxArgMinAlongEachAxis) {
  Tensor x = V<float>({1, 9, 3, 7, 5, 6}, {2, 3});
  OpTest a("ArgMax");
  a.Input(x).Input(Tensor::Scalar<int32_t>(1));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> ao, a.Run());
  EXPECT_TENSOR_EQ(V<int64_t>({1, 0}, {2}), ao[0]);

  OpTest b("ArgMin");
  b.Input(x).Input(Tensor::Scalar<int64_t>(0));
  SetAttrType(b.def(), "output_type", DT_INT32);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> bo, b.Run());
  EXPECT_TENSOR_EQ(V<int32_t>({0, 1, 0}, {3}), bo[0]);

  OpTest c("ArgMax");
  c.Input(V<int32_t>({2, 8, 8, 1}, {4})).Input(Tensor::Scalar<int32_t>(-1));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> co, c.Run());
  EXPECT_TENSOR_EQ(Tensor::Scalar<int64_t>(1), co[0]);  // first of the ties

  OpTest d("ArgMin");
  d.Input(V<double>({1, 3, 2, 0, 4, 4, 5, 0}, {2, 2, 2})).Input(Tensor::Scalar<int32_t>(1));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> dout, d.Run());
  EXPECT_TENSOR_EQ(V<int64_t>({0, 1, 0, 1}, {2, 2}), dout[0]);

  OpTest e("ArgMax");
  e.Input(V<int64_t>({}, {0, 3})).Input(Tensor::Scalar<int32_t>(1));
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> eo, e.Run());
  EXPECT_EQ(eo[0].shape(), TensorShape({0}));
}

TEST(ReductionKernels, ArgMaxRejectsBadDimensionAndEmptyAxis) {
  OpTest a("ArgMax");
  a.Input(V<float>({1, 2}, {2})).Input(Tensor::Scalar<int32_t>(1));
  ExpectError(a.Run(), "Expected dimension in the range [-1, 1), but got 1");
  OpTest b("ArgMin");
  b.Input(V<float>({}, {2, 0})).Input(Tensor::Scalar<int32_t>(1));
  ExpectError(b.Run(), "Reduction axis 1 is empty in shape [2,0]");
}

// ------------------------------------------- build-time shape inference

TEST(ReductionShapeInference, PartialShapesFromUnknownInputs) {
  Graph g;
  auto add = [&](const std::string& name, const std::string& op, std::vector<std::string> inputs,
                 auto&& set_attrs) -> absl::StatusOr<PartialShape> {
    proto::NodeDef n;
    n.set_name(name);
    n.set_op(op);
    for (auto& i : inputs) n.add_input(i);
    set_attrs(&n);
    ASSIGN_OR_RETURN(const Node* node, g.AddNode(n));
    return node->output_shape(0);
  };
  auto none = [](proto::NodeDef*) {};
  ASSERT_TRUE(add("x", "Placeholder", {}, [](proto::NodeDef* n) {
                SetAttrType(n, "dtype", DT_FLOAT);
                SetAttrShape(n, "shape", PartialShape({-1, 4, 5}));
              }).ok());
  ASSERT_TRUE(add("axes", "Placeholder", {}, [](proto::NodeDef* n) {
                SetAttrType(n, "dtype", DT_INT32);
                SetAttrShape(n, "shape", PartialShape({-1}));
              }).ok());
  ASSERT_TRUE(add("c", "Const", {}, [](proto::NodeDef* n) {
                SetAttrTensor(n, "value", I32({-1, 0}));
                SetAttrType(n, "dtype", DT_INT32);
              }).ok());
  ASSERT_TRUE(add("d", "Placeholder", {}, [](proto::NodeDef* n) {
                SetAttrType(n, "dtype", DT_INT32);
                SetAttrShape(n, "shape", PartialShape::Scalar());
              }).ok());

  auto s = add("s1", "Sum", {"x", "c"}, none);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, PartialShape({4}));
  s = add("s2", "Max", {"x", "c"}, [](proto::NodeDef* n) { SetAttrBool(n, "keep_dims", true); });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, PartialShape({1, 4, 1}));
  s = add("s3", "Mean", {"x", "axes"}, [](proto::NodeDef* n) { SetAttrBool(n, "keep_dims", true); });
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, PartialShape::UnknownOfRank(3));
  s = add("s4", "Mean", {"x", "axes"}, none);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->unknown_rank());
  s = add("s5", "ArgMax", {"x", "d"}, none);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, PartialShape::UnknownOfRank(2));
}

}  // namespace
}  // namespace distflow
