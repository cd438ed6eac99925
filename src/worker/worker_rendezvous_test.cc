#include "worker/worker_rendezvous.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace distflow {
namespace {

WorkerRendezvous Local() {
  return WorkerRendezvous("/job:ps/replica:0/task:0",
                          [](const std::string&, int64_t, const std::string&, CancellationManager*,
                             Rendezvous::DoneCallback done) { done(absl::UnavailableError("no peers"), Tensor()); });
}

TEST(WorkerRendezvous, SendThenRecvAndRecvThenSend) {
  WorkerRendezvous r = Local();
  ASSERT_TRUE(r.Send(1, "a", Tensor::Scalar<float>(2)).ok());
  float got = 0;
  r.RecvLocalAsync(1, "a", nullptr, [&](const absl::Status& s, const Tensor& t) {
    ASSERT_TRUE(s.ok());
    got = t.scalar<float>();
  });
  EXPECT_EQ(got, 2);
  bool called = false;
  r.RecvLocalAsync(2, "b", nullptr, [&](const absl::Status& s, const Tensor& t) { called = s.ok(); });
  EXPECT_FALSE(called);
  ASSERT_TRUE(r.Send(2, "b", Tensor::Scalar<float>(3)).ok());
  EXPECT_TRUE(called);
  EXPECT_EQ(r.NumPendingForTest(), 0u);
}

// A receive for a step that will never run here (its client died) must not
// outlive the task: AbortAll fails it, and every later one at once.
TEST(WorkerRendezvous, AbortAllFailsEveryWaiterNowAndLater) {
  WorkerRendezvous r = Local();
  std::vector<absl::Status> results;
  for (int step = 1; step <= 3; ++step) {
    r.RecvLocalAsync(step, "never_sent", nullptr, [&](const absl::Status& s, const Tensor&) { results.push_back(s); });
  }
  EXPECT_TRUE(results.empty());
  EXPECT_EQ(r.NumPendingForTest(), 3u);
  r.AbortAll(absl::CancelledError("task stopping"));
  ASSERT_EQ(results.size(), 3u);
  for (const absl::Status& s : results) EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(r.NumPendingForTest(), 0u);
  r.RecvLocalAsync(9, "late", nullptr, [&](const absl::Status& s, const Tensor&) { results.push_back(s); });
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results.back().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(r.Send(9, "late", Tensor::Scalar<float>(1)).code(), absl::StatusCode::kCancelled);
}

// A bundle's receives: the first asks the peer once for every key, the
// others wait for that one answer, whichever order they come in.
TEST(WorkerRendezvous, ABundleIsFetchedOnceForAllItsReceives) {
  const std::vector<std::string> keys = {"a;0;ps;w", "b;0;ps;w", "c;0;ps;w"};
  std::vector<std::vector<std::string>> asked;
  std::function<void(absl::Status, std::vector<Tensor>)> answer;
  WorkerRendezvous r(
      "/job:worker/replica:0/task:0",
      [](const std::string&, int64_t, const std::string&, CancellationManager*, Rendezvous::DoneCallback done) {
        done(absl::UnavailableError("a single receive was not expected"), Tensor());
      },
      [&](const std::string& task, int64_t, const std::vector<std::string>& ks, CancellationManager*,
          std::function<void(absl::Status, std::vector<Tensor>)> done) {
        EXPECT_EQ(task, "/job:ps/replica:0/task:0");
        asked.push_back(ks);
        answer = std::move(done);
      });
  std::vector<float> got(3, 0);
  auto recv = [&](int i) {
    r.RecvBundleAsync(7, keys[static_cast<size_t>(i)], keys, "/job:ps/replica:0/task:0", nullptr,
                      [&got, i](const absl::Status& s, const Tensor& t) {
                        ASSERT_TRUE(s.ok()) << s;
                        got[static_cast<size_t>(i)] = t.scalar<float>();
                      });
  };
  recv(1);
  recv(0);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], keys);
  answer(absl::OkStatus(), {Tensor::Scalar<float>(1), Tensor::Scalar<float>(2), Tensor::Scalar<float>(3)});
  EXPECT_EQ(got, (std::vector<float>{1, 2, 0}));
  recv(2);  // after the answer: takes what it left, asks nothing
  EXPECT_EQ(asked.size(), 1u);
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(r.NumPendingForTest(), 0u);
}

