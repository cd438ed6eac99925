// Shared memory under the bulk port (shm_channel.h): every size through the
// ring both ways, the fallback to TCP, the token check, a peer process
// killed mid-transfer, and nothing left behind (no memfd mapped or open, no
// file in /dev/shm, no socket) after each case.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/bytes_copied.h"
#include "bulk/bulk_transfer.h"
#include "bulk/bulk_wire.h"
#include "bulk/shm_channel.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using bulk_internal::kShmSlotBytes;
using bulk_internal::kShmSlots;

// /dev/shm's entries, leaving out POSIX named semaphores ("sem.*"): distflow
// makes none, and other programs on the machine (Python's multiprocessing in
// a test running beside this one) create and remove them at any time.
std::set<std::string> DevShm() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::string_view(e->d_name).starts_with("sem.")) continue;
      names.insert(e->d_name);
    }
    closedir(d);
  }
  return names;
}

// Segments this process has open or mapped.
int OurSegments() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[512] = {0};
      const std::string link = absl::StrCat("/proc/self/fd/", e->d_name);
      if (readlink(link.c_str(), target, sizeof(target) - 1) > 0 && absl::StrContains(target, "memfd:distflow-bulk"))
        ++n;
    }
    closedir(d);
  }
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) n += absl::StrContains(line, "memfd:distflow-bulk") ? 1 : 0;
  return n;
}

// Listening or connected abstract sockets of process `pid`'s bulk servers.
int SocketsOf(pid_t pid) {
  std::ifstream unix_sockets("/proc/net/unix");
  const std::string prefix = absl::StrCat("@distflow-bulk.", pid, ".");
  int n = 0;
  for (std::string line; std::getline(unix_sockets, line);) n += absl::StrContains(line, prefix) ? 1 : 0;
  return n;
}

// Checks, when a case ends, that it left nothing behind.
class SharedMemory : public ::testing::Test {
 protected:
  void SetUp() override { dev_shm_ = DevShm(); }
  void TearDown() override {
    EXPECT_EQ(OurSegments(), 0) << "a shared-memory segment outlived its server and client";
    EXPECT_EQ(SocketsOf(getpid()), 0) << "an abstract socket outlived its server";
    EXPECT_EQ(DevShm(), dev_shm_) << "/dev/shm changed";
  }
  std::set<std::string> dev_shm_;
};

Tensor Bytes(size_t n, int seed) {
  Tensor t = Tensor::Allocate(DT_UINT8, TensorShape({static_cast<int64_t>(n)})).value();
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(seed)) % 251);
  return t;
}

TEST_F(SharedMemory, EverySizeRoundTripsThroughTheRingBothWays) {
  {
    auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "secret");
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE((*server)->EnableSharedMemory().ok());
    EXPECT_EQ(SocketsOf(getpid()), 1) << "the listener, in the abstract namespace";
    BulkClient client(BulkClient::kClientIdleTimeout, "secret");
    client.set_shared_memory(true);
    client.set_shm_direct_read(false);   // gets through the ring too (direct reads: below)
    client.set_shm_mapped_reads(false);  // (mapped gets: shm_blocks_test)
    const size_t ring = kShmSlotBytes * kShmSlots;
    uint64_t total = 0;
    int seed = 0;
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, kShmSlotBytes - 1, kShmSlotBytes, kShmSlotBytes + 1, ring,
                     ring + 3, 5 * ring + kShmSlotBytes / 3}) {
      SCOPED_TRACE(n);
      Tensor t = Bytes(n, ++seed);
      const uint64_t ticket = (*server)->Offer(t);
      Tensor got = Tensor::Allocate(DT_UINT8, t.shape()).value();
      absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), ticket, got.raw_data(), n, nullptr);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), n), 0);
      Tensor put = Bytes(n, ++seed);
      absl::StatusOr<uint64_t> put_ticket = client.Put("127.0.0.1", (*server)->port(), put.raw_data(), n);
      ASSERT_TRUE(put_ticket.ok()) << put_ticket.status();
      absl::StatusOr<Tensor> arrived = (*server)->TakeReceived(*put_ticket, DT_UINT8, put.shape());
      ASSERT_TRUE(arrived.ok()) << arrived.status();
      EXPECT_EQ(std::memcmp(arrived->raw_data(), put.raw_data(), n), 0);
      total += n;
    }
    EXPECT_EQ((*server)->shm_bytes_served(), total) << "every fetch went through shared memory";
    EXPECT_EQ((*server)->shm_bytes_received(), total) << "every put too";
    EXPECT_EQ((*server)->bytes_served(), total) << "and is counted as the bulk port's";
    EXPECT_EQ(client.NumPooledShmForTest(), 1u) << "one shared-memory connection, reused";
    // An unknown ticket is NotFound and keeps the connection.
    char buf[8];
    EXPECT_EQ(client.Fetch("127.0.0.1", (*server)->port(), 424242, buf, sizeof(buf), nullptr).code(),
              absl::StatusCode::kNotFound);
    EXPECT_EQ(client.NumPooledShmForTest(), 1u);
  }
}

