// A bulk server in a process of its own, for bulk_shm_test: it offers one
// tensor of the given size and prints "READY <port> <ticket>"; with "stall",
// a shared-memory get of it stops after its first chunk, printing "STALLED",
// so the test can kill this process in the middle of a transfer.
//
//   bulk_shm_peer TOKEN BYTES [stall]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bulk/bulk_transfer.h"

namespace {
void StallForever() {
  std::printf("STALLED\n");
  std::fflush(stdout);
  for (;;) pause();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bulk_shm_peer TOKEN BYTES [stall]\n");
    return 2;
  }
  auto server = distflow::BulkServer::Start("127.0.0.1", absl::Seconds(600), 0, argv[1]);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  if (absl::Status s = (*server)->EnableSharedMemory(); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (argc > 3 && std::strcmp(argv[3], "stall") == 0) (*server)->set_shm_chunk_hook_for_test(&StallForever);
  const int64_t bytes = std::atoll(argv[2]);
  distflow::Tensor t = distflow::Tensor::Allocate(distflow::DT_UINT8, distflow::TensorShape({bytes})).value();
  std::memset(t.raw_data(), 7, static_cast<size_t>(bytes));
  const uint64_t ticket = (*server)->Offer(t);
  std::printf("READY %d %llu\n", (*server)->port(), static_cast<unsigned long long>(ticket));
  std::fflush(stdout);
  for (;;) pause();
}
