// In-process masters. A Server registers its master under its address; a
// grpc:// session in the same process whose target names that address calls
// the master directly instead of through gRPC, the way TensorFlow's
// LocalMaster does. The seeds' workers run `Server` and their session on
// `server.target` in one process, so every step saves the client -> master
// and master -> client network hops, and large feeds and fetches are handed
// over without a copy.
//
// Addresses match after normalisation: "localhost", "127.0.0.1" and "0.0.0.0"
// name the same IPv4 server for a given port; "::1" and "::" the same IPv6 one.
//
// As with a local session, tensors of 1 MiB or more are shared, not copied:
// a fed tensor becomes the graph's input (a variable assigned from it shares
// its buffer until its next update), and a fetched one may be a variable's
// snapshot. Do not write into either afterwards; DeepCopy() first.
// Thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rpc/master_interface.h"

namespace distflow {

class Master;

// One registered master. Calls hold a lease; Server::Stop closes the entry
// (no new leases) and ~Server waits until the leases are back before the
// master goes away.
class LocalMasterEntry {
 public:
  explicit LocalMasterEntry(Master* master) : master_(master) {}

  // Refuses new leases.
  void Close();
  // Blocks until every lease taken before Close has been returned.
  void WaitIdle();

 private:
  friend class LocalMasterLease;
  friend void RegisterLocalMaster(const std::string& address, std::shared_ptr<LocalMasterEntry> entry);
  Master* Borrow();
  void Return();

  absl::Mutex mu_;
  Master* master_ ABSL_GUARDED_BY(mu_);
  int leases_ ABSL_GUARDED_BY(mu_) = 0;
};

// Use of a registered master for the duration of one call.
class LocalMasterLease {
 public:
  LocalMasterLease(LocalMasterLease&& other) noexcept;
  LocalMasterLease& operator=(LocalMasterLease&&) = delete;
  LocalMasterLease(const LocalMasterLease&) = delete;
  ~LocalMasterLease();

  Master* master() const { return master_; }

  // A lease on the master registered for `address` ("host:port"), if there
  // is one in this process and it is not shutting down.
  static std::optional<LocalMasterLease> Find(const std::string& address);

 private:
  LocalMasterLease(std::shared_ptr<LocalMasterEntry> entry, Master* master)
      : entry_(std::move(entry)), master_(master) {}
  std::shared_ptr<LocalMasterEntry> entry_;
  Master* master_;
};

// Registers `entry` under `address` ("host:port" with the bound port). An
// entry already there is replaced only if it is closed.
void RegisterLocalMaster(const std::string& address, std::shared_ptr<LocalMasterEntry> entry);
// Removes `address` if it still maps to `entry`.
void UnregisterLocalMaster(const std::string& address, const LocalMasterEntry* entry);

// A server of this process that stopped (its job failed, its cluster was
// shut down, or Stop() was called): sessions naming its address then fail at
// once with `why` instead of waiting for a server that will not come back.
// Registering a master at the address again clears the mark.
void MarkLocalMasterEnded(const std::string& address, const absl::Status& why);
// OK unless MarkLocalMasterEnded named `address`; then `why`'s code
// (Unavailable after Stop(), Cancelled when the cluster ended the job),
// naming `address` and the reason.
absl::Status LocalMasterEndedStatus(const std::string& address);

// The registry key for "host:port" (loopback and wildcard hosts fold into one);
// empty if the address does not parse.
std::string LocalMasterKey(const std::string& address);

// LocalMaster: MasterInterface over the master a Server of this process
// registered for `address`, called in memory (no messages; tensors of 1 MiB or
// more are handed over as tensors through the master's bulk server, without a
// copy). Each call leases the master; once its server has stopped, calls fail
// with LocalMasterEndedStatus (or Unavailable) at once. Thread-safe.
class LocalMaster final : public MasterInterface {
 public:
  // A LocalMaster if a server of this process serves `address` now; else null.
  static std::unique_ptr<MasterInterface> Lookup(const std::string& address);

  absl::Status CreateSession(CallOptions* opts, int64_t wait_ms, const proto::CreateSessionRequest& req,
                             proto::CreateSessionResponse* resp) override;
  absl::Status ExtendSession(CallOptions* opts, int64_t wait_ms, const proto::ExtendSessionRequest& req) override;
  absl::Status RunStep(RunStepCall* call) override;
  absl::Status CloseSession(const std::string& handle) override;
  absl::Status Reset(const proto::ResetRequest& req) override;
  absl::Status ListDevices(proto::ListDevicesResponse* resp) override;

 private:
  explicit LocalMaster(std::string address) : address_(std::move(address)) {}
  // A lease on the master, or why there is none.
  absl::StatusOr<LocalMasterLease> Lease() const;

  const std::string address_;
};

}  // namespace distflow