// A failed fetch fails the step: the receives waiting now and those to come.
TEST(WorkerRendezvous, AFailedBundleFailsEveryReceiveOfItsStep) {
  const std::vector<std::string> keys = {"a;0;ps;w", "b;0;ps;w"};
  int asked = 0;
  WorkerRendezvous r(
      "/job:worker/replica:0/task:0",
      [](const std::string&, int64_t, const std::string&, CancellationManager*, Rendezvous::DoneCallback done) {
        done(absl::UnavailableError("a single receive was not expected"), Tensor());
      },
      [&](const std::string&, int64_t, const std::vector<std::string>&, CancellationManager*,
          std::function<void(absl::Status, std::vector<Tensor>)> done) {
        ++asked;
        done(absl::UnavailableError("ps:0 is gone"), {});
      });
  std::vector<absl::Status> results;
  for (const std::string& k : keys) {
    r.RecvBundleAsync(3, k, keys, "/job:ps/replica:0/task:0", nullptr,
                      [&](const absl::Status& s, const Tensor&) { results.push_back(s); });
  }
  EXPECT_EQ(asked, 1);
  ASSERT_EQ(results.size(), 2u);
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("ps:0 is gone"), std::string::npos) << s;
  }
  EXPECT_EQ(r.NumPendingForTest(), 0u);
}

// A bundle fetch cancelled because this task's own step failed (a bad id in
// its Gather) aborts the step with that failure, not with the cancellation:
// a peer that receives what the step sends is told the root cause.
TEST(WorkerRendezvous, ABundleCancelledByItsOwnStepsFailureAbortsTheStepWithThatFailure) {
  const std::vector<std::string> keys = {"a;0;w;ps", "b;0;w;ps"};
  std::function<void(absl::Status, std::vector<Tensor>)> answer;
  WorkerRendezvous r(
      "/job:ps/replica:0/task:1",
      [](const std::string&, int64_t, const std::string&, CancellationManager*, Rendezvous::DoneCallback done) {
        done(absl::UnavailableError("a single receive was not expected"), Tensor());
      },
      [&](const std::string&, int64_t, const std::vector<std::string>&, CancellationManager*,
          std::function<void(absl::Status, std::vector<Tensor>)> done) { answer = std::move(done); });
  CancellationManager cm;
  std::vector<absl::Status> first;
  r.RecvBundleAsync(7, keys[0], keys, "/job:worker/replica:0/task:0", &cm,
                    [&](const absl::Status& s, const Tensor&) { first.push_back(s); });
  ASSERT_TRUE(answer);
  cm.StartCancel(absl::InvalidArgumentError("Node 'Gather_1' (GatherV2): indices[0] = 19999 is not in [0, 10000)"));
  answer(absl::CancelledError("RecvTensor of a bundle of 2 tensors: CANCELLED"), {});
  ASSERT_EQ(first.size(), 1u);
  absl::Status peer;
  r.RecvLocalAsync(7, "rows;0;ps;w", nullptr, [&](const absl::Status& s, const Tensor&) { peer = s; });
  EXPECT_EQ(peer.code(), absl::StatusCode::kInvalidArgument) << peer;
  EXPECT_NE(peer.message().find("indices[0] = 19999"), std::string::npos) << peer;
  EXPECT_EQ(r.NumPendingForTest(), 0u);
}

// A step aborted while its bundle is being fetched: the other receives fail
// at once, but the first one (which started the fetch) ends only when the
// fetch's callback has run, so the step, and the cancellation manager the
// fetch still holds, cannot end before the fetch does.
TEST(WorkerRendezvous, AnAbortedStepsFirstBundleReceiveWaitsForTheFetchToEnd) {
  const std::vector<std::string> keys = {"a;0;ps;w", "b;0;ps;w"};
  std::function<void(absl::Status, std::vector<Tensor>)> answer;
  WorkerRendezvous r(
      "/job:worker/replica:0/task:0",
      [](const std::string&, int64_t, const std::string&, CancellationManager*, Rendezvous::DoneCallback done) {
        done(absl::UnavailableError("a single receive was not expected"), Tensor());
      },
      [&](const std::string&, int64_t, const std::vector<std::string>&, CancellationManager*,
          std::function<void(absl::Status, std::vector<Tensor>)> done) { answer = std::move(done); });
  std::vector<absl::Status> first, second;
  r.RecvBundleAsync(5, keys[0], keys, "/job:ps/replica:0/task:0", nullptr,
                    [&](const absl::Status& s, const Tensor&) { first.push_back(s); });
  r.RecvBundleAsync(5, keys[1], keys, "/job:ps/replica:0/task:0", nullptr,
                    [&](const absl::Status& s, const Tensor&) { second.push_back(s); });
  ASSERT_TRUE(answer != nullptr);
  r.AbortStep(5, absl::UnavailableError("the master died"));
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(first.empty()) << "the first receive ended while its fetch was in flight";
  answer(absl::CancelledError("the call was cancelled"), {});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].code(), absl::StatusCode::kUnavailable) << first[0];
  EXPECT_NE(first[0].message().find("the master died"), std::string::npos) << first[0];
  EXPECT_EQ(r.NumPendingForTest(), 0u);
}

}  // namespace
}  // namespace distflow
