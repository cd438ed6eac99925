// The collective algorithms and executor with N ranks inside this process
// (gloo's harness style): each rank runs on its own thread over
// InProcessCollectives, and every rank's result is checked against the
// arithmetic done here.
#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "collective/algorithms.h"
#include "collective/collective_test_util.h"
#include "collective/shape_check.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

// Rank r's element i: small integers, so float sums are exact and every
// algorithm's order of additions gives the same bits.
template <typename T>
Tensor Input(int64_t count, int rank) {
  Tensor t(DataTypeToEnum<T>::value, TensorShape({count}));
  auto f = t.flat<T>();
  for (int64_t i = 0; i < count; ++i) f[static_cast<size_t>(i)] = static_cast<T>((i * 7 + rank * 13) % 17 - 8);
  return t;
}

template <typename T>
T Expected(int64_t i, int n, MergeOp merge, FinalOp final_op) {
  T acc = static_cast<T>((i * 7) % 17 - 8);
  for (int r = 1; r < n; ++r) {
    const T v = static_cast<T>((i * 7 + r * 13) % 17 - 8);
    if (merge == MergeOp::kAdd) acc += v;
    if (merge == MergeOp::kMax) acc = std::max(acc, v);
    if (merge == MergeOp::kMin) acc = std::min(acc, v);
    if (merge == MergeOp::kMul) acc *= v;
  }
  if (final_op == FinalOp::kDiv) acc /= static_cast<T>(n);
  return acc;
}

CollectiveParams ReduceParams(int n, MergeOp merge, FinalOp final_op, DataType dt) {
  CollectiveParams p;
  p.kind = CollectiveKind::kReduce;
  p.node_name = "allreduce";
  p.group_size = n;
  p.group_key = 1;
  p.instance_key = 7;
  p.merge_op = merge;
  p.final_op = final_op;
  p.dtype = dt;
  return p;
}

template <typename T>
void CheckAllReduce(int n, int64_t count) {
  struct Op {
    MergeOp merge;
    FinalOp final_op;
    const char* name;
  };
  for (Op op : {Op{MergeOp::kAdd, FinalOp::kId, "sum"}, Op{MergeOp::kAdd, FinalOp::kDiv, "mean"},
                Op{MergeOp::kMax, FinalOp::kId, "max"}, Op{MergeOp::kMin, FinalOp::kId, "min"}}) {
    SCOPED_TRACE(absl::StrCat(DataTypeName(DataTypeToEnum<T>::value), " ", op.name, ", n=", n, ", count=", count));
    Ranks ranks(n);
    std::vector<Tensor> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(Input<T>(count, r));
    auto out = ranks.Run(ReduceParams(n, op.merge, op.final_op, DataTypeToEnum<T>::value), inputs);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
      const Tensor& got = *out[static_cast<size_t>(r)];
      ASSERT_EQ(got.shape(), inputs[0].shape());
      auto f = got.flat<T>();
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(f[static_cast<size_t>(i)], Expected<T>(i, n, op.merge, op.final_op))
            << "rank " << r << " [" << i << "]";
      }
    }
    // Inputs untouched, and nothing sent was left behind.
    EXPECT_EQ(inputs[0].flat<T>().size(), static_cast<size_t>(count));
    if (count > 0) {
      EXPECT_EQ(inputs[0].flat<T>()[0], static_cast<T>(-8));
    }
    EXPECT_EQ(ranks.hub.NumPending(), 0u);
  }
}

// Sizes: empty, one element, not divisible by any n > 1, and above
// kRingMinBytes for every dtype (the ring, several segments per rank).
const int64_t kCounts[] = {0, 1, 7, 40009};

TEST(AllReduce, Float32EverySizeAndGroup) {
  for (int n = 1; n <= 4; ++n)
    for (int64_t c : kCounts) CheckAllReduce<float>(n, c);
}
TEST(AllReduce, Float64EverySizeAndGroup) {
  for (int n = 1; n <= 4; ++n)
    for (int64_t c : kCounts) CheckAllReduce<double>(n, c);
}
TEST(AllReduce, Int32EverySizeAndGroup) {
  for (int n = 1; n <= 4; ++n)
    for (int64_t c : kCounts) CheckAllReduce<int32_t>(n, c);
}
TEST(AllReduce, Int64EverySizeAndGroup) {
  for (int n = 1; n <= 4; ++n)
    for (int64_t c : kCounts) CheckAllReduce<int64_t>(n, c);
}

