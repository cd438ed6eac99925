// Mapped gets (shm_blocks.h): a tensor in one of the server's shared blocks
// is copied once, straight from the block, at every size around the
// blocks' bounds; a tensor outside a block takes the ring; each block is
// handed over once per connection and dropped when retired or over the
// budget; a malformed answer is DataLoss, never a fault; a client that
// goes away before its answer leaves the offer to be fetched again.
#include "bulk/shm_blocks.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/bytes_copied.h"
#include "base/wait_until.h"
#include "bulk/bulk_transfer.h"
#include "bulk/bulk_wire.h"
#include "bulk/shm_channel.h"
#include "gtest/gtest.h"
#include "tensor/shared_blocks.h"

namespace distflow {
namespace {

using bulk_internal::MappedBlocks;
using bulk_internal::SentBlocks;

double Copied(const char* what) { return BytesCopiedCounter(what)->value(); }

// Mappings of tensor blocks in this process: the allocator's own, plus a
// client's of a server's blocks.
int TensorBlockMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += absl::StrContains(line, "memfd:distflow-tensor") ? 1 : 0;
  return n;
}

Tensor Bytes(size_t n, int seed) {
  Tensor t = Tensor::Allocate(DT_UINT8, TensorShape({static_cast<int64_t>(n)})).value();
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 131 + static_cast<size_t>(seed)) % 251);
  return t;
}

class MappedGets : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = BulkServer::Start("127.0.0.1", absl::Seconds(60), 0, "secret");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->EnableSharedMemory().ok());
    ASSERT_TRUE(shared_blocks::Enabled()) << "a server serving shared memory allocates large tensors in blocks";
    client_ = std::make_unique<BulkClient>(BulkClient::kClientIdleTimeout, "secret");
    client_->set_shared_memory(true);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    EXPECT_EQ(TensorBlockMappings(), static_cast<int>(shared_blocks::NumLiveForTest()))
        << "a client's mapping of a block outlived its connection";
  }
  absl::Status Fetch(const Tensor& t, Tensor* got) {
    *got = Tensor::Allocate(DT_UINT8, t.shape()).value();
    return client_->Fetch("127.0.0.1", server_->port(), server_->Offer(t), got->raw_data(), t.TotalBytes(), nullptr);
  }
  std::unique_ptr<BulkServer> server_;
  std::unique_ptr<BulkClient> client_;
};

TEST_F(MappedGets, ATensorInABlockIsCopiedOnceStraightFromIt) {
  const size_t min = shared_blocks::kMinBytes;
  int seed = 0;
  // Around the smallest block, a size class's bounds (1 MiB + 128 KiB) and
  // a tensor that fills its block to the last byte (2 MiB), and the CNN's
  // fully connected weight.
  for (size_t n : {min, min + 1, min + (size_t{128} << 10) - 1, min + (size_t{128} << 10),
                   min + (size_t{128} << 10) + 1, (size_t{2} << 20) - 1, size_t{2} << 20, size_t{6422528}}) {
    SCOPED_TRACE(n);
    Tensor t = Bytes(n, ++seed);
    ASSERT_TRUE(shared_blocks::Find(t.raw_data(), n).has_value()) << "the tensor lies in a shared block";
    const double ring = Copied("shm_ring"), mapped = Copied("shm_mapped");
    Tensor got;
    absl::Status s = Fetch(t, &got);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), n), 0);
    EXPECT_EQ(Copied("shm_mapped") - mapped, static_cast<double>(n)) << "one copy, out of the block";
    EXPECT_EQ(Copied("shm_ring") - ring, 0.0) << "none through the ring";
  }
  EXPECT_EQ(client_->NumPooledShmForTest(), 1u) << "the connection stays in step";
  // A second get of a taken ticket is NotFound, on the same connection.
  Tensor t = Bytes(min, 1);
  const uint64_t ticket = server_->Offer(t);
  ASSERT_TRUE(client_->Fetch("127.0.0.1", server_->port(), ticket, t.raw_data(), min, nullptr).ok());
  char buf[8];
  EXPECT_EQ(client_->Fetch("127.0.0.1", server_->port(), ticket, buf, sizeof(buf), nullptr).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->NumPooledShmForTest(), 1u);
}

