#include "server/grpc_session.h"

#include <random>

#include "absl/base/call_once.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/final_status.h"
#include "base/status_macros.h"
#include "master/local_master.h"
#include "rpc/remote_master.h"
#include "runtime/session_factory.h"

namespace distflow {
namespace {

constexpr int64_t kDefaultWaitMs = 300000;

uint64_t RandomRequestId() {
  static std::mt19937_64 gen{std::random_device{}()};
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  return gen() | 1;
}

}  // namespace

GrpcSession::GrpcSession(std::string address, SessionOptions options, std::unique_ptr<MasterInterface> master)
    : address_(std::move(address)), options_(std::move(options)), master_(std::move(master)) {}

GrpcSession::~GrpcSession() { (void)Close(); }

absl::StatusOr<std::unique_ptr<GrpcSession>> GrpcSession::Create(const std::string& target, SessionOptions options) {
  absl::string_view rest = target;
  if (!absl::ConsumePrefix(&rest, "grpc://") || rest.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("Session target '", target, "' should look like grpc://host:port"));
  }
  std::string address(rest);
  // A server of this process that serves the address is called in memory.
  std::unique_ptr<MasterInterface> master = options.in_process_master ? LocalMaster::Lookup(address) : nullptr;
  if (master == nullptr) master = NewGrpcRemoteMaster(address);
  return std::make_unique<GrpcSession>(std::move(address), std::move(options), std::move(master));
}

absl::Status GrpcSession::Extend(const proto::GraphDef& graph) {
  // One Extend at a time. mu_ is held only to read and publish state, so a
  // Run or Close on another thread never waits behind the wait for the
  // cluster, and a Close ends that wait.
  absl::MutexLock extend_lock(&extend_mu_);
  std::string handle;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::FailedPreconditionError("Session has been closed");
    handle = handle_;
  }
  // Our own server, stopped for good: nothing to wait for.
  if (absl::Status ended = LocalMasterEndedStatus(address_); !ended.ok()) return ended;
  const int64_t wait = options_.wait_for_cluster_ms > 0 ? options_.wait_for_cluster_ms : kDefaultWaitMs;
  // The call in flight, which Close cancels meanwhile.
  CallOptions opts;
  {
    absl::MutexLock lock(&mu_);
    extending_ = &opts;
    if (closed_) opts.StartCancel();  // closed meanwhile: the call ends at once
  }
  auto done_extending = [&] {
    absl::MutexLock lock(&mu_);
    extending_ = nullptr;
  };
  if (!handle.empty()) {
    proto::ExtendSessionRequest req;
    req.set_session_handle(handle);
    *req.mutable_graph_def() = graph;
    absl::Status e = master_->ExtendSession(&opts, wait, req);
    done_extending();
    if (absl::IsCancelled(e)) return absl::FailedPreconditionError("Session was closed while it was being extended");
    return e;
  }
  proto::CreateSessionRequest req;
  *req.mutable_graph_def() = graph;
  proto::SessionConfig* c = req.mutable_config();
  c->set_allow_soft_placement(options_.allow_soft_placement);
  c->set_log_device_placement(options_.log_device_placement);
  for (const std::string& f : options_.device_filters) c->add_device_filters(f);
  c->set_operation_timeout_ms(options_.operation_timeout_ms);
  c->set_wait_for_tasks_ms(wait);
  proto::CreateSessionResponse resp;
  absl::Status e = master_->CreateSession(&opts, wait, req, &resp);
  done_extending();
  if (!e.ok()) {
    if (absl::IsCancelled(e) || absl::IsFailedPrecondition(e)) {
      absl::MutexLock lock(&mu_);
      if (closed_)
        return absl::FailedPreconditionError(
            absl::StrCat("Session was closed while it was being created on ", address_));
    }
    if (absl::IsDeadlineExceeded(e) || absl::IsUnavailable(e)) {
      absl::Status down =
          absl::UnavailableError(absl::StrCat("Cannot create a session on ", address_, ": ", e.message()));
      return IsFinal(e) ? MarkFinal(std::move(down)) : down;  // our own server, stopped meanwhile
    }
    return e;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      handle_ = resp.session_handle();
      return absl::OkStatus();
    }
  }
  // Closed while the master was creating it: nobody will close it but us.
  (void)master_->CloseSession(resp.session_handle());
  return absl::FailedPreconditionError(absl::StrCat("Session was closed while it was being created on ", address_));
}

absl::StatusOr<std::vector<Tensor>> GrpcSession::Run(const RunOptions& options,
                                                     const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                     const std::vector<std::string>& fetches,
                                                     const std::vector<std::string>& targets) {
  RunStepCall call;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::FailedPreconditionError("Session has been closed");
    if (handle_.empty()) return absl::FailedPreconditionError("Session has no graph yet");
    call.req.set_session_handle(handle_);
  }
  if (absl::Status ended = LocalMasterEndedStatus(address_); !ended.ok()) return ended;
  call.feeds = feeds;
  for (const std::string& f : fetches) call.req.add_fetch(f);
  for (const std::string& t : targets) call.req.add_target(t);
  call.req.set_request_id(RandomRequestId());
  call.req.set_timeout_ms(options.timeout_ms > 0 ? options.timeout_ms : options_.operation_timeout_ms);
  call.req.set_trace(options.trace != nullptr);
  call.trace = options.trace;
  if (absl::Status st = master_->RunStep(&call); !st.ok()) return st;
  if (call.fetched.size() != fetches.size()) {
    return absl::DataLossError(absl::StrCat("Asked for ", fetches.size(), " tensors, got ", call.fetched.size()));
  }
  return std::move(call.fetched);
}

absl::Status GrpcSession::Close() {
  std::string handle;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    handle = handle_;
    if (extending_ != nullptr) extending_->StartCancel();  // an Extend waiting on the master
  }
  if (handle.empty()) return absl::OkStatus();  // an Extend still creating it closes it itself
  return master_->CloseSession(handle);
}

absl::Status GrpcSession::Reset(const std::vector<std::string>& containers) {
  proto::ResetRequest req;
  for (const std::string& c : containers) req.add_container(c);
  for (const std::string& f : options_.device_filters) req.add_device_filters(f);
  return master_->Reset(req);
}

void RegisterGrpcSessionFactory() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    RegisterSessionFactory(
        "grpc://",
        [](const std::string& target, SessionOptions options) -> absl::StatusOr<std::unique_ptr<SessionInterface>> {
          ASSIGN_OR_RETURN(std::unique_ptr<GrpcSession> s, GrpcSession::Create(target, std::move(options)));
          return std::unique_ptr<SessionInterface>(std::move(s));
        });
  });
}

namespace {
// Where every object of the layer is linked in (libdistflow.so), loading it
// registers grpc://; static programs get it from Server::Create (or call
// RegisterGrpcSessionFactory), since a linker may drop this object.
[[maybe_unused]] const bool registered_at_load = (RegisterGrpcSessionFactory(), true);
}  // namespace

}  // namespace distflow
