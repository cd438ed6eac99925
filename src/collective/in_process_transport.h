// InProcessCollectives: N ranks inside one process (gloo's test harness
// style), each with a CollectiveTransport whose channels leave tensors in
// the sending rank's mailbox and take them from the peer's, as the worker's
// transport does with its rendezvous and RecvTensor. For the algorithms'
// tests, and for tests of what a rank's death does (KillRank). Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "collective/transport.h"

namespace distflow {

class InProcessCollectives {
 public:
  explicit InProcessCollectives(int num_ranks);
  ~InProcessCollectives();

  int num_ranks() const { return static_cast<int>(mailboxes_.size()); }
  // Rank `rank`'s transport (the hub must outlive it). Its channels resolve
  // a group of size n to ranks 0..n-1 of the hub.
  std::unique_ptr<CollectiveTransport> TransportFor(int rank);
  // Rank `rank` is gone: what waits on it fails with Unavailable naming it,
  // and so does everything that asks it later.
  void KillRank(int rank);
  // Tensors sent and not taken, over every mailbox (0 after a clean run).
  size_t NumPending() const;
  // Bytes of the tensors rank `rank` has sent so far, over every run.
  int64_t BytesSent(int rank) const;

  class Mailbox;

 private:
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
};

}  // namespace distflow
