#include "server/grpc_server.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/cpu_budget.h"
#include "base/env.h"
#include "base/logging.h"
#include "base/mutex_checks.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"
#include "cluster/host_share.h"
#include "grpcpp/channel.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "rpc/ask_tasks.h"
#include "rpc/auth.h"
#include "rpc/coordinator_client.h"
#include "rpc/grpc_status.h"
#include "rpc/rpc_metrics.h"
#include "rpc/unix_socket.h"
#include "server/elastic_client.h"
#include "server/grpc_elastic_service.h"
#include "server/grpc_master_service.h"
#include "server/grpc_worker_service.h"
#include "worker/worker_collective_transport.h"

namespace distflow {

GrpcServer::GrpcServer(ClusterSpec cluster, std::string job, int task, ServerOptions options)
    : cluster_(std::move(cluster)),
      job_(std::move(job)),
      task_(task),
      task_name_(TaskName(job_, task_)),
      options_(options) {}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(const ClusterSpec& cluster, const std::string& job,
                                                               int task_index, ServerOptions options) {
  RETURN_IF_ERROR(cluster.ValidateTask(job, task_index));
  std::unique_ptr<GrpcServer> s(new GrpcServer(cluster, job, task_index, options));
  return s;
}

GrpcServer::~GrpcServer() {
  Stop();
  std::thread stopper;
  {
    absl::MutexLock lock(&mu_);
    stopper = std::move(shutdown_thread_);
  }
  if (stopper.joinable()) stopper.join();
  // In-process sessions may still be inside a call to the master.
  if (local_entry_ != nullptr) local_entry_->WaitIdle();
}

// Intra-op threads 0 means this task's share of the machine: the CPUs the
// process may use divided by the cluster's tasks on this host, so the
// README's 1 ps + 3 workers on two cores compute with one thread each
// instead of two (which, with OpenMP teams spinning at their barriers,
// oversubscribes the cores; see docs/PERFORMANCE.md).
void GrpcServer::SizeComputeThreads() {
  const int cpus = AvailableCpus();
  const int tasks = TasksOnHost(cluster_, host_);
  int& intra = options_.worker.intra_op_threads;
  if (intra <= 0) {
    intra = ThreadsPerTask(cpus, tasks);
    LOG(INFO) << task_name_ << " computes with " << intra << " intra-op thread(s): " << cpus
              << " CPU(s) available, shared by " << tasks << " task(s) of the cluster on " << host_
              << " (set intra_op_threads to choose)";
  }
  if (intra > 1 && intra * tasks > cpus && std::getenv("OMP_WAIT_POLICY") == nullptr) {
    LOG(WARNING) << task_name_ << ": " << tasks << " tasks with " << intra << " intra-op threads each oversubscribe "
                 << cpus << " CPU(s); OpenMP's spinning waits then burn the cores others need. Set "
                 << "OMP_WAIT_POLICY=passive in the environment, or fewer intra_op_threads.";
  }
}

absl::Status GrpcServer::Start() {
  absl::MutexLock lock(&mu_);
  if (started_ && stopped_) {
    return absl::FailedPreconditionError(
        absl::StrCat("The server for ", task_name_, " was stopped and cannot start again: create a new Server"));
  }
  if (started_) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string address, cluster_.task_address(job_, task_));
  ASSIGN_OR_RETURN(auto hp, SplitHostPort(address));
  host_ = hp.first;
  const std::string token = options_.auth_token.value_or(ClusterToken());
  if (token.empty() && !IsLoopbackHost(host_)) {
    LOG(WARNING) << "\n*** " << task_name_ << " listens on " << host_
                 << " without a cluster token: anyone who can reach this port can read and overwrite every "
                    "variable and shut the cluster down. Set DISTFLOW_AUTH_TOKEN (or --auth_token_file) on every "
                    "task and client. ***";
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentials();
  if (!credentials.ok()) {
    return absl::Status(credentials.status().code(),
                        absl::StrCat("Task ", task_name_, ": ", credentials.status().message()));
  }
  const bool tls = TlsEnabled();
  // With TLS, the bulk port speaks TLS too, with the same files.
  absl::StatusOr<std::shared_ptr<const BulkTls>> bulk_tls = BulkTls::ForProcess();
  if (!bulk_tls.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Task ", task_name_, ": ", bulk_tls.status().message()));
  }
  if (options_.bulk_transfer && options_.bulk_port >= 0 && BulkTransferEnabledByEnv()) {
    absl::StatusOr<std::unique_ptr<BulkServer>> bulk =
        BulkServer::Start(host_, absl::Seconds(120), options_.bulk_port, token, *bulk_tls);
    if (bulk.ok()) {
      bulk_ = std::move(*bulk);
    } else if (options_.bulk_port != 0) {
      return absl::UnavailableError(absl::StrCat("Task ", task_name_, " cannot listen for bulk transfer on ", host_,
                                                 ":", options_.bulk_port, ": ", bulk.status().message(),
                                                 ". Pick a free --bulk_port, 0 for any, or -1 for none."));
    } else {
      LOG(WARNING) << bulk.status().message() << "; large tensors will travel inside gRPC messages";
    }
  }
  SizeComputeThreads();
  // Abseil's deadlock detector (on in Debian's build) off unless asked for:
  // see base/mutex_checks.h. Once per process.
  static const absl::OnDeadlockCycle mutex_checks = ConfigureMutexDeadlockDetection();
  if (mutex_checks != absl::OnDeadlockCycle::kIgnore) LOG(INFO) << "abseil's mutex deadlock detection is on";
  bool shm = bulk_ != nullptr && options_.shared_memory && SharedMemoryEnabledByEnv();
  if (shm) {
    if (absl::Status s = bulk_->EnableSharedMemory(); !s.ok()) {
      LOG(WARNING) << "Task " << task_name_ << ": " << s.message() << "; tasks on this host use TCP";
      shm = false;
    }
  }
  workers_ = std::make_unique<WorkerCache>(cluster_, token);
  if (bulk_ != nullptr) workers_->EnableBulkTransfer(bulk_.get(), shm);
  worker_ = std::make_unique<Worker>(task_name_, workers_.get(), options_.worker);
  worker_->set_bulk_server(bulk_.get());
  worker_->set_auth_token(token);
  master_ = std::make_unique<Master>(task_name_, workers_.get(), worker_.get());
  master_->set_bulk_server(bulk_.get());
  master_->set_auth_token(token);
  master_->set_max_sessions(options_.max_sessions);
  // Stop from a thread of our own (not the RPC's), joined by ~GrpcServer.
  worker_->SetShutdownHandler([this](const absl::Status& why) { StopInBackground(why, false); });
  const bool detect = options_.heartbeat_timeout_ms > 0 && options_.heartbeat_interval_ms > 0;
  const std::string coordinator = CoordinatorTask(cluster_);
  if (detect && coordinator == task_name_) {
    coordination_ = std::make_unique<CoordinationService>(cluster_, absl::Milliseconds(options_.heartbeat_timeout_ms),
                                                          worker_->incarnation());
    elastic_service_ = NewGrpcElasticService(coordination_.get(), workers_.get(), token, task_name_);
    worker_->set_heartbeat_handler(
        [this](const proto::HeartbeatRequest& req, proto::HeartbeatResponse* resp) {
          return coordination_->Heartbeat(req, resp);
        },
        coordinator);
  } else {
    worker_->set_heartbeat_handler(nullptr, detect ? coordinator : "");
  }
  // Tasks that joined the running job are not in the spec: the coordinator
  // knows their addresses.
  if (detect) workers_->SetAddressResolver(JoinedTaskResolver(coordination_.get(), workers_.get(), coordinator));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // Bind the host the spec names (bracketed IPv6 stays bracketed).
  std::string bind =
      absl::StrCat(host_.find(':') != std::string::npos ? absl::StrCat("[", host_, "]") : host_, ":", hp.second);
  builder.AddListeningPort(bind, *credentials, &bound_port_);
  // Tasks on this host reach this one over an abstract Unix-domain socket
  // too, which skips TCP's stack (rpc/unix_socket.h). Not with TLS: such
  // peers stay on TCP with TLS, whose certificates a Unix socket would not
  // check the same way.
  unix_socket_.clear();
  if (!tls && UnixSocketsEnabledByEnv()) unix_socket_ = NewUnixSocketName(host_, hp.second);
  if (!unix_socket_.empty()) {
    builder.AddListeningPort(UnixSocketTarget(unix_socket_), grpc::InsecureServerCredentials());
    workers_->set_unix_socket_announcement(UnixSocketAnnouncement(unix_socket_));
  }
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  // Without this, a second server on the same port would silently share it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(NewRpcMetricsInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  worker_service_ = NewGrpcWorkerService(worker_.get(), workers_.get());
  master_service_ = NewGrpcMasterService(master_.get());
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(master_service_.get());
  if (elastic_service_ != nullptr) builder.RegisterService(elastic_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || bound_port_ == 0) {
    // Leave nothing behind: the bulk port stays open otherwise, and a retry
    // (or another server) could not take it.
    server_.reset();
    master_.reset();
    worker_.reset();
    coordination_.reset();
    workers_.reset();
    bulk_.reset();
    bound_port_ = 0;
    unix_socket_.clear();
    return absl::UnavailableError(absl::StrCat("Task ", task_name_, " cannot listen on ", bind,
                                               ": the port is already in use or the address is not on this machine. "
                                               "Stop the other process or change the cluster spec."));
  }
  if (hp.second == 0) SetAddressLocked(job_, task_, absl::StrCat(bind.substr(0, bind.rfind(':')), ":", bound_port_));
  started_ = true;
  if (options_.status_port >= 0) {
    StatusView view{task_name_,    host_port(),   cluster_,       absl::FromUnixMicros(workers_->clock()->NowMicros()),
                    master_.get(), worker_.get(), workers_.get(), bulk_.get()};
    absl::StatusOr<std::unique_ptr<StatusServer>> status = StatusServer::Start(view, host_, options_.status_port);
    if (status.ok()) {
      status_ = std::move(*status);
      LOG(INFO) << "Status page of " << task_name_ << " on http://" << host_ << ":" << status_->port() << "/status";
    } else {
      LOG(WARNING) << "The status page is off: " << status.status().message() << ". The task serves gRPC anyway.";
    }
  }
  local_entry_ = std::make_shared<LocalMasterEntry>(master_.get());
  RegisterLocalMaster(host_port(), local_entry_);
  if (detect) StartCoordination();
  LOG(INFO) << "Started server for " << task_name_ << " on " << host_ << ":" << bound_port_ << " with device "
            << worker_->device_name()
            << (bulk_ ? absl::StrCat("; bulk tensor transfer on port ", bulk_->port())
                      : std::string("; bulk transfer off"))
            << (tls ? "; TLS" : "") << (unix_socket_.empty() ? "" : "; tasks on this host over a Unix socket");
  return absl::OkStatus();
}

void GrpcServer::Stop() {
  bool already = false;
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
    already = stopped_;
    stopped_ = true;
  }
  if (already) {
    // Another thread is stopping the server: return once it has.
    stopped_note_.WaitForNotification();
    return;
  }
  LOG(INFO) << "Stopping server for " << task_name_;
  absl::Status why;
  {
    absl::MutexLock lock(&mu_);
    why = exit_status_;
  }
  // Say goodbye unless the job failed: a clean stop is not a death.
  if (agent_ != nullptr) {
    agent_->Stop(/*leaving=*/why.ok());
    workers_->SetGoneReason(nullptr);  // the agent may go once the server has stopped
  }
  if (status_ != nullptr) status_->Stop();
  // Sessions of this process that name this server fail at once from now on,
  // instead of waiting for a server that will not come back.
  if (why.ok()) {
    MarkLocalMasterEnded(
        host_port(), absl::UnavailableError(absl::StrCat(task_name_,
                                                         "'s cluster was shut down, or Stop() was called; start a new "
                                                         "Server, or use another task's target")));
  }
  UnregisterLocalMaster(host_port(), local_entry_.get());
  local_entry_->Close();
  master_->CloseAll();
  // A clean stop lets the variable updates that steps deferred finish
  // (deferred_updates.h); a failed job does not wait for them.
  if (why.ok()) (void)worker_->WaitForDeferredUpdates(absl::Seconds(30));
  // Handlers waiting on this task (a RecvTensor for a step whose client
  // died) must end before gRPC's shutdown can finish.
  worker_->AbortAll(
      why.ok() ? absl::CancelledError(absl::StrCat("Task ", task_name_, " is shutting down"))
               : absl::Status(why.code(), absl::StrCat("Task ", task_name_, " is shutting down: ", why.message())));
  // The collective executor's group rebuilds ask the coordinator through
  // agent_ and workers_ (AskGroupRendezvous): end them while those live. The
  // executor itself may outlive this server (the device holds it), so it
  // must never call back into it afterwards.
  if (CollectiveExecutorImpl* collective = worker_->collective(); collective != nullptr) collective->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_->Wait();
  stopped_note_.Notify();
}

