// What the master's tests share (master_test.cc: steps; master_session_test.cc:
// sessions; master_tasks_test.cc: tasks that hang, are down or are not up):
// MasterTest, a fixture that starts a real cluster (one ps, two workers) on
// loopback ports in this process and a Master under test over its own
// WorkerCache, with worker 0 as its in-memory local worker; graph builders
// that place nodes and hold a step; and a step started on a master whose
// answer a test waits for, bounded.
//
// Steps that must stay running wait in a SyncBarrierWait op whose own timeout
// (kHoldMs) is far beyond the bound the test waits for an answer (kBound): an
// answer within the bound means the step was cancelled, not that it ran out.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/ports.h"
#include "base/status_macros.h"
#include "base/wait_until.h"
#include "distflow/server.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "master/master.h"
#include "proto/master.pb.h"
#include "rpc/worker_cache.h"
#include "runtime/graph_def_builder_for_test.h"
#include "server/grpc_server.h"
#include "tensor/tensor_codec.h"
#include "tensor/tensor_testutil.h"

namespace distflow::master_test {

using test::AddConst;
using test::AddNode;
using test::AddPlaceholder;
using test::AddVariable;

inline constexpr char kPs[] = "/job:ps/replica:0/task:0";
inline constexpr char kWorker0[] = "/job:worker/replica:0/task:0";  // the master's own task
inline constexpr char kWorker1[] = "/job:worker/replica:0/task:1";
inline constexpr absl::Duration kBound = absl::Seconds(60);
inline constexpr int64_t kHoldMs = 300000;

inline std::string Cpu(const std::string& task) { return task + "/device:CPU:0"; }

inline proto::NodeDef* On(const std::string& device, proto::NodeDef* n) {
  n->set_device(device);
  return n;
}

// Adds a step barrier on `device` that holds a step: `name` (SyncBarrierWait)
// answers once the barrier's step differs from the int64 fed to `name`_at.
// Until `name`_init (SyncBarrierRelease) has set the barrier's step to 0 it
// holds whatever is fed; after that, feeding 1 passes (answering 0) and
// feeding 0 holds. A held step ends only when it is cancelled.
inline void AddBarrier(proto::GraphDef* g, const std::string& name, const std::string& device) {
  On(device, AddPlaceholder(g, name + "_at", DT_INT64, PartialShape::Scalar()));
  On(device, AddConst(g, name + "_zero", Tensor::Scalar<int64_t>(0)));
  SetAttrString(On(device, AddNode(g, name + "_init", "SyncBarrierRelease", {name + "_zero"})), "shared_name", name);
  proto::NodeDef* wait = On(device, AddNode(g, name, "SyncBarrierWait", {name + "_at"}));
  SetAttrString(wait, "shared_name", name);
  SetAttrInt(wait, "replica_id", 0);
  SetAttrInt(wait, "replicas_to_aggregate", 1);
  SetAttrInt(wait, "total_num_replicas", 1);
  SetAttrInt(wait, "timeout_ms", kHoldMs);
}

inline proto::RunStepRequest Request(const std::string& handle, const std::vector<std::string>& fetches,
                                     const std::vector<std::string>& targets = {}) {
  proto::RunStepRequest req;
  req.set_session_handle(handle);
  for (const std::string& f : fetches) req.add_fetch(f);
  for (const std::string& t : targets) req.add_target(t);
  return req;
}

inline void Feed(proto::RunStepRequest* req, const std::string& name, const Tensor& value) {
  proto::NamedTensor* nt = req->add_feed();
  nt->set_name(name);
  EncodeTensor(value, nt->mutable_tensor());
}

inline Tensor Fetched(const proto::RunStepResponse& resp, int i) {
  if (i >= resp.tensor_size()) {
    ADD_FAILURE() << "the answer has " << resp.tensor_size() << " tensors, not " << i + 1;
    return Tensor();
  }
  absl::StatusOr<Tensor> t = DecodeTensor(resp.tensor(i).tensor());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

// A step started on a master; `status` and `resp` are its answer once `done`
// is notified. The master's callback holds it, so a test that stops waiting
// leaves nothing dangling.
struct StepCall {
  proto::RunStepRequest req;
  proto::RunStepResponse resp;
  absl::Status status;
  std::atomic<int> answers{0};
  absl::Notification done;
};

inline std::shared_ptr<StepCall> StartStep(Master* master, proto::RunStepRequest req) {
  auto call = std::make_shared<StepCall>();
  call->req = std::move(req);
  master->RunStepAsync(&call->req, &call->resp, [call](absl::Status s) {
    if (call->answers.fetch_add(1) > 0) return;  // a second answer: Answered() reports it
    call->status = std::move(s);
    call->done.Notify();
  });
  return call;
}

// Waits (bounded) until `worker` runs no partition: nothing tells when a
// cancelled partition has unwound, so this polls.
inline ::testing::AssertionResult BecomesIdle(Worker* worker, absl::Duration bound = kBound) {
  if (WaitUntil([&] { return worker->running_partitions() == 0; }, bound)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << worker->task_name() << " still runs " << worker->running_partitions()
                                       << " partition(s) after " << bound;
}

// The step answered, once, within `bound`.
inline ::testing::AssertionResult Answered(StepCall& call, absl::Duration bound = kBound) {
  if (!call.done.WaitForNotificationWithTimeout(bound)) {
    return ::testing::AssertionFailure() << "the master did not answer within " << bound;
  }
  if (int n = call.answers.load(); n != 1) return ::testing::AssertionFailure() << "answered " << n << " times";
  return ::testing::AssertionSuccess();
}

class MasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 2);
    ASSERT_TRUE(spec.ok()) << spec.status();
    ServerOptions options;
    options.bulk_transfer = false;
    options.auth_token = "";
    options.heartbeat_timeout_ms = 0;  // tasks are declared dead by the tests, not by heartbeats
    options.worker.inter_op_threads = 2;
    options.worker.intra_op_threads = 1;
    absl::StatusOr<std::vector<std::unique_ptr<Server>>> servers = StartLocalCluster(*spec, options);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    // StartLocalCluster may have moved a task to another port: take the bound ones.
    for (const auto& s : servers_) {
      const std::string job = absl::StrContains(s->task_name(), "/job:ps/") ? "ps" : "worker";
      const int index = absl::EndsWith(s->task_name(), "task:1") ? 1 : 0;
      jobs_[job][index] = absl::StrCat("127.0.0.1:", s->port());
    }
    absl::StatusOr<ClusterSpec> bound = ClusterSpec::FromJobs(jobs_);
    ASSERT_TRUE(bound.ok()) << bound.status();
    workers_ = std::make_unique<WorkerCache>(*bound, "");
    master_ = std::make_unique<Master>(kWorker0, workers_.get(), WorkerOf(kWorker0));
  }

