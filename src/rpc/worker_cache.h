// WorkerCache: the gRPC WorkerCacheInterface (worker_cache_interface.h):
// every task of the cluster as a WorkerInterface, and the gRPC channels and
// stubs under them, created on first use. It decides how a task is reached:
// this process's own task (SetLocalWorker) in memory through a LocalWorker,
// every other one through a GrpcRemoteWorker. Channels have no message-size
// limit. A task on this host is dialled over an abstract Unix-domain socket
// once it has said where (worker_cache_unix.cc, rpc/unix_socket.h), every
// other one over TCP. Only rpc/ and server/ include this header (it pulls
// in gRPC's); the master and the worker hold the interface. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/thread_pool.h"
#include "bulk/bulk_transfer.h"
#include "distflow/cluster_spec.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/channel_arguments.h"
#include "kernels/rendezvous.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_status.h"
#include "rpc/tensor_transfer.h"
#include "rpc/worker_cache_interface.h"
#include "rpc/worker_interface.h"

namespace distflow {

class Env;
class Worker;

// Channel arguments shared by every client: messages up to
// kMaxGrpcMessageBytes (grpc_status.h), keepalive, and reconnection to a
// peer that is down at least every second.
grpc::ChannelArguments UnlimitedChannelArguments();

class WorkerCache final : public WorkerCacheInterface {
 public:
  // Calls carry `auth_token` (rpc/auth.h); by default the process's.
  // Waits read the time from `clock` (null: the real clock; it must outlive
  // the cache), so a test can give them a FakeClockEnv.
  explicit WorkerCache(ClusterSpec cluster);
  WorkerCache(ClusterSpec cluster, std::string auth_token, Env* clock = nullptr);
  ~WorkerCache() override;

  // Lets large tensors arrive over the senders' bulk ports (bulk_transfer.h)
  // and, with `local` (this task's bulk server), large RunGraph feeds leave
  // over it. With `shared_memory`, the bytes of peers on this host come
  // through shared memory instead of TCP (if they offer it). Call before any
  // transfer.
  void EnableBulkTransfer(BulkServer* local = nullptr, bool shared_memory = false);
  BulkServer* local_bulk_server() const { return local_bulk_; }
  Env* clock() const override { return clock_; }

  // WorkerCacheInterface. GetWorker: this task's in-process worker, or a
  // GrpcRemoteWorker on the task's worker service.
  void SetLocalWorker(const std::string& task, std::shared_ptr<WorkerInterface> worker) override;
  absl::StatusOr<std::shared_ptr<WorkerInterface>> GetWorker(const std::string& task_name) override;
  const ClusterSpec& cluster() const override { return cluster_; }
  std::vector<std::string> TaskNames() const override;
  absl::StatusOr<std::string> AddressOf(const std::string& task_name) const;
  // Overrides a task's address (a server bound to port 0 learns its real port).
  void SetTaskAddress(const std::string& task_name, const std::string& address);
  // How to find the address of a task the cluster spec does not have (one
  // that joined the running job): asked once per such task, the answer kept.
  // Set before the cache is used from other threads.
  using AddressResolver = std::function<absl::StatusOr<std::string>(const std::string& task_name)>;
  void SetAddressResolver(AddressResolver resolver) { resolver_ = std::move(resolver); }
  // The channel to `task` (for services other than the worker's).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(const std::string& task_name);

  // gRPC over abstract Unix-domain sockets (rpc/unix_socket.h): what this
  // task's own server announces to peers on its host ("" for nothing). Set
  // before the server starts.
  void set_unix_socket_announcement(std::string a) { unix_announcement_ = std::move(a); }
  const std::string& unix_socket_announcement() const { return unix_announcement_; }
  // How `task` is dialled now: "unix", "tcp", or "" before its first use.
  std::string TransportOf(const std::string& task_name) const;

  absl::StatusOr<proto::WorkerService::Stub*> Stub(const std::string& task_name);
  absl::StatusOr<grpc::GenericStub*> GenericStub(const std::string& task_name);

  // Why a task will not answer, as the cluster's failure detector knows it
  // ("" if it may: alive, starting, or not known to be gone). The server
  // sets it from its coordination agent (coordination.h, GoneReason);
  // empty (the default): no task is known to be gone.
  using GoneReason = std::function<std::string(const std::string& task_name)>;
  // Thread-safe; once it returns, no call of the previous `reason` is in
  // flight (so its owner may go).
  void SetGoneReason(GoneReason reason);

  // WaitForDevices (worker_cache_interface.h): the deadline is on the cache's clock; the pauses between rounds (50 ms,
  // doubling to 1 s) are the clock's sleeps, or waits on `stop` if given. A task that does not answer and that the
  // failure detector knows is gone (SetGoneReason: declared dead, or left the job) ends the wait at once with
  // Unavailable naming it and why, instead of waiting `wait` for it; once it is back (it answers), it is a task like
  // any other.
  absl::StatusOr<std::vector<std::string>> WaitForDevices(const std::vector<std::string>& filters, absl::Duration wait,
                                                          const absl::Notification* stop = nullptr) override;

