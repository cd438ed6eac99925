// The transport seam on its own: CallOptions' cancellation hook, the blocking
// forms of WorkerInterface, and WorkerCache's choice of LocalWorker or
// GrpcRemoteWorker per task.
#include "rpc/worker_interface.h"

#include <string>

#include "gtest/gtest.h"
#include "rpc/grpc_remote_worker.h"
#include "rpc/worker_cache.h"
#include "worker/local_worker.h"
#include "worker/worker.h"

namespace distflow {
namespace {

TEST(CallOptions, CancelRunsTheInstalledCallbackOnce) {
  CallOptions opts;
  int cancels = 0;
  opts.SetCancelCallback([&] { ++cancels; });
  opts.StartCancel();
  opts.StartCancel();
  EXPECT_EQ(cancels, 1);
}

TEST(CallOptions, ACancelBeforeTheCallStartsCancelsItWhenTheTransportInstallsItsHook) {
  CallOptions opts;
  int cancels = 0;
  opts.StartCancel();
  opts.SetCancelCallback([&] { ++cancels; });
  EXPECT_EQ(cancels, 1);
}

TEST(CallOptions, AFinishedCallIsNotCancelled) {
  CallOptions opts;
  int cancels = 0;
  opts.SetCancelCallback([&] { ++cancels; });
  opts.ClearCancelCallback();
  opts.StartCancel();
  EXPECT_EQ(cancels, 0);
}

// Answers every call at once with `status`, on the caller's thread.
class AnsweringWorker final : public WorkerInterface {
 public:
  explicit AnsweringWorker(absl::Status status) : status_(std::move(status)) {}
  void GetStatusAsync(CallOptions*, proto::GetStatusResponse* resp, StatusCallback done) override {
    resp->set_task_name("answering");
    done(status_);
  }
  void RegisterGraphAsync(CallOptions*, const proto::RegisterGraphRequest*, proto::RegisterGraphResponse* resp,
                          StatusCallback done) override {
    resp->set_graph_handle("g");
    done(status_);
  }
  void DeregisterGraphAsync(const proto::DeregisterGraphRequest*, StatusCallback done) override { done(status_); }
  void RunGraphAsync(CallOptions*, RunGraphCall*, StatusCallback done) override { done(status_); }
  void CleanupGraphAsync(const proto::CleanupGraphRequest*, StatusCallback done) override { done(status_); }
  void CleanupAllAsync(CallOptions*, const proto::CleanupAllRequest*, StatusCallback done) override { done(status_); }
  void ShutdownAsync(CallOptions*, const proto::ShutdownRequest*, StatusCallback done) override { done(status_); }
  void RecvTensorAsync(int64_t, const std::string&, CancellationManager*, Rendezvous::DoneCallback done) override {
    done(status_, Tensor());
  }

 private:
  const absl::Status status_;
};

TEST(WorkerInterface, BlockingFormsReturnWhatTheCallbackGot) {
  AnsweringWorker ok(absl::OkStatus());
  proto::RegisterGraphResponse registered;
  EXPECT_TRUE(ok.RegisterGraph(proto::RegisterGraphRequest(), &registered).ok());
  EXPECT_EQ(registered.graph_handle(), "g");
  AnsweringWorker down(absl::UnavailableError("down"));
  proto::GetStatusResponse status;
  EXPECT_EQ(down.GetStatus(&status).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(down.CleanupGraph(proto::CleanupGraphRequest()).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(down.DeregisterGraph(proto::DeregisterGraphRequest()).code(), absl::StatusCode::kUnavailable);
}

TEST(WorkerCache, HandsOutTheInProcessWorkerForItsOwnTaskAndGrpcForTheOthers) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse("worker|127.0.0.1:1;127.0.0.1:2");
  ASSERT_TRUE(spec.ok()) << spec.status();
  WorkerCache cache(*spec, "");
  const std::string own = "/job:worker/replica:0/task:0", other = "/job:worker/replica:0/task:1";
  Worker worker(own, &cache);
  cache.SetLocalWorker(own, NewLocalWorker(&worker));
  absl::StatusOr<std::shared_ptr<WorkerInterface>> local = cache.GetWorker(own);
  absl::StatusOr<std::shared_ptr<WorkerInterface>> remote = cache.GetWorker(other);
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_NE(dynamic_cast<LocalWorker*>(local->get()), nullptr);
  EXPECT_NE(dynamic_cast<GrpcRemoteWorker*>(remote->get()), nullptr);
  // In memory: no server listens at 127.0.0.1:1, yet the own task answers.
  proto::GetStatusResponse status;
  ASSERT_TRUE((*local)->GetStatus(&status).ok());
  EXPECT_EQ(status.task_name(), own);

  cache.SetLocalWorker(own, nullptr);
  absl::StatusOr<std::shared_ptr<WorkerInterface>> after = cache.GetWorker(own);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(dynamic_cast<GrpcRemoteWorker*>(after->get()), nullptr) << "without a local worker the task is remote";
}

}  // namespace
}  // namespace distflow