// The ring itself on small tensors, with more pieces than elements (empty
// segments) and several pipelined rings.
TEST(RingAllReduce, PipelinedRingsAndEmptySegments) {
  for (int n = 2; n <= 4; ++n) {
    for (int64_t count : {1, 5, 11, 1000}) {
      for (int pipeline : {1, 3}) {
        SCOPED_TRACE(absl::StrCat("n=", n, " count=", count, " pipeline=", pipeline));
        InProcessCollectives hub(n);
        std::vector<std::unique_ptr<CollectiveTransport>> transports;
        std::vector<Tensor> bufs;
        std::vector<absl::Status> status(static_cast<size_t>(n), absl::UnknownError("did not run"));
        std::vector<std::unique_ptr<absl::Notification>> done;
        std::vector<std::thread> threads;
        CollectiveParams p = ReduceParams(n, MergeOp::kAdd, FinalOp::kId, DT_INT64);
        for (int r = 0; r < n; ++r) {
          transports.push_back(hub.TransportFor(r));
          bufs.push_back(Input<int64_t>(count, r));
          done.push_back(std::make_unique<absl::Notification>());
        }
        for (int r = 0; r < n; ++r) {
          threads.emplace_back([&, r] {
            auto ch = transports[static_cast<size_t>(r)]->Open(p, 0);
            ASSERT_TRUE(ch.ok()) << ch.status();
            RingAllReduce(*ch, bufs[static_cast<size_t>(r)], MergeOp::kAdd, FinalOp::kId, pipeline,
                          [&, r](absl::Status s) {
                            status[static_cast<size_t>(r)] = s;
                            done[static_cast<size_t>(r)]->Notify();
                          });
          });
        }
        for (auto& t : threads) t.join();
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(done[static_cast<size_t>(r)]->WaitForNotificationWithTimeout(kHang));
          ASSERT_TRUE(status[static_cast<size_t>(r)].ok()) << status[static_cast<size_t>(r)];
          for (int64_t i = 0; i < count; ++i) {
            ASSERT_EQ(bufs[static_cast<size_t>(r)].flat<int64_t>()[static_cast<size_t>(i)],
                      Expected<int64_t>(i, n, MergeOp::kAdd, FinalOp::kId));
          }
        }
        EXPECT_EQ(hub.NumPending(), 0u);
      }
    }
  }
}

// The bytes each rank sends, which bench/scaling_table.py's formulas assume:
// the ring 2(n-1)/n of the tensor whatever n is, the direct exchange (small
// tensors) (n-1) times the tensor.
TEST(AllReduce, EachRankSendsWhatTheAlgorithmsCost) {
  for (int n : {2, 3, 4, 8}) {
    for (int64_t count : {int64_t{3} << 18, int64_t{1000}}) {  // 3 MiB (ring), 4,000 bytes (direct)
      SCOPED_TRACE(absl::StrCat("n=", n, " count=", count));
      Ranks ranks(n);
      std::vector<Tensor> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(Input<float>(count, r));
      auto out = ranks.Run(ReduceParams(n, MergeOp::kAdd, FinalOp::kDiv, DT_FLOAT), inputs);
      const double bytes = 4.0 * static_cast<double>(count);
      const bool ring = bytes >= static_cast<double>(kRingMinBytes);
      // The first message to each peer also carries the run's signature (shape_check.h).
      const double signature = static_cast<double>(
          FirstMessageOverheadBytes(ReduceSignature{DT_FLOAT, TensorShape({count})}, TensorShape({count})));
      const double expected = ring ? 2.0 * (n - 1) / n * bytes : (n - 1) * (bytes + signature);
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
        // The ring's segments round to whole elements: within 0.1%.
        EXPECT_NEAR(static_cast<double>(ranks.hub.BytesSent(r)), expected, expected * 1e-3) << "rank " << r;
      }
    }
  }
}

// The k-th run of an instance meets the k-th run on the other ranks.
TEST(CollectiveExecutor, RunsOfOneInstancePairInOrder) {
  Ranks ranks(3);
  for (int run = 0; run < 3; ++run) {
    std::vector<Tensor> inputs;
    for (int r = 0; r < 3; ++r) inputs.push_back(Tensor::FromVector<float>({static_cast<float>(run * 100 + r)}));
    auto out = ranks.Run(ReduceParams(3, MergeOp::kAdd, FinalOp::kId, DT_FLOAT), inputs);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
      EXPECT_EQ(out[static_cast<size_t>(r)]->flat<float>()[0], static_cast<float>(run * 300 + 3));
    }
  }
}

