// CollectiveReduce with compression="fp16" (Horovod's Compression.fp16),
// N ranks inside this process: every size (0, 1, not divisible by N, the
// ring), sum/mean/max, float32 and float64, every rank checked element by
// element against arithmetic done here in _Float16.
#include "collective/fp16_channel.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/collective_test_util.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using Half = _Float16;

template <typename T>
T ToHalf(T v) {
  return static_cast<T>(static_cast<Half>(v));
}

// Rank r's element i: multiples of 1/8 in [-8, 8], fp16 numbers whose sums
// over up to 4 ranks are fp16 numbers too, so the order of additions (the
// ring's or the direct exchange's) does not matter, and only the mean's
// division rounds.
template <typename T>
T Value(int64_t i, int rank) {
  return static_cast<T>((i * 7 + rank * 13) % 129 - 64) / static_cast<T>(8);
}

template <typename T>
Tensor Input(int64_t count, int rank) {
  Tensor t(DataTypeToEnum<T>::value, TensorShape({count}));
  for (int64_t i = 0; i < count; ++i) t.flat<T>()[static_cast<size_t>(i)] = Value<T>(i, rank);
  return t;
}

CollectiveParams Fp16Reduce(int n, MergeOp merge, FinalOp final_op, DataType dt) {
  CollectiveParams p;
  p.kind = CollectiveKind::kReduce;
  p.node_name = "allreduce_fp16";
  p.group_size = n;
  p.group_key = 1;
  p.instance_key = 9;
  p.merge_op = merge;
  p.final_op = final_op;
  p.dtype = dt;
  p.compress_fp16 = true;
  return p;
}

template <typename T>
void CheckFp16AllReduce(int n, int64_t count) {
  struct Op {
    MergeOp merge;
    FinalOp final_op;
    const char* name;
  };
  for (Op op : {Op{MergeOp::kAdd, FinalOp::kId, "sum"}, Op{MergeOp::kAdd, FinalOp::kDiv, "mean"},
                Op{MergeOp::kMax, FinalOp::kId, "max"}}) {
    SCOPED_TRACE(absl::StrCat(DataTypeName(DataTypeToEnum<T>::value), " fp16 ", op.name, ", n=", n, ", count=", count));
    Ranks ranks(n);
    std::vector<Tensor> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(Input<T>(count, r));
    auto out = ranks.Run(Fp16Reduce(n, op.merge, op.final_op, DataTypeToEnum<T>::value), inputs);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
      const Tensor& got = *out[static_cast<size_t>(r)];
      ASSERT_EQ(got.dtype(), DataTypeToEnum<T>::value);
      ASSERT_EQ(got.shape(), inputs[0].shape());
      for (int64_t i = 0; i < count; ++i) {
        T acc = Value<T>(i, 0);
        for (int k = 1; k < n; ++k)
          acc = op.merge == MergeOp::kMax ? std::max(acc, Value<T>(i, k)) : acc + Value<T>(i, k);
        if (op.final_op == FinalOp::kDiv) acc /= static_cast<T>(n);
        ASSERT_EQ(got.flat<T>()[static_cast<size_t>(i)], ToHalf(acc)) << "rank " << r << " [" << i << "]";
      }
    }
    EXPECT_EQ(ranks.hub.NumPending(), 0u);
  }
}

// Empty, one element, not divisible by any n > 1, and the ring (40009
// float32 is above kRingMinBytes).
const int64_t kCounts[] = {0, 1, 7, 40009};