void GrpcServer::StartCoordination() {
  CoordinationOptions co;
  co.interval = absl::Milliseconds(options_.heartbeat_interval_ms);
  co.timeout = absl::Milliseconds(options_.heartbeat_timeout_ms);
  co.address = cluster_.task_address(job_, task_).value_or("");
  agent_ = std::make_unique<CoordinationAgent>(task_name_, worker_->incarnation(), CoordinatorTask(cluster_), co,
                                               workers_.get(), coordination_.get());
  agent_->Start([this](const std::string& task, const absl::Status& why) { OnTaskDead(task, why); },
                [this] { CheckOrphaned(); });
  // A session does not wait for the devices of a task the coordinator
  // declared dead or saw leave (worker_cache.h, WaitForDevices).
  workers_->SetGoneReason([agent = agent_.get()](const std::string& task) { return agent->GoneReason(task); });
  if (CollectiveExecutorImpl* collective = worker_->collective(); collective != nullptr) {
    collective->SetRendezvous([this](const GroupAsk& ask) { return AskGroupRendezvous(ask); }, absl::Minutes(5));
  }
}

absl::StatusOr<GroupAnswer> GrpcServer::AskGroupRendezvous(const GroupAsk& ask) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::CancelledError(absl::StrCat(task_name_, " is shutting down"));
  }
  proto::GroupRendezvousRequest req;
  req.set_job(job_);
  req.set_group_size(ask.group_size);
  // Ranks are positions among the members (a process set's tasks, or
  // 0..group_size-1, which travel as none). The elastic group (group size
  // 0) has no fixed ranks: each task asks as its task index.
  std::vector<int> members = ask.members;
  std::vector<std::string> tasks;  // a group across jobs': its tasks' full names
  if (!ask.tasks.empty()) {
    // Resolved as the channel will (so a task the cluster lacks is named
    // before anyone waits for it); the coordinator knows them by full name.
    ASSIGN_OR_RETURN(auto resolved, WorkerCollectiveTransport::ResolveGroupTasks(cluster(), ask.tasks, task_name_));
    tasks = std::move(resolved.first);
    for (const std::string& t : tasks) req.add_tasks(t);
    req.set_rank(resolved.second);
  } else if (ask.group_size == 0) {
    req.set_rank(task_);
  } else {
    bool first_tasks = true;
    for (size_t r = 0; r < members.size(); ++r) first_tasks = first_tasks && members[r] == static_cast<int>(r);
    if (members.empty()) {
      for (int r = 0; r < ask.group_size; ++r) members.push_back(r);
    } else if (!first_tasks) {
      for (int m : members) req.add_members(m);
    }
    auto mine = std::find(members.begin(), members.end(), task_);
    if (mine == members.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(task_name_, " is not a member of the collective group it asked to rebuild"));
    }
    req.set_rank(static_cast<int>(mine - members.begin()));
  }
  req.set_last_generation(ask.last_generation);
  req.set_nonce(ask.nonce);
  req.set_query(ask.query);
  req.set_probe(ask.probe);
  proto::GroupRendezvousResponse resp;
  if (absl::Status s = CallGroupRendezvous(req, &resp); !s.ok()) return s;
  GroupAnswer answer;
  answer.done = resp.done();
  answer.generation = resp.generation();
  answer.root = resp.root();
  answer.members.assign(resp.members().begin(), resp.members().end());
  // An elastic group's answers name tasks (it has no fixed ranks); a fixed
  // group's name ranks and the tasks they are.
  auto name = [this, &members, &tasks, elastic = ask.group_size == 0](std::string* to, int r) {
    if (elastic) {
      absl::StrAppend(to, to->empty() ? "" : ", ", TaskName(job_, r));
      return;
    }
    if (r >= 0 && r < static_cast<int>(tasks.size())) {
      absl::StrAppend(to, to->empty() ? "" : ", ", "rank ", r, " (", tasks[static_cast<size_t>(r)], ")");
      return;
    }
    const int task = r >= 0 && r < static_cast<int>(members.size()) ? members[static_cast<size_t>(r)] : r;
    absl::StrAppend(to, to->empty() ? "" : ", ", "rank ", r, " (", TaskName(job_, task), ")");
  };
  for (int r : resp.missing()) name(&answer.missing, r);
  for (int r : resp.waiting()) name(&answer.waiting, r);
  if (answer.done && answer.generation > 1) {
    // Rebuilt, most likely because a member died and came back: this
    // task's channel to it may still be backing off from the death (up to
    // 1 s, worker_cache.cc), failing the new generation's first receives
    // at once and forcing another round. Dial every member afresh.
    std::vector<std::string> peers = tasks;
    if (peers.empty()) {
      for (int m : ask.group_size == 0 ? answer.members : members) peers.push_back(TaskName(job_, m));
    }
    for (const std::string& peer : peers) {
      if (peer == task_name_) continue;
      if (absl::StatusOr<std::shared_ptr<grpc::Channel>> ch = workers_->Channel(peer); ch.ok()) {
        grpc::experimental::ChannelResetConnectionBackoff(ch->get());
      }
    }
  }
  return answer;
}

