#include "rpc/worker_cache.h"

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/bytes_copied.h"
#include "base/env.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "base/tsan.h"
#include "cluster/device_filters.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "rpc/auth.h"
#include "rpc/grpc_remote_worker.h"
#include "rpc/rpc_metrics.h"
#include "rpc/tensor_transfer.h"
#include "rpc/unix_socket.h"
#include "runtime/kernel_threads.h"

namespace distflow {

grpc::ChannelArguments UnlimitedChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  args.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  // Keep connections to peers alive across idle periods between steps.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  // A peer that is not up yet (or restarting) is dialled again at least every
  // second. gRPC's own backoff grows to two minutes, so a task that started
  // a few minutes late would be found up to two minutes after it came up.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return args;
}

WorkerCache::WorkerCache(ClusterSpec cluster) : WorkerCache(std::move(cluster), ClusterToken()) {}

WorkerCache::WorkerCache(ClusterSpec cluster, std::string auth_token, Env* clock)
    : cluster_(std::move(cluster)),
      clock_(clock != nullptr ? clock : Env::Default()),
      auth_token_(std::move(auth_token)),
      unix_sockets_(UnixSocketsEnabledByEnv() && !TlsEnabled()) {}

WorkerCache::~WorkerCache() {
  bulk_pool_.reset();  // finishes in-flight bulk reads before the client goes
  // A probe's callback uses the cache; each ends within its deadline.
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &probes_in_flight_));
}

void WorkerCache::EnableBulkTransfer(BulkServer* local, bool shared_memory) {
  local_bulk_ = local;
  absl::StatusOr<std::shared_ptr<const BulkTls>> tls = BulkTls::ForProcess();
  if (!tls.ok()) {  // the server checked the same files first; a client-only process may not
    LOG(WARNING) << "Bulk transfer is off: " << tls.status().message();
    return;
  }
  bulk_ = std::make_unique<BulkClient>(BulkClient::kClientIdleTimeout, auth_token_, *tls);
  bulk_->set_shared_memory(shared_memory);
  bulk_pool_ = std::make_unique<ThreadPool>("df_bulk", 4);
}

std::vector<std::string> WorkerCache::TaskNames() const {
  std::vector<std::string> out;
  for (const std::string& job : cluster_.jobs())
    for (int t : cluster_.task_indices(job)) out.push_back(TaskName(job, t));
  return out;
}

void WorkerCache::SetTaskAddress(const std::string& task_name, const std::string& address) {
  absl::MutexLock lock(&mu_);
  overrides_[task_name] = address;
  if (auto it = peers_.find(task_name); it != peers_.end()) {
    RetireLocked(std::move(it->second));
    peers_.erase(it);
  }
  routes_.erase(task_name);  // a probe in flight for the old address is dropped
}

absl::StatusOr<std::string> WorkerCache::AddressOf(const std::string& task_name) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = overrides_.find(task_name);
    if (it != overrides_.end()) return it->second;
  }
  // "/job:J/replica:0/task:T"
  std::string job;
  int task = -1;
  for (absl::string_view part : absl::StrSplit(task_name, '/')) {
    if (absl::ConsumePrefix(&part, "job:")) job = std::string(part);
    if (absl::ConsumePrefix(&part, "task:") && !absl::SimpleAtoi(part, &task)) task = -1;
  }
  if (job.empty() || task < 0) return absl::InvalidArgumentError(absl::StrCat("Malformed task name '", task_name, "'"));
  absl::StatusOr<std::string> address = cluster_.task_address(job, task);
  if (address.ok() || !resolver_) return address;
  // Not in the spec: a task that joined the running job.
  absl::StatusOr<std::string> found = resolver_(task_name);
  if (!found.ok()) {
    // A coordinator that restarted knows a joined task again only from its
    // next heartbeat (a second at most): Unavailable, so that the step is
    // retried, rather than an error that ends the worker.
    const absl::StatusCode code =
        absl::IsNotFound(found.status()) ? absl::StatusCode::kUnavailable : address.status().code();
    return absl::Status(code, absl::StrCat(address.status().message(),
                                           "; nor did it join the running job (asking the "
                                           "coordinator: ",
                                           found.status().message(), ")"));
  }
  absl::MutexLock lock(&mu_);
  overrides_[task_name] = *found;
  return found;
}

