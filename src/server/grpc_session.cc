#include "server/grpc_session.h"

#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "rpc/auth.h"
#include "server/grpc_master_service.h"
#include "rpc/grpc_status.h"
#include "master/local_master.h"
#include "master/master.h"
#include "rpc/step_stats_proto.h"
#include "rpc/worker_cache.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/health.grpc.pb.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace {

constexpr int64_t kDefaultWaitMs = 300000;

// Takes (and drops) the offers an in-process master made for `resp`'s fetches.
void TakeBulkFetches(BulkServer& bulk, const proto::RunStepResponse& resp) {
  for (const proto::NamedTensor& nt : resp.tensor())
    if (nt.bulk_ticket() != 0) (void)bulk.TakeOffer(nt.bulk_ticket());
}

uint64_t RandomRequestId() {
  static std::mt19937_64 gen{std::random_device{}()};
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  return gen() | 1;
}

}  // namespace

GrpcSession::GrpcSession(std::string address, SessionOptions options)
    : address_(std::move(address)), options_(std::move(options)) {
  channel_ = NewAuthenticatedChannel(address_, UnlimitedChannelArguments(), ClusterToken());
  stub_ = proto::MasterService::NewStub(channel_);
}

GrpcSession::~GrpcSession() { (void)Close(); }

std::optional<LocalMasterLease> GrpcSession::InProcessMaster() const {
  if (!options_.in_process_master) return std::nullopt;
  return LocalMasterLease::Find(address_);
}

absl::Status GrpcSession::RunInProcess(const std::shared_ptr<InProcessCall>& call) {
  call->lease->master()->RunStepAsync(&call->req, &call->resp, [call](absl::Status s) {
    bool abandoned = false;
    {
      absl::MutexLock lock(&call->mu);
      call->status = std::move(s);
      call->completed = true;
      abandoned = call->abandoned;
    }
    if (abandoned && call->bulk != nullptr) TakeBulkFetches(*call->bulk, call->resp);
    call->finished.Notify();
  });
  // The master enforces the step's deadline on its partitions; this bounds
  // the rest (registering a new plan, a peer that accepts but never answers)
  // the way the gRPC path's deadline does.
  if (call->req.timeout_ms() > 0) {
    if (!call->finished.WaitForNotificationWithTimeout(absl::Milliseconds(call->req.timeout_ms() + 5000))) {
      absl::MutexLock lock(&call->mu);
      if (!call->completed) {
        call->abandoned = true;  // its completion frees what it offered
        return absl::DeadlineExceededError(absl::StrCat("The step did not finish within its ", call->req.timeout_ms(),
                                                        " ms timeout (plus 5 s) on ", address_));
      }
    }
  } else {
    call->finished.WaitForNotification();
  }
  return call->status;
}