// Bytes of this process's mappings of shared-memory segments (server and
// client side of every open connection).
size_t MappedSegmentBytes() {
  std::ifstream maps("/proc/self/maps");
  size_t total = 0;
  for (std::string line; std::getline(maps, line);) {
    if (!absl::StrContains(line, "memfd:distflow-bulk")) continue;
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) == 2) total += hi - lo;
  }
  return total;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

TEST_F(SharedMemory, DistflowShmSlotKibSetsTheSlotsOfNewConnectionsAndABadValueKeepsTheDefault) {
  for (const auto& [value, slot] : std::vector<std::pair<const char*, size_t>>{
           {"64", size_t{64} << 10}, {"100", kShmSlotBytes}, {"32", kShmSlotBytes}, {"abc", kShmSlotBytes}}) {
    SCOPED_TRACE(value);
    ScopedEnv env("DISTFLOW_SHM_SLOT_KIB", value);
    auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "secret");
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE((*server)->EnableSharedMemory().ok());
    BulkClient client(BulkClient::kClientIdleTimeout, "secret");
    client.set_shared_memory(true);
    client.set_shm_direct_read(false);
    client.set_shm_mapped_reads(false);
    const size_t n = 3 * slot * kShmSlots + 17;  // wraps the ring three times
    Tensor t = Bytes(n, 5);
    Tensor got = Tensor::Allocate(DT_UINT8, t.shape()).value();
    absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), (*server)->Offer(t), got.raw_data(), n, nullptr);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), n), 0);
    EXPECT_EQ((*server)->shm_bytes_served(), n) << "through the ring";
    EXPECT_EQ(MappedSegmentBytes(), 2 * slot * kShmSlots) << "the segment, mapped by the server and the client";
  }
}

TEST_F(SharedMemory, TheBulkServersThreadsAreNamed) {
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "secret");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->EnableSharedMemory().ok());
  BulkClient shm(BulkClient::kClientIdleTimeout, "secret");
  shm.set_shared_memory(true);
  BulkClient tcp(BulkClient::kClientIdleTimeout, "secret");
  tcp.set_shared_memory(false);
  Tensor t = Bytes(1000, 3);
  char buf[1000];
  for (BulkClient* c : {&shm, &tcp}) {
    ASSERT_TRUE(c->Fetch("127.0.0.1", (*server)->port(), (*server)->Offer(t), buf, sizeof(buf), nullptr).ok());
  }
  std::multiset<std::string> names;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      std::ifstream comm(absl::StrCat("/proc/self/task/", e->d_name, "/comm"));
      std::string name;
      if (std::getline(comm, name)) names.insert(name);
    }
    closedir(d);
  }
  // Each connection has a serving thread; the acceptors are one each.
  EXPECT_EQ(names.count("df_bulk_accept"), 1u);
  EXPECT_EQ(names.count("df_shm_accept"), 1u);
  for (const char* want : {"df_bulk_serve", "df_shm_serve"}) {
    EXPECT_GE(names.count(want), 1u) << want;
  }
}

TEST_F(SharedMemory, OffOnEitherSideTheBytesGoOverTcp) {
  auto with = BulkServer::Start("127.0.0.1");
  auto without = BulkServer::Start("127.0.0.1");
  ASSERT_TRUE(with.ok() && without.ok());
  ASSERT_TRUE((*with)->EnableSharedMemory().ok());
  const size_t n = 3 * kShmSlotBytes + 5;
  Tensor t = Bytes(n, 1);
  Tensor got = Tensor::Allocate(DT_UINT8, t.shape()).value();
  BulkClient off;  // shared memory is the caller's choice: off unless set
  ASSERT_TRUE(off.Fetch("127.0.0.1", (*with)->port(), (*with)->Offer(t), got.raw_data(), n, nullptr).ok());
  EXPECT_EQ((*with)->bytes_served(), n);
  EXPECT_EQ((*with)->shm_bytes_served(), 0u) << "a client with shared memory off uses TCP";
  BulkClient on;
  on.set_shared_memory(true);
  ASSERT_TRUE(on.Fetch("127.0.0.1", (*without)->port(), (*without)->Offer(t), got.raw_data(), n, nullptr).ok());
  EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), n), 0);
  EXPECT_EQ((*without)->bytes_served(), n);
  EXPECT_EQ((*without)->shm_bytes_served(), 0u) << "a server that offers no socket is reached over TCP";
  EXPECT_EQ(on.NumPooledShmForTest(), 0u);
  EXPECT_EQ(on.NumPooledForTest(), 1u);
}

