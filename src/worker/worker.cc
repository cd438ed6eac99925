#include "worker/worker.h"

#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/logging.h"
#include "collective/collective_executor_impl.h"
#include "kernels/collective.h"
#include "rpc/worker_cache_interface.h"
#include "worker/worker_collective_transport.h"

namespace distflow {
namespace {

// WorkerOptions::max_step_bytes: 0 is an eighth of the machine's memory.
int64_t StepByteLimit(int64_t configured) {
  if (configured < 0) return 0;
  if (configured > 0) return configured;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 8 : 0;
}

// The clock of the stalled-partition log: the worker cache's (a test's
// FakeClockEnv), as the master's stalled-step log reads it.
absl::Time NowOn(const WorkerCacheInterface* peers) {
  return absl::FromUnixMicros((peers != nullptr ? peers->clock() : Env::Default())->NowMicros());
}

// How long deregistering a graph waits for its session's deferred updates.
constexpr absl::Duration kDeferredUpdatesGrace = absl::Seconds(30);

uint64_t RandomIncarnation() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ 1;
}

}  // namespace

Worker::Worker(std::string task_name, WorkerCacheInterface* peers, WorkerOptions options)
    : task_name_(std::move(task_name)),
      incarnation_(RandomIncarnation()),
      options_(options),
      max_step_bytes_(StepByteLimit(options.max_step_bytes)),
      peers_(peers),
      compute_(std::make_unique<ThreadPool>("df_worker", 8)),
      device_(std::make_unique<Device>(task_name_ + "/device:CPU:0", "CPU", nullptr)),
      rendezvous_(
          task_name_,
          [this](const std::string& task, int64_t step, const std::string& key, CancellationManager* cm,
                 Rendezvous::DoneCallback done) { RemoteRecv(task, step, key, cm, std::move(done)); },
          [this](const std::string& task, int64_t step, const std::vector<std::string>& keys,
                 std::vector<PushedTensor> pushed, CancellationManager* cm, WorkerCacheInterface::BundleCallback done) {
            if (peers_ == nullptr) {
              done(absl::FailedPreconditionError(
                       absl::StrCat(task_name_, " has no peers to receive ", keys.size(), " tensors from")),
                   {});
              return;
            }
            // A large tensor rides as a bulk ticket (WorkerCache offers it).
            peers_->RecvTensorBundleAsync(task, step, keys, std::move(pushed), cm, std::move(done));
          },
          [this](const std::string& task, int64_t step, const std::string& key, CancellationManager* cm,
                 Rendezvous::DoneCallback done) { PushedRecv(task, step, key, cm, std::move(done)); }) {
  if (peers_ != nullptr) {
    StallCheckOptions stall_check;
    if (absl::StatusOr<absl::Duration> interval = StallCheckIntervalFromEnv(); interval.ok()) {
      stall_check.interval = *interval;
    } else {
      LOG(ERROR) << task_name_ << ": " << interval.status().message() << "; using "
                 << absl::FormatDuration(stall_check.interval);
    }
    collective_ = std::make_shared<CollectiveExecutorImpl>(
        std::make_unique<WorkerCollectiveTransport>(
            task_name_, peers_->cluster(), &rendezvous_,
            [peers](const std::string& task) { return peers->GetWorker(task); }),
        std::move(stall_check));
    RegisterCollectiveExecutor(device_.get(), collective_);
  }
}

Worker::~Worker() {
  UnregisterCollectiveExecutor(device_.get());
  compute_.reset();  // joins feed decoding still queued
  // Cancel the partitions still running and wait for them: their completions
  // use this Worker.
  std::map<int64_t, RunningStep> steps;
  {
    absl::MutexLock lock(&mu_);
    steps = steps_;
  }
  absl::Status reason = absl::CancelledError(absl::StrCat("Task ", task_name_, " is shutting down"));
  for (auto& [step, run] : steps) {
    rendezvous_.AbortStep(step, reason);
    if (run.deferred) deferred_.Aborted(run.deferred);
    run.cm->StartCancel(reason);
  }
  CancelFetches(reason);
  absl::MutexLock lock(&inflight_->mu);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return inflight_->count == 0 && inflight_->fetches.empty(); };
  if (!inflight_->mu.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(30))) {
    LOG(ERROR) << task_name_ << ": " << inflight_->count << " partition run(s) did not end within 30 s of shutdown";
  }
}