TEST(Broadcast, OneSenderReachesEveryRank) {
  for (int n = 2; n <= 4; ++n) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    Ranks ranks(n);
    const int root = n - 1;
    CollectiveParams send, recv;
    send.kind = CollectiveKind::kBroadcastSend;
    recv.kind = CollectiveKind::kBroadcastRecv;
    for (CollectiveParams* p : {&send, &recv}) {
      p->group_size = n;
      p->group_key = 2;
      p->instance_key = 1;
      p->dtype = DT_DOUBLE;
      p->shape = TensorShape({2, 3});
    }
    Tensor value(DT_DOUBLE, TensorShape({2, 3}));
    for (int i = 0; i < 6; ++i) value.flat<double>()[static_cast<size_t>(i)] = 0.5 * i - 1;
    // Each rank runs its own op: the sender first in one thread, the others in theirs.
    std::vector<absl::StatusOr<Tensor>> out(static_cast<size_t>(n), absl::UnknownError("did not run"));
    std::vector<std::unique_ptr<absl::Notification>> done;
    for (int r = 0; r < n; ++r) done.push_back(std::make_unique<absl::Notification>());
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        ranks.executors[static_cast<size_t>(r)]->Run(r == root ? send : recv, r == root ? value : Tensor(), nullptr,
                                                     [&, r](absl::StatusOr<Tensor> t) {
                                                       out[static_cast<size_t>(r)] = std::move(t);
                                                       done[static_cast<size_t>(r)]->Notify();
                                                     });
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(done[static_cast<size_t>(r)]->WaitForNotificationWithTimeout(kHang));
      ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
      ASSERT_EQ(out[static_cast<size_t>(r)]->shape(), TensorShape({2, 3}));
      for (int i = 0; i < 6; ++i)
        EXPECT_EQ(out[static_cast<size_t>(r)]->flat<double>()[static_cast<size_t>(i)], 0.5 * i - 1);
    }
    EXPECT_EQ(ranks.hub.NumPending(), 0u);
  }
}

TEST(Broadcast, TwoSendersFailOnEveryRankNamingThem) {
  Ranks ranks(3);
  CollectiveParams send;
  send.kind = CollectiveKind::kBroadcastSend;
  send.group_size = 3;
  send.group_key = 2;
  send.instance_key = 2;
  send.dtype = DT_FLOAT;
  send.shape = TensorShape({1});
  std::vector<Tensor> inputs(3, Tensor::FromVector<float>({1.0f}));
  auto out = ranks.Run(send, inputs);
  for (int r = 0; r < 3; ++r) {
    ASSERT_FALSE(out[static_cast<size_t>(r)].ok());
    EXPECT_NE(out[static_cast<size_t>(r)].status().message().find("all send"), std::string::npos)
        << out[static_cast<size_t>(r)].status();
  }
}

// root_rank (Horovod's broadcast when every rank runs CollectiveBcastSend):
// rank k's value reaches every rank, for every k; a root_rank outside the
// group fails on every rank naming it and the size.
TEST(Broadcast, RootRankSendsWhenEveryRankRunsTheSendOp) {
  for (int n = 2; n <= 3; ++n) {
    for (int root = 0; root <= n; ++root) {
      SCOPED_TRACE(absl::StrCat("n=", n, " root_rank=", root));
      Ranks ranks(n);
      CollectiveParams send;
      send.kind = CollectiveKind::kBroadcastSend;
      send.group_size = n;
      send.group_key = 2;
      send.instance_key = 3;
      send.dtype = DT_INT64;
      send.shape = TensorShape({2});
      send.root_rank = root;
      std::vector<Tensor> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(Tensor::FromVector<int64_t>({10 * r, 10 * r + 1}));
      auto out = ranks.Run(send, inputs);
      for (int r = 0; r < n; ++r) {
        const auto& got = out[static_cast<size_t>(r)];
        if (root == n) {
          ASSERT_FALSE(got.ok());
          EXPECT_NE(got.status().message().find(
                        absl::StrCat("root_rank ", n, " is not a rank of the group of size ", n, " (0..", n - 1, ")")),
                    std::string::npos)
              << got.status();
          continue;
        }
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got->flat<int64_t>()[0], 10 * root) << "rank " << r;
        EXPECT_EQ(got->flat<int64_t>()[1], 10 * root + 1) << "rank " << r;
      }
      EXPECT_EQ(ranks.hub.NumPending(), 0u);
    }
  }
}

