// The bulk-transfer wire format and the socket helpers its server and client
// share (see bulk_transfer.h for the protocol). Internal to bulk/.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace distflow {
namespace bulk_internal {

constexpr uint32_t kMagic = 0x4B424644;       // "DFBK" little-endian: get
constexpr uint32_t kPutMagic = 0x50424644;    // "DFBP": put
constexpr uint32_t kHelloMagic = 0x48424644;  // "DFBH": first on every connection
// Direct get (shared-memory connections only, see bulk_transfer.h).
constexpr uint32_t kDirectMagic = 0x44424644;  // "DFBD"
constexpr char kDirectDone = 0;                // the client read the bytes itself
constexpr char kDirectUseRing = 1;             // it could not: send them through the ring
// Mapped get (shared-memory connections only): the client copies the bytes
// out of the server's shared block (shm_blocks.h); answered with the same
// two bytes as a direct get.
constexpr uint32_t kMappedMagic = 0x4D424644;  // "DFBM"
// Identify (TCP only): request = magic, version, u64 0; answer = u32 length,
// then "<host identity>\n<abstract socket name>" (no name: no shared memory).
constexpr uint32_t kIdentifyMagic = 0x49424644;  // "DFBI"
constexpr uint32_t kMaxIdentifyBytes = 4096;
constexpr uint32_t kVersion = 1;
// The hello: magic, version, token length, the token (rpc/auth.h);
// the server answers one byte, kHelloAccepted or kHelloRefused (then closes).
constexpr uint32_t kMaxTokenBytes = 4096;
constexpr char kHelloAccepted = 1;
constexpr char kHelloRefused = 0;
// On a shared-memory connection: the token was fine, but the server cannot
// serve one more connection (or make a segment) now; use TCP.
constexpr char kHelloBusy = 2;
constexpr uint64_t kUnknownTicket = ~uint64_t{0};

// Counts one transfer of `n` bytes a BulkClient made (distflow_bulk_client_bytes_total,
// distflow_bulk_client_transfers_total).
void CountBulkClientBytes(bool shm, bool fetched, size_t n);

inline void PutU32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline void PutU64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
inline uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
inline uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

inline std::string PeerName(const std::string& host, int port) {
  return absl::StrCat(host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host, ":", port);
}

inline void SetIdleTimeout(int fd, absl::Duration idle_timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(absl::ToInt64Seconds(idle_timeout));
  tv.tv_usec = static_cast<suseconds_t>(absl::ToInt64Microseconds(idle_timeout) % 1000000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

inline void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace bulk_internal
}  // namespace distflow