void Worker::GetStatus(proto::GetStatusResponse* resp) const {
  resp->set_task_name(task_name_);
  proto::DeviceAttributes* d = resp->add_devices();
  d->set_name(device_->name());
  d->set_device_type(device_->device_type());
  d->set_incarnation(incarnation_);
}

absl::Status Worker::RegisterGraph(const proto::RegisterGraphRequest& req, proto::RegisterGraphResponse* resp) {
  SessionOptions so;
  so.session_private_variables = false;  // every session on this task shares them, as in TensorFlow's workers
  so.default_container = "";
  so.inter_op_threads = options_.inter_op_threads;
  so.intra_op_threads = options_.intra_op_threads;
  so.max_step_bytes = max_step_bytes_;
  auto session = std::make_shared<LocalSession>(so, /*timer=*/nullptr, device_.get());
  absl::Status s = session->Create(req.graph_def());
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("[", task_name_, "] ", s.message()));
  absl::MutexLock lock(&mu_);
  std::string handle = absl::StrCat(req.session_handle(), "/", incarnation_, "/", next_graph_++);
  graphs_[handle] = std::move(session);
  GraphInfo& info = graph_info_[handle];
  info.session = req.session_handle();
  info.defer = req.defer_updates();
  for (const proto::NodeDef& n : req.graph_def().node())
    info.checkpoint |= n.op() == "SaveShard" || n.op() == "RestoreShard";
  if (std::shared_ptr<ReadPrefetcher> p = ReadPrefetcher::ForGraph(req.graph_def())) prefetchers_[handle] = p;
  resp->set_graph_handle(handle);
  resp->set_incarnation(incarnation_);
  return absl::OkStatus();
}

absl::Status Worker::DeregisterGraph(const std::string& handle) {
  std::string session;
  {
    absl::MutexLock lock(&mu_);
    auto it = graph_info_.find(handle);
    if (it != graph_info_.end()) session = it->second.session;
  }
  // The session's deferred updates in flight end first (their partitions
  // may be this graph's).
  if (!session.empty()) (void)deferred_.WaitForUpdates(session, kDeferredUpdatesGrace);
  absl::MutexLock lock(&mu_);
  graphs_.erase(handle);
  graph_info_.erase(handle);
  prefetchers_.erase(handle);
  bool last = true;
  for (const auto& [h, info] : graph_info_) last &= info.session != session;
  if (last && !session.empty()) deferred_.Forget(session);
  return absl::OkStatus();
}