  // Reads the bytes of a tensor that `task` offered on its bulk port into
  // `t` (already allocated with the announced dtype and shape). Blocks.
  // FailedPrecondition if bulk transfer is off here. If the bulk port cannot
  // be used (unreachable, full, the connection broke before the offer was
  // taken), the offer comes over gRPC instead, with a warning.
  absl::Status FetchBulkInto(const std::string& task, uint64_t ticket, int port, Tensor* t, CancellationManager* cm);
  bool bulk_enabled() const { return bulk_ != nullptr; }
  // Reads the bytes of a tensor `task` pushed as a bulk header
  // (RecvTensorRequest.pushed) into `t` on the bulk pool, then calls `done`
  // there; with bulk transfer off here, asks `task` for the offer over gRPC
  // on `fallback` instead.
  void FetchPushed(const std::string& task, const std::string& key, Tensor t, BulkRef ref, CancellationManager* cm,
                   ThreadPool* fallback, Rendezvous::DoneCallback done);
  // Runs `fn` on the pool of blocking bulk reads (bulk transfer must be on).
  void RunOnBulkPool(std::function<void()> fn) { bulk_pool_->Schedule(std::move(fn)); }

  // Pulls a tensor from `task` (its RecvTensor service) for the rendezvous.
  void RecvTensorAsync(const std::string& task, int64_t step_id, const std::string& key, CancellationManager* cm,
                       Rendezvous::DoneCallback done) override;
  // Pulls a bundle, the tensors sent under each of `keys`, in one call.
  void RecvTensorBundleAsync(const std::string& task, int64_t step_id, const std::vector<std::string>& keys,
                             std::vector<PushedTensor> pushed, CancellationManager* cm, BundleCallback done) override;

 private:
  struct Peer {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<proto::WorkerService::Stub> stub;
    std::unique_ptr<grpc::GenericStub> generic;
    std::shared_ptr<WorkerInterface> remote;  // a GrpcRemoteWorker over `channel`
    bool over_unix = false;                   // `channel` is to the task's abstract socket
    std::shared_ptr<grpc::Channel> tcp;       // if `over_unix`: the TCP channel to go back to
  };
  // Whether to ask a task for its abstract socket (worker_cache_unix.cc).
  struct Route {
    bool asking = false;  // a probe is in flight
    uint64_t probe = 0;   // the latest probe's number: an older one's answer is dropped
    absl::Time ask_after = absl::InfinitePast();
  };
  absl::StatusOr<Peer*> GetPeer(const std::string& task_name);
  std::unique_ptr<Peer> NewPeer(const std::string& task_name, std::shared_ptr<grpc::Channel> channel, bool over_unix);
  // Called with mu_ held on every use of a peer: turns a Unix channel that
  // fails back to TCP, and says (returning a probe number, else 0) whether
  // to ask the task for its socket now, which the caller does once mu_ is
  // released (StartUnixProbe).
  uint64_t CheckRouteLocked(const std::string& task_name, std::unique_ptr<Peer>& peer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetireLocked(std::unique_ptr<Peer> peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartUnixProbe(const std::string& task_name, uint64_t probe, std::shared_ptr<grpc::Channel> tcp);
  // Ends probe `probe`: switches the peer to `unix_channel` if set, else
  // asks again after `retry`.
  void FinishUnixProbe(const std::string& task_name, uint64_t probe, std::shared_ptr<grpc::Channel> unix_channel,
                       absl::Duration retry);

  // Completes a decoded bundle: fetches its parts that arrived as bulk
  // headers (`refs`), then calls `done` with every tensor.
  void FetchBundleParts(const std::string& task, const std::vector<std::string>& keys, std::vector<Tensor> tensors,
                        const std::vector<BulkRef>& refs, CancellationManager* cm, BundleCallback done);
  void FetchBulk(const std::string& task, const std::string& key, Tensor t, BulkRef ref, CancellationManager* cm,
                 Rendezvous::DoneCallback done);
  // The bulk read of `ticket` from `task`, falling back to a RecvTensor call
  // for the offer when the bulk port fails. Blocks.
  absl::Status FetchOffer(const std::string& task, const std::string& host, int port, uint64_t ticket, Tensor* t,
                          CancellationManager* cm);

  const ClusterSpec cluster_;
  Env* const clock_;
  std::unique_ptr<BulkClient> bulk_;  // set by EnableBulkTransfer, before any transfer
  BulkServer* local_bulk_ = nullptr;  // likewise
  const std::string auth_token_;
  std::unique_ptr<ThreadPool> bulk_pool_;  // runs blocking bulk reads
  AddressResolver resolver_;               // may be empty
  mutable absl::Mutex mu_;
  // Mutable: AddressOf keeps what the resolver found.
  mutable std::map<std::string, std::string> overrides_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Peer>> peers_ ABSL_GUARDED_BY(mu_);
  // Unix-domain sockets: on with DISTFLOW_UNIX_SOCKETS=1, unless TLS is on.
  const bool unix_sockets_;
  std::string unix_announcement_;  // set before the server starts
  std::map<std::string, Route> routes_ ABSL_GUARDED_BY(mu_);
  // Peers replaced by a switch of transport or a new address, with when:
  // a caller of Stub() or GenericStub() may still be starting a call on
  // their stubs, so they are freed only kRetiredFor later.
  std::vector<std::pair<absl::Time, std::unique_ptr<Peer>>> retired_ ABSL_GUARDED_BY(mu_);
  uint64_t next_probe_ ABSL_GUARDED_BY(mu_) = 0;
  int probes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // the destructor waits for none
  std::string local_task_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<WorkerInterface> local_ ABSL_GUARDED_BY(mu_);
  // Called under its own lock, so that SetGoneReason can wait out calls in flight.
  absl::Mutex gone_mu_;
  GoneReason gone_ ABSL_GUARDED_BY(gone_mu_);
};

}  // namespace distflow
