// WorkerCache's choice between TCP and an abstract Unix-domain socket for a
// task (rpc/unix_socket.h, docs/TRANSPORT.md). A task is first dialled over
// TCP at its address. Its first use also starts a probe, off the caller's
// path: a GetStatus over that TCP channel, whose answer's metadata announces
// the task's socket if it has one and says which machine it runs on. If the
// machine is this one, a second GetStatus over a channel to the socket must
// succeed and announce the same (nonce included) before the task's peer
// switches to it. A socket channel that fails to connect (the task went, or
// came back without a socket) turns back to TCP on the next use, and the
// task is asked again. A replaced peer is freed only minutes later
// (RetireLocked): callers may still hold its stubs.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/env.h"
#include "base/logging.h"
#include "grpcpp/client_context.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/auth.h"
#include "rpc/unix_socket.h"
#include "rpc/worker_cache.h"

namespace distflow {
namespace {

// A probe's calls end within this; the cache's destructor waits for them.
constexpr auto kProbeDeadline = std::chrono::seconds(2);
// A task that did not answer (not up yet, or restarting) is asked again
// after a second; one that answered without a socket on this host (another
// machine, another network namespace, or Unix sockets off there), after a
// minute, in case it restarts with one.
constexpr absl::Duration kRetryUnanswered = absl::Seconds(1);
constexpr absl::Duration kRetryAnswered = absl::Seconds(60);
// Longer than any call is in the hands of a caller of Stub() before it has
// started (the longest synchronous one, a bulk fetch's fallback, has 5 min).
constexpr absl::Duration kRetiredFor = absl::Minutes(10);

struct ProbeCall {
  grpc::ClientContext ctx;
  proto::GetStatusRequest req;
  proto::GetStatusResponse resp;
  std::unique_ptr<proto::WorkerService::Stub> stub;
  std::shared_ptr<grpc::Channel> channel;
};

// Sends GetStatus over `channel`; `done` gets the status and what the answer
// announced (rpc/unix_socket.h; "" for nothing).
void AskForSocket(std::shared_ptr<grpc::Channel> channel,
                  std::function<void(const grpc::Status&, const std::string&)> done) {
  auto call = std::make_shared<ProbeCall>();
  call->channel = std::move(channel);
  call->stub = proto::WorkerService::NewStub(call->channel);
  call->ctx.set_deadline(std::chrono::system_clock::now() + kProbeDeadline);
  call->stub->async()->GetStatus(&call->ctx, &call->req, &call->resp, [call, done = std::move(done)](grpc::Status s) {
    std::string announced;
    if (s.ok()) {
      const auto& md = call->ctx.GetServerInitialMetadata();
      if (auto it = md.find(kUnixSocketMetadataKey); it != md.end()) {
        announced.assign(it->second.data(), it->second.size());
      }
    }
    done(s, announced);
  });
}

}  // namespace

std::string WorkerCache::TransportOf(const std::string& task_name) const {
  absl::MutexLock lock(&mu_);
  auto it = peers_.find(task_name);
  if (it == peers_.end()) return "";
  return it->second->over_unix ? "unix" : "tcp";
}

void WorkerCache::RetireLocked(std::unique_ptr<Peer> peer) {
  const absl::Time now = absl::FromUnixMicros(clock_->NowMicros());
  retired_.erase(
      std::remove_if(retired_.begin(), retired_.end(), [now](const auto& r) { return now - r.first > kRetiredFor; }),
      retired_.end());
  retired_.emplace_back(now, std::move(peer));
}

uint64_t WorkerCache::CheckRouteLocked(const std::string& task_name, std::unique_ptr<Peer>& peer) {
  Route& route = routes_[task_name];
  const absl::Time now = absl::FromUnixMicros(clock_->NowMicros());
  if (peer->over_unix) {
    if (peer->channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_TRANSIENT_FAILURE) return 0;
    // The socket is gone: back to TCP, and ask again soon (the task may
    // come back, with or without its socket).
    LOG(INFO) << "gRPC to " << task_name << " goes over TCP again: its Unix-domain socket does not answer";
    std::unique_ptr<Peer> tcp = NewPeer(task_name, peer->tcp, false);
    RetireLocked(std::move(peer));
    peer = std::move(tcp);
    route.ask_after = now + kRetryUnanswered;
    return 0;
  }
  if (route.asking || now < route.ask_after) return 0;
  route.asking = true;
  route.probe = ++next_probe_;
  ++probes_in_flight_;
  return route.probe;
}

void WorkerCache::StartUnixProbe(const std::string& task_name, uint64_t probe, std::shared_ptr<grpc::Channel> tcp) {
  AskForSocket(tcp, [this, task_name, probe](const grpc::Status& s, const std::string& announced) {
    const std::string name = SameHostUnixSocket(announced);
    if (!s.ok() || name.empty()) {
      // Not up yet, or restarting: soon. Any other answer (a refusal of our
      // token, a task without a socket here): rarely.
      const bool unanswered =
          s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      FinishUnixProbe(task_name, probe, nullptr, unanswered ? kRetryUnanswered : kRetryAnswered);
      return;
    }
    // The task is on this machine. Its socket is reachable only from its
    // own network namespace, and there it must be the same task (the same
    // nonce): one call over it decides.
    std::shared_ptr<grpc::Channel> local =
        NewAuthenticatedChannel(UnixSocketTarget(name), UnlimitedChannelArguments(), auth_token_);
    AskForSocket(local, [this, task_name, probe, announced, local](const grpc::Status& s, const std::string& again) {
      FinishUnixProbe(task_name, probe, s.ok() && again == announced ? local : nullptr, kRetryAnswered);
    });
  });
}

void WorkerCache::FinishUnixProbe(const std::string& task_name, uint64_t probe,
                                  std::shared_ptr<grpc::Channel> unix_channel, absl::Duration retry) {
  absl::MutexLock lock(&mu_);
  --probes_in_flight_;
  auto r = routes_.find(task_name);
  if (r == routes_.end() || r->second.probe != probe) return;  // the task moved meanwhile
  Route& route = r->second;
  route.asking = false;
  auto p = peers_.find(task_name);
  if (unix_channel == nullptr || p == peers_.end() || p->second->over_unix) {
    route.ask_after = absl::FromUnixMicros(clock_->NowMicros()) + retry;
    return;
  }
  std::unique_ptr<Peer> local = NewPeer(task_name, std::move(unix_channel), true);
  local->tcp = p->second->channel;
  RetireLocked(std::move(p->second));
  p->second = std::move(local);
}

}  // namespace distflow