TEST(AllGather, ConcatenatesInRankOrder) {
  Ranks ranks(3);
  CollectiveParams p;
  p.kind = CollectiveKind::kGather;
  p.group_size = 3;
  p.group_key = 3;
  p.instance_key = 1;
  p.dtype = DT_INT32;
  std::vector<Tensor> inputs;
  for (int r = 0; r < 3; ++r) {
    Tensor t(DT_INT32, TensorShape({2, 2}));
    for (int i = 0; i < 4; ++i) t.flat<int32_t>()[static_cast<size_t>(i)] = r * 10 + i;
    inputs.push_back(t);
  }
  auto out = ranks.Run(p, inputs);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
    ASSERT_EQ(out[static_cast<size_t>(r)]->shape(), TensorShape({6, 2}));
    for (int i = 0; i < 12; ++i) {
      EXPECT_EQ(out[static_cast<size_t>(r)]->flat<int32_t>()[static_cast<size_t>(i)], (i / 4) * 10 + i % 4);
    }
  }
}

// Horovod's allgather: the first dimension may differ per rank (0 rows
// included); the result is NumPy's concatenation in rank order.
TEST(AllGather, FirstDimensionsMayDiffer) {
  for (int n : {2, 3}) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    Ranks ranks(n);
    CollectiveParams p;
    p.kind = CollectiveKind::kGather;
    p.group_size = n;
    p.group_key = 3;
    p.instance_key = 4;
    p.dtype = DT_FLOAT;
    std::vector<Tensor> inputs;
    std::vector<float> want;
    for (int r = 0; r < n; ++r) {
      const int rows = r == 1 ? 0 : r + 2;  // rank 1 gathers no rows
      Tensor t(DT_FLOAT, TensorShape({rows, 3}));
      for (int i = 0; i < rows * 3; ++i) {
        t.flat<float>()[static_cast<size_t>(i)] = static_cast<float>(100 * r + i);
        want.push_back(static_cast<float>(100 * r + i));
      }
      inputs.push_back(t);
    }
    auto out = ranks.Run(p, inputs);
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
      ASSERT_EQ(out[static_cast<size_t>(r)]->shape(), TensorShape({static_cast<int64_t>(want.size() / 3), 3}));
      auto got = out[static_cast<size_t>(r)]->flat<float>();
      EXPECT_EQ(std::vector<float>(got.begin(), got.end()), want) << "rank " << r;
    }
    EXPECT_EQ(ranks.hub.NumPending(), 0u);
  }
}

TEST(AllGather, MismatchedShapesFailNamingTheRank) {
  Ranks ranks(2);
  CollectiveParams p;
  p.kind = CollectiveKind::kGather;
  p.group_size = 2;
  p.group_key = 3;
  p.instance_key = 2;
  p.dtype = DT_FLOAT;
  Tensor a(DT_FLOAT, TensorShape({2, 3})), b(DT_FLOAT, TensorShape({2, 4}));
  auto out = ranks.Run(p, {a, b});
  // Each rank fails with its own finding or the other's, which names both
  // ranks and shapes alike.
  const std::string one = "rank 1 (in-process) gathers float32 [2,4] but rank 0 (in-process) gathers float32 [2,3]";
  const std::string other = "rank 0 (in-process) gathers float32 [2,3] but rank 1 (in-process) gathers float32 [2,4]";
  for (const auto& r : out) {
    ASSERT_FALSE(r.ok());
    const std::string m(r.status().message());
    EXPECT_TRUE(m.find(one) != std::string::npos || m.find(other) != std::string::npos) << r.status();
    EXPECT_NE(m.find("same dimensions after the first"), std::string::npos) << r.status();
  }
}

// A dead rank fails the collective on the others, naming it, for the ring
// and the direct exchange alike; nobody hangs.
TEST(CollectiveFailure, DeadRankFailsTheOthersNamingIt) {
  for (int64_t count : {int64_t{4}, int64_t{100000}}) {
    SCOPED_TRACE(absl::StrCat("count=", count));
    Ranks ranks(3);
    ranks.hub.KillRank(2);
    std::vector<Tensor> inputs;
    for (int r = 0; r < 3; ++r) inputs.push_back(Input<float>(count, r));
    auto out = ranks.Run(ReduceParams(3, MergeOp::kAdd, FinalOp::kDiv, DT_FLOAT), inputs, {0, 1});
    for (int r : {0, 1}) {
      ASSERT_FALSE(out[static_cast<size_t>(r)].ok());
      EXPECT_NE(out[static_cast<size_t>(r)].status().message().find("rank 2 is gone"), std::string::npos)
          << out[static_cast<size_t>(r)].status();
    }
  }
}