absl::Status GrpcServer::CallGroupRendezvous(const proto::GroupRendezvousRequest& req,
                                             proto::GroupRendezvousResponse* resp) {
  if (coordination_ != nullptr) return coordination_->GroupRendezvous(req, resp);
  if (agent_ == nullptr) return absl::FailedPreconditionError(absl::StrCat(task_name_, " has no coordinator"));
  return CoordinatorGroupRendezvous(workers_.get(), agent_->coordinator(), req, resp, absl::Seconds(5));
}

void GrpcServer::OnTaskDead(const std::string& task, const absl::Status& why) {
  master_->AbortStepsOnTask(task, why);
  worker_->AbortStepsOfMaster(task, why);
}

void GrpcServer::CheckOrphaned() {
  // A task declared dead fails the steps that need it when it is reported
  // (OnTaskDead). A step this master starts afterwards, while the task is
  // still dead, would wait for it until a transport deadline: it fails at
  // this heartbeat instead (once the task answers again it leaves the list).
  for (const std::string& task : agent_->DeadTasks()) {
    std::string msg = agent_->DeathMessage(task);
    if (!msg.empty()) master_->AbortStepsOnTask(task, absl::UnavailableError(msg));
  }
  if (options_.stall_log_ms > 0) {
    master_->LogStalledSteps(absl::Milliseconds(options_.stall_log_ms));
    worker_->LogStalledSteps(absl::Milliseconds(options_.stall_log_ms));
  }
  if (job_ != "ps" || options_.orphan_grace_ms < 0 || agent_ == nullptr) return;
  std::string reason = OrphanReason(*agent_, ChiefTask(cluster()), absl::Milliseconds(options_.orphan_grace_ms));
  if (reason.empty()) return;
  StopInBackground(
      absl::UnavailableError(absl::StrCat(task_name_, " gives up on its job: ", reason, " (waited ",
                                          options_.orphan_grace_ms / 1000, " s more; see --orphan_grace_secs)")),
      /*end_cluster=*/coordination_ != nullptr);
}