TEST_F(SharedMemory, AWrongTokenIsRefusedBeforeAnySegmentIsHandedOver) {
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "right");
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->EnableSharedMemory().ok());
  // Straight to the socket with the wrong token: refused, no descriptor.
  for (const std::string token : {"wrong", ""}) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr;
    const socklen_t len = bulk_internal::AbstractAddress((*server)->shm_socket_name(), &addr);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
    std::string hello(12, '\0');
    bulk_internal::PutU32(hello.data(), bulk_internal::kHelloMagic);
    bulk_internal::PutU32(hello.data() + 4, bulk_internal::kVersion);
    bulk_internal::PutU32(hello.data() + 8, static_cast<uint32_t>(token.size()));
    hello += token;
    ASSERT_EQ(write(fd, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
    char answer[16];
    int memfd = -1, err = 0;
    EXPECT_EQ(bulk_internal::ReadWithFd(fd, answer, 1, &memfd, &err), 1u);
    EXPECT_EQ(answer[0], bulk_internal::kHelloRefused);
    EXPECT_EQ(memfd, -1) << "no segment for a peer without the token";
    EXPECT_EQ(bulk_internal::ReadWithFd(fd, answer, 1, &memfd, &err), 0u) << "and the connection is closed";
    close(fd);
  }
  // Through the client: the error says what is wrong and how to fix it.
  BulkClient stranger(BulkClient::kClientIdleTimeout, "wrong");
  stranger.set_shared_memory(true);
  char buf[4];
  absl::Status s = stranger.Fetch("127.0.0.1", (*server)->port(), 1, buf, sizeof(buf), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "DISTFLOW_AUTH_TOKEN")) << s;
  EXPECT_EQ((*server)->shm_bytes_served(), 0u);
}

// bulk_shm_peer as a child process, its stdout on a pipe.
struct Peer {
  pid_t pid = -1;
  FILE* out = nullptr;
  std::string Line() {
    char buf[256];
    return out != nullptr && std::fgets(buf, sizeof(buf), out) != nullptr ? std::string(buf) : std::string();
  }
  ~Peer() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out != nullptr) fclose(out);
  }
};

void StartPeer(Peer* peer, const std::vector<std::string>& args) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  std::vector<char*> argv;
  std::string bin = BULK_SHM_PEER_BIN;
  argv.push_back(bin.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  peer->pid = fork();
  ASSERT_GE(peer->pid, 0);
  if (peer->pid == 0) {
    dup2(fds[1], 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  peer->out = fdopen(fds[0], "r");
}

// The peer's first line: the port it serves on and the ticket of its offer.
void ReadReady(Peer* peer, int* port, unsigned long long* ticket) {
  const std::string ready = peer->Line();
  ASSERT_EQ(std::sscanf(ready.c_str(), "READY %d %llu", port, ticket), 2) << ready;
}

TEST_F(SharedMemory, APeerKilledMidTransferFailsItNamingThePeerAtOnce) {
  const size_t n = 8 * kShmSlotBytes;  // twice the ring: the peer stalls after its first chunk
  Peer peer;
  ASSERT_NO_FATAL_FAILURE(StartPeer(&peer, {"secret", std::to_string(n), "stall"}));
  int port = 0;
  unsigned long long ticket = 0;
  ASSERT_NO_FATAL_FAILURE(ReadReady(&peer, &port, &ticket));
  EXPECT_EQ(SocketsOf(peer.pid), 1) << "the peer's listener";
  {
    BulkClient client(BulkClient::kClientIdleTimeout, "secret");
    client.set_shared_memory(true);
    client.set_shm_direct_read(false);  // the ring, which the peer stalls
    client.set_shm_mapped_reads(false);
    Tensor dst = Tensor::Allocate(DT_UINT8, TensorShape({static_cast<int64_t>(n)})).value();
    absl::Status status;
    absl::Notification done;
    // A receive timeout of an hour: only noticing the death can end it soon.
    std::thread fetch([&] {
      status = client.Fetch("127.0.0.1", port, ticket, dst.raw_data(), n, nullptr, absl::Hours(1));
      done.Notify();
    });
    EXPECT_EQ(peer.Line(), "STALLED\n") << "the transfer is under way";
    EXPECT_FALSE(done.HasBeenNotified());
    kill(peer.pid, SIGKILL);
    waitpid(peer.pid, nullptr, 0);
    peer.pid = -1;
    // Not a timing assertion: without the death noticed the wait is an hour.
    const bool ended = done.WaitForNotificationWithTimeout(absl::Minutes(5));
    EXPECT_TRUE(ended) << "the fetch still waits on a dead peer";
    if (!ended) kill(getpid(), SIGABRT);
    fetch.join();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), absl::StrCat("127.0.0.1:", port))) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "died")) << status;
    EXPECT_EQ(client.NumPooledShmForTest(), 0u) << "the broken connection is not pooled";
  }
  EXPECT_EQ(SocketsOf(getpid()), 0);
}

