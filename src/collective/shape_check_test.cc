// Ranks that run one CollectiveReduce on tensors of different shapes, some
// of them on either side of an algorithm's size threshold, fail on every
// rank with an error naming the ranks and both shapes instead of hanging
// (shape_check.h). N ranks in this process; Ranks::Run fails the test if a
// rank does not finish.
#include "collective/shape_check.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collective/adasum.h"
#include "collective/algorithms.h"
#include "collective/collective_test_util.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

CollectiveParams Reduce(int n, MergeOp merge) {
  CollectiveParams p;
  p.kind = CollectiveKind::kReduce;
  p.node_name = "allreduce";
  p.group_size = n;
  p.group_key = 1;
  p.instance_key = 9;
  p.merge_op = merge;
  p.final_op = FinalOp::kId;
  p.dtype = DT_FLOAT;
  return p;
}

Tensor Ones(const TensorShape& shape) {
  Tensor t(DT_FLOAT, shape);
  for (float& v : t.flat<float>()) v = 1;
  return t;
}

// Every rank fails with InvalidArgument whose message names both shapes;
// nothing is left in the mailboxes.
void ExpectEveryRankFails(Ranks& ranks, const std::vector<absl::StatusOr<Tensor>>& out, const std::string& a,
                          const std::string& b) {
  for (size_t r = 0; r < out.size(); ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_FALSE(out[r].ok());
    const std::string msg(out[r].status().message());
    EXPECT_TRUE(absl::IsInvalidArgument(out[r].status())) << msg;
    EXPECT_NE(msg.find(a), std::string::npos) << msg;
    EXPECT_NE(msg.find(b), std::string::npos) << msg;
    EXPECT_NE(msg.find("every rank must run the op with the same dtype and shape"), std::string::npos) << msg;
  }
  EXPECT_EQ(ranks.hub.NumPending(), 0u);
}

// Rank `odd` passes `other`, the rest `shape`; with the stall check on (its
// announcements are the first messages of a ring of 3 or more) and off.
void CheckMismatch(int n, int odd, MergeOp merge, const TensorShape& shape, const TensorShape& other) {
  for (bool stall_check : {true, false}) {
    SCOPED_TRACE(absl::StrCat("n=", n, " odd rank ", odd, " ", shape.DebugString(), " vs ", other.DebugString(),
                              stall_check ? " stall check on" : " stall check off"));
    Ranks ranks(n, [stall_check](int) {
      StallCheckOptions o;
      if (!stall_check) o.interval = absl::ZeroDuration();
      return o;
    });
    std::vector<Tensor> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(Ones(r == odd ? other : shape));
    auto out = ranks.Run(Reduce(n, merge), inputs);
    ExpectEveryRankFails(ranks, out, shape.DebugString(), other.DebugString());
    // The group works again for the next run of matching shapes.
    for (int r = 0; r < n; ++r) inputs[static_cast<size_t>(r)] = Ones(shape);
    auto again = ranks.Run(Reduce(n, merge), inputs);
    for (const auto& t : again) ASSERT_TRUE(t.ok()) << t.status();
  }
}

// 16384 floats are 64 KiB: the ring (kRingMinBytes); one fewer is the direct
// exchange.
TEST(ShapeCheck, SizesAcrossTheRingThresholdFailEveryRank) {
  static_assert(kRingMinBytes == 16384 * 4);
  for (int n : {2, 3, 4}) {
    for (int odd : {0, n - 1}) {
      CheckMismatch(n, odd, MergeOp::kAdd, TensorShape({16384}), TensorShape({16383}));
      CheckMismatch(n, odd, MergeOp::kAdd, TensorShape({16383}), TensorShape({16384}));
    }
  }
}

TEST(ShapeCheck, RingsOfDifferentPipelinesFailEveryRank) {
  // 2 Mi floats among 2 ranks run 1 ring; 3 Mi floats run 2 (4 MiB per rank segment).
  CheckMismatch(2, 1, MergeOp::kAdd, TensorShape({int64_t{2} << 20}), TensorShape({int64_t{3} << 20}));
}

TEST(ShapeCheck, SameSizeDifferentShapeFailsEveryRank) {
  for (int n : {2, 3}) {
    CheckMismatch(n, 1, MergeOp::kAdd, TensorShape({2, 3}), TensorShape({3, 2}));          // direct
    CheckMismatch(n, 1, MergeOp::kAdd, TensorShape({128, 256}), TensorShape({256, 128}));  // ring
    CheckMismatch(n, 0, MergeOp::kMax, TensorShape({40000}), TensorShape({200, 200}));     // ring
  }
}

TEST(ShapeCheck, AnEmptyTensorAgainstAFullOneFailsEveryRank) {
  for (int n : {2, 3}) {
    CheckMismatch(n, 0, MergeOp::kAdd, TensorShape({5}), TensorShape({0}));
    CheckMismatch(n, n - 1, MergeOp::kAdd, TensorShape({20000}), TensorShape({0}));
    CheckMismatch(n, 1, MergeOp::kAdasum, TensorShape({20000}), TensorShape({0}));
  }
}

// Adasum's whole-tensor doubling below 64 KiB, its vector halving from 64 KiB.
TEST(ShapeCheck, AdasumSizesAcrossTheHalvingThresholdFailEveryRank) {
  static_assert(kAdasumHalvingMinBytes == 16384 * 4);
  for (int n : {2, 3, 4, 5}) {
    for (int odd : {0, 1, n - 1}) {
      CheckMismatch(n, odd, MergeOp::kAdasum, TensorShape({16384}), TensorShape({16383}));
      CheckMismatch(n, odd, MergeOp::kAdasum, TensorShape({16383}), TensorShape({16384}));
    }
  }
  CheckMismatch(4, 2, MergeOp::kAdasum, TensorShape({2, 3}), TensorShape({3, 2}));
}

TEST(ShapeCheck, DifferentMergeOpsFailEveryRank) {
  Ranks ranks(3);
  std::vector<CollectiveParams> params(3, Reduce(3, MergeOp::kAdd));
  params[2].merge_op = MergeOp::kAdasum;
  std::vector<Tensor> inputs(3, Ones(TensorShape({20000})));
  auto out = ranks.RunEach(params, inputs);
  ExpectEveryRankFails(ranks, out, "float32 [20000] merge_op Adasum", "runs it on float32 [20000]");
}

TEST(ShapeCheck, EqualShapesPassIncludingEmptyTensors) {
  for (int n : {2, 3}) {
    for (MergeOp merge : {MergeOp::kAdd, MergeOp::kAdasum}) {
      Ranks ranks(n);
      auto out = ranks.Run(Reduce(n, merge), std::vector<Tensor>(static_cast<size_t>(n), Ones(TensorShape({0, 4}))));
      for (const auto& t : out) {
        ASSERT_TRUE(t.ok()) << t.status();
        EXPECT_EQ(t->shape(), TensorShape({0, 4}));
      }
      EXPECT_EQ(ranks.hub.NumPending(), 0u);
    }
  }
}

TEST(ShapeCheck, DescribesTheSignature) {
  EXPECT_EQ((ReduceSignature{DT_FLOAT, TensorShape({2, 3})}.DebugString()), "float32 [2,3]");
  EXPECT_EQ((ReduceSignature{DT_DOUBLE, TensorShape({4}), MergeOp::kAdasum}.DebugString()),
            "float64 [4] merge_op Adasum");
  EXPECT_EQ((ReduceSignature{DT_FLOAT, TensorShape({}), MergeOp::kAdd, true}.DebugString()),
            "float32 [] compression fp16");
}

}  // namespace
}  // namespace distflow
