#include "tensor/shared_blocks.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace distflow {
namespace shared_blocks {
namespace {

struct Block {
  uint64_t id;
  int fd;
  size_t bytes;
  pid_t pid;  // the process that made it (a forked child's differs)
};

// Live blocks by start address.
class Registry {
 public:
  void Add(uintptr_t base, const Block& b) {
    absl::MutexLock lock(&mu_);
    blocks_.emplace(base, b);
    alive_.insert(b.id);
  }
  size_t Size() {
    absl::MutexLock lock(&mu_);
    return blocks_.size();
  }
  std::optional<BlockRef> Find(uintptr_t p, size_t n, pid_t self) {
    absl::MutexLock lock(&mu_);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return std::nullopt;
    --it;
    const Block& b = it->second;
    const size_t offset = p - it->first;
    if (b.pid != self || offset > b.bytes || n > b.bytes - offset) return std::nullopt;
    return BlockRef{b.id, b.fd, b.bytes, offset};
  }
  std::optional<Block> At(uintptr_t base) {
    absl::MutexLock lock(&mu_);
    auto it = blocks_.find(base);
    if (it == blocks_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<Block> Remove(uintptr_t base) {
    absl::MutexLock lock(&mu_);
    auto it = blocks_.find(base);
    if (it == blocks_.end()) return std::nullopt;
    Block b = it->second;
    blocks_.erase(it);
    alive_.erase(b.id);
    return b;
  }
  bool Alive(uint64_t id) {
    absl::MutexLock lock(&mu_);
    return alive_.contains(id);
  }

 private:
  absl::Mutex mu_;
  std::map<uintptr_t, Block> blocks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> alive_ ABSL_GUARDED_BY(mu_);
};

Registry& Blocks() {
  static Registry* r = new Registry;
  return *r;
}

std::atomic<bool> g_enabled{false};
std::atomic<uint64_t> g_next_id{1};
std::atomic<uint64_t> g_retired{0};
// Set after memfd_create failed for a reason that will not pass (no kernel
// support, a seccomp filter): no more attempts.
std::atomic<bool> g_unavailable{false};

// Live blocks allowed: kMaxBlocks, or a quarter of the descriptor limit.
size_t MaxBlocks() {
  static const size_t max = [] {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return kMaxBlocks;
    return std::min(kMaxBlocks, static_cast<size_t>(lim.rlim_cur / 4));
  }();
  return max;
}

int NewMemfd(size_t bytes) {
  const int fd = memfd_create("distflow-tensor", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    if (errno == ENOSYS || errno == EPERM || errno == EINVAL) g_unavailable.store(true);
    return -1;
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool Enable() {
  const char* env = std::getenv("DISTFLOW_SHM_TENSORS");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  if (g_enabled.load()) return true;
  if (g_unavailable.load()) return false;
  const int probe = NewMemfd(4096);
  if (probe < 0) return false;
  close(probe);
  g_enabled.store(true);
  return true;
}

bool Enabled() { return g_enabled.load(std::memory_order_relaxed); }

bool HasRoom() { return Enabled() && !g_unavailable.load(std::memory_order_relaxed) && Blocks().Size() < MaxBlocks(); }

void* Map(size_t bytes) {
  if (bytes < kMinBytes || !HasRoom()) return nullptr;
  const int fd = NewMemfd(bytes);
  if (fd < 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  // Our mapping stays writable; nobody can map the block writable again,
  // so a peer handed the descriptor can only read it.
  (void)fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL);
  const uint64_t id = g_next_id.fetch_add(1);
  Blocks().Add(reinterpret_cast<uintptr_t>(p), Block{id, fd, bytes, getpid()});
  return p;
}

Kind KindOf(const void* p) {
  std::optional<Block> b = Blocks().At(reinterpret_cast<uintptr_t>(p));
  if (!b.has_value()) return Kind::kNone;
  return b->pid == getpid() ? Kind::kOwn : Kind::kInherited;
}

bool Unmap(void* p, size_t bytes) {
  std::optional<Block> b = Blocks().Remove(reinterpret_cast<uintptr_t>(p));
  if (!b.has_value()) return false;
  munmap(p, bytes);
  close(b->fd);
  g_retired.fetch_add(1);
  return true;
}

std::optional<BlockRef> Find(const void* p, size_t n) {
  if (p == nullptr) return std::nullopt;
  return Blocks().Find(reinterpret_cast<uintptr_t>(p), n, getpid());
}

uint64_t Retired() { return g_retired.load(); }

bool Alive(uint64_t id) { return Blocks().Alive(id); }

size_t NumLiveForTest() { return Blocks().Size(); }

}  // namespace shared_blocks
}  // namespace distflow
