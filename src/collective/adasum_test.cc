// Adasum (merge_op Adasum) and process sets (CollectiveParams::members),
// N ranks in one process: every rank gets the same bytes, equal to a
// computation of Adasum's tree written here from its definition; a process
// set's collectives run among its members only, beside the whole group's;
// the vector-halving form agrees with the whole-tensor form and sends less.
#include "collective/adasum.h"

#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "collective/collective_test_util.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

// Adasum(a, b) from its definition, in double.
std::vector<double> Pair(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa > 0 ? 1 - dot / (2 * aa) : 1, cb = bb > 0 ? 1 - dot / (2 * bb) : 1;
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// The tree adasum.h documents: ranks p..n-1 folded into 0..n-p-1, then
// halves combined recursively (ranks [lo, lo+k) with [lo+k, lo+2k)).
std::vector<double> Reference(std::vector<std::vector<double>> g) {
  const int n = static_cast<int>(g.size());
  int p = 1;
  while (p * 2 <= n) p *= 2;
  for (int r = p; r < n; ++r)
    g[static_cast<size_t>(r - p)] = Pair(g[static_cast<size_t>(r - p)], g[static_cast<size_t>(r)]);
  for (int k = 1; k < p; k *= 2) {
    for (int lo = 0; lo < p; lo += 2 * k) {
      g[static_cast<size_t>(lo)] = Pair(g[static_cast<size_t>(lo)], g[static_cast<size_t>(lo + k)]);
    }
  }
  return g[0];
}

// Rank r's gradient: values that are neither orthogonal nor parallel.
template <typename T>
Tensor Gradient(int64_t count, int r) {
  Tensor t(DataTypeToEnum<T>::value, TensorShape({count}));
  for (int64_t i = 0; i < count; ++i) {
    t.flat<T>()[static_cast<size_t>(i)] =
        static_cast<T>(std::sin(0.7 * static_cast<double>(i + 1) * (r + 1)) + 0.1 * r);
  }
  return t;
}

CollectiveParams Adasum(int n, DataType dt) {
  CollectiveParams p;
  p.kind = CollectiveKind::kReduce;
  p.node_name = "adasum";
  p.group_size = n;
  p.group_key = 3;
  p.instance_key = 5;
  p.merge_op = MergeOp::kAdasum;
  p.dtype = dt;
  return p;
}

template <typename T>
void CheckAdasum(int n, int64_t count, double tolerance) {
  SCOPED_TRACE(absl::StrCat(DataTypeName(DataTypeToEnum<T>::value), " n=", n, " count=", count));
  Ranks ranks(n);
  std::vector<Tensor> inputs;
  std::vector<std::vector<double>> g;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(Gradient<T>(count, r));
    std::vector<double> v;
    for (T x : inputs.back().flat<T>()) v.push_back(static_cast<double>(x));
    g.push_back(v);
  }
  const std::vector<double> want = Reference(g);
  auto out = ranks.Run(Adasum(n, DataTypeToEnum<T>::value), inputs);
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(out[static_cast<size_t>(r)].ok()) << out[static_cast<size_t>(r)].status();
    auto got = out[static_cast<size_t>(r)]->template flat<T>();
    ASSERT_EQ(got.size(), static_cast<size_t>(count));
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(static_cast<double>(got[i]), want[i], tolerance * (1 + std::abs(want[i])))
          << "rank " << r << " [" << i << "]";
      // Every rank holds the same bytes.
      EXPECT_EQ(got[i], out[0]->template flat<T>()[i]) << "rank " << r << " [" << i << "]";
    }
  }
  EXPECT_EQ(ranks.hub.NumPending(), 0u);
}