absl::StatusOr<WorkerCache::Peer*> WorkerCache::GetPeer(const std::string& task_name) {
  uint64_t probe = 0;
  Peer* peer = nullptr;
  std::shared_ptr<grpc::Channel> tcp;  // to probe, if `probe`
  {
    absl::MutexLock lock(&mu_);
    auto it = peers_.find(task_name);
    if (it != peers_.end()) {
      if (unix_sockets_) probe = CheckRouteLocked(task_name, it->second);
      peer = it->second.get();
      if (probe != 0) tcp = peer->channel;
    }
  }
  if (peer == nullptr) {
    ASSIGN_OR_RETURN(std::string addr, AddressOf(task_name));
    absl::MutexLock lock(&mu_);
    std::unique_ptr<Peer>& slot = peers_[task_name];
    if (slot == nullptr) {
      slot = NewPeer(task_name, NewAuthenticatedChannel(addr, UnlimitedChannelArguments(), auth_token_), false);
    }
    if (unix_sockets_) probe = CheckRouteLocked(task_name, slot);
    peer = slot.get();
    if (probe != 0) tcp = peer->channel;
  }
  // Outside the lock: gRPC may run the probe's callback on this thread.
  if (probe != 0) StartUnixProbe(task_name, probe, std::move(tcp));
  return peer;
}

std::unique_ptr<WorkerCache::Peer> WorkerCache::NewPeer(const std::string& task_name,
                                                        std::shared_ptr<grpc::Channel> channel, bool over_unix) {
  auto peer = std::make_unique<Peer>();
  peer->channel = std::move(channel);
  peer->stub = proto::WorkerService::NewStub(peer->channel);
  peer->generic = std::make_unique<grpc::GenericStub>(peer->channel);
  peer->remote = std::make_shared<GrpcRemoteWorker>(task_name, peer->channel, this);
  peer->over_unix = over_unix;
  CountChannel(over_unix ? "unix" : "tcp");
  return peer;
}

void WorkerCache::SetLocalWorker(const std::string& task, std::shared_ptr<WorkerInterface> worker) {
  absl::MutexLock lock(&mu_);
  local_task_ = worker != nullptr ? task : std::string();
  local_ = std::move(worker);
}

