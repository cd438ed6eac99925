#include "rpc/unix_socket.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/metrics.h"
#include "base/ports.h"
#include "base/wait_until.h"
#include "cluster/host_share.h"
#include "distflow/server.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "rpc/worker_cache.h"
#include "server/grpc_server.h"

namespace distflow {
namespace {

TEST(UnixSocket, NamesAreFreshAndAnnouncedWithThisHostsIdentity) {
  const std::string a = NewUnixSocketName(), b = NewUnixSocketName();
  ASSERT_FALSE(a.empty());
  EXPECT_NE(a, b);
  ASSERT_FALSE(HostIdentity().empty()) << "the boot id is readable here";
  EXPECT_EQ(SameHostUnixSocket(UnixSocketAnnouncement(a)), a);
  EXPECT_EQ(UnixSocketTarget(a), "unix-abstract:" + a);
}

TEST(UnixSocket, IgnoresAnnouncementsFromElsewhereOrMalformed) {
  const std::string name = NewUnixSocketName();
  EXPECT_EQ(SameHostUnixSocket("00000000-0000-0000-0000-000000000000/otherhost " + name), "")
      << "another machine's socket is never dialled";
  EXPECT_EQ(SameHostUnixSocket(""), "");
  EXPECT_EQ(SameHostUnixSocket(HostIdentity()), "") << "no separator";
  EXPECT_EQ(SameHostUnixSocket(HostIdentity() + " "), "") << "no name";
  EXPECT_EQ(SameHostUnixSocket(HostIdentity() + " someone-else"), "") << "not a distflow socket";
  EXPECT_EQ(SameHostUnixSocket(HostIdentity() + " distflow-grpc.1/../x"), "") << "odd characters";
  EXPECT_EQ(SameHostUnixSocket(HostIdentity() + " distflow-grpc." + std::string(200, 'a')), "") << "too long";
  EXPECT_EQ(SameHostUnixSocket(" " + name), "") << "no identity";
}

TEST(UnixSocket, TransportOfPeerAddresses) {
  EXPECT_STREQ(TransportOfPeer("unix-abstract:distflow-grpc.1.2"), "unix");
  EXPECT_STREQ(TransportOfPeer("unix:"), "unix");
  EXPECT_STREQ(TransportOfPeer("ipv4:127.0.0.1:5000"), "tcp");
  EXPECT_STREQ(TransportOfPeer("ipv6:[::1]:5000"), "tcp");
}

TEST(UnixSocket, OffWithTheEnvironmentVariable) {
  unsetenv("DISTFLOW_UNIX_SOCKETS");
  EXPECT_TRUE(UnixSocketsEnabledByEnv());
  setenv("DISTFLOW_UNIX_SOCKETS", "0", 1);
  EXPECT_FALSE(UnixSocketsEnabledByEnv());
  setenv("DISTFLOW_UNIX_SOCKETS", "1", 1);
  EXPECT_TRUE(UnixSocketsEnabledByEnv());
  unsetenv("DISTFLOW_UNIX_SOCKETS");
}

double CallsOver(const char* transport) {
  return Metrics::Global()->GetCounter("distflow_rpc_server_calls_total", "", {{"transport", transport}})->value();
}

absl::Status CallGetStatus(WorkerCache* cache, const std::string& task) {
  absl::StatusOr<proto::WorkerService::Stub*> stub = cache->Stub(task);
  if (!stub.ok()) return stub.status();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  proto::GetStatusRequest req;
  proto::GetStatusResponse resp;
  return FromGrpcStatus((*stub)->GetStatus(&ctx, req, &resp));
}

// A task found on this host is called over its socket; when it restarts (on
// the same address, with a socket of another name) the dead socket's channel
// goes back to TCP and the task is asked again, and its calls go over its
// new socket.
TEST(UnixSocket, ARestartedTaskIsCalledOverItsNewSocket) {
  unsetenv("DISTFLOW_UNIX_SOCKETS");
  const std::string ps_task = "/job:ps/replica:0/task:0";
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(absl::StrCat("ps|127.0.0.1:", PickUnusedTcpPort().value()));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto start = [&] {
    absl::StatusOr<std::unique_ptr<Server>> ps = Server::Create(*spec, "ps", 0);
    EXPECT_TRUE(ps.ok()) << ps.status();
    EXPECT_TRUE((*ps)->Start().ok());
    return std::move(*ps);
  };
  std::unique_ptr<Server> ps = start();
  const std::string first = ps->impl()->unix_socket();
  ASSERT_FALSE(first.empty());
  WorkerCache cache(*spec, "");
  ASSERT_TRUE(CallGetStatus(&cache, ps_task).ok());
  ASSERT_TRUE(WaitUntil([&] { return cache.TransportOf(ps_task) == "unix"; }, absl::Seconds(30)));
  double unix_calls = CallsOver("unix");
  ASSERT_TRUE(CallGetStatus(&cache, ps_task).ok());
  EXPECT_EQ(CallsOver("unix"), unix_calls + 1) << "the call came over the socket";

  ps.reset();
  ps = start();
  const std::string second = ps->impl()->unix_socket();
  EXPECT_NE(second, first);
  // The first call after the restart may fail (it finds the old socket gone);
  // the next use goes back to TCP and asks the task again.
  EXPECT_TRUE(WaitUntil(
      [&] {
        if (!CallGetStatus(&cache, ps_task).ok() || cache.TransportOf(ps_task) != "unix") return false;
        unix_calls = CallsOver("unix");
        return CallGetStatus(&cache, ps_task).ok() && CallsOver("unix") == unix_calls + 1;
      },
      absl::Seconds(60)))
      << "the restarted task is called over " << cache.TransportOf(ps_task);
}

}  // namespace
}  // namespace distflow
