// MasterSessionImpl: the MasterSession behind MasterSession::Create, shared
// by master_session.cc (graph, device discovery, plans, retried requests,
// Close) and master_step.cc (running one step on every partition). Internal
// to those two files. Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "graph/graph.h"
#include "master/master_session.h"
#include "placement/partition.h"
#include "placement/placement.h"
#include "rpc/worker_interface.h"
#include "tensor/tensor_codec.h"

namespace distflow {

class MasterSessionImpl final : public MasterSession {
 public:
  MasterSessionImpl(std::string handle, proto::SessionConfig config, WorkerCacheInterface* workers,
                    std::string local_task, BulkServer* bulk, const absl::Notification* closing)
      : handle_(std::move(handle)),
        config_(std::move(config)),
        workers_(workers),
        local_task_(std::move(local_task)),
        bulk_(bulk),
        closing_(closing) {}

  absl::Status Init(const proto::GraphDef& graph) override;

  absl::Status Extend(const proto::GraphDef& graph) override;

  // Runs one step without parking the calling thread (an RPC thread): `done`
  // is called once, from whichever thread finishes the step. `req` and `resp`
  // must stay alive until then. Steps whose plan is not built yet go to
  // `pool` (registering partitions makes blocking RPCs).
  void RunAsync(const proto::RunStepRequest* req, proto::RunStepResponse* resp, ThreadPool* pool,
                std::function<void(absl::Status)> done) override;

  void Close() override;
  void AbortStepsOnTask(const std::string& task, const absl::Status& why) override;
  int LogStalledSteps(absl::Duration every) override;

 private:
  // The session's clock: the worker cache's (a test's FakeClockEnv), which
  // the stalled-step log measures with.
  absl::Time Now() const;

  struct PartitionPlan {
    std::string task;
    std::string handle;
    Partition partition;
    bool only_sends = false;  // OnlyFeedsOtherPartitions: the step need not wait for its answer
  };
  struct Plan {
    std::map<std::string, PartitionPlan> parts;
  };
  // The first attempt of a request id; retries wait on it.
  struct Pending {
    absl::Mutex mu;
    bool finished ABSL_GUARDED_BY(mu) = false;
    absl::Status status;              // written under `mu` before `finished`, then immutable
    proto::RunStepResponse response;  // likewise
    std::vector<std::function<void()>> waiters ABSL_GUARDED_BY(mu);
  };

  // Cancelled, naming the session: a step that comes after Close.
  absl::Status ClosedError() const;
  // Waits for the cluster's tasks (those that pass the device filters) and
  // learns their devices.
  absl::Status Discover();
  // The plan of a step signature: built and registered on first use. No
  // lock is held across the RegisterGraph calls (Close, the steps of other
  // signatures and the stall logger never wait behind them); two steps of a
  // new signature may both register, and the second keeps the first's plan.
  absl::StatusOr<std::shared_ptr<Plan>> GetPlan(const std::vector<TensorId>& feeds,
                                                const std::vector<TensorId>& fetches,
                                                const std::vector<std::string>& targets, const std::string& key);
  // Registers every partition with its task's worker, all at once, each call
  // bounded (the step timeout, else the transport's default) and cancelled
  // by Close or by its task's death (AbortStepsOnTask). On failure the
  // partitions that did register are deregistered.
  absl::StatusOr<std::shared_ptr<Plan>> RegisterPartitions(std::map<std::string, Partition> parts);
  // Deregisters a plan's partitions, all at once (each call bounded).
  void DeregisterPlan(const Plan& plan);

  // A RegisterGraph call in flight: what Close and a task's death cancel and
  // the stall logger reports.
  struct Registration {
    explicit Registration(absl::Time now) : started(now), logged(now) {}
    std::string task;
    CallOptions opts;
    const absl::Time started;
    absl::Mutex mu;
    absl::Time logged ABSL_GUARDED_BY(mu);
    absl::Status aborted ABSL_GUARDED_BY(mu);  // why it was cancelled (else OK)
    // Cancels the call; true the first time (a later abort changes nothing).
    bool Abort(const absl::Status& why) {
      {
        absl::MutexLock lock(&mu);
        if (!aborted.ok()) return false;
        aborted = why;
      }
      opts.StartCancel();
      return true;
    }
  };

  // One step in flight: a call per partition, and what their completions need.
  struct StepState {
    struct Call {
      std::string task;
      std::shared_ptr<WorkerInterface> worker;
      bool only_sends = false;
      bool returned = false;  // under StepState::mu
      CallOptions opts;       // AbortStep cancels the call through it
      RunGraphCall run;       // the partition's feeds and, once it returns, fetches
    };
    int64_t step_id = 0;
    absl::Time started;  // on the session's clock (Now())
    absl::Time logged;   // last stalled-step log, under `mu`
    std::shared_ptr<Plan> plan;
    std::vector<std::unique_ptr<Call>> calls;
    const proto::RunStepRequest* req = nullptr;
    proto::RunStepResponse* resp = nullptr;
    std::vector<std::string> fetch_keys;                           // canonical, in request order
    std::map<std::string, const proto::TensorProto*> feed_values;  // canonical name -> in `req`
    std::map<std::string, Tensor> bulk_feeds;                      // feeds whose bytes the client put on our bulk port

