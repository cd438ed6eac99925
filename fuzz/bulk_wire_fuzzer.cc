// libFuzzer target for the bulk-transfer port (bulk/bulk_transfer.h):
// each input is written, as a peer would, to a real BulkServer's socket on
// loopback (hello, get and put requests and whatever follows), then the
// connection is half-closed and the answer read until the server closes it.
// The server must never crash, hold a put's bytes after its connection
// ended, or keep the connection past the end of its input.
//
// The server holds one offer (4 KiB) so that gets can succeed: its ticket is
// random, so every 8 bytes of the input equal to kTicketPlaceholder are
// replaced by it (the seed corpus's gets name the placeholder). The offer is
// renewed whenever an input took it. Puts may reserve at most
// kPutBudget bytes, so a put announcing gigabytes is refused, not allocated.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "bulk/bulk_transfer.h"
#include "distflow/logging.h"

namespace distflow {
namespace {

constexpr uint64_t kPutBudget = uint64_t{64} << 20;
constexpr char kTicketPlaceholder[8] = {'T', 'I', 'C', 'K', 'E', 'T', '!', '!'};

// A blocking connect that a signal (libFuzzer's timers) does not cut short.
bool Connect(int fd, const sockaddr_in& a) {
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) return true;
  if (errno != EINTR) return false;
  pollfd p{fd, POLLOUT, 0};
  while (poll(&p, 1, 5000) < 0 && errno == EINTR) {
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  errno = err;
  return err == 0;
}

class Harness {
 public:
  static Harness& Get() {
    static Harness* h = new Harness;
    return *h;
  }

  void Run(const uint8_t* data, size_t size) {
    if (server_->NumOffersForTest() == 0) ticket_ = server_->Offer(offer_);
    std::string input(reinterpret_cast<const char*>(data), size);
    for (size_t at = input.find(kTicketPlaceholder, 0, 8); at != std::string::npos;
         at = input.find(kTicketPlaceholder, at + 8, 8)) {
      for (int i = 0; i < 8; ++i) input[at + i] = static_cast<char>((ticket_ >> (8 * i)) & 0xff);
    }
    data = reinterpret_cast<const uint8_t*>(input.data());
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(server_->port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || !Connect(fd, a)) {
      DF_LOG(ERROR) << "cannot connect to the bulk server: " << std::strerror(errno);
      std::abort();
    }
    // The answer is read as it comes, so a large one cannot block our writes.
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    size_t sent = 0;
    while (sent < size) {
      ssize_t w = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;  // libFuzzer's timer signals
      if (w <= 0) break;                      // the server closed early: fine
      sent += static_cast<size_t>(w);
    }
    shutdown(fd, SHUT_WR);
    char buf[4096];
    for (;;) {
      ssize_t r = recv(fd, buf, sizeof(buf), 0);
      if (r == 0) break;
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          DF_LOG(ERROR) << "the bulk server kept a connection open 5 s after its input ended";
          std::abort();
        }
        break;  // reset: fine
      }
    }
    // Closed with a reset: thousands of connections a second would otherwise
    // leave as many in TIME_WAIT and use up the ephemeral ports.
    linger reset{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(fd);
    // Unclaimed puts live until their TTL; drop them so they cannot add up
    // across inputs (a put of `size` bytes at most each).
    if (server_->NumReceivedForTest() > 64) Renew();
  }

 private:
  Harness() {
    SetMinLogSeverity(LogSeverity::kError);
    Renew();
  }

  void Renew() {
    server_.reset();
    absl::StatusOr<std::unique_ptr<BulkServer>> s = BulkServer::Start("127.0.0.1");
    if (!s.ok()) {
      DF_LOG(ERROR) << s.status();
      std::abort();
    }
    server_ = std::move(*s);
    server_->set_max_held_put_bytes(kPutBudget);
    offer_ = Tensor::Allocate(DT_FLOAT, TensorShape({1024})).value();
    std::memset(offer_.raw_data(), 0x5a, offer_.TotalBytes());
    ticket_ = server_->Offer(offer_);
  }

  std::unique_ptr<BulkServer> server_;
  Tensor offer_;
  uint64_t ticket_ = 0;
};

}  // namespace
}  // namespace distflow

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distflow::Harness::Get().Run(data, size);
  return 0;
}