  void TearDown() override {
    master_.reset();  // closes its sessions while the workers still answer
    servers_.clear();
  }

  Worker* WorkerOf(const std::string& task) {
    for (const auto& s : servers_)
      if (s->task_name() == task) return s->impl()->worker();
    ADD_FAILURE() << "no server for " << task;
    return nullptr;
  }

  absl::StatusOr<std::string> CreateSession(Master* master, const proto::GraphDef& graph,
                                            proto::SessionConfig config = {}) {
    proto::CreateSessionRequest req;
    *req.mutable_graph_def() = graph;
    *req.mutable_config() = std::move(config);
    proto::CreateSessionResponse resp;
    RETURN_IF_ERROR(master->CreateSession(req, &resp));
    return resp.session_handle();
  }
  absl::StatusOr<std::string> CreateSession(const proto::GraphDef& graph, proto::SessionConfig config = {}) {
    return CreateSession(master_.get(), graph, std::move(config));
  }

  // Runs a step to its end (bounded): its answer, or its error.
  absl::StatusOr<proto::RunStepResponse> Run(proto::RunStepRequest req) {
    std::shared_ptr<StepCall> call = StartStep(master_.get(), std::move(req));
    if (::testing::AssertionResult answered = Answered(*call); !answered) {
      return absl::InternalError(answered.message());
    }
    if (!call->status.ok()) return call->status;
    return call->resp;
  }

  // The live tasks plus /job:straggler/task:0 at `address`, a free port
  // where nothing listens (until a test starts a server there).
  absl::StatusOr<ClusterSpec> WithStraggler(std::string* address) {
    ASSIGN_OR_RETURN(int port, PickUnusedTcpPort());
    *address = absl::StrCat("127.0.0.1:", port);
    ClusterSpec::JobMap jobs = jobs_;
    jobs["straggler"][0] = *address;
    return ClusterSpec::FromJobs(jobs);
  }

  ClusterSpec::JobMap jobs_;  // the live tasks, at their bound ports
  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<WorkerCache> workers_;
  std::unique_ptr<Master> master_;
};

}  // namespace distflow::master_test
