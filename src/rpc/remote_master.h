// NewGrpcRemoteMaster: a MasterInterface (master_interface.h) to the master
// of the task at "host:port", over gRPC (a GrpcRemoteMaster,
// grpc_remote_master.h). Declared apart from the class so that the grpc://
// session (server/grpc_session.cc) gets a remote master without including
// gRPC's headers.
#pragma once

#include <memory>
#include <string>

#include "rpc/master_interface.h"

namespace distflow {

std::unique_ptr<MasterInterface> NewGrpcRemoteMaster(std::string address);

}  // namespace distflow