    // A feed as a tensor (a copy out of the request, or the bulk bytes).
    absl::StatusOr<Tensor> FeedTensor(const std::string& name) const {
      if (auto b = bulk_feeds.find(name); b != bulk_feeds.end()) return b->second;
      return DecodeTensor(*feed_values.at(name));
    }
    std::function<void(absl::Status)> done;
    ThreadPool* pool = nullptr;
    absl::Mutex mu;
    // Partitions a step that succeeds waits for: all but those that only
    // send (their consumers finishing implies they are done; their errors
    // still abort). A step that fails waits for every call, and for its
    // abort to have reached every task (AbortStep).
    int remaining ABSL_GUARDED_BY(mu) = 0;
    int returned ABSL_GUARDED_BY(mu) = 0;  // calls that have returned
    bool answered ABSL_GUARDED_BY(mu) = false;
    // Every call until its completion has run, and an abort until it ends.
    int unreported ABSL_GUARDED_BY(mu) = 0;
    absl::Status first_error ABSL_GUARDED_BY(mu);
    bool aborted ABSL_GUARDED_BY(mu) = false;
    bool told ABSL_GUARDED_BY(mu) = false;  // the abort has reached every task it could
  };

  // master_step.cc
  void RunOnceAsync(const proto::RunStepRequest* req, proto::RunStepResponse* resp, ThreadPool* pool,
                    std::function<void(absl::Status)> done);
  void StartStep(const std::shared_ptr<StepState>& st);
  // A partition has returned. The first failure aborts the step on every task
  // (failing waiting transfers and cancelling what runs, so nothing is left
  // blocked). A step that succeeds reports once every partition but those
  // that only send has returned; one that fails, once every partition has
  // returned and every task has been told to abort it, so that the next
  // step never runs beside what is left of this one (a partition that only
  // sends is not done when its consumers were aborted before receiving).
  void PartitionDone(const std::shared_ptr<StepState>& st, StepState::Call* c, const absl::Status& result);
  // Marks the step aborted and counts the abort as unreported until it
  // ends; false if it was aborted or answered already. True: AbortStep
  // must follow.
  static bool MarkAbortedLocked(StepState& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu);
  // Tells every task but `skip` (a dead task: the call would only wait) to
  // abort the step, all at once; as each task answers (or its 5 s cleanup
  // deadline passes) its RunGraph calls are cancelled, and `skip`'s at once;
  // then, if `counted` (MarkAbortedLocked said so), AbortDone.
  void AbortStep(const std::shared_ptr<StepState>& st, const absl::Status& why, const std::string& skip = "",
                 bool counted = true);
  // The abort has reached every task: the step may report.
  void AbortDone(const std::shared_ptr<StepState>& st);
  // Whether the step may report now (and then it is answered).
  static bool TakeAnswerLocked(StepState& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(st.mu);
  // A call's completion, or an abort, has ended: the last one ends the step's activity.
  void Reported(const std::shared_ptr<StepState>& st);
  // A fetched tensor we hold in memory: large ones go back over the bulk port
  // if the client accepts that, the rest inside the answer.
  void SetFetch(const std::shared_ptr<StepState>& st, const std::string& name, const Tensor& t,
                proto::NamedTensor* out);
  // Every partition the answer waits for has returned.
  void FinishStep(const std::shared_ptr<StepState>& st);
  void AnswerStep(const std::shared_ptr<StepState>& st);
  // On Close (and so on server shutdown): refuses new steps, gives the
  // registrations in flight 2 s to end, cancels those still waiting, then
  // cancels the steps still running
  // and waits (up to 30 s) until every partition call has reported, so no
  // completion runs after the master, its pool or the local worker are gone.
  void CancelActiveSteps();

  absl::Mutex active_mu_;
  absl::flat_hash_map<StepState*, std::weak_ptr<StepState>> active_ ABSL_GUARDED_BY(active_mu_);
  absl::flat_hash_map<Registration*, std::shared_ptr<Registration>> registering_ ABSL_GUARDED_BY(active_mu_);
  // Set by Close before it cancels active_: a step that was still being
  // planned then is refused instead of starting on a closed session.
  bool refuse_steps_ ABSL_GUARDED_BY(active_mu_) = false;

  const std::string handle_;
  const proto::SessionConfig config_;
  WorkerCacheInterface* const workers_;
  const std::string local_task_;
  BulkServer* const bulk_;                   // may be null
  const absl::Notification* const closing_;  // the master is closing (may be null)
  std::vector<std::string> devices_;
  std::string default_device_;

  absl::Mutex mu_;
  std::unique_ptr<Graph> graph_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Plan>> plans_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // no more plans: Close has deregistered them
  std::map<uint64_t, std::shared_ptr<Pending>> requests_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> request_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
