// CancellationManager: lets a step be cancelled (deadline, error elsewhere)
// and lets blocking work register a callback that runs on cancellation.
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace distflow {

class CancellationManager {
 public:
  using Token = int64_t;
  static constexpr Token kInvalidToken = -1;

  // Runs every registered callback once, one at a time on the calling
  // thread; later registrations fail. The first call's status is kept as
  // the reason.
  void StartCancel(absl::Status reason);
  bool IsCancelled() const;
  absl::Status reason() const;

  // Registers `fn` to run on cancellation. Returns kInvalidToken if already
  // cancelled (the caller should then act as cancelled itself).
  Token Register(std::function<void()> fn);
  // True if the callback was removed before running. If it is running now
  // (StartCancel on another thread), waits until it has returned, so that
  // the caller may then free what it uses, as TensorFlow's
  // DeregisterCallback does; called from that callback itself, returns at
  // once.
  //
  // So a caller must not hold, while it calls Deregister, a lock that the
  // callback takes, nor be what the callback waits for: the two would wait
  // for each other. Every caller today deregisters with no lock held (after
  // taking its waiter out of its table), and every callback only takes
  // short locks of its own, cancels an RPC or fails a waiter, and never
  // waits for the thread that deregisters it.
  bool Deregister(Token token);

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status reason_ ABSL_GUARDED_BY(mu_);
  Token next_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<Token, std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
  // The callback StartCancel runs now (kInvalidToken: none) and its thread.
  Token running_ ABSL_GUARDED_BY(mu_) = kInvalidToken;
  std::thread::id running_thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace distflow
