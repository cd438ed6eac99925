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
      [&](const std::string& task, int64_t, const std::vector<std::string>& ks, std::vector<PushedTensor>,
          CancellationManager*, std::function<void(absl::Status, std::vector<Tensor>)> done) {
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
      [&](const std::string&, int64_t, const std::vector<std::string>&, std::vector<PushedTensor>, CancellationManager*,
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
      [&](const std::string&, int64_t, const std::vector<std::string>&, std::vector<PushedTensor>, CancellationManager*,
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
      [&](const std::string&, int64_t, const std::vector<std::string>&, std::vector<PushedTensor>, CancellationManager*,
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

// A bundle whose fetch pushes: the fetch leaves only once every pushed tensor
// has been sent here, carries them (they leave this table), and the peer's
// pushed receive waits for the push without a call.
TEST(WorkerRendezvous, APushingBundleFetchCarriesThePushedTensorsOnceSent) {
  const std::vector<std::string> keys = {"grad;0;w;ps"};
  const std::vector<std::string> push = {"rows;0;ps;w", "weights;0;ps;w"};
  std::vector<std::vector<PushedTensor>> carried;
  std::function<void(absl::Status, std::vector<Tensor>)> answer;
  WorkerRendezvous r(
      "/job:ps/replica:0/task:0",
      [](const std::string&, int64_t, const std::string&, CancellationManager*, Rendezvous::DoneCallback done) {
        done(absl::UnavailableError("a single receive was not expected"), Tensor());
      },
      [&](const std::string& task, int64_t, const std::vector<std::string>& ks, std::vector<PushedTensor> pushed,
          CancellationManager*, std::function<void(absl::Status, std::vector<Tensor>)> done) {
        EXPECT_EQ(task, "/job:worker/replica:0/task:0");
        EXPECT_EQ(ks, keys);
        carried.push_back(std::move(pushed));
        answer = std::move(done);
      });
  float got = 0;
  r.RecvBundlePushingAsync(4, keys[0], keys, push, "/job:worker/replica:0/task:0", nullptr,
                           [&](const absl::Status& s, const Tensor& t) {
                             ASSERT_TRUE(s.ok()) << s;
                             got = t.scalar<float>();
                           });
  EXPECT_TRUE(carried.empty()) << "the fetch left before what it pushes was sent";
  ASSERT_TRUE(r.Send(4, push[1], Tensor::Scalar<float>(20)).ok());
  EXPECT_TRUE(carried.empty());
  ASSERT_TRUE(r.Send(4, push[0], Tensor::Scalar<float>(10)).ok());
  ASSERT_EQ(carried.size(), 1u);
  ASSERT_EQ(carried[0].size(), 2u);
  EXPECT_EQ(carried[0][0].key, push[0]);
  EXPECT_EQ(carried[0][0].value.scalar<float>(), 10);
  EXPECT_EQ(carried[0][1].key, push[1]);
  EXPECT_EQ(carried[0][1].value.scalar<float>(), 20);
  answer(absl::OkStatus(), {Tensor::Scalar<float>(3)});
  EXPECT_EQ(got, 3);
  EXPECT_EQ(r.NumPendingForTest(), 0u);

  // The receiving side: a pushed receive asks nothing and is listed as
  // waiting for its pusher until the push arrives.
  WorkerRendezvous w = Local();
  float pushed = 0;
  w.RecvPushedAsync(4, push[0], "/job:ps/replica:0/task:0", nullptr, [&](const absl::Status& s, const Tensor& t) {
    ASSERT_TRUE(s.ok()) << s;
    pushed = t.scalar<float>();
  });
  std::vector<std::string> waiting = w.Waiting(4);
  ASSERT_FALSE(waiting.empty());
  EXPECT_NE(waiting.back().find("pushed by /job:ps/replica:0/task:0"), std::string::npos) << waiting.back();
  ASSERT_TRUE(w.Send(4, push[0], Tensor::Scalar<float>(10)).ok());
  EXPECT_EQ(pushed, 10);
  EXPECT_TRUE(w.Waiting(4).empty());
}

// A step aborted while the fetch waits for what it pushes: no call is made,
// and every receive of the bundle fails with the abort.
TEST(WorkerRendezvous, AnAbortedStepsPushingFetchIsNeverMade) {
  const std::vector<std::string> keys = {"grad;0;w;ps", "token;0;w;ps"};
  int asked = 0;
  WorkerRendezvous r(
      "/job:ps/replica:0/task:0",
      [](const std::string&, int64_t, const std::string&, CancellationManager*, Rendezvous::DoneCallback done) {
        done(absl::UnavailableError("a single receive was not expected"), Tensor());
      },
      [&](const std::string&, int64_t, const std::vector<std::string>&, std::vector<PushedTensor>, CancellationManager*,
          std::function<void(absl::Status, std::vector<Tensor>)> done) { ++asked; });
  std::vector<absl::Status> results;
  for (const std::string& k : keys) {
    r.RecvBundlePushingAsync(6, k, keys, {"rows;0;ps;w"}, "/job:worker/replica:0/task:0", nullptr,
                             [&](const absl::Status& s, const Tensor&) { results.push_back(s); });
  }
  EXPECT_TRUE(results.empty());
  r.AbortStep(6, absl::UnavailableError("/job:worker/replica:0/task:0 died"));
  EXPECT_EQ(asked, 0);
  ASSERT_EQ(results.size(), 2u);
  for (const absl::Status& s : results) EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(r.NumPendingForTest(), 0u);
}

// A pushed receive goes to the PushedRecvFn (the worker answers a
// prefetched read there, worker.cc), which may still wait for the push in
// the table; the push then reaches that wait.
TEST(WorkerRendezvous, APushedReceiveGoesToItsHookWhichMayWaitForThePush) {
  WorkerRendezvous* self = nullptr;
  std::vector<std::string> hooked;
  float waited = 0;
  WorkerRendezvous r(
      "/job:worker/replica:0/task:0",
      [](const std::string&, int64_t, const std::string&, CancellationManager*, Rendezvous::DoneCallback done) {
        done(absl::UnavailableError("a single receive was not expected"), Tensor());
      },
      nullptr,
      [&](const std::string& task, int64_t step, const std::string& key, CancellationManager* cm,
          Rendezvous::DoneCallback done) {
        hooked.push_back(key);
        if (key == "old") {
          done(absl::OkStatus(), Tensor::Scalar<float>(1));  // answered by the hook itself
          self->WaitForPush(step, key, task, cm, [&](const absl::Status& s, const Tensor& t) {
            ASSERT_TRUE(s.ok()) << s;
            waited = t.scalar<float>();
          });
          return;
        }
        self->WaitForPush(step, key, task, cm, std::move(done));
      });
  self = &r;
  float got_old = 0, got_new = 0;
  r.RecvPushedAsync(3, "old", "/job:ps/replica:0/task:0", nullptr,
                    [&](const absl::Status& s, const Tensor& t) { got_old = s.ok() ? t.scalar<float>() : -1; });
  r.RecvPushedAsync(3, "new", "/job:ps/replica:0/task:0", nullptr,
                    [&](const absl::Status& s, const Tensor& t) { got_new = s.ok() ? t.scalar<float>() : -1; });
  EXPECT_EQ(hooked, (std::vector<std::string>{"old", "new"}));
  EXPECT_EQ(got_old, 1) << "answered before the push";
  EXPECT_EQ(got_new, 0) << "waits for the push";
  int pushed_by = 0;
  for (const std::string& w : r.Waiting(3)) pushed_by += w.find("pushed by /job:ps") != std::string::npos ? 1 : 0;
  EXPECT_EQ(pushed_by, 2) << "both waits are listed as pushed by the ps";
  ASSERT_TRUE(r.Send(3, "old", Tensor::Scalar<float>(2)).ok());
  ASSERT_TRUE(r.Send(3, "new", Tensor::Scalar<float>(3)).ok());
  EXPECT_EQ(waited, 2) << "the hook's own wait got the push";
  EXPECT_EQ(got_new, 3);
  EXPECT_EQ(r.NumPendingForTest(), 0u);
}

// Without a bundle fetch to carry them, the pushed tensors could never
// reach the peer: the receive fails at once, naming them.
TEST(WorkerRendezvous, APushWithoutABundleFetchFailsNamingIt) {
  WorkerRendezvous r = Local();
  absl::Status got;
  r.RecvBundlePushingAsync(2, "grad;0;w;ps", {"grad;0;w;ps"}, {"rows;0;ps;w"}, "/job:worker/replica:0/task:0", nullptr,
                           [&](const absl::Status& s, const Tensor&) { got = s; });
  EXPECT_EQ(got.code(), absl::StatusCode::kFailedPrecondition) << got;
  EXPECT_NE(got.message().find("rows;0;ps;w"), std::string::npos) << got;
}

}  // namespace
}  // namespace distflow
