#include "master/master_session.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "master/master_session_impl.h"
#include "placement/deferred_updates.h"
#include "rpc/worker_cache_interface.h"
#include "worker/local_worker.h"

namespace distflow {
namespace {

constexpr int64_t kDefaultWaitForTasksMs = 300000;

// Calls in flight; shared with their callbacks, so a late one never touches
// a waiter's frame.
class Countdown {
 public:
  explicit Countdown(size_t n) : left_(n) {}
  void Done() {
    absl::MutexLock lock(&mu_);
    --left_;
  }
  void Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Countdown::Finished));
  }

 private:
  bool Finished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return left_ == 0; }
  absl::Mutex mu_;
  size_t left_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

int64_t RandomStepId() {
  static std::mt19937_64 gen{std::random_device{}()};
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  return static_cast<int64_t>(gen() >> 1) | 1;
}

std::shared_ptr<MasterSession> MasterSession::Create(std::string handle, proto::SessionConfig config,
                                                     WorkerCacheInterface* workers, std::string local_task,
                                                     Worker* local_worker, BulkServer* bulk,
                                                     const absl::Notification* closing) {
  if (local_worker != nullptr) workers->SetLocalWorker(local_task, NewLocalWorker(local_worker));
  return std::make_shared<MasterSessionImpl>(std::move(handle), std::move(config), workers, std::move(local_task), bulk,
                                             closing);
}

absl::Status MasterSessionImpl::ClosedError() const {
  return absl::CancelledError(absl::StrCat("Session '", handle_, "' was closed before the step started"));
}

absl::Status MasterSessionImpl::Init(const proto::GraphDef& graph) {
  RETURN_IF_ERROR(Discover());
  return Extend(graph);
}

absl::Status MasterSessionImpl::Extend(const proto::GraphDef& graph) {
  absl::MutexLock lock(&mu_);
  if (graph_ == nullptr) graph_ = std::make_unique<Graph>();
  return graph_->Extend(graph);  // all or nothing
}

void MasterSessionImpl::RunAsync(const proto::RunStepRequest* req, proto::RunStepResponse* resp, ThreadPool* pool,
                                 std::function<void(absl::Status)> done) {
  if (req->request_id() == 0) {
    RunOnceAsync(req, resp, pool, std::move(done));
    return;
  }
  // Deduplicate retried requests: a retry waits for the first attempt's result.
  std::shared_ptr<Pending> pending;
  bool owner = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = requests_.find(req->request_id());
    if (it != requests_.end()) {
      pending = it->second;
    } else {
      pending = std::make_shared<Pending>();
      requests_[req->request_id()] = pending;
      request_order_.push_back(req->request_id());
      while (request_order_.size() > 256) {
        requests_.erase(request_order_.front());
        request_order_.pop_front();
      }
      owner = true;
    }
  }
  if (!owner) {
    {
      absl::MutexLock lock(&pending->mu);
      if (!pending->finished) {
        pending->waiters.push_back([resp, done, pending] {
          *resp = pending->response;
          done(pending->status);
        });
        return;
      }
    }
    *resp = pending->response;  // immutable once finished
    done(pending->status);
    return;
  }
  RunOnceAsync(req, resp, pool, [resp, pending, done = std::move(done)](absl::Status s) {
    std::vector<std::function<void()>> waiters;
    {
      absl::MutexLock lock(&pending->mu);
      pending->status = s;
      pending->response = *resp;
      pending->finished = true;
      waiters.swap(pending->waiters);
    }
    done(s);
    for (auto& w : waiters) w();
  });
}

void MasterSessionImpl::Close() {
  CancelActiveSteps();  // and the registrations in flight
  std::map<std::string, std::shared_ptr<Plan>> plans;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    plans.swap(plans_);
  }
  for (auto& [key, plan] : plans) DeregisterPlan(*plan);
}

absl::Status MasterSessionImpl::Discover() {
  std::vector<std::string> filters(config_.device_filters().begin(), config_.device_filters().end());
  int64_t wait_ms = config_.wait_for_tasks_ms() > 0 ? config_.wait_for_tasks_ms() : kDefaultWaitForTasksMs;
  ASSIGN_OR_RETURN(std::vector<std::string> devices,
                   workers_->WaitForDevices(filters, absl::Milliseconds(wait_ms), closing_));
  devices_ = std::move(devices);
  default_device_ = local_task_ + "/device:CPU:0";
  if (std::find(devices_.begin(), devices_.end(), default_device_) == devices_.end() && !devices_.empty()) {
    default_device_ = devices_.front();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<MasterSessionImpl::Plan>> MasterSessionImpl::GetPlan(
    const std::vector<TensorId>& feeds, const std::vector<TensorId>& fetches, const std::vector<std::string>& targets,
    const std::string& key) {
  std::map<std::string, Partition> parts;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return ClosedError();
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    if (graph_ == nullptr) return absl::FailedPreconditionError("Session has no graph");
    ASSIGN_OR_RETURN(std::vector<const Node*> nodes, PruneForStep(*graph_, feeds, fetches, targets));
    PlacementOptions po;
    po.devices = devices_;
    po.default_device = default_device_;
    po.allow_soft_placement = config_.allow_soft_placement();
    po.log_device_placement = config_.log_device_placement();
    ASSIGN_OR_RETURN(std::vector<std::string> placement, PlaceNodes(*graph_, nodes, po));
    PartitionOptions popts;
    popts.defer_updates = StepDefersUpdates(nodes);
    ASSIGN_OR_RETURN(auto partitioned, PartitionGraph(*graph_, nodes, placement, feeds, fetches, targets, popts));
    if (popts.defer_updates) {
      if (absl::Status s = MarkDeferredUpdates(*graph_, &partitioned); !s.ok()) {
        // Not an asynchronous update (a synchronous replica's step, say): the
        // step runs as if it had not asked.
        LOG(WARNING) << "Session " << handle_ << ": the step asks to defer its variable updates, but " << s.message()
                     << ". Its updates are not deferred: the step ends after them.";
        popts.defer_updates = false;
        ASSIGN_OR_RETURN(partitioned, PartitionGraph(*graph_, nodes, placement, feeds, fetches, targets, popts));
      }
    }
    parts = std::move(partitioned);
    // The step lets its workers prefetch the variables it updates (one step stale).
    if (StepAllowsStaleReads(nodes)) MarkPrefetchableReads(nodes, &parts);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan, RegisterPartitions(std::move(parts)));
  std::shared_ptr<Plan> unused;
  absl::Status closed;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      unused = std::move(plan);
      closed = ClosedError();
    } else if (auto [it, inserted] = plans_.emplace(key, plan); !inserted) {
      unused = std::move(plan);  // a step of the same signature registered first
      plan = it->second;
    }
  }
  if (unused != nullptr) DeregisterPlan(*unused);
  if (!closed.ok()) return closed;
  return plan;
}

