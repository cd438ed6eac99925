// MasterInterface: how a client session reaches a master, whatever carries
// the calls. `GrpcSession` holds one and never sees a transport:
// `LocalMaster` (master/local_master.h) calls a master of this process in
// memory (large feeds and fetches handed over as tensors, without a copy),
// `GrpcRemoteMaster` (grpc_remote_master.h) makes the RPCs, with the retries,
// deadlines, health checks and the bulk port that go with them. Whether a
// tensor travels inside a message, over a bulk port or in memory is the
// implementation's business, not the session's.
//
// Calls block (a client thread makes them). Implementations are thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "distflow/tensor.h"
#include "proto/master.pb.h"
#include "rpc/worker_interface.h"

namespace distflow {

// One step, in memory: the request without its feeds (handle, fetches,
// targets, request id, timeout, trace), the fed tensors, and on success the
// fetched tensors (in the order of req.fetch) and the step's trace.
struct RunStepCall {
  proto::RunStepRequest req;
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<Tensor> fetched;
  StepStats* trace = nullptr;  // if set (and req.trace()), the step's node times are appended
};

class MasterInterface {
 public:
  virtual ~MasterInterface() = default;

  // Creates a session. Waits up to `wait_ms` for the master to come up (a
  // remote one); `opts` cancels the wait and the call (Session::Close).
  virtual absl::Status CreateSession(CallOptions* opts, int64_t wait_ms, const proto::CreateSessionRequest& req,
                                     proto::CreateSessionResponse* resp) = 0;
  virtual absl::Status ExtendSession(CallOptions* opts, int64_t wait_ms, const proto::ExtendSessionRequest& req) = 0;
  virtual absl::Status RunStep(RunStepCall* call) = 0;
  // A master that is down has nothing to close: OK.
  virtual absl::Status CloseSession(const std::string& handle) = 0;
  virtual absl::Status Reset(const proto::ResetRequest& req) = 0;
  virtual absl::Status ListDevices(proto::ListDevicesResponse* resp) = 0;
};

}  // namespace distflow
