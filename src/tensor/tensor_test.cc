#include "distflow/tensor.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "tensor/tensor_eigen.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

TEST(Tensor, DefaultIsUninitialized) {
  Tensor t;
  EXPECT_FALSE(t.IsInitialized());
  EXPECT_EQ(t.DebugString(), "<uninitialized tensor>");
}

TEST(Tensor, BuffersAre64ByteAligned) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL}) {
    Tensor t(dt, TensorShape({3, 5}));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u) << DataTypeName(dt);
    EXPECT_EQ(t.TotalBytes(), 15 * DataTypeSize(dt));
  }
}

TEST(Tensor, ScalarAndTypedAccess) {
  Tensor s = Tensor::Scalar<int64_t>(7);
  EXPECT_EQ(s.dims(), 0);
  EXPECT_EQ(s.scalar<int64_t>(), 7);
  Tensor m = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  auto mv = m.matrix<float>();
  EXPECT_EQ(mv(1, 2), 6.f);
  mv(0, 1) = 20.f;
  EXPECT_EQ(m.flat<float>()[1], 20.f);
}

TEST(TensorDeathTest, WrongTypeAccessIsAProgrammingError) {
  Tensor t(DT_INT32, TensorShape({2}));
  EXPECT_DEATH(t.flat<float>(), "int32 accessed as float32");
}

TEST(Tensor, SliceSharesMemory) {
  Tensor t = Tensor::FromVector<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}, TensorShape({4, 2}));
  Tensor s = t.Slice(1, 3);
  EXPECT_EQ(s.shape(), TensorShape({2, 2}));
  EXPECT_TRUE(s.SharesBufferWith(t));
  EXPECT_EQ(s.flat<int32_t>()[0], 2);
  s.flat<int32_t>()[0] = 99;
  EXPECT_EQ(t.flat<int32_t>()[2], 99);
  Tensor empty = t.Slice(4, 4);
  EXPECT_EQ(empty.NumElements(), 0);
}

TEST(Tensor, SliceOfStrings) {
  Tensor t = Tensor::FromVector<std::string>({"a", "bb", "ccc"});
  Tensor s = t.Slice(1, 3);
  EXPECT_EQ(s.flat<std::string>()[1], "ccc");
  EXPECT_EQ(s.TotalBytes(), 5u);
}

TEST(Tensor, SliceOutlivesOriginal) {
  Tensor s;
  {
    Tensor t = Tensor::FromVector<double>({1, 2, 3, 4});
    s = t.Slice(2, 4);
  }
  EXPECT_EQ(s.flat<double>()[1], 4.0);
}

TEST(Tensor, ReshapedChecksElementCount) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6});
  auto r = t.Reshaped(TensorShape({3, 2}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->SharesBufferWith(t));
  auto bad = t.Reshaped(TensorShape({4, 2}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[4,2]"), std::string::npos);
}

TEST(Tensor, DeepCopyIsIndependent) {
  Tensor t = Tensor::FromVector<std::string>({"x", "y"});
  Tensor c = t.DeepCopy();
  c.flat<std::string>()[0] = "changed";
  EXPECT_EQ(t.flat<std::string>()[0], "x");
  EXPECT_FALSE(c.SharesBufferWith(t));
}

TEST(Tensor, FromBufferValidatesSize) {
  std::vector<float> storage(4, 1.5f);
  bool released = false;
  {
    auto buf = TensorBuffer::Wrap(storage.data(), storage.size() * 4, [&] { released = true; });
    EXPECT_FALSE(Tensor::FromBuffer(DT_FLOAT, TensorShape({5}), buf, 0).ok());
    EXPECT_FALSE(Tensor::FromBuffer(DT_FLOAT, TensorShape({4}), buf, 4).ok());
    auto t = Tensor::FromBuffer(DT_FLOAT, TensorShape({3}), buf, 4);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->flat<float>()[2], 1.5f);
    EXPECT_FALSE(released);
  }
  EXPECT_TRUE(released) << "the release callback runs when the last tensor is gone";
}

TEST(Tensor, LargeBuffersAreReusedAfterRelease) {
  const void* first;
  {
    Tensor big(DT_FLOAT, TensorShape({int64_t{8} << 20}));  // 32 MiB
    first = big.raw_data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  Tensor again(DT_FLOAT, TensorShape({int64_t{8} << 20}));
  EXPECT_EQ(again.raw_data(), first) << "a freed large block serves the next allocation of its size";
  Tensor other(DT_FLOAT, TensorShape({int64_t{8} << 20}));
  EXPECT_NE(other.raw_data(), again.raw_data()) << "a block in use is never handed out twice";
}

TEST(Tensor, MidSizedBuffersAreReusedAcrossSteps) {
  // A step's activations (about 1 MB here) find the block the previous step
  // freed, even when their size differs a little: no fresh pages.
  const void* first;
  {
    Tensor act(DT_FLOAT, TensorShape({250000}));
    first = act.raw_data();
  }
  Tensor again(DT_FLOAT, TensorShape({250016}));
  EXPECT_EQ(again.raw_data(), first) << "sizes within one size class share a freed block";
  Tensor small(DT_FLOAT, TensorShape({1024}));
  EXPECT_NE(small.raw_data(), first);
}

TEST(Tensor, AllocateTooLargeIsResourceExhausted) {
  auto t = Tensor::Allocate(DT_DOUBLE, TensorShape({int64_t{1} << 61}));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(Tensor, DebugStringIsNumpyLike) {
  Tensor m = Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  EXPECT_EQ(m.DebugString(), "int32 [2,3] [[1 2 3]\n [4 5 6]]");
  EXPECT_EQ(Tensor::Scalar<bool>(true).DebugString(), "bool [] True");
  EXPECT_EQ(Tensor::FromVector<std::string>({"a'b"}).DebugString(), "string [1] ['a\\'b']");
  EXPECT_EQ(Tensor(DT_FLOAT, TensorShape({0, 3})).DebugString(), "float32 [0,3] []");
}

TEST(Tensor, DebugStringSummarizesLargeTensors) {
  std::vector<int32_t> v(2000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i);
  std::string s = Tensor::FromVector<int32_t>(v).DebugString();
  EXPECT_EQ(s, "int32 [2000] [0 1 2 ... 1997 1998 1999]");
}

TEST(Tensor, EigenViewsSeeTheSameMemory) {
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));
  auto m = EigenMatrix<float>(t);
  EXPECT_EQ(m(1, 0), 4.f);
  EigenFlat<float>(t) = EigenFlat<float>(t) * 2.f;
  EXPECT_EQ(t.flat<float>()[5], 12.f);
  auto t3 = EigenShaped<float, 3>(t, {1, 2, 3});
  EXPECT_EQ(t3(0, 1, 2), 12.f);
}

TEST(TensorTestUtil, NearAndEqualReportDifferences) {
  Tensor a = Tensor::FromVector<float>({1.f, 2.f});
  Tensor b = Tensor::FromVector<float>({1.f, 2.0001f});
  EXPECT_FALSE(test::TensorEqual(a, b));
  EXPECT_TRUE(test::TensorNear(a, b, 1e-3, 0));
  EXPECT_FALSE(test::TensorNear(a, b, 1e-6, 0));
  EXPECT_FALSE(test::TensorEqual(a, Tensor::FromVector<double>({1, 2})));
  EXPECT_FALSE(test::TensorEqual(a, Tensor::FromVector<float>({1, 2}, TensorShape({2, 1}))));
}

}  // namespace
}  // namespace distflow
