#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/device.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using ::distflow::test::OpTest;

#define EXPECT_ERROR_CONTAINS(status_or, text)                                                        \
  do {                                                                                                \
    auto df_r_ = (status_or);                                                                         \
    ASSERT_FALSE(df_r_.ok());                                                                         \
    EXPECT_NE(std::string(df_r_.status().message()).find(text), std::string::npos) << df_r_.status(); \
  } while (0)

std::vector<double> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(gen);
  return v;
}

Tensor MakeTensor(DataType dt, const std::vector<double>& v, const TensorShape& s) {
  Tensor t(dt, s);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DT_FLOAT) {
      t.flat<float>()[i] = static_cast<float>(v[i]);
    } else {
      t.flat<double>()[i] = v[i];
    }
  }
  return t;
}

Tensor Random(DataType dt, const TensorShape& s, uint32_t seed) {
  return MakeTensor(dt, RandomValues(s.num_elements(), seed), s);
}

struct G {
  int64_t n, h, w, c, kh, kw, o, sh, sw;
  bool same;
  int64_t oh, ow, pt, pl;
};

G Geometry(int64_t n, int64_t h, int64_t w, int64_t c, int64_t kh, int64_t kw, int64_t o, int64_t sh, int64_t sw,
           bool same) {
  G g{n, h, w, c, kh, kw, o, sh, sw, same, 0, 0, 0, 0};
  if (same) {
    g.oh = (h + sh - 1) / sh;
    g.ow = (w + sw - 1) / sw;
    g.pt = std::max<int64_t>((g.oh - 1) * sh + kh - h, 0) / 2;
    g.pl = std::max<int64_t>((g.ow - 1) * sw + kw - w, 0) / 2;
  } else {
    g.oh = (h - kh) / sh + 1;
    g.ow = (w - kw) / sw + 1;
  }
  return g;
}

// Naive float64 references.
std::vector<double> NaiveConv(const G& g, const std::vector<double>& x, const std::vector<double>& f) {
  std::vector<double> y(static_cast<size_t>(g.n * g.oh * g.ow * g.o), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < g.oh; ++oh)
      for (int64_t ow = 0; ow < g.ow; ++ow)
        for (int64_t o = 0; o < g.o; ++o) {
          double s = 0;
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ih = oh * g.sh - g.pt + i, iw = ow * g.sw - g.pl + j;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
              for (int64_t c = 0; c < g.c; ++c)
                s += x[static_cast<size_t>(((n * g.h + ih) * g.w + iw) * g.c + c)] *
                     f[static_cast<size_t>(((i * g.kw + j) * g.c + c) * g.o + o)];
            }
          y[static_cast<size_t>(((n * g.oh + oh) * g.ow + ow) * g.o + o)] = s;
        }
  return y;
}

// Adjoints of the convolution: d/dx and d/df of sum(conv(x, f) * dy).
void NaiveConvAdjoints(const G& g, const std::vector<double>& x, const std::vector<double>& f,
                       const std::vector<double>& dy, std::vector<double>* dx, std::vector<double>* df) {
  dx->assign(x.size(), 0.0);
  df->assign(f.size(), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < g.oh; ++oh)
      for (int64_t ow = 0; ow < g.ow; ++ow)
        for (int64_t o = 0; o < g.o; ++o) {
          const double gy = dy[static_cast<size_t>(((n * g.oh + oh) * g.ow + ow) * g.o + o)];
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ih = oh * g.sh - g.pt + i, iw = ow * g.sw - g.pl + j;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
              for (int64_t c = 0; c < g.c; ++c) {
                const size_t xi = static_cast<size_t>(((n * g.h + ih) * g.w + iw) * g.c + c);
                const size_t fi = static_cast<size_t>(((i * g.kw + j) * g.c + c) * g.o + o);
                (*dx)[xi] += f[fi] * gy;
                (*df)[fi] += x[xi] * gy;
              }
            }
        }
}

void SetConvAttrs(OpTest* t, int64_t sh, int64_t sw, bool same) {
  SetAttrIntList(t->def(), "strides", {1, sh, sw, 1});
  SetAttrString(t->def(), "padding", same ? "SAME" : "VALID");
}

struct ConvCase {
  int64_t n, h, w, c, kh, kw, o, sh, sw;
  bool same;
};

class ConvTest : public ::testing::TestWithParam<std::tuple<ConvCase, DataType>> {};

