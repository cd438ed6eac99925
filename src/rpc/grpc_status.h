// gRPC's status and message limits, as the runtime sees them: conversion
// between grpc::Status and absl::Status (the code and message kept), and the
// largest message a task sends or accepts. Stateless; thread-safe.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace distflow {

// The largest gRPC message a task sends or accepts: 2 GiB - 1, protobuf's own
// ceiling (a larger message could never be parsed). Set on every channel and
// server, so an oversized message is refused by the transport before it is
// buffered, and named (FromGrpcStatus). Tensors this large travel over the
// bulk port (bulk_transfer.h), which has no such limit.
inline constexpr int kMaxGrpcMessageBytes = 0x7fffffff;

// grpc::Status -> absl::Status and back, keeping the code and message; a
// message over kMaxGrpcMessageBytes is said so, with the way around it.
absl::Status FromGrpcStatus(const grpc::Status& s);
grpc::Status ToGrpcStatus(const absl::Status& s);

// Trailing metadata the master's RunStep answer carries when the step itself
// failed, so that a client can tell the step's Unavailable (a task of the
// cluster is down) from not reaching the master at all.
inline constexpr char kStepStatusMetadataKey[] = "distflow-step-failed";

}  // namespace distflow