void Worker::RunGraphAsync(RunGraphCall* call, std::function<void(absl::Status)> done) {
  std::shared_ptr<LocalSession> session;
  GraphInfo info;
  auto cm = std::make_shared<CancellationManager>();
  {
    absl::MutexLock lock(&mu_);
    auto it = graphs_.find(call->graph_handle);
    if (it != graphs_.end()) {
      session = it->second;
      info = graph_info_[call->graph_handle];
    }
  }
  if (session == nullptr) {
    done(absl::AbortedError(absl::StrCat("[", task_name_, "] Graph handle '", call->graph_handle,
                                         "' is unknown here: the task has probably restarted (its incarnation is now ",
                                         incarnation_, "). Restart the session.")));
    return;
  }
  // A deferred update of the session's earlier step failed: this step says so.
  if (absl::Status failed = deferred_.TakeError(info.session); !failed.ok()) {
    done(failed);
    return;
  }
  // A traced run waits for everything, to record it all.
  const bool defer = info.defer && !call->trace;
  std::shared_ptr<DeferredUpdates::Run> run = defer ? deferred_.Begin(info.session, call->step_id) : nullptr;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = NowOn(peers_);
    // A traced run reads its variables afresh, so its trace shows each
    // transfer of the step (a prefetched read is the previous step's).
    auto p = call->trace ? prefetchers_.end() : prefetchers_.find(call->graph_handle);
    steps_[call->step_id] =
        RunningStep{cm, p != prefetchers_.end() ? p->second : nullptr, ++runs_, call->master_task, run, now, now};
  }
  // The master's abort overtook this RunGraph (CleanupGraph aborts the
  // rendezvous before it looks for the step's partitions): nothing would
  // cancel the partition, so it does not start.
  if (absl::Status aborted = rendezvous_.StepAborted(call->step_id); !aborted.ok()) {
    {
      absl::MutexLock lock(&mu_);
      auto it = steps_.find(call->step_id);
      if (it != steps_.end() && it->second.cm == cm) steps_.erase(it);
    }
    done(absl::Status(aborted.code(), absl::StrCat("[", task_name_,
                                                   "] The step was aborted before its partition here "
                                                   "started: ",
                                                   aborted.message())));
    return;
  }
  bool over = false;
  {
    absl::MutexLock lock(&inflight_->mu);
    over = options_.max_concurrent_steps > 0 && inflight_->count >= options_.max_concurrent_steps;
    if (!over) ++inflight_->count;
  }
  if (over) {
    {
      absl::MutexLock lock(&mu_);
      auto it = steps_.find(call->step_id);
      if (it != steps_.end() && it->second.cm == cm) steps_.erase(it);
    }
    done(absl::ResourceExhaustedError(absl::StrCat(
        "[", task_name_, "] ", options_.max_concurrent_steps,
        " partitions are running here already, the most this task runs at once: raise --max_concurrent_steps "
        "(WorkerOptions::max_concurrent_steps) or run fewer steps at a time")));
    return;
  }
  auto answer = std::make_shared<std::function<void(absl::Status)>>(std::move(done));
  auto start = [this, call, session, cm, run, answer]() {
    RunOptions ro;
    ro.timeout_ms = call->timeout_ms;
    PartitionStep partition;
    partition.step_id = call->step_id;
    partition.rendezvous = &rendezvous_;
    partition.cancellation = cm.get();
    if (call->trace) ro.trace = &call->stats;
    if (run != nullptr) {
      partition.outputs_done = [this, call, run, answer](std::vector<Tensor> out) {
        call->recv = std::move(out);
        deferred_.OutputsDone(run, [answer] { (*answer)(absl::OkStatus()); });
      };
    }
    const int64_t step_id = call->step_id;
    session->RunAsync(
        ro, call->send, call->recv_keys, call->targets,
        [this, call, step_id, session, cm, run, answer, inflight = inflight_](absl::StatusOr<std::vector<Tensor>> out) {
          {
            absl::MutexLock lock(&mu_);
            auto it = steps_.find(step_id);
            if (it != steps_.end() && it->second.cm == cm) steps_.erase(it);
          }
          // Answered already (deferred updates): `call` may be gone; this
          // was the end of the run's updates.
          if (run == nullptr || deferred_.End(run, out.status())) {
            if (!out.ok()) {
              (*answer)(absl::Status(out.status().code(), absl::StrCat("[", task_name_, "] ", out.status().message())));
            } else {
              call->recv = std::move(*out);
              (*answer)(absl::OkStatus());
            }
          }
          // The last touch: the shared count, not the Worker.
          absl::MutexLock lock(&inflight->mu);
          --inflight->count;
        },
        partition);
  };
  if (defer) {
    start();
  } else {
    deferred_.AfterUpdates(info.checkpoint ? std::string() : info.session, std::move(start));
  }
}

Worker::Prefetched Worker::FindPrefetcher(int64_t step_id, const std::string& key, CancellationManager* cm) {
  absl::MutexLock lock(&mu_);
  auto it = steps_.find(step_id);
  if (it == steps_.end() || it->second.prefetcher == nullptr || it->second.cm.get() != cm ||
      !it->second.prefetcher->Covers(key)) {
    return {};
  }
  return {it->second.prefetcher, it->second.cm, it->second.run};
}