TEST_P(ConvTest, ForwardAndBackpropsMatchNaiveReference) {
  const ConvCase cc = std::get<0>(GetParam());
  const DataType dt = std::get<1>(GetParam());
  const G g = Geometry(cc.n, cc.h, cc.w, cc.c, cc.kh, cc.kw, cc.o, cc.sh, cc.sw, cc.same);
  const TensorShape xs({g.n, g.h, g.w, g.c}), fs({g.kh, g.kw, g.c, g.o}), ys({g.n, g.oh, g.ow, g.o});
  const std::vector<double> x = RandomValues(xs.num_elements(), 1), f = RandomValues(fs.num_elements(), 2),
                            dy = RandomValues(ys.num_elements(), 3);
  const double tol = dt == DT_FLOAT ? 1e-4 : 1e-10;
  const std::vector<double> y = NaiveConv(g, x, f);
  std::vector<double> dx, df;
  NaiveConvAdjoints(g, x, f, dy, &dx, &df);

  for (int threads : {0, 2}) {
    OpTest t("Conv2D");
    t.Input(MakeTensor(dt, x, xs)).Input(MakeTensor(dt, f, fs));
    SetConvAttrs(&t, g.sh, g.sw, g.same);
    if (threads) t.IntraOpThreads(threads);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
    EXPECT_TENSOR_NEAR(MakeTensor(dt, y, ys), out[0], tol);

    OpTest bi("Conv2DBackpropInput");
    bi.Input(Tensor::FromVector<int32_t>({static_cast<int32_t>(g.n), static_cast<int32_t>(g.h),
                                          static_cast<int32_t>(g.w), static_cast<int32_t>(g.c)}))
        .Input(MakeTensor(dt, f, fs))
        .Input(MakeTensor(dt, dy, ys));
    SetConvAttrs(&bi, g.sh, g.sw, g.same);
    if (threads) bi.IntraOpThreads(threads);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> bout, bi.Run());
    EXPECT_TENSOR_NEAR(MakeTensor(dt, dx, xs), bout[0], tol);

    OpTest bf("Conv2DBackpropFilter");
    bf.Input(MakeTensor(dt, x, xs))
        .Input(Tensor::FromVector<int32_t>({static_cast<int32_t>(g.kh), static_cast<int32_t>(g.kw),
                                            static_cast<int32_t>(g.c), static_cast<int32_t>(g.o)}))
        .Input(MakeTensor(dt, dy, ys));
    SetConvAttrs(&bf, g.sh, g.sw, g.same);
    if (threads) bf.IntraOpThreads(threads);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> fout, bf.Run());
    EXPECT_TENSOR_NEAR(MakeTensor(dt, df, fs), fout[0], tol * 10);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ConvTest,
                         ::testing::Combine(::testing::Values(ConvCase{1, 5, 5, 1, 3, 3, 1, 1, 1, true},
                                                              ConvCase{2, 7, 6, 3, 3, 2, 4, 1, 1, false},
                                                              ConvCase{2, 7, 9, 3, 3, 3, 5, 2, 2, true},
                                                              ConvCase{3, 8, 7, 2, 2, 3, 3, 2, 1, false},
                                                              ConvCase{2, 9, 9, 4, 5, 5, 8, 2, 2, true},
                                                              ConvCase{2, 6, 6, 1, 1, 1, 2, 3, 3, true},
                                                              ConvCase{4, 12, 12, 16, 5, 5, 32, 1, 1, true}),
                                            ::testing::Values(DT_FLOAT, DT_DOUBLE)));

TEST(Conv2D, KnownSmallValues) {
  // 1x3x3x1 input 1..9, 2x2 filter of ones, VALID: window sums.
  OpTest t("Conv2D");
  t.Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, TensorShape({1, 3, 3, 1})))
      .Input(Tensor::FromVector<float>({1, 1, 1, 1}, TensorShape({2, 2, 1, 1})));
  SetConvAttrs(&t, 1, 1, false);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_NEAR(Tensor::FromVector<float>({12, 16, 24, 28}, TensorShape({1, 2, 2, 1})), out[0], 1e-6);
}