absl::Time MasterSessionImpl::Now() const { return absl::FromUnixMicros(workers_->clock()->NowMicros()); }

absl::StatusOr<std::shared_ptr<MasterSessionImpl::Plan>> MasterSessionImpl::RegisterPartitions(
    std::map<std::string, Partition> parts) {
  struct Call {
    std::string device;
    Partition part;
    std::shared_ptr<WorkerInterface> worker;
    std::shared_ptr<Registration> reg;
    proto::RegisterGraphRequest req;
    proto::RegisterGraphResponse resp;
    absl::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (auto& [device, part] : parts) {
    auto c = std::make_unique<Call>();
    c->reg = std::make_shared<Registration>(Now());
    ASSIGN_OR_RETURN(c->worker, workers_->GetWorker(part.task));
    c->device = device;
    c->req.set_session_handle(handle_);
    *c->req.mutable_graph_def() = part.graph;
    c->req.set_defer_updates(part.defer_updates);
    c->part = std::move(part);
    c->reg->task = c->part.task;
    if (config_.operation_timeout_ms() > 0) c->reg->opts.SetTimeout(absl::Milliseconds(config_.operation_timeout_ms()));
    calls.push_back(std::move(c));
  }
  {
    absl::MutexLock lock(&active_mu_);
    if (refuse_steps_) return ClosedError();
    for (auto& c : calls) registering_.emplace(c->reg.get(), c->reg);
  }
  auto pending = std::make_shared<Countdown>(calls.size());
  for (auto& c : calls) {
    Call* raw = c.get();
    raw->worker->RegisterGraphAsync(&raw->reg->opts, &raw->req, &raw->resp, [raw, pending](absl::Status s) {
      raw->status = std::move(s);
      pending->Done();
    });
  }
  pending->Wait();  // every call is bounded by its deadline
  {
    absl::MutexLock lock(&active_mu_);
    for (auto& c : calls) registering_.erase(c->reg.get());
  }
  auto plan = std::make_shared<Plan>();
  absl::Status error;
  for (auto& c : calls) {
    absl::Status e = c->status;
    {
      absl::MutexLock lock(&c->reg->mu);
      if (!e.ok() && !c->reg->aborted.ok()) e = c->reg->aborted;  // the reason, not the cancellation
    }
    if (absl::IsDeadlineExceeded(e)) {
      // The task accepts calls but does not answer: as good as down, and a
      // supervisor recovers from that.
      e = absl::UnavailableError(absl::StrCat(c->part.task, " did not answer RegisterGraph in time: ", e.message()));
    }
    if (!e.ok()) {
      if (error.ok() || (absl::IsCancelled(error) && !absl::IsCancelled(e))) {
        error = absl::Status(e.code(), absl::StrCat("Registering the partition for ", c->part.task, ": ", e.message()));
      }
      continue;
    }
    PartitionPlan pp;
    pp.task = c->part.task;
    pp.handle = c->resp.graph_handle();
    pp.only_sends = OnlyFeedsOtherPartitions(c->part);
    pp.partition = std::move(c->part);
    plan->parts[c->device] = std::move(pp);
  }
  if (!error.ok()) {
    DeregisterPlan(*plan);  // the partitions that did register
    return error;
  }
  return plan;
}

void MasterSessionImpl::DeregisterPlan(const Plan& plan) {
  struct Call {
    std::shared_ptr<WorkerInterface> worker;
    proto::DeregisterGraphRequest req;
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (const auto& [device, part] : plan.parts) {
    absl::StatusOr<std::shared_ptr<WorkerInterface>> worker = workers_->GetWorker(part.task);
    if (!worker.ok()) continue;
    auto c = std::make_unique<Call>();
    c->worker = std::move(*worker);
    c->req.set_graph_handle(part.handle);
    calls.push_back(std::move(c));
  }
  auto pending = std::make_shared<Countdown>(calls.size());
  for (auto& c : calls) c->worker->DeregisterGraphAsync(&c->req, [pending](const absl::Status&) { pending->Done(); });
  pending->Wait();  // each call is bounded by the transport's deadline
}

}  // namespace distflow
