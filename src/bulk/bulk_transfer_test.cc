#include "bulk/bulk_transfer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/fake_clock_env.h"
#include "base/wait_until.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

Tensor Ramp(int64_t n) {
  Tensor t = Tensor::Allocate(DT_FLOAT, TensorShape({n})).value();
  float* p = static_cast<float*>(t.raw_data());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 1000) * 0.5f;
  return t;
}

TEST(BulkTransfer, FetchCopiesTheOfferedBytesAndReusesTheConnection) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  Tensor t = Ramp(3 << 20);  // 12 MiB
  BulkClient client;
  for (int round = 0; round < 2; ++round) {
    uint64_t ticket = (*server)->Offer(t);
    EXPECT_EQ((*server)->NumOffersForTest(), 1u);
    Tensor dst = Tensor::Allocate(DT_FLOAT, t.shape()).value();
    absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), ticket, dst.raw_data(), dst.TotalBytes(), nullptr);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(std::memcmp(dst.raw_data(), t.raw_data(), t.TotalBytes()), 0);
    EXPECT_EQ((*server)->NumOffersForTest(), 0u) << "an offer is served once";
    EXPECT_EQ(client.NumPooledForTest(), 1u) << "the connection goes back to the pool";
  }
}

TEST(BulkTransfer, UnknownTicketIsNotFoundAndTheConnectionSurvives) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  BulkClient client;
  char buf[16];
  absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), 12345, buf, sizeof(buf), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("127.0.0.1"), std::string::npos) << s;
  // A ticket is good for one fetch only.
  Tensor t = Ramp(4);
  uint64_t ticket = (*server)->Offer(t);
  ASSERT_TRUE(client.Fetch("127.0.0.1", (*server)->port(), ticket, buf, sizeof(buf), nullptr).ok());
  EXPECT_EQ(client.Fetch("127.0.0.1", (*server)->port(), ticket, buf, sizeof(buf), nullptr).code(),
            absl::StatusCode::kNotFound);
}

TEST(BulkTransfer, SizeMismatchIsDataLossNamingBothSizes) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  uint64_t ticket = (*server)->Offer(Ramp(8));  // 32 bytes
  BulkClient client;
  char buf[16];
  absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), ticket, buf, sizeof(buf), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("offers 32 bytes"), std::string::npos) << s;
  EXPECT_NE(s.message().find("16 bytes"), std::string::npos) << s;
}

TEST(BulkTransfer, AnOfferLivesItsTimeToLiveAndNoLonger) {
  // Two minutes of offer life on a fake clock: advanced, not waited for.
  FakeClockEnv clock;
  Timer timer(&clock);
  auto server = BulkServer::Start("127.0.0.1", absl::Minutes(2), 0, "", nullptr, &timer);
  ASSERT_TRUE(server.ok()) << server.status();
  uint64_t ticket = (*server)->Offer(Ramp(4));
  clock.Advance(absl::Seconds(119));
  timer.Poke();
  EXPECT_EQ((*server)->NumOffersForTest(), 1u);
  EXPECT_EQ(timer.NumPendingForTest(), 1u) << "the offer's expiry has not run";
  clock.Advance(absl::Seconds(2));
  timer.Poke();
  // The expiry runs on the timer's thread: wait for its effect, bounded.
  WaitUntil([&] { return (*server)->NumOffersForTest() == 0; }, absl::Seconds(10), absl::Milliseconds(1));
  EXPECT_EQ((*server)->NumOffersForTest(), 0u);
  BulkClient client;
  char buf[16];
  EXPECT_EQ(client.Fetch("127.0.0.1", (*server)->port(), ticket, buf, sizeof(buf), nullptr).code(),
            absl::StatusCode::kNotFound);
}

TEST(BulkTransfer, NobodyListeningIsUnavailableWithTheFix) {
  // Bind a port, then close it so nothing listens there.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  BulkClient client;
  char buf[8];
  absl::Status s = client.Fetch("127.0.0.1", port, 1, buf, sizeof(buf), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("DISTFLOW_BULK_TRANSFER=0"), std::string::npos) << s;
}

