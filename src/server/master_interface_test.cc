// MasterInterface: the in-process LocalMaster and the GrpcRemoteMaster answer
// alike, whichever way a tensor travels (inline, bulk port, in memory).
#include "rpc/master_interface.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "master/local_master.h"
#include "rpc/grpc_remote_master.h"
#include "runtime/graph_def_builder_for_test.h"
#include "server/session_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddNode;
using test::AddPlaceholder;

std::string AddressOf(const Server& server) { return std::string(absl::StripPrefix(server.target(), "grpc://")); }

TEST(LocalMaster, LookupFindsOnlyAServerOfThisProcessAndFailsAtOnceAfterItStops) {
  std::unique_ptr<Server> server = test::StartOneTask(test::LeanOptions());
  ASSERT_NE(server, nullptr);
  const std::string address = AddressOf(*server);
  std::unique_ptr<MasterInterface> local = LocalMaster::Lookup(address);
  ASSERT_NE(local, nullptr) << address;
  EXPECT_EQ(LocalMaster::Lookup("127.0.0.1:1"), nullptr) << "no server of this process listens there";
  proto::ListDevicesResponse devices;
  ASSERT_TRUE(local->ListDevices(&devices).ok());
  EXPECT_GT(devices.devices_size(), 0);
  server->Stop();
  absl::Status after = local->ListDevices(&devices);
  EXPECT_FALSE(after.ok());
  EXPECT_TRUE(absl::StrContains(after.message(), address)) << after;
  EXPECT_TRUE(local->CloseSession("no-such-handle").ok()) << "a stopped master has nothing to close";
}

// x (a float vector) fed, y = x * 2 fetched, through `master`.
void RunDoubling(MasterInterface& master, int64_t n) {
  proto::GraphDef g;
  AddPlaceholder(&g, "x", DT_FLOAT, PartialShape({n}));
  AddConst(&g, "two", Tensor::Scalar<float>(2));
  AddNode(&g, "y", "Mul", {"x", "two"});
  proto::CreateSessionRequest create;
  *create.mutable_graph_def() = g;
  create.mutable_config()->set_wait_for_tasks_ms(20000);
  proto::CreateSessionResponse created;
  CallOptions opts;
  absl::Status s = master.CreateSession(&opts, 20000, create, &created);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_FALSE(created.session_handle().empty());

  absl::StatusOr<Tensor> x = Tensor::Allocate(DT_FLOAT, TensorShape({n}));
  ASSERT_TRUE(x.ok());
  for (int64_t i = 0; i < n; ++i) x->flat<float>()[i] = static_cast<float>(i % 1000) - 500.0f;
  RunStepCall call;
  call.req.set_session_handle(created.session_handle());
  call.req.add_fetch("y");
  call.req.set_request_id(7);
  call.req.set_timeout_ms(60000);
  call.feeds.push_back({"x", *x});
  s = master.RunStep(&call);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(call.fetched.size(), 1u);
  const Tensor& y = call.fetched[0];
  ASSERT_EQ(y.dtype(), DT_FLOAT);
  ASSERT_EQ(y.shape(), TensorShape({n}));
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.flat<float>()[i], 2 * x->flat<float>()[i]) << i;

  // A fetch of a node that does not exist is the step's error, on both.
  RunStepCall bad;
  bad.req.set_session_handle(created.session_handle());
  bad.req.add_fetch("nope");
  bad.req.set_request_id(8);
  s = master.RunStep(&bad);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "nope")) << s;
  EXPECT_TRUE(master.CloseSession(created.session_handle()).ok());
}

TEST(MasterInterface, LocalAndGrpcMastersRunTheSameStepWithSmallAndLargeTensors) {
  std::unique_ptr<Server> server = test::StartOneTask(test::LeanOptions());
  ASSERT_NE(server, nullptr);
  const std::string address = AddressOf(*server);
  std::unique_ptr<MasterInterface> local = LocalMaster::Lookup(address);
  ASSERT_NE(local, nullptr);
  GrpcRemoteMaster remote(address);
  for (MasterInterface* m : {local.get(), static_cast<MasterInterface*>(&remote)}) {
    SCOPED_TRACE(m == local.get() ? "LocalMaster" : "GrpcRemoteMaster");
    ASSERT_NO_FATAL_FAILURE(RunDoubling(*m, 3));
    ASSERT_NO_FATAL_FAILURE(RunDoubling(*m, 400000));  // 1.6 MB: the bulk port or memory
  }
  proto::ListDevicesResponse a, b;
  ASSERT_TRUE(local->ListDevices(&a).ok());
  ASSERT_TRUE(remote.ListDevices(&b).ok());
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  proto::ResetRequest reset;
  EXPECT_TRUE(local->Reset(reset).ok());
  EXPECT_TRUE(remote.Reset(reset).ok());
}

TEST(GrpcRemoteMaster, ACancelledCallEndsTheWaitForAMasterThatIsNotUp) {
  GrpcRemoteMaster remote("127.0.0.1:1");
  CallOptions opts;
  opts.StartCancel();  // cancelled before it starts: returns without waiting the 20 s
  proto::CreateSessionResponse resp;
  const absl::Time start = absl::Now();
  absl::Status s = remote.CreateSession(&opts, 20000, proto::CreateSessionRequest(), &resp);
  EXPECT_FALSE(s.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << s;
}

}  // namespace
}  // namespace distflow