TEST(AdasumCombine, OrthogonalAddsEqualAveragesZeroLeavesTheOther) {
  auto vec = [](std::vector<float> v) { return Tensor::FromVector<float>(v); };
  absl::StatusOr<Tensor> orth = AdasumCombine(vec({1, 0}), vec({0, 2}));
  ASSERT_TRUE(orth.ok()) << orth.status();
  EXPECT_EQ(orth->flat<float>()[0], 1.0f);
  EXPECT_EQ(orth->flat<float>()[1], 2.0f);
  absl::StatusOr<Tensor> same = AdasumCombine(vec({3, 4}), vec({3, 4}));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->flat<float>()[0], 3.0f);
  EXPECT_EQ(same->flat<float>()[1], 4.0f);
  absl::StatusOr<Tensor> zero = AdasumCombine(vec({0, 0}), vec({5, -1}));
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->flat<float>()[0], 5.0f);
  EXPECT_EQ(zero->flat<float>()[1], -1.0f);
  absl::StatusOr<Tensor> ints = AdasumCombine(Tensor::FromVector<int32_t>({1}), Tensor::FromVector<int32_t>({2}));
  ASSERT_FALSE(ints.ok());
  EXPECT_NE(std::string(ints.status().message()).find("float32 and float64 tensors, not int32"), std::string::npos)
      << ints.status();
}

// Powers of two (recursive doubling alone) and not (ranks folded first).
TEST(AdasumAllReduce, MatchesTheDefinitionOnEveryRank) {
  for (int n : {1, 2, 3, 4, 5, 6, 8}) {
    // 20,000 elements: the executor takes the vector-halving form.
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{20000}}) {
      CheckAdasum<float>(n, count, 1e-5);
      CheckAdasum<double>(n, count, 1e-12);
    }
  }
}

// AdasumAllReduce with a chosen algorithm on n ranks of a fresh in-process
// hub, each rank on its own thread: every rank's result and bytes sent.
struct AlgorithmRun {
  std::vector<Tensor> out;
  std::vector<int64_t> bytes_sent;
};

AlgorithmRun RunAlgorithm(AdasumAlgorithm algorithm, const std::vector<Tensor>& inputs) {
  const int n = static_cast<int>(inputs.size());
  InProcessCollectives hub(n);
  std::vector<std::unique_ptr<CollectiveTransport>> transports;
  for (int r = 0; r < n; ++r) transports.push_back(hub.TransportFor(r));
  CollectiveParams params = Adasum(n, inputs[0].dtype());
  AlgorithmRun run;
  std::vector<absl::Status> status(static_cast<size_t>(n), absl::UnknownError("did not run"));
  for (const Tensor& t : inputs) run.out.push_back(t.DeepCopy());
  std::vector<std::unique_ptr<absl::Notification>> done;
  for (int r = 0; r < n; ++r) done.push_back(std::make_unique<absl::Notification>());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::shared_ptr<CollectiveChannel>> ch = transports[static_cast<size_t>(r)]->Open(params, 0);
      if (!ch.ok()) {
        status[static_cast<size_t>(r)] = ch.status();
        done[static_cast<size_t>(r)]->Notify();
        return;
      }
      AdasumAllReduce(
          *ch, run.out[static_cast<size_t>(r)],
          [&, r](absl::Status s) {
            status[static_cast<size_t>(r)] = s;
            done[static_cast<size_t>(r)]->Notify();
          },
          algorithm);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(done[static_cast<size_t>(r)]->WaitForNotificationWithTimeout(kHang)) << "rank " << r;
    EXPECT_TRUE(status[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << status[static_cast<size_t>(r)];
    run.bytes_sent.push_back(hub.BytesSent(r));
  }
  EXPECT_EQ(hub.NumPending(), 0u);
  return run;
}

// The vector-halving form gives what the whole-tensor form gives, within
// rounding (only the order the partial dot products are summed in
// differs), the same bytes on every rank, for every group size and for
// sizes that do not divide evenly (fewer elements than ranks included).
template <typename T>
void CheckHalvingMatchesWholeTensor(int n, int64_t count, double tolerance) {
  SCOPED_TRACE(absl::StrCat(DataTypeName(DataTypeToEnum<T>::value), " n=", n, " count=", count));
  std::vector<Tensor> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(Gradient<T>(count, r));
  const AlgorithmRun whole = RunAlgorithm(AdasumAlgorithm::kWholeTensor, inputs);
  const AlgorithmRun halving = RunAlgorithm(AdasumAlgorithm::kVectorHalving, inputs);
  for (int r = 0; r < n; ++r) {
    auto got = halving.out[static_cast<size_t>(r)].template flat<T>();
    auto want = whole.out[static_cast<size_t>(r)].template flat<T>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(static_cast<double>(got[i]), static_cast<double>(want[i]),
                  tolerance * (1 + std::abs(static_cast<double>(want[i]))))
          << "rank " << r << " [" << i << "]";
      ASSERT_EQ(got[i], halving.out[0].template flat<T>()[i]) << "rank " << r << " [" << i << "]";
    }
  }
}