void Worker::PrefetchedRecv(const Prefetched& p, const std::string& key, Rendezvous::DoneCallback done,
                            std::function<void(CancellationManager*, Rendezvous::DoneCallback)> fetch) {
  // The run's own receive may outlive the run (the next run uses it): it
  // keeps the run's cancellation manager alive, and the worker's
  // destructor cancels and waits for it.
  p.prefetcher->Recv(
      p.run, key,
      [step_cm = p.step_cm, inflight = inflight_, fetch = std::move(fetch)](Rendezvous::DoneCallback got) {
        uint64_t id = 0;
        {
          absl::MutexLock lock(&inflight->mu);
          id = inflight->next_fetch++;
          inflight->fetches.emplace(id, step_cm);
        }
        fetch(step_cm.get(), [inflight, id, got = std::move(got)](absl::Status s, Tensor t) {
          got(std::move(s), std::move(t));
          // The last touch: the shared count, not the Worker.
          absl::MutexLock lock(&inflight->mu);
          inflight->fetches.erase(id);
        });
      },
      p.step_cm, std::move(done));
}

void Worker::RemoteRecv(const std::string& task, int64_t step_id, const std::string& key, CancellationManager* cm,
                        Rendezvous::DoneCallback done) {
  if (peers_ == nullptr) {
    done(absl::FailedPreconditionError(absl::StrCat(task_name_, " has no peers to receive '", key, "' from")),
         Tensor());
    return;
  }
  Prefetched p = FindPrefetcher(step_id, key, cm);
  if (p.prefetcher == nullptr) {
    peers_->RecvTensorAsync(task, step_id, key, cm, std::move(done));
    return;
  }
  PrefetchedRecv(p, key, std::move(done),
                 [peers = peers_, task, step_id, key](CancellationManager* step_cm, Rendezvous::DoneCallback got) {
                   peers->RecvTensorAsync(task, step_id, key, step_cm, std::move(got));
                 });
}

void Worker::PushedRecv(const std::string& task, int64_t step_id, const std::string& key, CancellationManager* cm,
                        Rendezvous::DoneCallback done) {
  Prefetched p = FindPrefetcher(step_id, key, cm);
  if (p.prefetcher == nullptr) {
    rendezvous_.WaitForPush(step_id, key, task, cm, std::move(done));
    return;
  }
  // The run's own value comes with `task`'s fetch from this run, which
  // carries it (placement/transfer_bundles.h): no call of its own.
  PrefetchedRecv(p, key, std::move(done),
                 [this, task, step_id, key](CancellationManager* step_cm, Rendezvous::DoneCallback got) {
                   rendezvous_.WaitForPush(step_id, key, task, step_cm, std::move(got));
                 });
}

void Worker::CleanupGraph(const proto::CleanupGraphRequest& req) {
  if (req.abort_message().empty()) return;
  absl::Status reason(static_cast<absl::StatusCode>(req.abort_code() == 0 ? 10 : req.abort_code()),
                      req.abort_message());
  // The rendezvous first: a partition that RunGraphAsync registers after the
  // lookup below finds the step aborted there and does not start.
  rendezvous_.AbortStep(req.step_id(), reason);
  std::shared_ptr<CancellationManager> cm;
  std::shared_ptr<DeferredUpdates::Run> deferred;
  {
    absl::MutexLock lock(&mu_);
    auto it = steps_.find(req.step_id());
    if (it != steps_.end()) {
      cm = it->second.cm;
      deferred = it->second.deferred;
    }
  }
  if (deferred) deferred_.Aborted(deferred);
  if (cm) cm->StartCancel(reason);
}

