#include "tcp_proxy.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/time/clock.h"

namespace distflow {

TcpProxy::TcpProxy(int upstream) : upstream_(upstream) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && listen(listen_fd_, 64) == 0 &&
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port_ = ntohs(a.sin_port);
  }
  acceptor_ = std::thread([this] { Accept(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  Resume();  // wakes pumps waiting on a pause
  shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  DropAll();
  std::vector<std::thread> pumps;
  std::vector<int> fds;
  {
    absl::MutexLock lock(&mu_);
    pumps.swap(pumps_);
    fds.swap(fds_);
  }
  for (std::thread& t : pumps) t.join();
  for (int fd : fds) close(fd);
  close(listen_fd_);
}

int TcpProxy::connections() {
  absl::MutexLock lock(&mu_);
  return accepted_;
}

void TcpProxy::DropAll() {
  absl::MutexLock lock(&mu_);
  for (int fd : fds_) shutdown(fd, SHUT_RDWR);
}

void TcpProxy::Pause() {
  absl::MutexLock lock(&mu_);
  paused_ = true;
}

void TcpProxy::Resume() {
  absl::MutexLock lock(&mu_);
  paused_ = false;
}

void TcpProxy::SetDelay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
}

void TcpProxy::WaitWhilePaused() {
  absl::MutexLock lock(&mu_);
  auto running = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !paused_; };
  mu_.Await(absl::Condition(&running));
}

void TcpProxy::Accept() {
  for (;;) {
    WaitWhilePaused();  // a paused link accepts nothing: connections queue
    int in = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (in < 0 || stopping_) {
      if (in >= 0) close(in);
      return;
    }
    int out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(upstream_));
    if (connect(out, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(in);
      close(out);
      continue;
    }
    absl::MutexLock lock(&mu_);
    ++accepted_;
    fds_.push_back(in);
    fds_.push_back(out);
    pumps_.emplace_back([this, in, out] { Pump(in, out); });
    pumps_.emplace_back([this, in, out] { Pump(out, in); });
  }
}

void TcpProxy::Pump(int from, int to) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(from, buf, sizeof(buf));
    if (n <= 0) break;
    absl::Duration delay;
    {
      absl::MutexLock lock(&mu_);
      delay = delay_;
    }
    if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
    WaitWhilePaused();
    for (ssize_t off = 0; off < n;) {
      // MSG_NOSIGNAL: a peer that hung up is an error here, not a SIGPIPE.
      ssize_t w = send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
      if (w <= 0) {
        n = -1;
        break;
      }
      off += w;
      bytes_ += static_cast<uint64_t>(w);
    }
    if (n < 0) break;
  }
  shutdown(from, SHUT_RDWR);
  shutdown(to, SHUT_RDWR);
}

}  // namespace distflow
