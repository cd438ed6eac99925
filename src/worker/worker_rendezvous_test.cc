#include "worker/worker_rendezvous.h"

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

}  // namespace
}  // namespace distflow