absl::StatusOr<std::shared_ptr<WorkerInterface>> WorkerCache::GetWorker(const std::string& task_name) {
  {
    absl::MutexLock lock(&mu_);
    if (local_ != nullptr && task_name == local_task_) return local_;
  }
  ASSIGN_OR_RETURN(Peer * p, GetPeer(task_name));
  return p->remote;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> WorkerCache::Channel(const std::string& task_name) {
  ASSIGN_OR_RETURN(Peer * p, GetPeer(task_name));
  return p->channel;
}

absl::StatusOr<proto::WorkerService::Stub*> WorkerCache::Stub(const std::string& task_name) {
  ASSIGN_OR_RETURN(Peer * p, GetPeer(task_name));
  return p->stub.get();
}

absl::StatusOr<grpc::GenericStub*> WorkerCache::GenericStub(const std::string& task_name) {
  ASSIGN_OR_RETURN(Peer * p, GetPeer(task_name));
  return p->generic.get();
}

void WorkerCache::SetGoneReason(GoneReason reason) {
  absl::MutexLock lock(&gone_mu_);
  gone_ = std::move(reason);
}

absl::StatusOr<std::vector<std::string>> WorkerCache::WaitForDevices(const std::vector<std::string>& filters,
                                                                     absl::Duration wait,
                                                                     const absl::Notification* stop) {
  std::vector<std::string> waiting;
  for (const std::string& t : TaskNames())
    if (PassesFilters(t, filters)) waiting.push_back(t);
  auto now = [this] { return absl::FromUnixMicros(clock_->NowMicros()); };
  const absl::Time deadline = now() + wait;
  absl::Time next_log = now() + absl::Seconds(2);
  absl::Duration backoff = absl::Milliseconds(50);
  std::vector<std::string> devices;
  auto describe = [this](const std::vector<std::string>& tasks) {
    std::vector<std::string> desc;
    for (const std::string& t : tasks) desc.push_back(absl::StrCat(t, " at ", AddressOf(t).value_or("?")));
    return absl::StrJoin(desc, ", ");
  };
  while (!waiting.empty()) {
    std::vector<std::string> still;
    for (const std::string& task : waiting) {
      ASSIGN_OR_RETURN(proto::WorkerService::Stub * stub, Stub(task));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1000));
      proto::GetStatusRequest r;
      proto::GetStatusResponse out;
      grpc::Status s = stub->GetStatus(&ctx, r, &out);
      if (s.ok()) {
        for (const auto& d : out.devices()) devices.push_back(d.name());
      } else {
        still.push_back(task);
      }
    }
    waiting.swap(still);
    if (waiting.empty()) break;
    // A task the cluster knows is gone is not worth the wait: say so now.
    // (One that is back answered above, whatever the detector last said.)
    std::vector<std::string> gone;
    {
      absl::MutexLock lock(&gone_mu_);
      if (gone_) {
        for (const std::string& task : waiting) {
          if (std::string why = gone_(task); !why.empty()) {
            gone.push_back(absl::StrCat(task, " at ", AddressOf(task).value_or("?"), ": ", why));
          }
        }
      }
    }
    if (!gone.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "The session needs the devices of ", absl::StrJoin(gone, "; and of "), ". Not waiting for ",
          gone.size() == 1 ? "it: start it again on its address (sessions then wait for it as for any task), or leave "
                             "it out of the session with device filters."
                           : "them: start them again on their addresses (sessions then wait for them as for any "
                             "task), or leave them out of the session with device filters."));
    }
    const absl::Time t = now();
    if (t >= deadline) {
      return absl::UnavailableError(
          absl::StrCat("Gave up after ", absl::ToDoubleSeconds(wait), " s waiting for ", waiting.size(),
                       " task(s) of the cluster: ", describe(waiting),
                       ". Start them, check their addresses in the cluster spec, or limit the "
                       "session to some tasks with device filters."));
    }
    if (t >= next_log) {
      LOG(INFO) << "Waiting for " << describe(waiting) << " to come up";
      next_log = t + absl::Seconds(5);
    }
    const absl::Duration pause = std::min(backoff, deadline - t);
    if (stop == nullptr) {
      clock_->SleepForMicros(absl::ToInt64Microseconds(pause));
    } else if (stop->WaitForNotificationWithTimeout(pause)) {
      return absl::CancelledError(
          absl::StrCat("Stopped waiting for ", describe(waiting), ": this server is shutting down"));
    }
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
  std::sort(devices.begin(), devices.end());
  return devices;
}

void WorkerCache::RecvTensorAsync(const std::string& task, int64_t step_id, const std::string& key,
                                  CancellationManager* cm, Rendezvous::DoneCallback counted) {
  Rendezvous::DoneCallback done = [task, counted = std::move(counted)](absl::Status s, Tensor t) {
    if (s.ok()) CountTensorBytesReceived(TaskOfDevice(task), t.TotalBytes());
    counted(std::move(s), std::move(t));
  };
  absl::StatusOr<grpc::GenericStub*> stub = GenericStub(task);
  if (!stub.ok()) {
    done(stub.status(), Tensor());
    return;
  }
  struct Call {
    grpc::ClientContext ctx;
    grpc::ByteBuffer request, response;
    CancellationManager::Token token = CancellationManager::kInvalidToken;
  };
  auto call = std::make_shared<Call>();
  proto::RecvTensorRequest req;
  req.set_step_id(step_id);
  req.set_rendezvous_key(key);
  req.set_accept_bulk(bulk_ != nullptr);
  bool own = false;
  grpc::Status ser =
      grpc::GenericSerialize<grpc::ProtoBufferWriter, proto::RecvTensorRequest>(req, &call->request, &own);
  if (!ser.ok()) {
    done(FromGrpcStatus(ser), Tensor());
    return;
  }
  if (cm != nullptr) {
    call->token = cm->Register([call] { call->ctx.TryCancel(); });
    if (call->token == CancellationManager::kInvalidToken) {
      done(absl::CancelledError("step cancelled before RecvTensor"), Tensor());
      return;
    }
  }
  DF_TSAN_HANDOFF(call.get());
  (*stub)->UnaryCall(
      &call->ctx, "/distflow.proto.WorkerService/RecvTensor", grpc::StubOptions(), &call->request, &call->response,
      [this, call, cm, task, key, done = std::move(done)](grpc::Status s) {
        DF_TSAN_RECEIVE(call.get());
        if (cm != nullptr) cm->Deregister(call->token);
        if (!s.ok()) {
          absl::Status err = FromGrpcStatus(s);
          done(absl::Status(err.code(), absl::StrCat("RecvTensor '", key, "' from ", task, ": ", err.message())),
               Tensor());
          return;
        }
        BulkRef ref;
        absl::StatusOr<Tensor> t = DecodeTensorFromByteBuffer(call->response, bulk_ != nullptr ? &ref : nullptr);
        if (t.ok() && ref.ticket != 0) {
          FetchBulk(task, key, std::move(*t), ref, cm, std::move(done));
          return;
        }
        if (!t.ok()) {
          done(absl::Status(t.status().code(),
                            absl::StrCat("RecvTensor '", key, "' from ", task, ": ", t.status().message())),
               Tensor());
          return;
        }
        done(absl::OkStatus(), std::move(*t));
      });
}