absl::Status GrpcSession::RunOverGrpc(const proto::RunStepRequest& req, proto::RunStepResponse* resp) {
  // A reply lost to a broken connection is retried; the master runs the step
  // once (same request id), and a retry of a step still running waits for
  // it. Retries back off (0.1 s doubling to 2 s) and wait for the channel to
  // reconnect, within a budget of 10 s of failing attempts: right after a
  // connection breaks, gRPC may still call the channel ready and fail the
  // next call at once, so retrying without a pause used up every attempt in
  // a few milliseconds. Only the reconnecting is bounded, not the step. The
  // session exists, so its master was up: one that stays unreachable is an
  // error after the budget, not a wait forever.
  constexpr auto kReconnectBudget = std::chrono::seconds(10);
  constexpr auto kMaxBackoff = std::chrono::milliseconds(2000);
  grpc::Status s;
  int attempts = 0;
  std::chrono::milliseconds backoff(100);
  std::chrono::system_clock::time_point give_up{};
  for (;;) {
    ++attempts;
    grpc::ClientContext ctx;
    if (req.timeout_ms() > 0) {
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(req.timeout_ms() + 5000));
    }
    resp->Clear();
    s = stub_->RunStep(&ctx, req, resp);
    if (s.ok()) return absl::OkStatus();
    const auto& trailers = ctx.GetServerTrailingMetadata();
    if (trailers.find(kStepStatusMetadataKey) != trailers.end()) return FromGrpcStatus(s);  // the step's own error
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return FromGrpcStatus(s);
    const auto now = std::chrono::system_clock::now();
    if (attempts == 1) give_up = now + kReconnectBudget;
    if (now >= give_up) break;
    std::this_thread::sleep_for(std::min<std::chrono::system_clock::duration>(backoff, give_up - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
    channel_->WaitForConnected(std::min(give_up, std::chrono::system_clock::now() + std::chrono::seconds(3)));
  }
  return absl::UnavailableError(absl::StrCat("The master at ", address_, " is unreachable after ", attempts,
                                             " attempts over ", std::chrono::duration_cast<std::chrono::seconds>(kReconnectBudget).count(),
                                             " s (", s.error_message(), "); is its server still running?"));
}

absl::Status GrpcSession::WaitForMaster(std::chrono::system_clock::time_point deadline) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  const auto start = std::chrono::system_clock::now();
  bool said = false;
  std::string last;
  int closed_in_a_row = 0;
  for (auto backoff = std::chrono::milliseconds(100);; backoff = std::min(backoff * 2, std::chrono::milliseconds(2000))) {
    // A health check that fails at once (no wait for the channel), so a
    // refused connection is known in a moment rather than at the deadline.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = health->Check(&ctx, req, &resp);
    if (s.ok()) return absl::OkStatus();
    const std::string msg = s.error_message();
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      return absl::FailedPreconditionError(absl::StrCat(
          address_, " is a gRPC server but not a distflow server (it has no health service): check the target"));
    }
    if (absl::StrContains(msg, "http1") || absl::StrContains(msg, "HTTP/1")) {
      return absl::FailedPreconditionError(absl::StrCat(address_, " answered, but not as a distflow server (",
                                                        msg, "): check the target's port"));
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE && s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::OkStatus();  // it answered: CreateSession says the rest
    }
    // TLS mismatches: a TLS server closes a plain or untrusted client's
    // connection at once; a handshake that fails says so.
    if (absl::StrContains(msg, "andshake") || absl::StrContains(msg, "SSL") || absl::StrContains(msg, "ssl")) {
      return absl::UnavailableError(absl::StrCat(
          "The TLS handshake with ", address_, " failed (", msg,
          "): check that its certificate names the host in the target, that both sides have certificates from the "
          "same CA (--tls_ca), and that the server uses TLS at all"));
    }
    closed_in_a_row = absl::StrContains(msg, "Socket closed") ? closed_in_a_row + 1 : 0;
    if (closed_in_a_row >= 3) {
      return absl::UnavailableError(absl::StrCat(
          address_, " closes every connection at once (", msg, "): it probably requires TLS",
          TlsEnabled() ? " with a client certificate from its CA, which this one is not"
                       : ", which this client does not use",
          ". Give every task and client the cluster's TLS files (--tls_cert, --tls_key, --tls_ca or DISTFLOW_TLS_CERT, "
          "DISTFLOW_TLS_KEY, DISTFLOW_TLS_CA)"));
    }
    const bool refused = absl::StrContains(msg, "onnection refused");
    last = refused ? "connection refused: nothing listens there" : msg;
    const auto now = std::chrono::system_clock::now();
    const int64_t left = std::chrono::duration_cast<std::chrono::seconds>(deadline - now).count();
    if (now + backoff >= deadline) break;
    if (!said) {
      said = true;
      LOG(WARNING) << "The master at " << address_ << ": " << last << "; waiting up to " << left
                   << " s for its server to start";
    }
    absl::MutexLock lock(&mu_);
    auto closed = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return closed_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&closed), absl::FromChrono(backoff))) {
      return absl::FailedPreconditionError(
          absl::StrCat("Session was closed while waiting for the master at ", address_, " to start"));
    }
  }
  const int64_t waited =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() - start).count();
  // Extend names the address.
  return absl::UnavailableError(
      absl::StrCat(last, " (waited ", waited, " s). Start its server, or fix the target's host and port."));
}