TEST(Conv2D, RepeatedRunsReuseCachedPrimitives) {
  const TensorShape xs({2, 6, 6, 3}), fs({3, 3, 3, 4});
  OpTest t("Conv2D");
  t.Input(Random(DT_FLOAT, xs, 5)).Input(Random(DT_FLOAT, fs, 6));
  SetConvAttrs(&t, 1, 1, true);
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> a, t.Run());
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> b, t.Run());
  EXPECT_TENSOR_EQ(a[0], b[0]);
}

TEST(Conv2D, ChannelMismatchNamesBothShapes) {
  OpTest t("Conv2D");
  t.Input(Random(DT_FLOAT, TensorShape({1, 5, 5, 3}), 1)).Input(Random(DT_FLOAT, TensorShape({3, 3, 2, 4}), 2));
  SetConvAttrs(&t, 1, 1, true);
  auto r = t.Run();
  EXPECT_ERROR_CONTAINS(r, "[1,5,5,3]");
  EXPECT_ERROR_CONTAINS(r, "[3,3,2,4]");
}

TEST(Conv2D, BadAttrsAreRejected) {
  auto run = [](std::vector<int64_t> strides, const char* padding, const char* fmt) {
    OpTest t("Conv2D");
    t.Input(Random(DT_FLOAT, TensorShape({1, 5, 5, 1}), 1)).Input(Random(DT_FLOAT, TensorShape({3, 3, 1, 1}), 2));
    SetAttrIntList(t.def(), "strides", strides);
    SetAttrString(t.def(), "padding", padding);
    if (fmt != nullptr) SetAttrString(t.def(), "data_format", fmt);
    return t.Run();
  };
  EXPECT_ERROR_CONTAINS(run({2, 1, 1, 1}, "SAME", nullptr), "strides");
  EXPECT_ERROR_CONTAINS(run({1, 1, 1}, "SAME", nullptr), "strides");
  EXPECT_ERROR_CONTAINS(run({1, 0, 1, 1}, "SAME", nullptr), "strides");
  EXPECT_ERROR_CONTAINS(run({1, 1, 1, 1}, "FULL", nullptr), "padding");
  EXPECT_ERROR_CONTAINS(run({1, 1, 1, 1}, "SAME", "NCHW"), "NCHW");
  DF_EXPECT_OK(run({1, 1, 1, 1}, "SAME", "NHWC").status());
}

TEST(Conv2D, ValidFilterLargerThanInputFails) {
  OpTest t("Conv2D");
  t.Input(Random(DT_FLOAT, TensorShape({1, 2, 2, 1}), 1)).Input(Random(DT_FLOAT, TensorShape({3, 3, 1, 1}), 2));
  SetConvAttrs(&t, 1, 1, false);
  EXPECT_FALSE(t.Run().ok());
}

TEST(Conv2DBackpropInput, OutBackpropShapeMismatchFails) {
  OpTest t("Conv2DBackpropInput");
  t.Input(Tensor::FromVector<int32_t>({1, 5, 5, 1}))
      .Input(Random(DT_FLOAT, TensorShape({3, 3, 1, 2}), 1))
      .Input(Random(DT_FLOAT, TensorShape({1, 4, 4, 2}), 2));
  SetConvAttrs(&t, 1, 1, true);
  EXPECT_ERROR_CONTAINS(t.Run(), "out_backprop");
}

// ---------------------------------------------------------------------------
// Pooling

struct PoolCase {
  int64_t n, h, w, c, kh, kw, sh, sw;
  bool same;
};

void NaivePool(const G& g, bool max, const std::vector<double>& x, const std::vector<double>& dy,
               std::vector<double>* y, std::vector<double>* dx) {
  y->assign(static_cast<size_t>(g.n * g.oh * g.ow * g.c), 0.0);
  dx->assign(x.size(), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < g.oh; ++oh)
      for (int64_t ow = 0; ow < g.ow; ++ow)
        for (int64_t c = 0; c < g.c; ++c) {
          double best = -1e300, sum = 0;
          size_t arg = 0;
          int count = 0;
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t ih = oh * g.sh - g.pt + i, iw = ow * g.sw - g.pl + j;
              if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
              const size_t xi = static_cast<size_t>(((n * g.h + ih) * g.w + iw) * g.c + c);
              if (x[xi] > best) {
                best = x[xi];
                arg = xi;
              }
              sum += x[xi];
              ++count;
            }
          const size_t yi = static_cast<size_t>(((n * g.oh + oh) * g.ow + ow) * g.c + c);
          (*y)[yi] = max ? best : sum / count;
          if (max) {
            (*dx)[arg] += dy[yi];
          } else {
            for (int64_t i = 0; i < g.kh; ++i)
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t ih = oh * g.sh - g.pt + i, iw = ow * g.sw - g.pl + j;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                (*dx)[static_cast<size_t>(((n * g.h + ih) * g.w + iw) * g.c + c)] += dy[yi] / count;
              }
          }
        }
}