// A peer that accepts, reads the request, sends a header promising `promise`
// bytes, sends `send` of them and then either closes or stalls.
class FakePeer {
 public:
  FakePeer(uint64_t promise, size_t send, bool stall) {
    listen_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listen_, 1);
    socklen_t len = sizeof(a);
    getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([=, this] {
      int c = accept(listen_, nullptr, nullptr);
      if (c < 0) return;
      auto read_n = [c](char* p, size_t n) {
        size_t got = 0;
        while (got < n) {
          ssize_t r = read(c, p + got, n - got);
          if (r <= 0) break;
          got += static_cast<size_t>(r);
        }
      };
      char hello[12];  // magic, version, token length 0 (no token here)
      read_n(hello, sizeof(hello));
      const char accepted = 1;
      (void)!write(c, &accepted, 1);
      char req[16];
      read_n(req, sizeof(req));
      char head[8];
      for (int i = 0; i < 8; ++i) head[i] = static_cast<char>((promise >> (8 * i)) & 0xff);
      (void)!write(c, head, sizeof(head));
      std::string body(send, 'x');
      if (send > 0) (void)!write(c, body.data(), body.size());
      if (stall) {
        stalled_.Notify();
        release_.WaitForNotification();
      }
      close(c);
    });
  }
  ~FakePeer() {
    release_.Notify();
    shutdown(listen_, SHUT_RDWR);
    thread_.join();
    close(listen_);
  }
  int port() const { return port_; }
  // Whether the peer reached its stall (sent what it would) within `timeout`.
  bool WaitStalled(absl::Duration timeout) { return stalled_.WaitForNotificationWithTimeout(timeout); }

 private:
  int listen_ = -1;
  int port_ = 0;
  absl::Notification release_;
  absl::Notification stalled_;
  std::thread thread_;
};