void WorkerCache::RecvTensorBundleAsync(const std::string& task, int64_t step_id, const std::vector<std::string>& keys,
                                        std::vector<PushedTensor> pushed, CancellationManager* cm,
                                        BundleCallback done) {
  absl::StatusOr<grpc::GenericStub*> stub = GenericStub(task);
  if (!stub.ok()) {
    done(stub.status(), {});
    return;
  }
  struct Call {
    grpc::ClientContext ctx;
    grpc::ByteBuffer request, response;
    CancellationManager::Token token = CancellationManager::kInvalidToken;
  };
  auto call = std::make_shared<Call>();
  proto::RecvTensorRequest req;
  req.set_step_id(step_id);
  for (const std::string& key : keys) req.add_bundle_keys(key);
  req.set_accept_bulk(bulk_ != nullptr);
  if (!pushed.empty()) {
    // A large tensor rides as a bulk header: `task` reads its bytes from
    // this task's bulk port (or shared memory), as a single receive's answer
    // would be read; it makes no call for it.
    BulkServer* offer = bulk_ != nullptr ? local_bulk_ : nullptr;
    std::vector<grpc::ByteBuffer> parts;
    for (PushedTensor& p : pushed) {
      if (p.fetch) {
        req.add_pushed_fetch_keys(p.key);
        continue;
      }
      req.add_pushed_keys(p.key);
      CountTensorBytesSent(TaskOfDevice(task), p.value.TotalBytes());
      const uint64_t ticket = offer != nullptr && IsBulkCandidate(p.value) ? offer->Offer(p.value) : 0;
      parts.push_back(ticket != 0 ? EncodeBulkTensorHeader(p.value, ticket, offer->port())
                                  : EncodeTensorToByteBuffer(p.value));
    }
    if (!parts.empty()) req.set_pushed(EncodeTensorBundleToString(parts));
  }
  bool own = false;
  grpc::Status ser =
      grpc::GenericSerialize<grpc::ProtoBufferWriter, proto::RecvTensorRequest>(req, &call->request, &own);
  if (!ser.ok()) {
    done(FromGrpcStatus(ser), {});
    return;
  }
  if (cm != nullptr) {
    call->token = cm->Register([call] { call->ctx.TryCancel(); });
    if (call->token == CancellationManager::kInvalidToken) {
      done(absl::CancelledError("step cancelled before RecvTensor"), {});
      return;
    }
  }
  DF_TSAN_HANDOFF(call.get());
  (*stub)->UnaryCall(&call->ctx, "/distflow.proto.WorkerService/RecvTensor", grpc::StubOptions(), &call->request,
                     &call->response, [this, call, cm, task, keys, done = std::move(done)](grpc::Status s) mutable {
                       const size_t n = keys.size();
                       const std::string& first = keys.front();
                       DF_TSAN_RECEIVE(call.get());
                       if (cm != nullptr) cm->Deregister(call->token);
                       auto named = [&](const absl::Status& e) {
                         return absl::Status(e.code(), absl::StrCat("RecvTensor of a bundle of ", n, " tensors ('",
                                                                    first, "', ...) from ", task, ": ", e.message()));
                       };
                       if (!s.ok()) {
                         done(named(FromGrpcStatus(s)), {});
                         return;
                       }
                       std::vector<BulkRef> refs;
                       absl::StatusOr<std::vector<Tensor>> t =
                           DecodeTensorBundle(call->response, n, bulk_ != nullptr ? &refs : nullptr);
                       if (!t.ok()) {
                         done(named(t.status()), {});
                         return;
                       }
                       FetchBundleParts(task, keys, std::move(*t), refs, cm, std::move(done));
                     });
}