absl::StatusOr<std::unique_ptr<GrpcSession>> GrpcSession::Create(const std::string& target, SessionOptions options) {
  absl::string_view rest = target;
  if (!absl::ConsumePrefix(&rest, "grpc://") || rest.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("Session target '", target, "' should look like grpc://host:port"));
  }
  return std::unique_ptr<GrpcSession>(new GrpcSession(std::string(rest), std::move(options)));
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
  std::optional<LocalMasterLease> local = InProcessMaster();
  if (!local) {
    if (absl::Status ended = LocalMasterEndedStatus(address_); !ended.ok()) {
      return ended;  // our own server, stopped for good: nothing to wait for
    }
  }
  grpc::ClientContext ctx;
  int64_t wait = options_.wait_for_cluster_ms > 0 ? options_.wait_for_cluster_ms : kDefaultWaitMs;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(wait + 10000));
  // Calls the master over gRPC with `ctx`, which Close cancels meanwhile.
  auto call_remote = [&](auto&& rpc) -> absl::Status {
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return absl::CancelledError("the session was closed");
      extending_ = &ctx;
    }
    grpc::Status s = rpc();
    absl::MutexLock lock(&mu_);
    extending_ = nullptr;
    return FromGrpcStatus(s);
  };
  if (!handle.empty()) {
    proto::ExtendSessionRequest req;
    req.set_session_handle(handle);
    *req.mutable_graph_def() = graph;
    if (local) return local->master()->ExtendSession(req);
    proto::ExtendSessionResponse resp;
    absl::Status e = call_remote([&] { return stub_->ExtendSession(&ctx, req, &resp); });
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
  absl::Status e;
  if (local) {
    e = local->master()->CreateSession(req, &resp);
  } else {
    e = WaitForMaster(std::chrono::system_clock::now() + std::chrono::milliseconds(wait));
    if (e.ok()) e = call_remote([&] { return stub_->CreateSession(&ctx, req, &resp); });
  }
  if (!e.ok()) {
    if (absl::IsCancelled(e) || absl::IsFailedPrecondition(e)) {
      absl::MutexLock lock(&mu_);
      if (closed_) return absl::FailedPreconditionError(absl::StrCat("Session was closed while it was being created on ", address_));
    }
    if (absl::IsDeadlineExceeded(e) || absl::IsUnavailable(e)) {
      return absl::UnavailableError(absl::StrCat("Cannot create a session on ", address_, ": ", e.message()));
    }
    return e;
  }
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      handle_ = resp.session_handle();
      // An in-process master takes large feeds from memory (Run); others over their bulk port.
      if (!local && resp.bulk_port() > 0 && BulkTransferEnabledByEnv()) {
        absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address_);
        absl::StatusOr<std::shared_ptr<const BulkTls>> tls = BulkTls::ForProcess();
        if (hp.ok() && tls.ok()) {
          bulk_host_ = hp->first;
          bulk_port_ = resp.bulk_port();
          bulk_ = std::make_unique<BulkClient>(BulkClient::kClientIdleTimeout, ClusterToken(), *tls);
        }
      }
      return absl::OkStatus();
    }
  }
  // Closed while the master was creating it: nobody will close it but us.
  (void)CloseOnMaster(resp.session_handle());
  return absl::FailedPreconditionError(absl::StrCat("Session was closed while it was being created on ", address_));
}

