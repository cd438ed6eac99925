// A TCP proxy for tests that break or stall the network between tasks
// without privileges: it forwards every connection it accepts on 127.0.0.1
// to 127.0.0.1:`upstream`.
//   DropAll()  breaks the connections open now (new ones are still accepted);
//   Pause()    stops moving bytes and accepting, as a network partition does:
//              nothing is closed, the peers' sends pile up and their reads wait;
//   Resume()   moves bytes again, and accepts the connections that queued;
//   SetDelay() holds every chunk read from either side this long before
//              passing it on, as a slow or lossy link does (TCP's
//              retransmissions show up to the peers as delay).
// A connection whose upstream refuses is closed at once. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace distflow {

class TcpProxy {
 public:
  explicit TcpProxy(int upstream);
  ~TcpProxy();  // closes every connection and joins its threads
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  int connections();                                          // accepted so far
  uint64_t bytes_forwarded() const { return bytes_.load(); }  // both ways, so far
  void DropAll();
  void Pause();
  void Resume();
  void SetDelay(absl::Duration delay);

 private:
  void Accept();
  // Copies from `from` to `to` until either side ends, waiting while paused;
  // then ends both directions.
  void Pump(int from, int to);
  void WaitWhilePaused();

  const int upstream_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> bytes_{0};
  std::thread acceptor_;
  absl::Mutex mu_;
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> fds_ ABSL_GUARDED_BY(mu_);  // closed in the destructor
  std::vector<std::thread> pumps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