void WorkerCache::FetchBundleParts(const std::string& task, const std::vector<std::string>& keys,
                                   std::vector<Tensor> tensors, const std::vector<BulkRef>& refs,
                                   CancellationManager* cm, BundleCallback done) {
  // The parts that arrived as bulk headers are fetched from the sender's bulk
  // port (each as a single receive's would be); the bundle is complete when
  // the last of them is.
  struct Pending {
    absl::Mutex mu;
    std::vector<Tensor> tensors;
    size_t remaining = 0;
    absl::Status status;
    BundleCallback done;
  };
  auto p = std::make_shared<Pending>();
  p->tensors = std::move(tensors);
  p->done = std::move(done);
  std::vector<size_t> fetch;
  for (size_t i = 0; i < refs.size(); ++i)
    if (refs[i].ticket != 0) fetch.push_back(i);
  auto finish = [task](const std::shared_ptr<Pending>& p) {
    if (!p->status.ok()) {
      p->done(p->status, {});
      return;
    }
    for (const Tensor& one : p->tensors) CountTensorBytesReceived(TaskOfDevice(task), one.TotalBytes());
    p->done(absl::OkStatus(), std::move(p->tensors));
  };
  if (fetch.empty()) {
    finish(p);
    return;
  }
  p->remaining = fetch.size();
  for (size_t i : fetch) {
    FetchBulk(task, keys[i], std::move(p->tensors[i]), refs[i], cm, [p, i, finish](absl::Status s, Tensor got) {
      bool last = false;
      {
        absl::MutexLock lock(&p->mu);
        if (s.ok()) {
          p->tensors[i] = std::move(got);
        } else if (p->status.ok()) {
          p->status = std::move(s);
        }
        last = --p->remaining == 0;
      }
      if (last) finish(p);
    });
  }
}

absl::Status WorkerCache::FetchBulkInto(const std::string& task, uint64_t ticket, int port, Tensor* t,
                                        CancellationManager* cm) {
  if (bulk_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("A bulk ticket from ", task, " arrived, but bulk transfer is off here"));
  }
  ASSIGN_OR_RETURN(std::string addr, AddressOf(task));
  ASSIGN_OR_RETURN(auto hp, SplitHostPort(addr));
  return FetchOffer(task, hp.first, port, ticket, t, cm);
}

void WorkerCache::FetchPushed(const std::string& task, const std::string& key, Tensor t, BulkRef ref,
                              CancellationManager* cm, ThreadPool* fallback, Rendezvous::DoneCallback done) {
  if (bulk_ != nullptr) {
    FetchBulk(task, key, std::move(t), ref, cm, std::move(done));
    return;
  }
  fallback->Schedule([this, task, key, t = std::move(t), ref, cm, done = std::move(done)]() mutable {
    absl::Status s = FetchOffer(task, "", ref.port, ref.ticket, &t, cm);
    if (!s.ok()) {
      done(absl::Status(s.code(), absl::StrCat("The tensor '", key, "' pushed by ", task, ": ", s.message())),
           Tensor());
      return;
    }
    done(absl::OkStatus(), std::move(t));
  });
}