absl::StatusOr<std::vector<Tensor>> GrpcSession::Run(const RunOptions& options,
                                                     const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                     const std::vector<std::string>& fetches,
                                                     const std::vector<std::string>& targets) {
  proto::RunStepRequest req;
  BulkClient* bulk = nullptr;
  std::string bulk_host;
  int bulk_port = 0;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::FailedPreconditionError("Session has been closed");
    if (handle_.empty()) return absl::FailedPreconditionError("Session has no graph yet");
    req.set_session_handle(handle_);
    bulk = bulk_.get();
    bulk_host = bulk_host_;
    bulk_port = bulk_port_;
  }
  // A master in this process takes large feeds and hands back large fetches
  // in memory, through its bulk server's tickets, without copying them.
  std::optional<LocalMasterLease> local = InProcessMaster();
  if (!local) {
    if (absl::Status ended = LocalMasterEndedStatus(address_); !ended.ok()) return ended;
  }
  BulkServer* local_bulk =
      local && BulkTransferEnabledByEnv() ? local->master()->bulk_server() : nullptr;
  if (local) bulk = nullptr;
  for (const auto& [name, t] : feeds) {
    proto::NamedTensor* nt = req.add_feed();
    if (local_bulk != nullptr && IsBulkCandidate(t)) {
      SetBulkNamedTensor(name, t, local_bulk->PutLocal(t), local_bulk->port(), nt);
      continue;
    }
    // Large feeds go to the master's bulk port first; the request names them.
    if (bulk != nullptr && IsBulkCandidate(t)) {
      absl::StatusOr<uint64_t> ticket = bulk->Put(bulk_host, bulk_port, t.raw_data(), t.TotalBytes());
      if (ticket.ok()) {
        SetBulkNamedTensor(name, t, *ticket, bulk_port, nt);
        continue;
      }
      // Nothing was handed over: send this one inside the request instead.
    }
    nt->set_name(name);
    EncodeTensor(t, nt->mutable_tensor());
  }
  req.set_accept_bulk(bulk != nullptr || local_bulk != nullptr);
  for (const std::string& f : fetches) req.add_fetch(f);
  for (const std::string& t : targets) req.add_target(t);
  req.set_request_id(RandomRequestId());
  req.set_timeout_ms(options.timeout_ms > 0 ? options.timeout_ms : options_.operation_timeout_ms);
  req.set_trace(options.trace != nullptr);
  // In process, `call` holds the lease (and so the master) until the step's
  // completion has run, even if we stop waiting for it.
  std::shared_ptr<InProcessCall> call;
  proto::RunStepResponse remote_resp;
  const proto::RunStepResponse* answer = &remote_resp;
  if (local) {
    call = std::make_shared<InProcessCall>();
    call->req = std::move(req);
    call->lease.emplace(std::move(*local));
    call->bulk = local_bulk;
    absl::Status st = RunInProcess(call);
    if (!st.ok()) return st;
    answer = &call->resp;
  } else {
    absl::Status st = RunOverGrpc(req, &remote_resp);
    if (!st.ok()) return st;
  }
  const proto::RunStepResponse& resp = *answer;
  if (options.trace != nullptr) AppendStepStats(resp.step_stats(), options.trace);
  std::vector<Tensor> out;
  for (const proto::NamedTensor& nt : resp.tensor()) {
    if (nt.bulk_ticket() != 0) {
      absl::StatusOr<std::pair<DataType, TensorShape>> spec = BulkTensorSpec(nt);
      if (!spec.ok()) {
        if (local_bulk != nullptr) TakeBulkFetches(*local_bulk, resp);  // do not leave them pinned
        return spec.status();
      }
      if (local_bulk != nullptr) {
        absl::StatusOr<Tensor> t = local_bulk->TakeOffer(nt.bulk_ticket());
        if (t.ok() && (t->dtype() != spec->first || t->shape() != spec->second)) {
          t = absl::DataLossError("it does not match its announced type");
        }
        if (!t.ok()) {
          TakeBulkFetches(*local_bulk, resp);  // do not leave the others pinned until their TTL
          return absl::Status(t.status().code(),
                              absl::StrCat("Fetched tensor '", nt.name(), "': ", t.status().message()));
        }
        out.push_back(std::move(*t));
        continue;
      }
      if (bulk == nullptr) return absl::DataLossError(absl::StrCat("Fetched tensor '", nt.name(), "' came as a bulk ticket"));
      absl::StatusOr<Tensor> t = Tensor::Allocate(spec->first, spec->second);
      if (!t.ok()) return t.status();
      absl::Status got = bulk->Fetch(bulk_host, nt.bulk_port(), nt.bulk_ticket(), t->raw_data(), t->TotalBytes(), nullptr);
      if (!got.ok()) return absl::Status(got.code(), absl::StrCat("Fetched tensor '", nt.name(), "': ", got.message()));
      out.push_back(std::move(*t));
      continue;
    }
    absl::StatusOr<Tensor> t = DecodeTensor(nt.tensor());
    if (!t.ok()) return absl::DataLossError(absl::StrCat("Fetched tensor '", nt.name(), "': ", t.status().message()));
    out.push_back(std::move(*t));
  }
  if (out.size() != fetches.size()) {
    return absl::DataLossError(absl::StrCat("Asked for ", fetches.size(), " tensors, got ", out.size()));
  }
  return out;
}

absl::Status GrpcSession::Close() {
  std::string handle;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    handle = handle_;
    if (extending_ != nullptr) extending_->TryCancel();  // an Extend waiting on the master
  }
  if (handle.empty()) return absl::OkStatus();  // an Extend still creating it closes it itself
  return CloseOnMaster(handle);
}

absl::Status GrpcSession::CloseOnMaster(const std::string& handle) {
  if (std::optional<LocalMasterLease> local = InProcessMaster()) return local->master()->CloseSession(handle);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  proto::CloseSessionRequest req;
  req.set_session_handle(handle);
  proto::CloseSessionResponse resp;
  grpc::Status s = stub_->CloseSession(&ctx, req, &resp);
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ? absl::OkStatus() : FromGrpcStatus(s);
}

absl::Status GrpcSession::Reset(const std::vector<std::string>& containers) {
  proto::ResetRequest req;
  for (const std::string& c : containers) req.add_container(c);
  for (const std::string& f : options_.device_filters) req.add_device_filters(f);
  if (std::optional<LocalMasterLease> local = InProcessMaster()) return local->master()->Reset(req);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  proto::ResetResponse resp;
  return FromGrpcStatus(stub_->Reset(&ctx, req, &resp));
}

}  // namespace distflow
