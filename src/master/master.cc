#include "master/master.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/env.h"
#include "base/metrics.h"
#include "base/status_macros.h"
#include "cluster/device_filters.h"
#include "master/master_session.h"
#include "rpc/ask_tasks.h"
#include "rpc/step_tensor_codec.h"
#include "rpc/worker_cache_interface.h"
#include "worker/local_worker.h"

namespace distflow {

Master::Master(std::string local_task, WorkerCacheInterface* workers, Worker* local_worker)
    : local_task_(std::move(local_task)), workers_(workers), pool_(std::make_unique<ThreadPool>("df_master", 8)) {
  if (local_worker != nullptr) workers_->SetLocalWorker(local_task_, NewLocalWorker(local_worker));
}

Master::~Master() {
  CloseAll();
  pool_.reset();
}

absl::StatusOr<std::shared_ptr<MasterSession>> Master::Find(const std::string& handle) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("Session '", handle, "' does not exist on ", local_task_, " (closed, or the server restarted)"));
  }
  return it->second;
}

absl::Status Master::CreateSession(const proto::CreateSessionRequest& req, proto::CreateSessionResponse* resp) {
  std::string handle;
  {
    absl::MutexLock lock(&mu_);
    if (max_sessions_ > 0 && static_cast<int>(sessions_.size()) + creating_ >= max_sessions_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          local_task_, " holds ", sessions_.size(), " sessions",
          creating_ > 0 ? absl::StrCat(" and is creating ", creating_, " more") : "",
          ", the most it holds at once: close sessions that are done (Session::Close) or raise --max_sessions "
          "(ServerOptions::max_sessions)"));
    }
    handle = absl::StrCat("session_", next_session_++, "_", RandomStepId());
    ++creating_;  // the slot is taken while Init waits for the cluster
  }
  auto session =
      MasterSession::Create(handle, req.config(), workers_, local_task_, /*local_worker=*/nullptr, bulk_, &closing_);
  absl::Status s = session->Init(req.graph_def());
  absl::MutexLock lock(&mu_);
  --creating_;
  if (!s.ok()) return s;
  // Closing swapped the sessions out under mu_; a session registered after
  // that would never be closed.
  if (closing_.HasBeenNotified()) {
    return absl::UnavailableError(absl::StrCat("The server of ", local_task_, " is shutting down"));
  }
  sessions_[handle] = session;
  resp->set_session_handle(handle);
  resp->set_bulk_port(BulkPortOf(bulk_));
  return absl::OkStatus();
}

absl::Status Master::ExtendSession(const proto::ExtendSessionRequest& req) {
  ASSIGN_OR_RETURN(std::shared_ptr<MasterSession> s, Find(req.session_handle()));
  return s->Extend(req.graph_def());
}

void Master::RunStepAsync(const proto::RunStepRequest* req, proto::RunStepResponse* resp,
                          std::function<void(absl::Status)> done) {
  absl::StatusOr<std::shared_ptr<MasterSession>> s = Find(req->session_handle());
  if (!s.ok()) {
    ReleaseBulkFeeds(bulk_, *req);
    return done(s.status());
  }
  // The callback keeps the session alive for the step, even if it is closed meanwhile.
  (*s)->RunAsync(req, resp, pool_.get(), [this, session = *s, start = Now(), done = std::move(done)](absl::Status st) {
    RecordStep(start, st);
    done(st);
  });
}

absl::Time Master::Now() const { return absl::FromUnixMicros(workers_->clock()->NowMicros()); }

void Master::RecordStep(absl::Time start, const absl::Status& st) {
  const absl::Time end = Now();
  const double secs = absl::ToDoubleSeconds(end - start);
  Metrics* m = Metrics::Global();
  m->GetCounter("distflow_steps_total", "Steps this task's master ran, by outcome",
                {{"status", st.ok() ? "OK" : std::string(absl::StatusCodeToString(st.code()))}})
      ->Increment();
  m->GetHistogram("distflow_step_seconds", "Time of a step this task's master ran, on every task it touched")
      ->Observe(secs);
  absl::MutexLock lock(&steps_mu_);
  recent_.push_back({end, secs, st.ok() ? "OK" : st.ToString()});
  if (recent_.size() > kRecentSteps) recent_.pop_front();
}