void GrpcServer::StopInBackground(const absl::Status& why, bool end_cluster) {
  absl::MutexLock lock(&mu_);
  if (stopped_ || shutdown_thread_.joinable()) return;
  if (exit_status_.ok()) exit_status_ = why;
  if (!why.ok()) {
    LOG(ERROR) << why.message();
    // Sessions of this process on this server fail at once from now on.
    MarkLocalMasterEnded(host_port(), why);
  }
  shutdown_thread_ = std::thread([this, why, end_cluster] {
    if (end_cluster) {
      // Tell the tasks still there (other ps tasks, workers still running)
      // why, so that they stop and say so instead of waiting.
      for (const std::string& task : workers_->TaskNames()) {
        if (task == task_name_) continue;
        absl::StatusOr<proto::WorkerService::Stub*> stub = workers_->Stub(task);
        if (!stub.ok()) continue;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
        proto::ShutdownRequest req;
        req.set_reason(std::string(why.message()));
        req.set_failed(true);
        proto::ShutdownResponse resp;
        (void)(*stub)->Shutdown(&ctx, req, &resp);
      }
    }
    Stop();
  });
}

std::vector<std::string> GrpcServer::DeadTasks() const {
  return agent_ != nullptr ? agent_->DeadTasks() : std::vector<std::string>{};
}