TEST(BulkTransfer, TruncatedTransferIsDataLoss) {
  FakePeer peer(/*promise=*/1000, /*send=*/100, /*stall=*/false);
  BulkClient client;
  std::vector<char> buf(1000);
  absl::Status s = client.Fetch("127.0.0.1", peer.port(), 7, buf.data(), buf.size(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("after 100 bytes"), std::string::npos) << s;
  EXPECT_EQ(client.NumPooledForTest(), 0u) << "a broken connection is not reused";
}

TEST(BulkTransfer, CancellationUnblocksAStalledFetch) {
  FakePeer peer(/*promise=*/1000, /*send=*/10, /*stall=*/true);
  BulkClient client;
  CancellationManager cm;
  std::vector<char> buf(1000);
  absl::Status s;
  absl::Notification done;
  std::thread t([&] {
    s = client.Fetch("127.0.0.1", peer.port(), 7, buf.data(), buf.size(), &cm);
    done.Notify();
  });
  // The peer has sent 10 of the 1000 bytes it promised and stalls: the
  // fetch cannot have finished.
  ASSERT_TRUE(peer.WaitStalled(absl::Seconds(30)));
  EXPECT_FALSE(done.HasBeenNotified());
  cm.StartCancel(absl::CancelledError("step aborted"));
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  t.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
}

TEST(BulkTransfer, IdleTimeoutEndsAStalledFetch) {
  FakePeer peer(/*promise=*/1000, /*send=*/10, /*stall=*/true);
  BulkClient client;
  std::vector<char> buf(1000);
  absl::Status s = client.Fetch("127.0.0.1", peer.port(), 7, buf.data(), buf.size(), nullptr, absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

// A peer that accepts every connection and never sends a byte (another
// program's port, or a stopped task: the kernel still accepts for it).
class SilentPeer {
 public:
  SilentPeer() {
    listen_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listen_, 4);
    socklen_t len = sizeof(a);
    getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (int c; (c = accept(listen_, nullptr, nullptr)) >= 0;) {
        accepted_.fetch_add(1);
        conns_.push_back(c);  // held open, unanswered, until the peer goes
      }
    });
  }
  ~SilentPeer() {
    shutdown(listen_, SHUT_RDWR);
    thread_.join();
    for (int c : conns_) close(c);
    close(listen_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  int listen_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::vector<int> conns_;  // the accepting thread's
  std::thread thread_;
};

TEST(BulkTransfer, APeerThatAcceptsButNeverAnswersTheHelloFailsTheTransferNamingIt) {
  SilentPeer peer;
  BulkClient client;
  const std::string where = absl::StrCat("127.0.0.1:", peer.port());
  std::vector<char> buf(1000);
  absl::Status s = client.Fetch("127.0.0.1", peer.port(), 7, buf.data(), buf.size(), nullptr, absl::Milliseconds(200));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find(where + " accepted the connection but did not answer the bulk hello"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("--bulk_port"), std::string::npos) << s;
  absl::StatusOr<uint64_t> put = client.Put("127.0.0.1", peer.port(), buf.data(), buf.size(), absl::Milliseconds(200));
  EXPECT_EQ(put.status().code(), absl::StatusCode::kDeadlineExceeded) << put.status();
  EXPECT_NE(put.status().message().find(where), std::string::npos) << put.status();
  EXPECT_TRUE(WaitUntil([&] { return peer.accepted() >= 2; }, absl::Seconds(10)));
  EXPECT_EQ(peer.accepted(), 2) << "one connection per transfer, not retried";
  EXPECT_EQ(client.NumPooledForTest(), 0u);
}

TEST(BulkTransfer, GarbageOnTheBulkPortIsDropped) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>((*server)->port()));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const char junk[] = "GET / HTTP/1.1\r\n\r\n";
  ASSERT_GT(write(fd, junk, sizeof(junk)), 0);
  char c;
  EXPECT_LE(read(fd, &c, 1), 0) << "the server closes a connection that does not speak its protocol";
  close(fd);
  // And it keeps serving others.
  uint64_t ticket = (*server)->Offer(Ramp(4));
  BulkClient client;
  char buf[16];
  EXPECT_TRUE(client.Fetch("127.0.0.1", (*server)->port(), ticket, buf, sizeof(buf), nullptr).ok());
}

TEST(BulkTransfer, PutBytesComeBackAsATensorOfTheGivenShape) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  Tensor t = Ramp(1 << 20);  // 4 MiB
  BulkClient client;
  absl::StatusOr<uint64_t> ticket = client.Put("127.0.0.1", (*server)->port(), t.raw_data(), t.TotalBytes());
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  EXPECT_EQ((*server)->NumReceivedForTest(), 1u);
  EXPECT_EQ((*server)->bytes_received(), t.TotalBytes());
  absl::StatusOr<Tensor> got = (*server)->TakeReceived(*ticket, DT_FLOAT, TensorShape({1024, 1024}));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shape(), TensorShape({1024, 1024}));
  EXPECT_EQ(std::memcmp(got->raw_data(), t.raw_data(), t.TotalBytes()), 0);
  EXPECT_EQ((*server)->TakeReceived(*ticket, DT_FLOAT, TensorShape({1024, 1024})).status().code(),
            absl::StatusCode::kNotFound)
      << "a put ticket is good once";
  EXPECT_EQ(client.NumPooledForTest(), 1u);
}

TEST(BulkTransfer, PutBytesOfTheWrongSizeForTheShapeAreRejected) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  Tensor t = Ramp(10);
  BulkClient client;
  absl::StatusOr<uint64_t> ticket = client.Put("127.0.0.1", (*server)->port(), t.raw_data(), t.TotalBytes());
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  absl::StatusOr<Tensor> got = (*server)->TakeReceived(*ticket, DT_DOUBLE, TensorShape({10}));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  EXPECT_NE(got.status().message().find("40 bytes"), std::string::npos) << got.status();
}