TEST_F(MappedGets, ATensorOutsideABlockGoesThroughTheRing) {
  for (size_t n : {size_t{0}, size_t{100}, size_t{300} << 10, size_t{3} << 20}) {
    SCOPED_TRACE(n);
    // Smaller than a block, or memory the allocator did not make.
    std::vector<uint8_t> outside(n + 1);
    for (size_t i = 0; i < n; ++i) outside[i] = static_cast<uint8_t>(i % 253);
    Tensor t = n < shared_blocks::kMinBytes ? Bytes(n, 3)
                                            : Tensor::FromBuffer(DT_UINT8, TensorShape({static_cast<int64_t>(n)}),
                                                                 TensorBuffer::Wrap(outside.data(), n, [] {}), 0)
                                                  .value();
    EXPECT_FALSE(shared_blocks::Find(t.raw_data(), n).has_value());
    const double ring = Copied("shm_ring"), mapped = Copied("shm_mapped");
    Tensor got;
    absl::Status s = Fetch(t, &got);
    ASSERT_TRUE(s.ok()) << s;
    if (n > 0) {
      EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), n), 0);
    }
    EXPECT_EQ(Copied("shm_ring") - ring, 2.0 * static_cast<double>(n)) << "into the ring and out of it";
    EXPECT_EQ(Copied("shm_mapped") - mapped, 0.0);
  }
}

TEST_F(MappedGets, EachBlockIsHandedOverOncePerConnection) {
  const size_t n = 3 << 20;
  Tensor t = Bytes(n, 4);
  Tensor got = Tensor::Allocate(DT_UINT8, t.shape()).value();
  const int before = TensorBlockMappings();
  ASSERT_TRUE(client_->Fetch("127.0.0.1", server_->port(), server_->Offer(t), got.raw_data(), n, nullptr).ok());
  const int after_first = TensorBlockMappings();
  EXPECT_EQ(after_first, before + 1) << "the client's mapping of the served block";
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client_->Fetch("127.0.0.1", server_->port(), server_->Offer(t), got.raw_data(), n, nullptr).ok());
  }
  EXPECT_EQ(TensorBlockMappings(), after_first) << "the block is mapped once and reused";
  EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), n), 0);
}

TEST_F(MappedGets, AClientUnmapsABlockTheServerRetiredAtItsNextGet) {
  // A block made here and retired when its tensor goes (as the allocator
  // retires one its cache has no room for).
  const size_t bytes = size_t{2} << 20;
  void* p = shared_blocks::Map(bytes);
  ASSERT_NE(p, nullptr);
  std::memset(p, 3, bytes);
  {
    Tensor t = Tensor::FromBuffer(DT_UINT8, TensorShape({static_cast<int64_t>(bytes)}),
                                  TensorBuffer::Wrap(p, bytes, [p, bytes] { shared_blocks::Unmap(p, bytes); }), 0)
                   .value();
    Tensor got;
    ASSERT_TRUE(Fetch(t, &got).ok());
    EXPECT_EQ(static_cast<const uint8_t*>(got.raw_data())[bytes - 1], 3);
  }  // t goes: its block is retired; `got`'s block is cached
  // The server's thread lets go of the tensor once it reads the client's "done".
  ASSERT_TRUE(WaitUntil([&] { return !shared_blocks::Find(p, 1).has_value(); }, absl::Minutes(2))) << "retired";
  EXPECT_EQ(TensorBlockMappings(), static_cast<int>(shared_blocks::NumLiveForTest()) + 1)
      << "p unmapped here, the client's mapping of it still there";
  Tensor next = Bytes(bytes, 6);
  Tensor got;
  ASSERT_TRUE(Fetch(next, &got).ok());
  EXPECT_EQ(std::memcmp(got.raw_data(), next.raw_data(), bytes), 0);
  // Now: next's block and the client's mapping of it; the retired one is gone.
  EXPECT_EQ(TensorBlockMappings(), static_cast<int>(shared_blocks::NumLiveForTest()) + 1);
}