absl::Status GrpcServer::exit_status() const {
  absl::MutexLock lock(&mu_);
  return exit_status_;
}

void GrpcServer::Join() {
  {
    absl::MutexLock lock(&mu_);
    if (!started_) return;
  }
  stopped_note_.WaitForNotification();
}

ClusterSpec GrpcServer::cluster() const {
  absl::MutexLock lock(&mu_);
  return cluster_;
}

void GrpcServer::SetPeerAddress(const std::string& job, int task, const std::string& address) {
  absl::MutexLock lock(&mu_);
  SetAddressLocked(job, task, address);
}

void GrpcServer::SetAddressLocked(const std::string& job, int task, const std::string& address) {
  ClusterSpec::JobMap jobs = cluster_.job_map();
  jobs[job][task] = address;
  if (absl::StatusOr<ClusterSpec> updated = ClusterSpec::FromJobs(std::move(jobs)); updated.ok()) {
    cluster_ = *std::move(updated);
  }
  if (workers_ != nullptr) workers_->SetTaskAddress(TaskName(job, task), address);
}

std::string GrpcServer::host_port() const {
  std::string h = host_.find(':') != std::string::npos ? absl::StrCat("[", host_, "]") : host_;
  return absl::StrCat(h, ":", bound_port_);
}

int GrpcServer::status_port() const { return status_ != nullptr ? status_->port() : 0; }