void SetPoolAttrs(OpTest* t, const PoolCase& p) {
  SetAttrIntList(t->def(), "ksize", {1, p.kh, p.kw, 1});
  SetAttrIntList(t->def(), "strides", {1, p.sh, p.sw, 1});
  SetAttrString(t->def(), "padding", p.same ? "SAME" : "VALID");
}

class PoolTest : public ::testing::TestWithParam<std::tuple<PoolCase, DataType>> {};

TEST_P(PoolTest, MaxAndAvgAndGradsMatchNaiveReference) {
  const PoolCase p = std::get<0>(GetParam());
  const DataType dt = std::get<1>(GetParam());
  const G g = Geometry(p.n, p.h, p.w, p.c, p.kh, p.kw, p.c, p.sh, p.sw, p.same);
  const TensorShape xs({g.n, g.h, g.w, g.c}), ys({g.n, g.oh, g.ow, g.c});
  const std::vector<double> x = RandomValues(xs.num_elements(), 7), dy = RandomValues(ys.num_elements(), 8);
  const double tol = dt == DT_FLOAT ? 1e-5 : 1e-12;
  for (bool max : {true, false}) {
    std::vector<double> y, dx;
    NaivePool(g, max, x, dy, &y, &dx);
    OpTest t(max ? "MaxPool" : "AvgPool");
    t.Input(MakeTensor(dt, x, xs)).IntraOpThreads(2);
    SetPoolAttrs(&t, p);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
    EXPECT_TENSOR_NEAR(MakeTensor(dt, y, ys), out[0], tol);

    OpTest gt(max ? "MaxPoolGrad" : "AvgPoolGrad");
    if (max) {
      gt.Input(MakeTensor(dt, x, xs)).Input(out[0]).Input(MakeTensor(dt, dy, ys));
    } else {
      gt.Input(Tensor::FromVector<int32_t>({static_cast<int32_t>(g.n), static_cast<int32_t>(g.h),
                                            static_cast<int32_t>(g.w), static_cast<int32_t>(g.c)}))
          .Input(MakeTensor(dt, dy, ys));
    }
    SetPoolAttrs(&gt, p);
    DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> gout, gt.Run());
    EXPECT_TENSOR_NEAR(MakeTensor(dt, dx, xs), gout[0], tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PoolTest,
                         ::testing::Combine(::testing::Values(PoolCase{2, 4, 4, 3, 2, 2, 2, 2, false},
                                                              PoolCase{2, 5, 7, 3, 2, 2, 2, 2, true},
                                                              PoolCase{1, 7, 6, 2, 3, 3, 2, 2, true},
                                                              PoolCase{3, 7, 6, 5, 3, 2, 1, 2, false},
                                                              PoolCase{2, 6, 6, 4, 3, 3, 1, 1, true}),
                                            ::testing::Values(DT_FLOAT, DT_DOUBLE)));

TEST(AvgPool, SameAveragesOnlyValidElements) {
  // 1x2x2x1 [1,2;3,4], 2x2 window stride 1 SAME: bottom-right corner sees only 4.
  OpTest t("AvgPool");
  t.Input(Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({1, 2, 2, 1})));
  SetPoolAttrs(&t, PoolCase{1, 2, 2, 1, 2, 2, 1, 1, true});
  DF_ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
  EXPECT_TENSOR_NEAR(Tensor::FromVector<float>({2.5f, 3, 3.5f, 4}, TensorShape({1, 2, 2, 1})), out[0], 1e-6);
}

TEST(MaxPool, BadKsizeIsRejected) {
  OpTest t("MaxPool");
  t.Input(Random(DT_FLOAT, TensorShape({1, 4, 4, 1}), 1));
  SetAttrIntList(t.def(), "ksize", {2, 2, 2, 1});
  SetAttrIntList(t.def(), "strides", {1, 2, 2, 1});
  SetAttrString(t.def(), "padding", "VALID");
  EXPECT_ERROR_CONTAINS(t.Run(), "ksize");
}

}  // namespace
}  // namespace distflow