TEST_F(MappedGets, AClientThatGoesAwayBeforeItsAnswerLeavesTheOfferToFetchAgain) {
  const size_t n = 2 << 20;
  Tensor t = Bytes(n, 5);
  const uint64_t ticket = server_->Offer(t);
  // A raw connection: the hello, a mapped get, the answer read, then gone.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr;
  const socklen_t len = bulk_internal::AbstractAddress(server_->shm_socket_name(), &addr);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
  std::string hello(12, '\0');
  bulk_internal::PutU32(hello.data(), bulk_internal::kHelloMagic);
  bulk_internal::PutU32(hello.data() + 4, bulk_internal::kVersion);
  bulk_internal::PutU32(hello.data() + 8, 6);
  hello += "secret";
  ASSERT_EQ(write(fd, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  char answer[9];
  int ring_fd = -1, err = 0;
  ASSERT_EQ(bulk_internal::ReadWithFd(fd, answer, sizeof(answer), &ring_fd, &err), sizeof(answer));
  ASSERT_EQ(answer[0], bulk_internal::kHelloAccepted);
  char req[16];
  bulk_internal::PutU32(req, bulk_internal::kMappedMagic);
  bulk_internal::PutU32(req + 4, bulk_internal::kVersion);
  bulk_internal::PutU64(req + 8, ticket);
  ASSERT_EQ(write(fd, req, sizeof(req)), 16);
  char head[8 + bulk_internal::kMappedAnswerBytes];
  int block_fd = -1;
  ASSERT_EQ(bulk_internal::ReadWithFd(fd, head, sizeof(head), &block_fd, &err), sizeof(head));
  EXPECT_EQ(bulk_internal::GetU64(head), n);
  EXPECT_EQ(bulk_internal::GetU32(head + 8), bulk_internal::kMappedModeBlock);
  EXPECT_GE(block_fd, 0) << "the block's descriptor comes with its first answer";
  if (block_fd >= 0) close(block_fd);
  close(ring_fd);
  close(fd);  // without saying done
  // The server gives the tensor back to the offers when it sees the
  // connection end: fetched again, whole.
  ASSERT_TRUE(WaitUntil([&] { return server_->NumShmConnectionsForTest() == 0; }, absl::Minutes(2)));
  Tensor got = Tensor::Allocate(DT_UINT8, t.shape()).value();
  absl::Status s = client_->Fetch("127.0.0.1", server_->port(), ticket, got.raw_data(), n, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(std::memcmp(got.raw_data(), t.raw_data(), n), 0);
}

// A memfd of `bytes`, sealed against resizing as the allocator's blocks are (or not).
int Memfd(size_t bytes, bool sealed) {
  const int fd = memfd_create("distflow-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  if (sealed) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  }
  return fd;
}

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(MappedBlocksTest, AnythingButASealedSegmentOfTheAnnouncedSizeIsRefused) {
  MappedBlocks blocks;
  const size_t mib = size_t{1} << 20;
  int fd = Memfd(mib, /*sealed=*/false);
  absl::Status s = blocks.Add(1, fd, mib);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "sealed")) << s;
  EXPECT_FALSE(IsOpen(fd)) << "the descriptor is taken, refused or not";
  s = blocks.Add(2, Memfd(mib, true), 2 * mib);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "announced")) << s;
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_EQ(blocks.Add(3, p[0], 4096).code(), absl::StatusCode::kDataLoss) << "a pipe is no segment";
  close(p[1]);
  EXPECT_EQ(blocks.Add(4, Memfd(0, true), 0).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(blocks.size(), 0u);
  ASSERT_TRUE(blocks.Add(5, Memfd(mib, true), mib).ok());
  s = blocks.Add(5, Memfd(mib, true), mib);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "a block sent twice";
  EXPECT_EQ(blocks.size(), 1u);
}

TEST(MappedBlocksTest, ARangeOutsideTheBlockIsDataLossNeverARead) {
  MappedBlocks blocks;
  const size_t n = size_t{1} << 20;
  const int fd = Memfd(n, true);
  ASSERT_EQ(pwrite(fd, "0123456789", 10, static_cast<off_t>(n - 10)), 10);
  ASSERT_TRUE(blocks.Add(9, fd, n).ok());
  absl::StatusOr<const char*> tail = blocks.Bytes(9, n - 10, 10);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(std::string(*tail, 10), "0123456789") << "the mapping shows the segment's bytes";
  EXPECT_TRUE(blocks.Bytes(9, 0, n).ok());
  EXPECT_TRUE(blocks.Bytes(9, n, 0).ok());
  for (const auto& [offset, len] : std::vector<std::pair<uint64_t, uint64_t>>{
           {n - 10, 11}, {n + 1, 0}, {0, n + 1}, {~uint64_t{0}, 2}, {8, ~uint64_t{0}}, {n / 2, ~uint64_t{0} - n / 4}}) {
    SCOPED_TRACE(absl::StrCat(offset, " + ", len));
    absl::StatusOr<const char*> out = blocks.Bytes(9, offset, len);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(out.status().message(), "offset")) << out.status();
  }
  absl::StatusOr<const char*> unknown = blocks.Bytes(10, 0, 1);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "never handed over")) << unknown.status();
  blocks.Drop(12345);  // unknown: nothing to do
  blocks.Drop(9);
  EXPECT_EQ(blocks.Bytes(9, 0, 1).status().code(), absl::StatusCode::kDataLoss) << "dropped";
}

