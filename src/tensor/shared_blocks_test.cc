// Shared blocks (shared_blocks.h): with them on, large buffers lie in
// sealed memfds that are still reused by size class, smaller ones do not,
// and a forked child never reuses its parent's block.
#include "tensor/shared_blocks.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "distflow/tensor.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

Tensor Floats(int64_t n) { return Tensor::Allocate(DT_FLOAT, TensorShape({n})).value(); }

TEST(SharedBlocks, OffByEnvironmentLargeBuffersStayPrivate) {
  // First in this file: no case before it turned shared blocks on.
  setenv("DISTFLOW_SHM_TENSORS", "0", 1);
  EXPECT_FALSE(shared_blocks::Enable());
  unsetenv("DISTFLOW_SHM_TENSORS");
  Tensor big = Floats(512 * 1024);
  EXPECT_FALSE(shared_blocks::Find(big.raw_data(), big.TotalBytes()).has_value());
}

TEST(SharedBlocks, OnLargeBuffersLieInSealedMemfdsStillReusedBySizeClass) {
  ASSERT_TRUE(shared_blocks::Enable());
  EXPECT_TRUE(shared_blocks::Enabled());
  const int64_t n = 512 * 1024;  // 2 MiB of floats
  const void* first = nullptr;
  uint64_t id = 0;
  {
    Tensor big = Floats(n);
    first = big.raw_data();
    std::optional<shared_blocks::BlockRef> block = shared_blocks::Find(big.raw_data(), big.TotalBytes());
    ASSERT_TRUE(block.has_value()) << "a large buffer is a shared block";
    id = block->id;
    EXPECT_EQ(block->offset, 0u);
    EXPECT_GE(block->bytes, big.TotalBytes());
    struct stat st {};
    ASSERT_EQ(fstat(block->fd, &st), 0);
    EXPECT_EQ(static_cast<size_t>(st.st_size), block->bytes);
    const int seals = fcntl(block->fd, F_GET_SEALS);
    EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SHRINK | F_SEAL_GROW) << "nobody can truncate it";
    EXPECT_EQ(mmap(nullptr, block->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, block->fd, 0), MAP_FAILED)
        << "nor map it writable (a peer handed the descriptor can only read)";
    void* ro = mmap(nullptr, block->bytes, PROT_READ, MAP_SHARED, block->fd, 0);
    ASSERT_NE(ro, MAP_FAILED);
    std::memset(big.raw_data(), 9, big.TotalBytes());
    EXPECT_EQ(static_cast<const unsigned char*>(ro)[big.TotalBytes() - 1], 9) << "ours stays writable; both see it";
    munmap(ro, block->bytes);
    EXPECT_FALSE(shared_blocks::Find(big.raw_data(), block->bytes + 1).has_value()) << "a range past its end";
    Tensor slice = big.Slice(1, 2);
    std::optional<shared_blocks::BlockRef> inner = shared_blocks::Find(slice.raw_data(), slice.TotalBytes());
    ASSERT_TRUE(inner.has_value());
    EXPECT_EQ(inner->id, id);
    EXPECT_EQ(inner->offset, static_cast<size_t>(static_cast<const char*>(slice.raw_data()) -
                                                 static_cast<const char*>(big.raw_data())));
  }
  EXPECT_TRUE(shared_blocks::Alive(id)) << "freed, the block is cached, not retired";
  Tensor again = Floats(n - 100);
  EXPECT_EQ(again.raw_data(), first) << "a freed block serves the next buffer of its size class";
  EXPECT_EQ(shared_blocks::Find(again.raw_data(), again.TotalBytes())->id, id) << "under the same id";
  Tensor small = Floats(64 * 1024);  // 256 KiB: never sent as a ticket
  EXPECT_FALSE(shared_blocks::Find(small.raw_data(), small.TotalBytes()).has_value());
  int x = 0;
  EXPECT_FALSE(shared_blocks::Find(&x, sizeof(x)).has_value());
  EXPECT_FALSE(shared_blocks::Find(nullptr, 0).has_value());
}

TEST(SharedBlocks, AForkedChildNeverReusesItsParentsBlock) {
  ASSERT_TRUE(shared_blocks::Enable());
  const int64_t n = 512 * 1024;
  const void* first = nullptr;
  uint64_t parent_block = 0;
  {
    Tensor t = Floats(n);
    std::memset(t.raw_data(), 1, t.TotalBytes());
    first = t.raw_data();
    parent_block = shared_blocks::Find(t.raw_data(), t.TotalBytes())->id;
  }  // cached
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The cached block is shared with the parent, not copied on write:
    // writing a new tensor into it would change the parent's memory.
    Tensor t = Floats(n);
    std::memset(t.raw_data(), 2, t.TotalBytes());
    // (It may get the same address: the parent's block unmapped here, a
    // new one mapped in its place.)
    std::optional<shared_blocks::BlockRef> block = shared_blocks::Find(t.raw_data(), t.TotalBytes());
    _exit(block.has_value() && block->id != parent_block ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child got its parent's block";
  Tensor mine = Floats(n);
  ASSERT_EQ(mine.raw_data(), first);
  const auto* p = static_cast<const unsigned char*>(mine.raw_data());
  EXPECT_EQ(p[0], 1);
  EXPECT_EQ(p[mine.TotalBytes() - 1], 1) << "the child's writes did not reach the parent";
}

}  // namespace
}  // namespace distflow