TEST(CollectiveFailure, CancellingOneRankFailsItsPeers) {
  Ranks ranks(2);
  CancellationManager cm0, cm1;
  std::vector<Tensor> inputs = {Input<float>(3, 0), Input<float>(3, 1)};
  cm0.StartCancel(absl::CancelledError("step cancelled by the test"));
  auto first = ranks.Run(ReduceParams(2, MergeOp::kAdd, FinalOp::kId, DT_FLOAT), inputs, {0}, {&cm0, &cm1});
  ASSERT_FALSE(first[0].ok());
  EXPECT_TRUE(absl::IsCancelled(first[0].status())) << first[0].status();
  // Rank 0's step was cancelled before its run 0 started, and it aborted
  // the run: rank 1's run 0 fails with rank 0's reason instead of waiting
  // for rank 0 (its own step is never cancelled here).
  absl::Notification done;
  absl::StatusOr<Tensor> second = absl::UnknownError("did not run");
  ranks.executors[1]->Run(ReduceParams(2, MergeOp::kAdd, FinalOp::kId, DT_FLOAT), inputs[1], &cm1,
                          [&](absl::StatusOr<Tensor> t) {
                            second = std::move(t);
                            done.Notify();
                          });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kHang));
  EXPECT_TRUE(absl::IsCancelled(second.status())) << second.status();
  EXPECT_NE(second.status().message().find("step cancelled by the test"), std::string::npos) << second.status();
}

// A step cancelled by its first error (a dead peer, say) aborts its other
// runs with that error: a peer's run that fails because of the abort names
// the root cause, in its code, not just "the step was cancelled". Ring
// all-reduce among 3 ranks, rank 2 never joining: rank 1 waits on rank 0's
// second segment, which rank 0 cannot send without rank 2's.
TEST(CollectiveFailure, AStepsCancellationCarriesItsFirstErrorToThePeers) {
  Ranks ranks(3);
  CancellationManager cm0, cm1;
  const int64_t count = 100000;
  std::vector<absl::Notification> done(2);
  std::vector<absl::StatusOr<Tensor>> out(2, absl::UnknownError("did not run"));
  for (int r = 0; r < 2; ++r) {
    ranks.executors[static_cast<size_t>(r)]->Run(ReduceParams(3, MergeOp::kAdd, FinalOp::kId, DT_FLOAT),
                                                 Input<float>(count, r), r == 0 ? &cm0 : &cm1,
                                                 [&, r](absl::StatusOr<Tensor> t) {
                                                   out[static_cast<size_t>(r)] = std::move(t);
                                                   done[static_cast<size_t>(r)].Notify();
                                                 });
  }
  cm0.StartCancel(absl::UnavailableError("Node 'other': rank 5 (/job:worker/task:5) failed or cannot be reached"));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(done[static_cast<size_t>(r)].WaitForNotificationWithTimeout(kHang)) << "rank " << r;
    const absl::Status& s = out[static_cast<size_t>(r)].status();
    EXPECT_TRUE(absl::IsUnavailable(s)) << "rank " << r << ": " << s;
    EXPECT_NE(s.message().find("rank 5 (/job:worker/task:5) failed"), std::string::npos) << "rank " << r << ": " << s;
  }
  EXPECT_FALSE(cm1.IsCancelled()) << "rank 1's run ended through rank 0's abort alone";
}

TEST(CollectiveFailure, TimeoutEndsAWaitForAMissingRank) {
  Ranks ranks(2);
  CollectiveParams p = ReduceParams(2, MergeOp::kAdd, FinalOp::kId, DT_FLOAT);
  p.timeout_seconds = 0.05;
  std::vector<Tensor> inputs = {Input<float>(3, 0), Input<float>(3, 1)};
  auto out = ranks.Run(p, inputs, {0});
  ASSERT_FALSE(out[0].ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(out[0].status())) << out[0].status();
  EXPECT_NE(out[0].status().message().find("timeout_seconds"), std::string::npos) << out[0].status();
}

TEST(CollectiveExecutor, RejectsUnsupportedDtypes) {
  Ranks ranks(1);
  CollectiveParams p = ReduceParams(1, MergeOp::kAdd, FinalOp::kId, DT_UINT8);
  Tensor t(DT_UINT8, TensorShape({2}));
  auto out = ranks.Run(p, {t});
  ASSERT_FALSE(out[0].ok());
  EXPECT_NE(out[0].status().message().find("uint8"), std::string::npos) << out[0].status();
}

}  // namespace
}  // namespace distflow
