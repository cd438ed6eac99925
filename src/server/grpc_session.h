// GrpcSession: a session whose target is grpc://host:port. Everything runs
// through the master service of that task; fetched tensors come back to the
// client. The first Extend creates the master session; later ones extend it.
// Calls wait for the server to come up (bounded by wait_for_cluster_ms), so a
// client may start before its cluster. Each RunStep carries a request id, so
// a retry after a lost reply is not executed twice. A target naming a server
// in this process skips the network (local_master.h). Thread-safe: Extends
// run one at a time, but Run and Close never wait behind one, and a Close
// ends an Extend that is still waiting for the cluster.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bulk/bulk_transfer.h"
#include "master/local_master.h"
#include "proto/master.grpc.pb.h"
#include "runtime/local_session.h"

namespace distflow {

class GrpcSession : public SessionInterface {
 public:
  // `target` is "grpc://host:port".
  static absl::StatusOr<std::unique_ptr<GrpcSession>> Create(const std::string& target, SessionOptions options);
  ~GrpcSession() override;

  absl::Status Extend(const proto::GraphDef& graph) override;
  absl::StatusOr<std::vector<Tensor>> Run(const RunOptions& options,
                                          const std::vector<std::pair<std::string, Tensor>>& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets) override;
  absl::Status Close() override;

  // Clears containers on every task (all of them if `containers` is empty).
  absl::Status Reset(const std::vector<std::string>& containers) override;

 private:
  GrpcSession(std::string address, SessionOptions options);
  // The master of a server in this process that `address_` names, if any.
  std::optional<LocalMasterLease> InProcessMaster() const;
  // One RunStep on an in-process master; shared with its completion.
  struct InProcessCall {
    proto::RunStepRequest req;
    proto::RunStepResponse resp;
    std::optional<LocalMasterLease> lease;
    BulkServer* bulk = nullptr;  // the master's, if large fetches come as tickets
    absl::Notification finished;
    absl::Mutex mu;
    bool completed ABSL_GUARDED_BY(mu) = false;
    bool abandoned ABSL_GUARDED_BY(mu) = false;  // the caller stopped waiting: drop the fetches
    absl::Status status;  // set before `finished`
  };
  absl::Status RunInProcess(const std::shared_ptr<InProcessCall>& call);
  absl::Status RunOverGrpc(const proto::RunStepRequest& req, proto::RunStepResponse* resp);
  // Until `deadline`, waits for the master to answer a health check; says
  // within a few seconds (a warning) when the connection is refused, and
  // fails at once if the target is not a distflow server.
  // Fails (FailedPrecondition) as soon as the session is closed.
  absl::Status WaitForMaster(std::chrono::system_clock::time_point deadline);
  // Closes `handle` on the master (a master that is down has nothing to close).
  absl::Status CloseOnMaster(const std::string& handle);

  const std::string address_;
  const SessionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::MasterService::Stub> stub_;
  absl::Mutex extend_mu_;  // held through an Extend, before mu_
  absl::Mutex mu_;
  // The CreateSession or ExtendSession call in flight, which Close cancels.
  grpc::ClientContext* extending_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string handle_ ABSL_GUARDED_BY(mu_);
  // Large feeds and fetches travel over the master's bulk port, if it has one.
  std::unique_ptr<BulkClient> bulk_ ABSL_GUARDED_BY(mu_);
  std::string bulk_host_ ABSL_GUARDED_BY(mu_);
  int bulk_port_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace distflow
