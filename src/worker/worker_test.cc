// The worker service against callers that misbehave.
#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/wait_until.h"
#include "distflow/server.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "rpc/grpc_status.h"
#include "server/grpc_server.h"

namespace distflow {
namespace {

TEST(WorkerService, RecvTensorCallsThatGiveUpLeaveNothingBehind) {
  auto spec = MakeLocalClusterSpec(0, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Server& server = *(*servers)[0];
  auto channel = grpc::CreateChannel(server.target().substr(7), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);

  // A flood of receives for tensors no step will ever send, each giving up
  // after 200 ms (as a caller with a deadline, or one that disconnects).
  constexpr int kCalls = 400;
  struct Call {
    grpc::ClientContext ctx;
    grpc::ByteBuffer req, resp;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::atomic<int> left{kCalls}, deadline_exceeded{0};
  absl::Notification all_done;
  for (int i = 0; i < kCalls; ++i) {
    auto c = std::make_unique<Call>();
    proto::RecvTensorRequest r;
    r.set_step_id(1000 + i);
    r.set_rendezvous_key("never;0;/job:x/replica:0/task:0/device:CPU:0;/job:y/replica:0/task:0/device:CPU:0");
    bool own = false;
    ASSERT_TRUE((grpc::GenericSerialize<grpc::ProtoBufferWriter, proto::RecvTensorRequest>(r, &c->req, &own)).ok());
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    stub.UnaryCall(&c->ctx, "/distflow.proto.WorkerService/RecvTensor", grpc::StubOptions(), &c->req, &c->resp,
                   [&](grpc::Status s) {
                     if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) ++deadline_exceeded;
                     if (--left == 0) all_done.Notify();
                   });
    calls.push_back(std::move(c));
  }
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(deadline_exceeded.load(), kCalls);
  // The server learns of each cancellation a moment after the caller.
  WaitUntil([&] { return server.impl()->worker()->rendezvous()->NumPendingForTest() == 0; }, absl::Seconds(30));
  EXPECT_EQ(server.impl()->worker()->rendezvous()->NumPendingForTest(), 0u) << "abandoned receives are dropped";

  // And a real receive still works after the flood.
  ASSERT_TRUE(server.impl()->worker()->rendezvous()->Send(7, "k", Tensor::Scalar<float>(3)).ok());
  absl::Notification got;
  float value = 0;
  server.impl()->worker()->rendezvous()->RecvLocalAsync(7, "k", nullptr, [&](absl::Status s, Tensor t) {
    if (s.ok()) value = t.scalar<float>();
    got.Notify();
  });
  ASSERT_TRUE(got.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(value, 3);
  server.Stop();
}

}  // namespace
}  // namespace distflow

namespace distflow {
namespace {

// A message over gRPC's limit is refused by the transport with gRPC's terse
// words; the status says what the limit is and how large tensors get across.
TEST(GrpcStatus, AMessageOverTheLimitIsNamedWithTheWayAround) {
  absl::Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                               "Received message larger than max (3000000000 vs. 2147483647)"));
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("3000000000 vs. 2147483647"), std::string::npos) << s;
  EXPECT_NE(s.message().find("bulk port"), std::string::npos) << s;
  // Other statuses keep their code and message as they are.
  absl::Status other = FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many sessions"));
  EXPECT_EQ(other.message(), "too many sessions");
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace distflow
