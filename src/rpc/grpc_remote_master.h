// GrpcRemoteMaster: MasterInterface over the MasterService of a task at
// "host:port". Waits for the master to come up (a health check with
// backoff that tells a refused connection, a TLS mismatch and a server that
// is not distflow's apart), retries a RunStep whose reply was lost (the
// request id makes the master run it once), and sends feeds and reads
// fetches of 1 MiB or more over the master's bulk port when it has one.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "bulk/bulk_transfer.h"
#include "proto/master.grpc.pb.h"
#include "rpc/master_interface.h"

namespace distflow {

class GrpcRemoteMaster final : public MasterInterface {
 public:
  explicit GrpcRemoteMaster(std::string address);

  absl::Status CreateSession(CallOptions* opts, int64_t wait_ms, const proto::CreateSessionRequest& req,
                             proto::CreateSessionResponse* resp) override;
  absl::Status ExtendSession(CallOptions* opts, int64_t wait_ms, const proto::ExtendSessionRequest& req) override;
  absl::Status RunStep(RunStepCall* call) override;
  absl::Status CloseSession(const std::string& handle) override;
  absl::Status Reset(const proto::ResetRequest& req) override;
  absl::Status ListDevices(proto::ListDevicesResponse* resp) override;

 private:
  // Until `deadline`, waits for the master to answer a health check; says
  // within a few seconds (a warning) when the connection is refused, and
  // fails at once if the target is not a distflow server. Cancelled as soon
  // as `opts` is.
  absl::Status WaitForMaster(CallOptions* opts, std::chrono::system_clock::time_point deadline);
  absl::Status RunOverGrpc(const proto::RunStepRequest& req, proto::RunStepResponse* resp);

  const std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::MasterService::Stub> stub_;
  absl::Mutex mu_;
  // Large feeds and fetches travel over the master's bulk port, if it has one
  // (learned from CreateSession).
  std::shared_ptr<BulkClient> bulk_ ABSL_GUARDED_BY(mu_);
  std::string bulk_host_ ABSL_GUARDED_BY(mu_);
  int bulk_port_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace distflow