absl::Status WorkerCache::FetchOffer(const std::string& task, const std::string& host, int port, uint64_t ticket,
                                     Tensor* t, CancellationManager* cm) {
  absl::Status s = bulk_ != nullptr ? bulk_->Fetch(host, port, ticket, t->raw_data(), t->TotalBytes(), cm)
                                    : absl::UnavailableError("bulk transfer is off here");
  if (s.ok() || absl::IsCancelled(s) || absl::IsUnauthenticated(s) || absl::IsNotFound(s)) return s;
  // The bulk port failed (or is off here); the offer is most likely still
  // there: ask for it over gRPC (a RecvTensor call naming the ticket).
  if (bulk_ != nullptr) {
    LOG(WARNING) << "Bulk transfer from " << task << " failed (" << s.message()
                 << "); fetching the tensor over gRPC instead";
  }
  absl::StatusOr<grpc::GenericStub*> stub = GenericStub(task);
  if (!stub.ok()) return s;
  proto::RecvTensorRequest req;
  req.set_bulk_ticket(ticket);
  grpc::ByteBuffer request, response;
  bool own = false;
  if (!grpc::GenericSerialize<grpc::ProtoBufferWriter, proto::RecvTensorRequest>(req, &request, &own).ok()) return s;
  // Shared with the cancellation callback: a cancellation that has already
  // taken the callback when Deregister runs below may still call TryCancel
  // after this function returns.
  auto ctx = std::make_shared<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  CancellationManager::Token token = CancellationManager::kInvalidToken;
  if (cm != nullptr) {
    token = cm->Register([ctx] { ctx->TryCancel(); });
    if (token == CancellationManager::kInvalidToken) return absl::CancelledError("step cancelled before the fetch");
  }
  absl::Notification done;
  grpc::Status gs;
  DF_TSAN_HANDOFF(ctx.get());
  (*stub)->UnaryCall(ctx.get(), "/distflow.proto.WorkerService/RecvTensor", grpc::StubOptions(), &request, &response,
                     [&](grpc::Status r) {
                       DF_TSAN_RECEIVE(ctx.get());
                       gs = std::move(r);
                       done.Notify();
                     });
  done.WaitForNotification();
  if (cm != nullptr) cm->Deregister(token);
  if (!gs.ok()) {
    absl::Status e = FromGrpcStatus(gs);
    return absl::Status(s.code(), absl::StrCat(s.message(), "; over gRPC too: ", e.message()));
  }
  ASSIGN_OR_RETURN(Tensor got, DecodeTensorFromByteBuffer(response));
  if (got.dtype() != t->dtype() || got.shape() != t->shape() || got.TotalBytes() != t->TotalBytes()) {
    return absl::DataLossError(absl::StrCat("the tensor ", task, " sent over gRPC for bulk ticket ", ticket,
                                            " does not match its announced type and shape"));
  }
  std::memcpy(t->raw_data(), got.raw_data(), t->TotalBytes());
  static Counter* copied = BytesCopiedCounter("bulk_fallback_over_grpc");
  copied->Increment(static_cast<double>(t->TotalBytes()));
  return absl::OkStatus();
}

void WorkerCache::FetchBulk(const std::string& task, const std::string& key, Tensor t, BulkRef ref,
                            CancellationManager* cm, Rendezvous::DoneCallback done) {
  absl::StatusOr<std::string> addr = AddressOf(task);
  absl::StatusOr<std::pair<std::string, int>> hp =
      addr.ok() ? SplitHostPort(*addr) : absl::StatusOr<std::pair<std::string, int>>(addr.status());
  if (!hp.ok()) {
    done(hp.status(), Tensor());
    return;
  }
  bulk_pool_->Schedule(
      [this, task, key, host = hp->first, t = std::move(t), ref, cm, done = std::move(done)]() mutable {
        // The step continues here, with the kernel that consumes the tensor
        // (runtime/kernel_threads.h): no hand-off to an inter-op thread.
        ScopedLongKernelsAllowed continue_here;
        absl::Status s = FetchOffer(task, host, ref.port, ref.ticket, &t, cm);
        if (!s.ok()) {
          done(absl::Status(s.code(), absl::StrCat("RecvTensor '", key, "' from ", task, ": ", s.message())), Tensor());
          return;
        }
        done(absl::OkStatus(), std::move(t));
      });
}

}  // namespace distflow