TEST(AdasumVectorHalving, MatchesTheWholeTensorFormOnEveryRank) {
  for (int n : {2, 3, 4, 5, 6, 8}) {
    for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1001}, int64_t{20000}}) {
      CheckHalvingMatchesWholeTensor<float>(n, count, 1e-5);
      CheckHalvingMatchesWholeTensor<double>(n, count, 1e-12);
    }
  }
}

// Bytes each rank sends, counted by the in-process transport: log2(p) whole
// tensors for the whole-tensor form; for vector halving 2 (1 - 1/p) of the
// tensor plus 32 bytes per dot-product message (round d of the halving
// sends log2(d) + 1 of them), so 3/4 of the whole-tensor bytes at p = 4
// and 7/12 at p = 8 (equal at p = 2, where halving does half the arithmetic).
TEST(AdasumVectorHalving, EachRankSendsLessThanTheWholeTensorForm) {
  constexpr int64_t kCount = 40000;  // 160,000 bytes of float32: kAuto takes halving
  for (int n : {2, 4, 8}) {
    SCOPED_TRACE(absl::StrCat("n=", n));
    std::vector<Tensor> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(Gradient<float>(kCount, r));
    ASSERT_TRUE(AdasumUsesVectorHalving(inputs[0], n));
    const AlgorithmRun whole = RunAlgorithm(AdasumAlgorithm::kWholeTensor, inputs);
    const AlgorithmRun halving = RunAlgorithm(AdasumAlgorithm::kVectorHalving, inputs);
    int log2p = 0, dot_messages = 0;
    for (int d = 1; d < n; d *= 2) dot_messages += ++log2p;
    const int64_t bytes = 4 * kCount;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(whole.bytes_sent[static_cast<size_t>(r)], log2p * bytes) << "rank " << r;
      EXPECT_EQ(halving.bytes_sent[static_cast<size_t>(r)], 2 * (bytes - bytes / n) + 32 * dot_messages)
          << "rank " << r;
      if (n > 2) {
        EXPECT_LT(halving.bytes_sent[static_cast<size_t>(r)], whole.bytes_sent[static_cast<size_t>(r)]) << "rank " << r;
      }
    }
  }
  // Small tensors keep the whole-tensor form (fewer rounds).
  EXPECT_FALSE(AdasumUsesVectorHalving(Gradient<float>(1000, 0), 4));
}

TEST(AdasumAllReduce, RefusesIntegersAndMismatchedSizes) {
  Ranks ranks(2);
  auto ints = ranks.Run(Adasum(2, DT_INT32), {Tensor::FromVector<int32_t>({1}), Tensor::FromVector<int32_t>({2})});
  for (const auto& r : ints) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find("Adasum reduces float32 and float64 tensors, not int32"),
              std::string::npos)
        << r.status();
  }
  auto sizes = ranks.Run(Adasum(2, DT_FLOAT), {Tensor::FromVector<float>({1, 2}), Tensor::FromVector<float>({1})});
  for (const auto& r : sizes) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status().message()).find("every rank must run the op with the same dtype and shape"),
              std::string::npos)
        << r.status();
  }
}