TEST(MappedBlocksTest, ItsLimitsBoundWhatAPeerCanHaveItMap) {
  MappedBlocks blocks;
  for (uint64_t id = 1; id <= bulk_internal::kMaxMappedBlocks; ++id)
    ASSERT_TRUE(blocks.Add(id, Memfd(4096, true), 4096).ok());
  absl::Status s = blocks.Add(1000, Memfd(4096, true), 4096);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(s.message(), "limit")) << s;
}

TEST(SentBlocksTest, ABlockGoesOnceAndIsDroppedWhenRetired) {
  ASSERT_TRUE(shared_blocks::Enable());
  const size_t mib = size_t{1} << 20;
  void* a = shared_blocks::Map(mib);
  void* b = shared_blocks::Map(mib);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  SentBlocks sent;
  SentBlocks::Answer first = sent.Plan(a, 100);
  EXPECT_TRUE(first.mapped);
  EXPECT_GE(first.fd, 0) << "new to the client: its descriptor goes along";
  EXPECT_EQ(first.offset, 0u);
  EXPECT_EQ(first.block_bytes, mib);
  SentBlocks::Answer again = sent.Plan(static_cast<char*>(a) + 4096, 100);
  EXPECT_TRUE(again.mapped);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(again.offset, 4096u);
  EXPECT_EQ(again.fd, -1) << "sent once per connection";
  EXPECT_FALSE(sent.Plan(a, mib + 1).mapped) << "a range that leaves the block";
  std::vector<char> outside(mib);
  EXPECT_FALSE(sent.Plan(outside.data(), mib).mapped) << "memory that is no block";
  ASSERT_TRUE(shared_blocks::Unmap(a, mib));
  EXPECT_FALSE(shared_blocks::Alive(first.id));
  SentBlocks::Answer next = sent.Plan(b, 10);
  EXPECT_EQ(next.drops, std::vector<uint64_t>{first.id}) << "the retired block is dropped by the client";
  EXPECT_GE(next.fd, 0);
  sent.Forget(next.id);  // the client could not map it
  EXPECT_GE(sent.Plan(b, 10).fd, 0) << "so it goes again";
  ASSERT_TRUE(shared_blocks::Unmap(b, mib));
}

TEST(SentBlocksTest, PastTheBudgetTheLeastRecentlyUsedBlockIsDropped) {
  ASSERT_TRUE(shared_blocks::Enable());
  const size_t mib = size_t{1} << 20;
  std::vector<void*> blocks;
  for (size_t i = 0; i <= bulk_internal::kMaxMappedBlocks; ++i) {
    blocks.push_back(shared_blocks::Map(mib));
    ASSERT_NE(blocks.back(), nullptr);
  }
  SentBlocks sent;
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < bulk_internal::kMaxMappedBlocks; ++i) {
    SentBlocks::Answer a = sent.Plan(blocks[i], 1);
    EXPECT_TRUE(a.drops.empty());
    ids.push_back(a.id);
  }
  EXPECT_EQ(sent.Plan(blocks[0], 1).fd, -1) << "block 0 used again: now the most recent";
  SentBlocks::Answer last = sent.Plan(blocks.back(), 1);
  EXPECT_GE(last.fd, 0);
  EXPECT_EQ(last.drops, std::vector<uint64_t>{ids[1]}) << "the least recently used goes";
  EXPECT_EQ(sent.size(), bulk_internal::kMaxMappedBlocks);
  for (void* p : blocks) ASSERT_TRUE(shared_blocks::Unmap(p, mib));
}