std::vector<Master::StepRecord> Master::RecentSteps() const {
  absl::MutexLock lock(&steps_mu_);
  return {recent_.begin(), recent_.end()};
}

size_t Master::num_sessions() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

int Master::sessions_being_created() const {
  absl::MutexLock lock(&mu_);
  return creating_;
}

absl::Status Master::CloseSession(const std::string& handle) {
  std::shared_ptr<MasterSession> s;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(handle);
    if (it == sessions_.end()) return absl::OkStatus();
    s = it->second;
    sessions_.erase(it);
  }
  s->Close();
  return absl::OkStatus();
}

void Master::CloseAll() {
  std::map<std::string, std::shared_ptr<MasterSession>> all;
  {
    absl::MutexLock lock(&mu_);
    if (!closing_.HasBeenNotified()) closing_.Notify();
    all.swap(sessions_);
  }
  for (auto& [h, s] : all) s->Close();
}

void Master::AbortStepsOnTask(const std::string& task, const absl::Status& why) {
  std::vector<std::shared_ptr<MasterSession>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [h, s] : sessions_) all.push_back(s);
  }
  for (auto& s : all) s->AbortStepsOnTask(task, why);
}

void Master::LogStalledSteps(absl::Duration every) {
  std::vector<std::shared_ptr<MasterSession>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [h, s] : sessions_) all.push_back(s);
  }
  int64_t reports = 0;
  for (auto& s : all) reports += s->LogStalledSteps(every);
  absl::MutexLock lock(&mu_);
  stalled_step_reports_ += reports;
}

int64_t Master::stalled_step_reports() const {
  absl::MutexLock lock(&mu_);
  return stalled_step_reports_;
}

absl::Status Master::ListDevices(proto::ListDevicesResponse* resp) {
  // Tasks that do not answer within 2 s (all asked at once) are left out.
  std::vector<TaskAnswer<proto::GetStatusResponse>> answers = AskTasks<proto::GetStatusResponse>(
      *workers_, workers_->TaskNames(), absl::Seconds(2),
      [](WorkerInterface* w, CallOptions* opts, proto::GetStatusResponse* out, WorkerInterface::StatusCallback done) {
        w->GetStatusAsync(opts, out, std::move(done));
      });
  for (const TaskAnswer<proto::GetStatusResponse>& answer : answers) {
    if (!answer.status.ok()) continue;
    for (const auto& d : answer.response.devices()) *resp->add_devices() = d;
  }
  return absl::OkStatus();
}

absl::Status Master::Reset(const proto::ResetRequest& req) {
  // Every task is asked, at once, even after one fails: a task that is down
  // must not leave the others' containers as they were.
  std::vector<std::string> filters(req.device_filters().begin(), req.device_filters().end());
  std::vector<std::string> tasks;
  for (const std::string& task : workers_->TaskNames()) {
    if (PassesFilters(task, filters)) tasks.push_back(task);
  }
  proto::CleanupAllRequest r;
  for (const std::string& c : req.container()) r.add_container(c);
  std::vector<TaskAnswer<proto::CleanupAllResponse>> answers = AskTasks<proto::CleanupAllResponse>(
      *workers_, tasks, absl::Seconds(10),
      [&r](WorkerInterface* w, CallOptions* opts, proto::CleanupAllResponse*, WorkerInterface::StatusCallback done) {
        w->CleanupAllAsync(opts, &r, std::move(done));
      });
  std::vector<std::pair<std::string, absl::Status>> failed;
  for (const TaskAnswer<proto::CleanupAllResponse>& answer : answers) {
    if (!answer.status.ok()) failed.emplace_back(answer.task, answer.status);
  }
  return FailedOnTasks("Reset", failed, tasks.size(), "the others were reset");
}

}  // namespace distflow