CollectiveParams Sum(int n, int64_t group_key, std::vector<int> members) {
  CollectiveParams p;
  p.kind = CollectiveKind::kReduce;
  p.node_name = "sum";
  p.group_size = n;
  p.group_key = group_key;
  p.instance_key = 1;
  p.merge_op = MergeOp::kAdd;
  p.dtype = DT_FLOAT;
  p.members = std::move(members);
  return p;
}

// Process set {0, 2} of 3 ranks: its reduction sums ranks 0 and 2 only,
// while all three run the whole group's at the same time; rank 1 cannot
// run the set's op; bad member lists are refused naming the problem.
TEST(ProcessSet, ReducesAmongItsMembersBesideTheWholeGroup) {
  for (int64_t count : {int64_t{3}, int64_t{40000}}) {  // direct exchange and ring
    SCOPED_TRACE(absl::StrCat("count=", count));
    Ranks ranks(3);
    std::vector<Tensor> inputs;
    for (int r = 0; r < 3; ++r) {
      Tensor t(DT_FLOAT, TensorShape({count}));
      for (auto& x : t.flat<float>()) x = static_cast<float>(1 << r);  // 1, 2, 4
      inputs.push_back(t);
    }
    // Rank 1 enters the whole group's reduction first; ranks 0 and 2 run
    // the set's, then join the whole group's.
    absl::Notification rank1_done;
    absl::StatusOr<Tensor> rank1 = absl::UnknownError("did not run");
    ranks.executors[1]->Run(Sum(3, 1, {}), inputs[1], nullptr, [&](absl::StatusOr<Tensor> t) {
      rank1 = std::move(t);
      rank1_done.Notify();
    });
    auto set = ranks.Run(Sum(2, 9, {0, 2}), inputs, {0, 2});
    for (int r : {0, 2}) {
      ASSERT_TRUE(set[static_cast<size_t>(r)].ok()) << set[static_cast<size_t>(r)].status();
      EXPECT_EQ(set[static_cast<size_t>(r)]->flat<float>()[0], 5.0f);
      EXPECT_EQ(set[static_cast<size_t>(r)]->flat<float>()[static_cast<size_t>(count - 1)], 5.0f);
    }
    auto all = ranks.Run(Sum(3, 1, {}), inputs, {0, 2});
    ASSERT_TRUE(rank1_done.WaitForNotificationWithTimeout(kHang));
    all[1] = rank1;
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(all[static_cast<size_t>(r)].ok()) << all[static_cast<size_t>(r)].status();
      EXPECT_EQ(all[static_cast<size_t>(r)]->flat<float>()[0], 7.0f);
    }
    EXPECT_EQ(ranks.hub.NumPending(), 0u);
  }
  Ranks ranks(3);
  std::vector<Tensor> one = {Tensor::FromVector<float>({1}), Tensor::FromVector<float>({1}),
                             Tensor::FromVector<float>({1})};
  auto outsider = ranks.Run(Sum(2, 9, {0, 2}), one, {1});
  ASSERT_FALSE(outsider[1].ok());
  EXPECT_NE(std::string(outsider[1].status().message()).find("rank 1 is not in the group (members 0, 2)"),
            std::string::npos)
      << outsider[1].status();
  auto short_list = ranks.Run(Sum(3, 9, {0, 2}), one, {0});
  ASSERT_FALSE(short_list[0].ok());
  EXPECT_NE(std::string(short_list[0].status().message()).find("group_members lists 2 task(s) but group_size is 3"),
            std::string::npos)
      << short_list[0].status();
  auto twice = ranks.Run(Sum(2, 9, {2, 2}), one, {2});
  ASSERT_FALSE(twice[2].ok());
  EXPECT_NE(std::string(twice[2].status().message()).find("group_members lists task 2 twice"), std::string::npos)
      << twice[2].status();
}

}  // namespace
}  // namespace distflow