TEST(BulkTransfer, UnclaimedPutsExpire) {
  auto server = BulkServer::Start("127.0.0.1", absl::Milliseconds(30));
  ASSERT_TRUE(server.ok()) << server.status();
  Tensor t = Ramp(10);
  BulkClient client;
  ASSERT_TRUE(client.Put("127.0.0.1", (*server)->port(), t.raw_data(), t.TotalBytes()).ok());
  WaitUntil([&] { return (*server)->NumReceivedForTest() == 0; }, absl::Seconds(10));
  EXPECT_EQ((*server)->NumReceivedForTest(), 0u);
}

TEST(BulkTransfer, ThreadsOfClosedConnectionsAreReaped) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  char buf[16];
  for (int i = 0; i < 20; ++i) {
    BulkClient client;  // a new connection each time, closed when the client goes
    ASSERT_TRUE(
        client.Fetch("127.0.0.1", (*server)->port(), (*server)->Offer(Ramp(4)), buf, sizeof(buf), nullptr).ok());
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_LE((*server)->NumConnectionThreadsForTest(), 5u) << "one thread per live connection, not per connection ever";
}

TEST(BulkTransfer, ClientKeepsAFewIdleConnectionsPerPeer) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  BulkClient client;
  Tensor t = Ramp(1 << 18);  // 1 MiB, so the fetches overlap
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      std::vector<char> buf(t.TotalBytes());
      if (client.Fetch("127.0.0.1", (*server)->port(), (*server)->Offer(t), buf.data(), buf.size(), nullptr).ok()) {
        ok.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), kThreads);
  EXPECT_LE(client.NumPooledForTest(), BulkClient::kMaxIdlePerPeer);
}

TEST(BulkTransfer, RestartedPeerIsReachedOnAFreshConnection) {
  BulkClient client;
  char buf[16];
  int port = 0;
  {
    auto first = BulkServer::Start("127.0.0.1");
    ASSERT_TRUE(first.ok());
    port = (*first)->port();
    ASSERT_TRUE(client.Fetch("127.0.0.1", port, (*first)->Offer(Ramp(4)), buf, sizeof(buf), nullptr).ok());
    ASSERT_EQ(client.NumPooledForTest(), 1u);
  }  // the peer goes away: the pooled connection is dead
  auto second = BulkServer::Start("127.0.0.1", absl::Seconds(120), port);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::Status s = client.Fetch("127.0.0.1", port, (*second)->Offer(Ramp(4)), buf, sizeof(buf), nullptr);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(client.NumPooledForTest(), 1u);
}

// Offers nobody fetches (a dead peer) cannot pile up without bound: past
// the budget Offer refuses (0) and the caller sends inside the message.
TEST(BulkTransfer, OffersBeyondTheBudgetAreRefusedUntilOthersAreTaken) {
  FakeClockEnv clock;
  Timer timer(&clock);
  auto server = BulkServer::Start("127.0.0.1", absl::Minutes(2), 0, "", nullptr, &timer);
  ASSERT_TRUE(server.ok());
  (*server)->set_max_held_offer_bytes(10 << 20);
  Tensor six = Ramp(6 << 18);  // 6 MiB
  uint64_t first = (*server)->Offer(six);
  ASSERT_NE(first, 0u);
  EXPECT_EQ((*server)->Offer(six), 0u) << "12 MiB held would exceed the 10 MiB budget";
  BulkClient client;
  Tensor dst = Tensor::Allocate(DT_FLOAT, six.shape()).value();
  ASSERT_TRUE(client.Fetch("127.0.0.1", (*server)->port(), first, dst.raw_data(), dst.TotalBytes(), nullptr).ok());
  uint64_t second = (*server)->Offer(six);
  EXPECT_NE(second, 0u) << "a fetched offer frees its share of the budget";
  EXPECT_EQ((*server)->Offer(six), 0u) << "the second offer holds its share until taken or expired";
  // An expired offer frees it too (the expiry runs on the timer's thread:
  // wait for its effect, bounded).
  clock.Advance(absl::Minutes(2) + absl::Seconds(1));
  timer.Poke();
  WaitUntil([&] { return (*server)->NumOffersForTest() == 0; }, absl::Seconds(10), absl::Milliseconds(1));
  EXPECT_EQ((*server)->NumOffersForTest(), 0u);
  EXPECT_NE((*server)->Offer(six), 0u);
}