void Worker::AbortAll(const absl::Status& reason) {
  std::map<int64_t, RunningStep> steps;
  {
    absl::MutexLock lock(&mu_);
    steps = steps_;
  }
  for (auto& [step, run] : steps) {
    rendezvous_.AbortStep(step, reason);
    if (run.deferred) deferred_.Aborted(run.deferred);
    run.cm->StartCancel(reason);
  }
  CancelFetches(reason);
  rendezvous_.AbortAll(reason);
}

void Worker::CancelFetches(const absl::Status& reason) {
  std::vector<std::shared_ptr<CancellationManager>> cms;
  {
    absl::MutexLock lock(&inflight_->mu);
    for (const auto& [id, cm] : inflight_->fetches) cms.push_back(cm);
  }
  for (auto& cm : cms) cm->StartCancel(reason);
}

void Worker::AbortStepsOfMaster(const std::string& task, const absl::Status& reason) {
  std::map<int64_t, RunningStep> steps;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [step, run] : steps_)
      if (run.master_task == task) steps.emplace(step, run);
  }
  if (!steps.empty()) {
    LOG(WARNING) << "Aborting " << steps.size() << " step(s) run for " << task << ": " << reason.message();
  }
  for (auto& [step, run] : steps) {
    rendezvous_.AbortStep(step, reason);
    if (run.deferred) deferred_.Aborted(run.deferred);
    run.cm->StartCancel(reason);
  }
}

void Worker::LogStalledSteps(absl::Duration every) {
  const absl::Time now = NowOn(peers_);
  std::vector<std::pair<int64_t, RunningStep>> stalled;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [step, run] : steps_) {
      if (now - run.started < every || now - run.logged < every) continue;
      run.logged = now;
      stalled.emplace_back(step, run);
    }
    stalled_step_reports_ += static_cast<int64_t>(stalled.size());
  }
  for (const auto& [step, run] : stalled) {
    std::vector<std::string> waiting = rendezvous_.Waiting(step);
    constexpr size_t kShown = 5;
    std::string shown;
    for (size_t i = 0; i < waiting.size() && i < kShown; ++i) absl::StrAppend(&shown, i ? "; " : "", waiting[i]);
    if (waiting.size() > kShown) absl::StrAppend(&shown, "; and ", waiting.size() - kShown, " more");
    LOG(WARNING) << "Step " << step << " (run for " << (run.master_task.empty() ? task_name_ : run.master_task)
                 << ") has been running here for "
                 << absl::FormatDuration(absl::Trunc(now - run.started, absl::Milliseconds(100)))
                 << (waiting.empty() ? std::string("; no receive is waiting (a kernel is running or waiting)")
                                     : absl::StrCat("; waiting for ", shown));
  }
}

int64_t Worker::stalled_step_reports() const {
  absl::MutexLock lock(&mu_);
  return stalled_step_reports_;
}

int Worker::running_partitions() const {
  absl::MutexLock lock(&inflight_->mu);
  return inflight_->count;
}

size_t Worker::registered_graphs() const {
  absl::MutexLock lock(&mu_);
  return graphs_.size();
}

absl::Status Worker::Heartbeat(const proto::HeartbeatRequest& req, proto::HeartbeatResponse* resp) {
  if (!heartbeat_handler_) {
    return absl::FailedPreconditionError(
        absl::StrCat(task_name_, " is not the cluster's coordinator",
                     coordinator_.empty() ? std::string() : absl::StrCat(" (", coordinator_, " is)"),
                     ": does the heartbeating task have the same cluster spec?"));
  }
  return heartbeat_handler_(req, resp);
}

void Worker::SetShutdownHandler(std::function<void(const absl::Status&)> fn) {
  absl::MutexLock lock(&mu_);
  shutdown_handler_ = std::move(fn);
}

void Worker::HandleShutdown(const absl::Status& why) {
  std::function<void(const absl::Status&)> fn;
  {
    absl::MutexLock lock(&mu_);
    fn = shutdown_handler_;
  }
  if (!why.ok()) LOG(ERROR) << "The cluster was ended: " << why.message();
  if (fn) fn(why);
}

}  // namespace distflow
