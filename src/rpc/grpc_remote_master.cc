#include "rpc/grpc_remote_master.h"

#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "grpcpp/client_context.h"
#include "proto/health.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/grpc_status.h"
#include "rpc/remote_master.h"
#include "rpc/step_stats_proto.h"
#include "rpc/worker_cache.h"
#include "tensor/tensor_codec.h"

namespace distflow {

std::unique_ptr<MasterInterface> NewGrpcRemoteMaster(std::string address) {
  return std::make_unique<GrpcRemoteMaster>(std::move(address));
}

GrpcRemoteMaster::GrpcRemoteMaster(std::string address) : address_(std::move(address)) {
  channel_ = NewAuthenticatedChannel(address_, UnlimitedChannelArguments(), ClusterToken());
  stub_ = proto::MasterService::NewStub(channel_);
}

absl::Status GrpcRemoteMaster::WaitForMaster(CallOptions* opts, std::chrono::system_clock::time_point deadline) {
  // Close (opts->StartCancel) ends the wait.
  absl::Notification cancelled;
  opts->SetCancelCallback([&cancelled] { cancelled.Notify(); });
  struct Clear {
    CallOptions* opts;
    ~Clear() { opts->ClearCancelCallback(); }
  } clear{opts};
  auto health = grpc::health::v1::Health::NewStub(channel_);
  const auto start = std::chrono::system_clock::now();
  bool said = false;
  std::string last;
  int closed_in_a_row = 0;
  for (auto backoff = std::chrono::milliseconds(100);;
       backoff = std::min(backoff * 2, std::chrono::milliseconds(2000))) {
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
      return absl::FailedPreconditionError(
          absl::StrCat(address_, " answered, but not as a distflow server (", msg, "): check the target's port"));
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
    if (cancelled.WaitForNotificationWithTimeout(absl::FromChrono(backoff))) {
      return absl::FailedPreconditionError(
          absl::StrCat("Session was closed while waiting for the master at ", address_, " to start"));
    }
  }
  const int64_t waited =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() - start).count();
  // The session names the address.
  return absl::UnavailableError(
      absl::StrCat(last, " (waited ", waited, " s). Start its server, or fix the target's host and port."));
}

namespace {

// A call the session's Close cancels (CreateSession, ExtendSession), which
// waits for the channel until `deadline`, as a client may start first.
template <typename Rpc>
absl::Status CallCancellable(CallOptions* opts, std::chrono::system_clock::time_point deadline, Rpc rpc) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(deadline);
  opts->SetCancelCallback([&ctx] { ctx.TryCancel(); });
  grpc::Status s = rpc(&ctx);
  opts->ClearCancelCallback();
  return FromGrpcStatus(s);
}

}  // namespace

absl::Status GrpcRemoteMaster::CreateSession(CallOptions* opts, int64_t wait_ms, const proto::CreateSessionRequest& req,
                                             proto::CreateSessionResponse* resp) {
  // The master has `wait_ms` to come up, and the call 10 s more.
  const auto start = std::chrono::system_clock::now();
  if (absl::Status up = WaitForMaster(opts, start + std::chrono::milliseconds(wait_ms)); !up.ok()) return up;
  RETURN_IF_ERROR(CallCancellable(opts, start + std::chrono::milliseconds(wait_ms + 10000),
                                  [&](grpc::ClientContext* ctx) { return stub_->CreateSession(ctx, req, resp); }));
  // Large feeds and fetches go over the master's bulk port, if it has one.
  if (resp->bulk_port() > 0 && BulkTransferEnabledByEnv()) {
    absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address_);
    absl::StatusOr<std::shared_ptr<const BulkTls>> tls = BulkTls::ForProcess();
    if (hp.ok() && tls.ok()) {
      absl::MutexLock lock(&mu_);
      bulk_host_ = hp->first;
      bulk_port_ = resp->bulk_port();
      bulk_ = std::make_shared<BulkClient>(BulkClient::kClientIdleTimeout, ClusterToken(), *tls);
      bulk_->set_shared_memory(SharedMemoryEnabledByEnv());  // a master on this host: through memory
    }
  }
  return absl::OkStatus();
}

absl::Status GrpcRemoteMaster::ExtendSession(CallOptions* opts, int64_t wait_ms,
                                             const proto::ExtendSessionRequest& req) {
  proto::ExtendSessionResponse resp;
  return CallCancellable(opts, std::chrono::system_clock::now() + std::chrono::milliseconds(wait_ms + 10000),
                         [&](grpc::ClientContext* ctx) { return stub_->ExtendSession(ctx, req, &resp); });
}

absl::Status GrpcRemoteMaster::RunOverGrpc(const proto::RunStepRequest& req, proto::RunStepResponse* resp) {
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
                                             " attempts over ",
                                             std::chrono::duration_cast<std::chrono::seconds>(kReconnectBudget).count(),
                                             " s (", s.error_message(), "); is its server still running?"));
}

absl::Status GrpcRemoteMaster::RunStep(RunStepCall* call) {
  std::shared_ptr<BulkClient> bulk;
  std::string bulk_host;
  int bulk_port = 0;
  {
    absl::MutexLock lock(&mu_);
    bulk = bulk_;
    bulk_host = bulk_host_;
    bulk_port = bulk_port_;
  }
  proto::RunStepRequest& req = call->req;
  for (const auto& [name, t] : call->feeds) {
    proto::NamedTensor* nt = req.add_feed();
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
  req.set_accept_bulk(bulk != nullptr);
  proto::RunStepResponse resp;
  if (absl::Status st = RunOverGrpc(req, &resp); !st.ok()) return st;
  if (call->trace != nullptr) AppendStepStats(resp.step_stats(), call->trace);
  for (const proto::NamedTensor& nt : resp.tensor()) {
    if (nt.bulk_ticket() != 0) {
      ASSIGN_OR_RETURN(auto spec, BulkTensorSpec(nt));
      if (bulk == nullptr) {
        return absl::DataLossError(absl::StrCat("Fetched tensor '", nt.name(), "' came as a bulk ticket"));
      }
      ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(spec.first, spec.second));
      absl::Status got =
          bulk->Fetch(bulk_host, nt.bulk_port(), nt.bulk_ticket(), t.raw_data(), t.TotalBytes(), nullptr);
      if (!got.ok()) return absl::Status(got.code(), absl::StrCat("Fetched tensor '", nt.name(), "': ", got.message()));
      call->fetched.push_back(std::move(t));
      continue;
    }
    absl::StatusOr<Tensor> t = DecodeTensor(nt.tensor());
    if (!t.ok()) return absl::DataLossError(absl::StrCat("Fetched tensor '", nt.name(), "': ", t.status().message()));
    call->fetched.push_back(std::move(*t));
  }
  return absl::OkStatus();
}

absl::Status GrpcRemoteMaster::CloseSession(const std::string& handle) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  proto::CloseSessionRequest req;
  req.set_session_handle(handle);
  proto::CloseSessionResponse resp;
  grpc::Status s = stub_->CloseSession(&ctx, req, &resp);
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ? absl::OkStatus() : FromGrpcStatus(s);
}

absl::Status GrpcRemoteMaster::Reset(const proto::ResetRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  proto::ResetResponse resp;
  return FromGrpcStatus(stub_->Reset(&ctx, req, &resp));
}

absl::Status GrpcRemoteMaster::ListDevices(proto::ListDevicesResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return FromGrpcStatus(stub_->ListDevices(&ctx, proto::ListDevicesRequest(), resp));
}

}  // namespace distflow
