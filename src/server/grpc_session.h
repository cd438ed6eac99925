// GrpcSession: a session whose target is grpc://host:port. Everything runs
// through the master of that task, reached through a MasterInterface
// (rpc/master_interface.h): a LocalMaster when a server of this process
// serves the address (master/local_master.h: no network, tensors handed over
// in memory), else a GrpcRemoteMaster (rpc/remote_master.h). The session
// itself never sees the transport. The first Extend creates the master
// session; later ones extend it. Calls wait for the server to come up
// (bounded by wait_for_cluster_ms), so a client may start before its
// cluster. Each RunStep carries a request id, so a retry after a lost reply
// is not executed twice. Thread-safe: Extends run one at a time, but Run and
// Close never wait behind one, and a Close ends an Extend that is still
// waiting for the cluster.
#pragma once

#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "rpc/master_interface.h"
#include "runtime/local_session.h"

namespace distflow {

// Registers GrpcSession::Create for "grpc://" targets (runtime/
// session_factory.h). Idempotent. Server::Create calls it, and so does
// libdistflow.so when it loads; a program linked to the static libraries
// that opens grpc:// sessions without creating a Server calls it itself.
void RegisterGrpcSessionFactory();

class GrpcSession : public SessionInterface {
 public:
  // `target` is "grpc://host:port".
  static absl::StatusOr<std::unique_ptr<GrpcSession>> Create(const std::string& target, SessionOptions options);
  // A session on `master` (which serves `address`).
  GrpcSession(std::string address, SessionOptions options, std::unique_ptr<MasterInterface> master);
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
  const std::string address_;
  const SessionOptions options_;
  const std::unique_ptr<MasterInterface> master_;
  absl::Mutex extend_mu_;  // held through an Extend, before mu_
  absl::Mutex mu_;
  // The CreateSession or ExtendSession call in flight, which Close cancels.
  CallOptions* extending_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::string handle_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace distflow