// Writes a mapped answer's fields (after the length) on `sock`, with `fd` attached if >= 0.
void SendFields(int sock, uint32_t mode, const std::vector<uint64_t>& drops, uint64_t id, uint64_t offset,
                uint64_t block_bytes, int fd, uint32_t claimed_drops) {
  std::vector<char> out(bulk_internal::kMappedAnswerBytes + 8 * drops.size());
  bulk_internal::PutU32(out.data(), mode);
  bulk_internal::PutU32(out.data() + 4, claimed_drops);
  bulk_internal::PutU64(out.data() + 8, id);
  bulk_internal::PutU64(out.data() + 16, offset);
  bulk_internal::PutU64(out.data() + 24, block_bytes);
  for (size_t i = 0; i < drops.size(); ++i) bulk_internal::PutU64(out.data() + 32 + 8 * i, drops[i]);
  if (fd >= 0) {
    ASSERT_EQ(bulk_internal::SendWithFd(sock, out.data(), out.size(), fd), 0);
  } else {
    ASSERT_EQ(write(sock, out.data(), out.size()), static_cast<ssize_t>(out.size()));
  }
}

TEST(ReceiveMappedTest, AMalformedAnswerIsDataLossNeverAFault) {
  const size_t mib = size_t{1} << 20;
  const int segment = Memfd(mib, true);
  ASSERT_EQ(pwrite(segment, "abcdef", 6, 16), 6);
  struct Case {
    const char* what;
    uint32_t mode;
    std::vector<uint64_t> drops;
    uint32_t claimed_drops;
    uint64_t id, offset;
    bool with_fd;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"an unknown mode", 7, {}, 0, 1, 0, false, "malformed"},
      {"too many drops", bulk_internal::kMappedModeBlock, {}, 100000, 1, 0, false, "malformed"},
      {"a block never handed over", bulk_internal::kMappedModeBlock, {}, 0, 1, 0, false, "never handed over"},
      {"an offset past the block", bulk_internal::kMappedModeBlock, {}, 0, 1, mib - 3, true, "offset"},
      {"a descriptor with a ring answer", bulk_internal::kMappedModeRing, {}, 0, 0, 0, true, "descriptor"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ASSERT_NO_FATAL_FAILURE(
        SendFields(sv[1], c.mode, c.drops, c.id, c.offset, mib, c.with_fd ? segment : -1, c.claimed_drops));
    MappedBlocks blocks;
    char dst[6];
    const bulk_internal::MappedReceipt r = bulk_internal::ReceiveMapped(sv[0], blocks, -1, dst, sizeof(dst));
    EXPECT_EQ(r.bad.code(), absl::StatusCode::kDataLoss) << r.bad;
    EXPECT_TRUE(absl::StrContains(r.bad.message(), c.says)) << r.bad;
    EXPECT_FALSE(r.copied);
    close(sv[0]);
    close(sv[1]);
  }
  // A good answer, with a block to drop first; then one cut short.
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  MappedBlocks blocks;
  ASSERT_TRUE(blocks.Add(3, Memfd(4096, true), 4096).ok());
  ASSERT_NO_FATAL_FAILURE(SendFields(sv[1], bulk_internal::kMappedModeBlock, {3}, 4, 16, mib, segment, 1));
  char dst[6];
  const double mapped = Copied("shm_mapped");
  bulk_internal::MappedReceipt r = bulk_internal::ReceiveMapped(sv[0], blocks, -1, dst, sizeof(dst));
  ASSERT_TRUE(r.bad.ok()) << r.bad;
  EXPECT_TRUE(r.copied);
  EXPECT_FALSE(r.ring);
  EXPECT_EQ(std::string(dst, 6), "abcdef");
  EXPECT_EQ(Copied("shm_mapped") - mapped, 6.0);
  EXPECT_EQ(blocks.size(), 1u) << "block 3 dropped, block 4 mapped";
  ASSERT_EQ(write(sv[1], "\1\0\0", 3), 3);
  close(sv[1]);
  r = bulk_internal::ReceiveMapped(sv[0], blocks, -1, dst, sizeof(dst));
  EXPECT_NE(r.io_err, 0) << "an answer cut short is the connection's failure";
  close(sv[0]);
  close(segment);
}

}  // namespace
}  // namespace distflow
