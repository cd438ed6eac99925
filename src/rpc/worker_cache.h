// WorkerCache: the gRPC WorkerCacheInterface (worker_cache_interface.h):
// every task of the cluster as a WorkerInterface, and the gRPC channels and
// stubs under them, created on first use. It decides how a task is reached:
// this process's own task (SetLocalWorker) in memory through a LocalWorker,
// every other one through a GrpcRemoteWorker. Channels have no message-size
// limit. Only rpc/ and server/ include this header (it pulls in gRPC's);
// the master and the worker hold the interface. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
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
  };
  absl::StatusOr<Peer*> GetPeer(const std::string& task_name);

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
  std::string local_task_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<WorkerInterface> local_ ABSL_GUARDED_BY(mu_);
  // Called under its own lock, so that SetGoneReason can wait out calls in flight.
  absl::Mutex gone_mu_;
  GoneReason gone_ ABSL_GUARDED_BY(gone_mu_);
};

}  // namespace distflow
