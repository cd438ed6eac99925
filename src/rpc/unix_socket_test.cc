#include "rpc/unix_socket.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
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

TEST(UnixSocket, NamesComeFromTheTcpAddressAndAnnouncementsCarryThisHost) {
  EXPECT_EQ(NewUnixSocketName("127.0.0.1", 5000), "distflow-grpc.5000.127.0.0.1");
  EXPECT_EQ(NewUnixSocketName("::1", 5000), "distflow-grpc.5000.--1") << "only name characters";
  const std::string a = NewUnixSocketName("127.0.0.1", 0), b = NewUnixSocketName("127.0.0.1", 0);
  EXPECT_NE(a, b) << "port 0: random names";
  EXPECT_TRUE(absl::StartsWith(a, "distflow-grpc.0.")) << a;
  EXPECT_TRUE(absl::StartsWith(NewUnixSocketName(std::string(200, 'h'), 5000), "distflow-grpc.0."))
      << "too long for an abstract name: random";
  ASSERT_FALSE(HostIdentity().empty()) << "the boot id is readable here";
  const std::string announced = UnixSocketAnnouncement(a);
  EXPECT_EQ(SameHostUnixSocket(announced), a);
  EXPECT_NE(UnixSocketAnnouncement(a), announced) << "a fresh nonce each time";
  EXPECT_EQ(UnixSocketTarget(a), "unix-abstract:" + a);
}

TEST(UnixSocket, ATakenNameIsNotUsed) {
  const std::string name = NewUnixSocketName("127.0.0.1", 1);
  ASSERT_FALSE(name.empty());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr),
                 static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
            0);
  EXPECT_EQ(NewUnixSocketName("127.0.0.1", 1), "") << "bound by someone else";
  close(fd);
  EXPECT_EQ(NewUnixSocketName("127.0.0.1", 1), name) << "free again";
}

TEST(UnixSocket, IgnoresAnnouncementsFromElsewhereOrMalformed) {
  const std::string name = NewUnixSocketName("127.0.0.1", 5000);
  const std::string nonce = " 0123456789abcdef";
  const std::string& me = HostIdentity();
  EXPECT_EQ(SameHostUnixSocket(me + " " + name + nonce), name);
  EXPECT_EQ(SameHostUnixSocket("00000000-0000-0000-0000-000000000000/otherhost " + name + nonce), "")
      << "another machine's socket is never dialled";
  EXPECT_EQ(SameHostUnixSocket(""), "");
  EXPECT_EQ(SameHostUnixSocket(me), "") << "no name";
  EXPECT_EQ(SameHostUnixSocket(me + " " + name), "") << "no nonce";
  EXPECT_EQ(SameHostUnixSocket(me + " " + name + " 0123"), "") << "short nonce";
  EXPECT_EQ(SameHostUnixSocket(me + " " + name + " 0123456789abcdeZ"), "") << "not hex";
  EXPECT_EQ(SameHostUnixSocket(me + " someone-else" + nonce), "") << "not a distflow socket";
  EXPECT_EQ(SameHostUnixSocket(me + " distflow-grpc.1/../x" + nonce), "") << "odd characters";
  EXPECT_EQ(SameHostUnixSocket(me + " distflow-grpc." + std::string(200, 'a') + nonce), "") << "too long";
  EXPECT_EQ(SameHostUnixSocket(" " + name + nonce), "") << "no identity";
}

TEST(UnixSocket, TransportOfPeerAddresses) {
  EXPECT_STREQ(TransportOfPeer("unix-abstract:distflow-grpc.1.2"), "unix");
  EXPECT_STREQ(TransportOfPeer("unix:"), "unix");
  EXPECT_STREQ(TransportOfPeer("ipv4:127.0.0.1:5000"), "tcp");
  EXPECT_STREQ(TransportOfPeer("ipv6:[::1]:5000"), "tcp");
}

TEST(UnixSocket, OnlyOnWithTheEnvironmentVariable) {
  unsetenv("DISTFLOW_UNIX_SOCKETS");
  EXPECT_FALSE(UnixSocketsEnabledByEnv());
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

// A task found on this host is called over its socket. Restarted on its
// address, it listens on the same socket and the channel reconnects to it;
// restarted without a socket, the socket's channel fails, goes back to TCP,
// and the task's calls go over TCP.
TEST(UnixSocket, ARestartedTaskIsCalledOverItsSocketOrOverTcpWithout) {
  setenv("DISTFLOW_UNIX_SOCKETS", "1", 1);
  const std::string ps_task = "/job:ps/replica:0/task:0";
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(absl::StrCat("ps|127.0.0.1:", PickUnusedTcpPort().value()));
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto start = [&](bool unix_sockets) {
    if (!unix_sockets) setenv("DISTFLOW_UNIX_SOCKETS", "0", 1);
    absl::StatusOr<std::unique_ptr<Server>> ps = Server::Create(*spec, "ps", 0);
    EXPECT_TRUE(ps.ok()) << ps.status();
    EXPECT_TRUE((*ps)->Start().ok());
    setenv("DISTFLOW_UNIX_SOCKETS", "1", 1);
    return std::move(*ps);
  };
  // Whether a call succeeds over `transport`, as the server counts it.
  WorkerCache cache(*spec, "");
  auto called_over = [&](const char* transport) {
    if (cache.TransportOf(ps_task) != transport) return false;
    const double before = CallsOver(transport);
    return CallGetStatus(&cache, ps_task).ok() && CallsOver(transport) == before + 1;
  };
  std::unique_ptr<Server> ps = start(true);
  const std::string first = ps->impl()->unix_socket();
  ASSERT_FALSE(first.empty());
  ASSERT_TRUE(CallGetStatus(&cache, ps_task).ok());
  ASSERT_TRUE(WaitUntil([&] { return cache.TransportOf(ps_task) == "unix"; }, absl::Seconds(30)));
  EXPECT_TRUE(called_over("unix"));

  ps.reset();
  ps = start(true);
  EXPECT_EQ(ps->impl()->unix_socket(), first) << "named after its address";
  // The first call may find the old connection closed before gRPC does.
  EXPECT_TRUE(WaitUntil([&] { return called_over("unix"); }, absl::Seconds(30)))
      << "the restarted task is called over " << cache.TransportOf(ps_task);

  ps.reset();
  ps = start(false);
  EXPECT_EQ(ps->impl()->unix_socket(), "");
  EXPECT_TRUE(WaitUntil(
      [&] {
        (void)CallGetStatus(&cache, ps_task);  // fails on the socket, and then the next use goes back to TCP
        return called_over("tcp");
      },
      absl::Seconds(30)))
      << "the task without a socket is called over " << cache.TransportOf(ps_task);
  unsetenv("DISTFLOW_UNIX_SOCKETS");
}

}  // namespace
}  // namespace distflow
