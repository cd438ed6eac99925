// in_process_cluster_test: a ps whose bulk port is crowded with idle or busy
// connections still gets a large tensor to the worker (over the bulk port,
// or over gRPC instead).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bulk/bulk_transfer.h"
#include "in_process_cluster_test.h"

namespace distflow {
namespace cluster_test {
namespace {

// A connection to the bulk port at 127.0.0.1:`port` from `source` (any
// 127.x.y.z address) that says hello (the cluster has no token) and then
// nothing, or, if `busy`, starts a put of 16 bytes and sends only 8, so its
// server thread waits in the middle of a request. -1 on failure.
int HoggingBulkConnection(const std::string& source, int port, bool busy) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char hello[12] = {'D', 'F', 'B', 'H', 1, 0, 0, 0, 0, 0, 0, 0};
  // "DFBP", version 1, 16 bytes follow; then 8 of them.
  const char put[24] = {'D', 'F', 'B', 'P', 1, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0};
  char answer = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 ||
      send(fd, hello, sizeof(hello), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello)) ||
      recv(fd, &answer, 1, 0) != 1 || answer != 1 ||
      (busy && send(fd, put, sizeof(put), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(put)))) {
    close(fd);
    return -1;
  }
  return fd;
}

// A cluster of 1 ps and 1 worker whose ps's bulk port is then given
// BulkServer::kMaxConnections connections from four loopback addresses (each
// address's whole share), idle or busy. Reading a 2 MiB variable of the ps
// on the worker crosses over that port if it can.
class BulkPortCrowded : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = MakeLocalClusterSpec(1, 1);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto servers = StartLocalCluster(*spec);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    for (auto& s : servers_) (s->task_name() == "/job:ps/replica:0/task:0" ? ps_ : worker_) = s.get();
    ASSERT_GT(ps_->bulk_port(), 0);
    Scope on_ps = root_.WithDevice("/job:ps/task:0");
    auto w = ops::MakeVariable(on_ps.WithOpName("w"), ops::Fill(on_ps, {512, 1024}, ops::Const(on_ps, 0.5f)));
    read_ = ops::Identity(root_.WithDevice("/job:worker/task:0"), w);
    auto init = ops::GlobalVariablesInitializer(root_);
    sess_ = std::make_unique<Session>(worker_->target());
    auto r = sess_->Run({}, {}, {init});
    ASSERT_TRUE(r.ok()) << r.status();
    rlimit lim{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
    lim.rlim_cur = std::min<rlim_t>(lim.rlim_max, 8192);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
    ASSERT_GE(lim.rlim_cur, 4096u) << "cannot open enough descriptors for this test";
  }
  void TearDown() override {
    for (int fd : hog_) close(fd);
  }
  void Crowd(bool busy) {
    BulkServer* bulk = ps_->impl()->worker()->bulk_server();
    for (int i = 0; i < BulkServer::kMaxConnections + 8; ++i) {
      if (i == BulkServer::kMaxConnections && busy) {
        // The server marks a connection busy when it has read its request;
        // until then it would count as idle and could be evicted.
        WaitUntil([&] { return bulk->NumBusyConnectionsForTest() >= static_cast<size_t>(BulkServer::kMaxConnections); },
                  absl::Seconds(30));
        ASSERT_EQ(bulk->NumBusyConnectionsForTest(), static_cast<size_t>(BulkServer::kMaxConnections));
      }
      const std::string source = absl::StrCat("127.0.0.", 2 + i / BulkServer::kMaxConnectionsPerPeer);
      int fd = HoggingBulkConnection(source, ps_->bulk_port(), busy);
      if (fd < 0 && busy && i >= BulkServer::kMaxConnections) continue;  // refused: every slot is busy
      ASSERT_GE(fd, 0) << "connection " << i << " from " << source;
      hog_.push_back(fd);
    }
    EXPECT_EQ(bulk->evictions(), busy ? 0u : 8u) << "idle connections make room; busy ones do not";
  }
  // Reads the variable on the worker; returns the bytes the ps's bulk port served meanwhile.
  uint64_t ReadAcross() {
    BulkServer* bulk = ps_->impl()->worker()->bulk_server();
    const uint64_t before = bulk->bytes_served();
    auto out = sess_->Run({read_});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return 0;
    EXPECT_EQ((*out)[0].NumElements(), 512 * 1024);
    EXPECT_EQ((*out)[0].flat<float>()[0], 0.5f);
    EXPECT_EQ((*out)[0].flat<float>()[512 * 1024 - 1], 0.5f);
    return bulk->bytes_served() - before;
  }
  std::vector<std::unique_ptr<Server>> servers_;
  Server* ps_ = nullptr;
  Server* worker_ = nullptr;
  Scope root_ = Scope::NewRootScope();
  Output read_;
  std::unique_ptr<Session> sess_;
  std::vector<int> hog_;
};

// Idle connections in every slot (the issue's ~1,000 idle connections that
// made every large transfer fail): the oldest is closed for the worker's
// connection, and the tensor still crosses over the bulk port.
TEST_F(BulkPortCrowded, IdleConnectionsAreClosedToLetATransferThrough) {
  Crowd(/*busy=*/false);
  EXPECT_EQ(ReadAcross(), uint64_t{512 * 1024 * 4});
}

// Every slot busy in the middle of a request: the worker's connection is
// refused, and the step gets the tensor over gRPC instead of failing.
TEST_F(BulkPortCrowded, BusySlotsMakeTheTransferFallBackToGrpc) {
  Crowd(/*busy=*/true);
  EXPECT_EQ(ReadAcross(), 0u) << "nothing over the bulk port: it had no room";
}

}  // namespace
}  // namespace cluster_test
}  // namespace distflow
