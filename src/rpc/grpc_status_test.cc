#include "rpc/grpc_status.h"

#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(GrpcStatus, CodeAndMessageSurviveBothWays) {
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  absl::Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "/job:ps/replica:0/task:0 is down"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "/job:ps/replica:0/task:0 is down");
  grpc::Status back = ToGrpcStatus(absl::FailedPreconditionError("uninitialised 'w'"));
  EXPECT_EQ(back.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(back.error_message(), "uninitialised 'w'");
  EXPECT_EQ(FromGrpcStatus(back).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GrpcStatus, AnOversizedMessageSaysTheLimitAndTheWayAround) {
  absl::Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                               "Received message larger than max (3000000000 vs. 2147483647)"));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("Received message larger than max"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("at most 2 GiB"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("bulk port"), absl::string_view::npos) << s;
  // Other resource errors pass through unchanged.
  absl::Status other = FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "--max_sessions (4) reached"));
  EXPECT_EQ(other.message(), "--max_sessions (4) reached");
}

}  // namespace
}  // namespace distflow