// The hand-written conversions against the compiler's _Float16 (GCC's,
// correctly rounded): every fp16 bit pattern back to its value, and
// floats and doubles around every rounding boundary to their bits.
TEST(Fp16Conversions, MatchTheCompilersFloat16) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    Half x;
    const uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&x, &bits, 2);
    const double want = static_cast<double>(x);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(FromHalfBits(bits))) << h;
      continue;
    }
    ASSERT_EQ(FromHalfBits(bits), want) << h;
    ASSERT_EQ(ToHalfBits(want), bits) << h;
    // Just below, at and just above the midpoint to the next pattern up.
    if ((h & 0x7fff) < 0x7bff) {
      Half next_half;
      const uint16_t up = static_cast<uint16_t>(h + 1);
      std::memcpy(&next_half, &up, 2);
      const double mid = (want + static_cast<double>(next_half)) / 2;
      for (double v : {std::nextafter(mid, -1e9), mid, std::nextafter(mid, 1e9)}) {
        const Half ref_d = static_cast<Half>(v);
        const Half ref_f = static_cast<Half>(static_cast<float>(v));
        uint16_t ref_d_bits, ref_f_bits;
        std::memcpy(&ref_d_bits, &ref_d, 2);
        std::memcpy(&ref_f_bits, &ref_f, 2);
        ASSERT_EQ(ToHalfBits(v), ref_d_bits) << h << " " << v;
        ASSERT_EQ(ToHalfBits(static_cast<double>(static_cast<float>(v))), ref_f_bits) << h << " " << v;
      }
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (double v : {65504.0, 65519.0, 65520.0, 1e6, -1e6, 0x1p-25, 0x1p-26, -0.0, inf, -inf}) {
    const Half ref = static_cast<Half>(v);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    EXPECT_EQ(ToHalfBits(v), ref_bits) << v;
  }
  EXPECT_TRUE(std::isnan(FromHalfBits(ToHalfBits(std::numeric_limits<double>::quiet_NaN()))));
}

TEST(Fp16AllReduce, Float32EverySizeAndGroup) {
  for (int n = 1; n <= 4; ++n)
    for (int64_t c : kCounts) CheckFp16AllReduce<float>(n, c);
}

TEST(Fp16AllReduce, Float64EverySizeAndGroup) {
  for (int n = 1; n <= 4; ++n)
    for (int64_t c : kCounts) CheckFp16AllReduce<double>(n, c);
}

// Values that are not fp16 numbers come back rounded to fp16, the same on
// every rank (also the owner of a ring segment, which finished it in
// float32), and differ from the uncompressed result.
TEST(Fp16AllReduce, RoundsToHalfTheSameOnEveryRank) {
  for (int64_t count : {int64_t{3}, int64_t{50000}}) {
    SCOPED_TRACE(absl::StrCat("count=", count));
    Ranks ranks(3);
    std::vector<Tensor> inputs;
    for (int r = 0; r < 3; ++r) {
      Tensor t(DT_FLOAT, TensorShape({count}));
      for (int64_t i = 0; i < count; ++i) t.flat<float>()[static_cast<size_t>(i)] = 1.0f / 3.0f + 0.001f * r;
      inputs.push_back(t);
    }
    CollectiveParams p = Fp16Reduce(3, MergeOp::kAdd, FinalOp::kDiv, DT_FLOAT);
    auto fp16 = ranks.Run(p, inputs);
    p.compress_fp16 = false;
    p.instance_key = 10;
    auto full = ranks.Run(p, inputs);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(fp16[static_cast<size_t>(r)].ok()) << fp16[static_cast<size_t>(r)].status();
      ASSERT_TRUE(full[static_cast<size_t>(r)].ok()) << full[static_cast<size_t>(r)].status();
      for (int64_t i = 0; i < count; ++i) {
        const float got = fp16[static_cast<size_t>(r)]->flat<float>()[static_cast<size_t>(i)];
        const float exact = full[static_cast<size_t>(r)]->flat<float>()[static_cast<size_t>(i)];
        ASSERT_EQ(got, ToHalf(got)) << "not an fp16 number: rank " << r << " [" << i << "]";
        ASSERT_EQ(got, fp16[0]->flat<float>()[static_cast<size_t>(i)]) << "rank " << r << " [" << i << "]";
        ASSERT_NE(got, exact);
        ASSERT_NEAR(got, exact, 1e-3f);  // fp16 has 11 significant bits
      }
    }
  }
}