TEST_F(SharedMemory, ACancelledFetchEndsAndFreesItsConnection) {
  const size_t n = 8 * kShmSlotBytes;
  Peer peer;
  ASSERT_NO_FATAL_FAILURE(StartPeer(&peer, {"", std::to_string(n), "stall"}));
  int port = 0;
  unsigned long long ticket = 0;
  ASSERT_NO_FATAL_FAILURE(ReadReady(&peer, &port, &ticket));
  BulkClient client;
  client.set_shared_memory(true);
  client.set_shm_direct_read(false);  // the ring, which the peer stalls
  client.set_shm_mapped_reads(false);
  Tensor dst = Tensor::Allocate(DT_UINT8, TensorShape({static_cast<int64_t>(n)})).value();
  CancellationManager cm;
  absl::Status status;
  std::thread fetch([&] { status = client.Fetch("127.0.0.1", port, ticket, dst.raw_data(), n, &cm, absl::Hours(1)); });
  EXPECT_EQ(peer.Line(), "STALLED\n");
  cm.StartCancel(absl::CancelledError("step aborted"));
  fetch.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_EQ(client.NumPooledShmForTest(), 0u);
}

double Copied(const char* what) { return BytesCopiedCounter(what)->value(); }

TEST_F(SharedMemory, AGetFromAnotherProcessIsReadStraightIntoTheDestinationWithOneCopy) {
  const size_t n = 5 * kShmSlotBytes + 3;
  Peer peer;
  ASSERT_NO_FATAL_FAILURE(StartPeer(&peer, {"secret", std::to_string(n)}));
  int port = 0;
  unsigned long long ticket = 0;
  ASSERT_NO_FATAL_FAILURE(ReadReady(&peer, &port, &ticket));
  BulkClient client(BulkClient::kClientIdleTimeout, "secret");
  client.set_shared_memory(true);
  client.set_shm_direct_read(true);  // DISTFLOW_SHM_DIRECT=1
  Tensor dst = Tensor::Allocate(DT_UINT8, TensorShape({static_cast<int64_t>(n)})).value();
  std::memset(dst.raw_data(), 0, n);
  const double ring_before = Copied("shm_ring"), direct_before = Copied("shm_direct_read");
  absl::Status s = client.Fetch("127.0.0.1", port, ticket, dst.raw_data(), n, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  const auto* p = static_cast<const uint8_t*>(dst.raw_data());
  EXPECT_EQ(std::count(p, p + n, 7), static_cast<std::ptrdiff_t>(n)) << "every byte is the peer's";
  EXPECT_EQ(Copied("shm_direct_read") - direct_before, static_cast<double>(n))
      << "the bytes were read from the peer's tensor into the destination";
  EXPECT_EQ(Copied("shm_ring") - ring_before, 0.0) << "no byte went through the ring";
  EXPECT_TRUE(client.shm_direct_read());
  EXPECT_EQ(client.NumPooledShmForTest(), 1u) << "the connection stays in step and is kept";
  // The offer was taken: a second get of the ticket is NotFound, on the same connection.
  EXPECT_EQ(client.Fetch("127.0.0.1", port, ticket, dst.raw_data(), n, nullptr).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client.NumPooledShmForTest(), 1u);
}

// Mappings of tensor blocks (tensor/shared_blocks.h) in this process.
int TensorBlockMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += absl::StrContains(line, "memfd:distflow-tensor") ? 1 : 0;
  return n;
}