std::string GrpcServer::target() const { return absl::StrCat("grpc://", host_port()); }

absl::Status ShutdownCluster(const ClusterSpec& cluster, const std::string& reason,
                             const std::vector<std::string>& except, const std::optional<std::string>& auth_token) {
  std::set<std::string> skip;  // canonical names, whichever spelling `except` used
  for (const std::string& e : except) {
    absl::StatusOr<DeviceName> d = DeviceName::Parse(e);
    if (!d.ok() || !d->has_job || !d->has_task) {
      return absl::InvalidArgumentError(absl::StrCat("ShutdownCluster: '", e,
                                                     "' in the tasks to spare is not a task "
                                                     "name; write /job:NAME/task:N. No task was asked to stop."));
    }
    skip.insert(TaskName(d->job, d->task));
  }
  WorkerCache workers(cluster, auth_token.value_or(ClusterToken()));
  // Every task is asked, at once, even after one fails, so that one hung
  // task does not keep the others running.
  std::vector<std::string> tasks;
  for (const std::string& task : workers.TaskNames()) {
    if (skip.count(task) == 0) tasks.push_back(task);
  }
  proto::ShutdownRequest req;
  req.set_reason(reason);
  std::vector<TaskAnswer<proto::ShutdownResponse>> answers = AskTasks<proto::ShutdownResponse>(
      workers, tasks, absl::Seconds(5),
      [&req](WorkerInterface* w, CallOptions* opts, proto::ShutdownResponse*, WorkerInterface::StatusCallback done) {
        w->ShutdownAsync(opts, &req, std::move(done));
      });
  std::vector<std::pair<std::string, absl::Status>> failed;
  for (const TaskAnswer<proto::ShutdownResponse>& answer : answers) {
    if (!answer.status.ok() && !absl::IsUnavailable(answer.status))
      failed.emplace_back(answer.task, answer.status);  // gone is fine
  }
  return FailedOnTasks("Shutdown", failed, tasks.size(), "every other task was asked to stop");
}

absl::StatusOr<ClusterSpec> MakeLocalClusterSpec(int num_ps, int num_workers) {
  ClusterSpec::JobMap jobs;
  auto add = [&](const std::string& job, int n) -> absl::Status {
    for (int i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(int port, Env::Default()->PickUnusedPort());
      jobs[job][i] = absl::StrCat("127.0.0.1:", port);
    }
    return absl::OkStatus();
  };
  absl::Status s = add("ps", num_ps);
  if (s.ok()) s = add("worker", num_workers);
  if (!s.ok()) return s;
  return ClusterSpec::FromJobs(jobs);
}

}  // namespace distflow