// Integers are reduced uncompressed (Horovod casts only floating tensors).
TEST(Fp16AllReduce, IgnoredForIntegers) {
  Ranks ranks(2);
  std::vector<Tensor> inputs = {Tensor::FromVector<int64_t>({100001, -3}), Tensor::FromVector<int64_t>({2, 5})};
  auto out = ranks.Run(Fp16Reduce(2, MergeOp::kAdd, FinalOp::kId, DT_INT64), inputs);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
    EXPECT_EQ(out[static_cast<size_t>(r)]->flat<int64_t>()[0], 100003);
    EXPECT_EQ(out[static_cast<size_t>(r)]->flat<int64_t>()[1], 2);
  }
}

// What travels is 2 bytes a value: the peer's plain channel receives a
// uint8 tensor of twice as many elements.
TEST(Fp16Channel, SendsTwoBytesPerValue) {
  InProcessCollectives hub(2);
  auto t0 = hub.TransportFor(0);
  auto t1 = hub.TransportFor(1);
  CollectiveParams p = Fp16Reduce(2, MergeOp::kAdd, FinalOp::kId, DT_FLOAT);
  auto ch0 = t0->Open(p, 0);
  auto ch1 = t1->Open(p, 0);
  ASSERT_TRUE(ch0.ok() && ch1.ok());
  auto sender = MakeFp16Channel(*ch0, DT_FLOAT);
  ASSERT_TRUE(sender->Send(1, "x", Tensor::FromVector<float>({1.5f, -2.0f, 65504.0f, 1e6f, 0.1f})).ok());
  absl::Notification got_it;
  Tensor raw;
  (*ch1)->RecvAsync(0, "x", [&](absl::Status s, Tensor t) {
    EXPECT_TRUE(s.ok()) << s;
    raw = t;
    got_it.Notify();
  });
  ASSERT_TRUE(got_it.WaitForNotificationWithTimeout(kHang));
  EXPECT_EQ(raw.dtype(), DT_UINT8);
  EXPECT_EQ(raw.NumElements(), 10);
  // And a compressing receiver widens it back: in range exact or rounded,
  // beyond fp16's range an infinity, as Horovod's cast gives.
  ASSERT_TRUE((*ch1)->Send(0, "y", raw).ok());
  absl::Notification back;
  Tensor wide;
  MakeFp16Channel(*ch0, DT_FLOAT)->RecvAsync(1, "y", [&](absl::Status s, Tensor t) {
    EXPECT_TRUE(s.ok()) << s;
    wide = t;
    back.Notify();
  });
  ASSERT_TRUE(back.WaitForNotificationWithTimeout(kHang));
  ASSERT_EQ(wide.dtype(), DT_FLOAT);
  ASSERT_EQ(wide.NumElements(), 5);
  EXPECT_EQ(wide.flat<float>()[0], 1.5f);
  EXPECT_EQ(wide.flat<float>()[1], -2.0f);
  EXPECT_EQ(wide.flat<float>()[2], 65504.0f);
  EXPECT_TRUE(std::isinf(wide.flat<float>()[3]));
  EXPECT_EQ(wide.flat<float>()[4], ToHalf(0.1f));
  EXPECT_NE(wide.flat<float>()[4], 0.1f);
}

// One rank compressing and another not is an error on both, naming the
// other rank, instead of garbage.
TEST(Fp16AllReduce, MismatchedCompressionFailsNamingTheRank) {
  Ranks ranks(2);
  CollectiveParams compressed = Fp16Reduce(2, MergeOp::kAdd, FinalOp::kId, DT_FLOAT);
  CollectiveParams plain = compressed;
  plain.compress_fp16 = false;
  std::vector<Tensor> inputs = {Tensor::FromVector<float>({1, 2}), Tensor::FromVector<float>({3, 4})};
  auto out = ranks.RunEach({compressed, plain}, inputs);
  ASSERT_FALSE(out[0].ok());
  ASSERT_FALSE(out[1].ok());
  EXPECT_NE(out[0].status().message().find("rank 1"), std::string::npos) << out[0].status();
  EXPECT_NE(out[0].status().message().find("same compression"), std::string::npos) << out[0].status();
  EXPECT_NE(out[1].status().message().find("rank 0"), std::string::npos) << out[1].status();
  EXPECT_NE(out[1].status().message().find("same compression"), std::string::npos) << out[1].status();
}

}  // namespace
}  // namespace distflow