TEST_F(SharedMemory, AGetFromAnotherProcessIsCopiedOnceOutOfItsSharedBlock) {
  const size_t n = 5 * kShmSlotBytes + 3;
  Peer peer;
  ASSERT_NO_FATAL_FAILURE(StartPeer(&peer, {"secret", std::to_string(n)}));
  int port = 0;
  unsigned long long ticket = 0;
  ASSERT_NO_FATAL_FAILURE(ReadReady(&peer, &port, &ticket));
  Tensor dst = Tensor::Allocate(DT_UINT8, TensorShape({static_cast<int64_t>(n)})).value();
  std::memset(dst.raw_data(), 0, n);
  const int mappings = TensorBlockMappings();
  {
    BulkClient client(BulkClient::kClientIdleTimeout, "secret");
    client.set_shared_memory(true);
    client.set_shm_direct_read(false);  // the default: mapped gets
    const double ring_before = Copied("shm_ring"), mapped_before = Copied("shm_mapped");
    absl::Status s = client.Fetch("127.0.0.1", port, ticket, dst.raw_data(), n, nullptr);
    ASSERT_TRUE(s.ok()) << s;
    const auto* p = static_cast<const uint8_t*>(dst.raw_data());
    EXPECT_EQ(std::count(p, p + n, 7), static_cast<std::ptrdiff_t>(n)) << "every byte is the peer's";
    EXPECT_EQ(Copied("shm_mapped") - mapped_before, static_cast<double>(n)) << "copied once, out of its block";
    EXPECT_EQ(Copied("shm_ring") - ring_before, 0.0) << "no byte went through the ring";
    EXPECT_EQ(TensorBlockMappings(), mappings + 1) << "the peer's block, mapped here";
    EXPECT_EQ(client.NumPooledShmForTest(), 1u);
    // The peer dies: the next get fails naming it, and our mapping of its
    // block goes with the connection.
    kill(peer.pid, SIGKILL);
    waitpid(peer.pid, nullptr, 0);
    peer.pid = -1;
    s = client.Fetch("127.0.0.1", port, ticket + 1, dst.raw_data(), n, nullptr);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(client.NumPooledShmForTest(), 0u);
  }
  EXPECT_EQ(TensorBlockMappings(), mappings) << "no mapping of the dead peer's block is left";
}

TEST_F(SharedMemory, WhereDirectReadsAreNotAllowedGetsUseTheRingFromThenOn) {
  auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "secret");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->EnableSharedMemory().ok());
  BulkClient client(BulkClient::kClientIdleTimeout, "secret");
  client.set_shared_memory(true);
  client.set_shm_direct_read(true);
  client.set_shm_direct_denied_for_test(true);  // as process_vm_readv answers EPERM
  client.set_shm_mapped_reads(false);           // then the ring, not a mapped get
  const size_t n = 3 * kShmSlotBytes + 11;
  for (int seed : {1, 2}) {
    SCOPED_TRACE(seed);
    Tensor t = Bytes(n, seed);
    Tensor got = Tensor::Allocate(DT_UINT8, t.shape()).value();
    const double ring_before = Copied("shm_ring"), direct_before = Copied("shm_direct_read");
    absl::Status s = client.Fetch("127.0.0.1", (*server)->port(), (*server)->Offer(t), got.raw_data(), n, nullptr);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), n), 0);
    // Server and client are this process: each counts its copy.
    EXPECT_EQ(Copied("shm_ring") - ring_before, 2.0 * static_cast<double>(n)) << "into the ring and out of it";
    EXPECT_EQ(Copied("shm_direct_read") - direct_before, 0.0);
    EXPECT_FALSE(client.shm_direct_read()) << "the refusal is remembered";
  }
  EXPECT_EQ((*server)->shm_bytes_served(), 2 * n);
  EXPECT_EQ(client.NumPooledShmForTest(), 1u);
}

TEST(SharedMemoryRing, ASegmentOfTheWrongShapeIsRefused) {
  auto ring = bulk_internal::ShmRing::Create(4096, 2);
  ASSERT_TRUE(ring.ok()) << ring.status();
  EXPECT_EQ(bulk_internal::ShmRing::Map(dup((*ring)->fd()), 4096, 4).status().code(), absl::StatusCode::kDataLoss)
      << "a size other than the one announced";
  EXPECT_EQ(bulk_internal::ShmRing::Map(-1, 4096, 2).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bulk_internal::ShmRing::Map(dup((*ring)->fd()), 0, 2).status().code(), absl::StatusCode::kDataLoss);
  auto same = bulk_internal::ShmRing::Map(dup((*ring)->fd()), 4096, 2);
  ASSERT_TRUE(same.ok()) << same.status();
  std::memcpy((*ring)->slot(1), "shared", 7);
  EXPECT_STREQ((*same)->slot(1), "shared") << "both mappings see one segment";
  EXPECT_NE(ftruncate((*same)->fd(), 0), 0) << "sealed: a peer cannot shrink it under us";
}

}  // namespace
}  // namespace distflow