// A peer that went away (or restarted on another port) leaves no pooled
// connection behind: idle connections are closed after the idle limit.
TEST(BulkTransfer, IdlePooledConnectionsAreClosedAfterTheLimit) {
  auto a = BulkServer::Start("127.0.0.1");
  auto b = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(a.ok() && b.ok());
  FakeClockEnv clock;
  BulkClient client(BulkClient::kClientIdleTimeout, "", nullptr, &clock);
  char buf[16];
  ASSERT_TRUE(client.Fetch("127.0.0.1", (*a)->port(), (*a)->Offer(Ramp(4)), buf, sizeof(buf), nullptr).ok());
  EXPECT_EQ(client.NumPooledForTest(), 1u);
  clock.Advance(BulkClient::kClientIdleTimeout - absl::Seconds(1));
  ASSERT_TRUE(client.Fetch("127.0.0.1", (*b)->port(), (*b)->Offer(Ramp(4)), buf, sizeof(buf), nullptr).ok());
  EXPECT_EQ(client.NumPooledForTest(), 2u) << "a's connection is kept until its idle limit";
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(client.Fetch("127.0.0.1", (*b)->port(), (*b)->Offer(Ramp(4)), buf, sizeof(buf), nullptr).ok());
  EXPECT_EQ(client.NumPooledForTest(), 1u) << "a's expired connection is closed, b's kept";
  // a is reached again on a fresh connection.
  ASSERT_TRUE(client.Fetch("127.0.0.1", (*a)->port(), (*a)->Offer(Ramp(4)), buf, sizeof(buf), nullptr).ok());
  EXPECT_EQ(client.NumPooledForTest(), 2u);
}

// A connection from `source` (a loopback address) to the server that says
// hello (no token) and then nothing; -1 on failure.
int IdleConnection(const char* source, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char hello[12] = {'D', 'F', 'B', 'H', 1, 0, 0, 0, 0, 0, 0, 0};  // v1, no token
  char answer = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 ||
      send(fd, hello, sizeof(hello), MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello)) ||
      recv(fd, &answer, 1, 0) != 1 || answer != 1) {
    close(fd);
    return -1;
  }
  return fd;
}

// True once the server has closed `fd` (EOF within `wait`).
bool ClosedByServer(int fd, absl::Duration wait) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(wait));
  tv.tv_usec = static_cast<suseconds_t>(absl::ToInt64Microseconds(wait) % 1000000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c;
  return recv(fd, &c, 1, 0) == 0;
}

