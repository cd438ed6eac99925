#include "rpc/grpc_status.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace distflow {

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  // gRPC's words: "Received message larger than max (N vs. M)", "Sent message larger than max ...".
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
      absl::StrContains(s.error_message(), "larger than max")) {
    return absl::ResourceExhaustedError(absl::StrCat(
        s.error_message(),
        ": a gRPC message may hold at most 2 GiB (protobuf's limit). Tensors this large "
        "cross tasks over the bulk port: leave bulk transfer on (--bulk_port=-1 or DISTFLOW_BULK_TRANSFER=0 turn "
        "it off), or split the tensor"));
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace distflow