// One address holding its whole share of connections idle cannot lock out
// itself or anyone else: a new connection closes the one idle longest, of
// that address, and other addresses keep theirs.
TEST(BulkTransfer, AnAddressOverItsShareLosesItsLongestIdleConnection) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  int other = IdleConnection("127.0.0.1", port);
  ASSERT_GE(other, 0);
  std::vector<int> hog;
  for (int i = 0; i < BulkServer::kMaxConnectionsPerPeer; ++i) {
    int fd = IdleConnection("127.0.0.2", port);
    ASSERT_GE(fd, 0) << "connection " << i;
    hog.push_back(fd);
  }
  EXPECT_EQ((*server)->evictions(), 0u);
  // One more from the same address: its oldest goes.
  int extra = IdleConnection("127.0.0.2", port);
  ASSERT_GE(extra, 0) << "the new connection is served";
  EXPECT_EQ((*server)->evictions(), 1u);
  EXPECT_TRUE(ClosedByServer(hog[0], absl::Seconds(5))) << "the longest idle of 127.0.0.2 is closed";
  EXPECT_FALSE(ClosedByServer(hog[1], absl::Milliseconds(100)));
  EXPECT_FALSE(ClosedByServer(other, absl::Milliseconds(100))) << "127.0.0.1's connection is not touched";
  // A real client from the other address still fetches over the bulk port.
  BulkClient client;
  Tensor t = Ramp(1 << 18);
  Tensor dst = Tensor::Allocate(DT_FLOAT, t.shape()).value();
  absl::Status s = client.Fetch("127.0.0.1", port, (*server)->Offer(t), dst.raw_data(), dst.TotalBytes(), nullptr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(dst.raw_data(), t.raw_data(), t.TotalBytes()), 0);
  for (int fd : hog) close(fd);
  close(extra);
  close(other);
}

// A pooled connection the server closed to make room is noticed by the
// client, which fetches (and puts) again on a new connection.
TEST(BulkTransfer, APooledConnectionClosedToMakeRoomIsReplaced) {
  auto server = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  BulkClient client;
  Tensor t = Ramp(1 << 18);
  Tensor dst = Tensor::Allocate(DT_FLOAT, t.shape()).value();
  std::vector<int> hog;
  // Fills the address's share with new idle connections, so that the
  // client's pooled connection, the oldest, is the one closed.
  auto crowd_out = [&] {
    for (int fd : hog) close(fd);
    hog.clear();
    WaitUntil([&] { return (*server)->NumOpenConnectionsForTest() <= 1; }, absl::Seconds(10), absl::Milliseconds(2));
    ASSERT_EQ((*server)->NumOpenConnectionsForTest(), 1u) << "only the client's pooled connection is left";
    // The server marks it idle once its thread is back from serving the
    // fetch, which may come after the client has its bytes: a busy
    // connection is never the one closed to make room.
    WaitUntil([&] { return (*server)->NumBusyConnectionsForTest() == 0; }, absl::Seconds(10), absl::Milliseconds(2));
    ASSERT_EQ((*server)->NumBusyConnectionsForTest(), 0u) << "the pooled connection is idle";
    const uint64_t before = (*server)->evictions();
    for (int i = 0; i < BulkServer::kMaxConnectionsPerPeer; ++i) {
      int fd = IdleConnection("127.0.0.1", port);
      ASSERT_GE(fd, 0) << "connection " << i;
      hog.push_back(fd);
    }
    EXPECT_EQ((*server)->evictions() - before, 1u);
    EXPECT_FALSE(ClosedByServer(hog[0], absl::Milliseconds(50))) << "the pooled connection went, not a new one";
  };
  ASSERT_TRUE(client.Fetch("127.0.0.1", port, (*server)->Offer(t), dst.raw_data(), dst.TotalBytes(), nullptr).ok());
  ASSERT_EQ(client.NumPooledForTest(), 1u);
  crowd_out();
  const uint64_t served = (*server)->bytes_served();
  absl::Status s = client.Fetch("127.0.0.1", port, (*server)->Offer(t), dst.raw_data(), dst.TotalBytes(), nullptr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ((*server)->bytes_served() - served, t.TotalBytes()) << "over the bulk port, on a new connection";
  EXPECT_EQ(std::memcmp(dst.raw_data(), t.raw_data(), t.TotalBytes()), 0);
  crowd_out();
  absl::StatusOr<uint64_t> ticket = client.Put("127.0.0.1", port, t.raw_data(), t.TotalBytes());
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  absl::StatusOr<Tensor> got = (*server)->TakeReceived(*ticket, DT_FLOAT, t.shape());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::memcmp(got->raw_data(), t.raw_data(), t.TotalBytes()), 0);
  for (int fd : hog) close(fd);
}

}  // namespace
}  // namespace distflow
