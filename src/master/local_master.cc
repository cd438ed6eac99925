#include "master/local_master.h"

#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/final_status.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "bulk/bulk_transfer.h"
#include "distflow/cluster_spec.h"
#include "master/master.h"
#include "rpc/step_stats_proto.h"
#include "tensor/tensor_codec.h"

namespace distflow {
namespace {

struct Registry {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<LocalMasterEntry>> entries ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, absl::Status> ended ABSL_GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

std::string LocalMasterKey(const std::string& address) {
  absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
  if (!hp.ok()) return "";
  // IPv4 and IPv6 loopback are different sockets (two servers may hold the
  // same port on each), so they stay apart; "localhost" is taken as IPv4.
  std::string host = absl::AsciiStrToLower(hp->first);
  if (host == "localhost" || host == "127.0.0.1" || host == "0.0.0.0") {
    host = "loopback4";
  } else if (host == "::1" || host == "::") {
    host = "loopback6";
  }
  return absl::StrCat(host, "#", hp->second);
}

void LocalMasterEntry::Close() {
  absl::MutexLock lock(&mu_);
  master_ = nullptr;
}

void LocalMasterEntry::WaitIdle() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return leases_ == 0; };
  mu_.Await(absl::Condition(&idle));
}

Master* LocalMasterEntry::Borrow() {
  absl::MutexLock lock(&mu_);
  if (master_ != nullptr) ++leases_;
  return master_;
}

void LocalMasterEntry::Return() {
  absl::MutexLock lock(&mu_);
  --leases_;
}

LocalMasterLease::LocalMasterLease(LocalMasterLease&& other) noexcept
    : entry_(std::move(other.entry_)), master_(other.master_) {
  other.master_ = nullptr;
}

LocalMasterLease::~LocalMasterLease() {
  if (entry_ != nullptr && master_ != nullptr) entry_->Return();
}

std::optional<LocalMasterLease> LocalMasterLease::Find(const std::string& address) {
  std::string key = LocalMasterKey(address);
  if (key.empty()) return std::nullopt;
  std::shared_ptr<LocalMasterEntry> entry;
  {
    Registry& r = GetRegistry();
    absl::MutexLock lock(&r.mu);
    auto it = r.entries.find(key);
    if (it == r.entries.end()) return std::nullopt;
    entry = it->second;
  }
  Master* m = entry->Borrow();
  if (m == nullptr) return std::nullopt;
  return LocalMasterLease(std::move(entry), m);
}

void RegisterLocalMaster(const std::string& address, std::shared_ptr<LocalMasterEntry> entry) {
  std::string key = LocalMasterKey(address);
  if (key.empty()) return;
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  r.ended.erase(key);
  auto [it, inserted] = r.entries.emplace(key, entry);
  if (inserted) return;
  // A stopped server may not have unregistered yet; a live one keeps its place.
  std::shared_ptr<LocalMasterEntry> old = it->second;  // outlives the lock below
  bool closed = false;
  {
    absl::MutexLock entry_lock(&old->mu_);
    closed = old->master_ == nullptr;
  }
  if (closed) {
    it->second = std::move(entry);
  } else {
    LOG(WARNING) << "Another server in this process already serves " << address
                 << "; sessions naming it will use that one's master";
  }
}

void UnregisterLocalMaster(const std::string& address, const LocalMasterEntry* entry) {
  std::string key = LocalMasterKey(address);
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.entries.find(key);
  if (it != r.entries.end() && it->second.get() == entry) r.entries.erase(it);
}

void MarkLocalMasterEnded(const std::string& address, const absl::Status& why) {
  std::string key = LocalMasterKey(address);
  if (key.empty() || why.ok()) return;
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  r.ended[key] = why;
}

absl::Status LocalMasterEndedStatus(const std::string& address) {
  std::string key = LocalMasterKey(address);
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.ended.find(key);
  if (it == r.ended.end()) return absl::OkStatus();
  // Named by the address asked for ("localhost:N" or "127.0.0.1:N"), with
  // the code of why it ended: Unavailable for a Stop() (as any server that
  // is gone), but a server its cluster ended (Cancelled: the job is over) is
  // not one to retry, and a client that retries Unavailable stops here:
  // the status is marked final (base/final_status.h).
  return MarkFinal(
      absl::Status(it->second.code(),
                   absl::StrCat("The server at ", address, " in this process has stopped: ", it->second.message())));
}

namespace {

// Takes (and drops) the offers an in-process master made for `resp`'s fetches.
void TakeBulkFetches(BulkServer& bulk, const proto::RunStepResponse& resp) {
  for (const proto::NamedTensor& nt : resp.tensor())
    if (nt.bulk_ticket() != 0) (void)bulk.TakeOffer(nt.bulk_ticket());
}

// One RunStep on an in-process master; shared with its completion.
struct InProcessCall {
  proto::RunStepRequest req;
  proto::RunStepResponse resp;
  std::optional<LocalMasterLease> lease;
  BulkServer* bulk = nullptr;  // the master's, if large fetches come as tickets
  absl::Notification finished;
  absl::Mutex mu;
  bool completed ABSL_GUARDED_BY(mu) = false;
  bool abandoned ABSL_GUARDED_BY(mu) = false;  // the caller stopped waiting: drop the fetches
  absl::Status status;                         // set before `finished`
};

absl::Status RunInProcess(const std::shared_ptr<InProcessCall>& call, const std::string& address) {
  call->lease->master()->RunStepAsync(&call->req, &call->resp, [call](absl::Status s) {
    bool abandoned = false;
    {
      absl::MutexLock lock(&call->mu);
      call->status = std::move(s);
      call->completed = true;
      abandoned = call->abandoned;
    }
    if (abandoned && call->bulk != nullptr) TakeBulkFetches(*call->bulk, call->resp);
    call->finished.Notify();
  });
  // The master enforces the step's deadline on its partitions; this bounds
  // the rest (registering a new plan, a peer that accepts but never answers)
  // the way the gRPC path's deadline does.
  if (call->req.timeout_ms() > 0) {
    if (!call->finished.WaitForNotificationWithTimeout(absl::Milliseconds(call->req.timeout_ms() + 5000))) {
      absl::MutexLock lock(&call->mu);
      if (!call->completed) {
        call->abandoned = true;  // its completion frees what it offered
        return absl::DeadlineExceededError(absl::StrCat("The step did not finish within its ", call->req.timeout_ms(),
                                                        " ms timeout (plus 5 s) on ", address));
      }
    }
  } else {
    call->finished.WaitForNotification();
  }
  return call->status;
}

}  // namespace

std::unique_ptr<MasterInterface> LocalMaster::Lookup(const std::string& address) {
  if (!LocalMasterLease::Find(address)) return nullptr;
  return std::unique_ptr<MasterInterface>(new LocalMaster(address));
}

absl::StatusOr<LocalMasterLease> LocalMaster::Lease() const {
  std::optional<LocalMasterLease> lease = LocalMasterLease::Find(address_);
  if (lease) return std::move(*lease);
  if (absl::Status ended = LocalMasterEndedStatus(address_); !ended.ok()) return ended;
  return MarkFinal(absl::UnavailableError(absl::StrCat("The server at ", address_, " in this process has stopped")));
}

absl::Status LocalMaster::CreateSession(CallOptions*, int64_t, const proto::CreateSessionRequest& req,
                                        proto::CreateSessionResponse* resp) {
  ASSIGN_OR_RETURN(LocalMasterLease lease, Lease());
  return lease.master()->CreateSession(req, resp);
}

absl::Status LocalMaster::ExtendSession(CallOptions*, int64_t, const proto::ExtendSessionRequest& req) {
  ASSIGN_OR_RETURN(LocalMasterLease lease, Lease());
  return lease.master()->ExtendSession(req);
}

absl::Status LocalMaster::RunStep(RunStepCall* step) {
  ASSIGN_OR_RETURN(LocalMasterLease lease, Lease());
  // The master takes large feeds and hands back large fetches in memory,
  // through its bulk server's tickets, without copying them.
  BulkServer* bulk = BulkTransferEnabledByEnv() ? lease.master()->bulk_server() : nullptr;
  // `call` holds the lease (and so the master) until the step's completion
  // has run, even if we stop waiting for it.
  auto call = std::make_shared<InProcessCall>();
  call->req = std::move(step->req);
  for (const auto& [name, t] : step->feeds) {
    proto::NamedTensor* nt = call->req.add_feed();
    if (bulk != nullptr && IsBulkCandidate(t)) {
      SetBulkNamedTensor(name, t, bulk->PutLocal(t), bulk->port(), nt);
      continue;
    }
    nt->set_name(name);
    EncodeTensor(t, nt->mutable_tensor());
  }
  call->req.set_accept_bulk(bulk != nullptr);
  call->lease.emplace(std::move(lease));
  call->bulk = bulk;
  if (absl::Status st = RunInProcess(call, address_); !st.ok()) return st;
  const proto::RunStepResponse& resp = call->resp;
  if (step->trace != nullptr) AppendStepStats(resp.step_stats(), step->trace);
  for (const proto::NamedTensor& nt : resp.tensor()) {
    if (nt.bulk_ticket() != 0) {
      absl::StatusOr<std::pair<DataType, TensorShape>> spec = BulkTensorSpec(nt);
      if (!spec.ok()) {
        if (bulk != nullptr) TakeBulkFetches(*bulk, resp);  // do not leave them pinned
        return spec.status();
      }
      if (bulk == nullptr) {
        return absl::DataLossError(absl::StrCat("Fetched tensor '", nt.name(), "' came as a bulk ticket"));
      }
      absl::StatusOr<Tensor> t = bulk->TakeOffer(nt.bulk_ticket());
      if (t.ok() && (t->dtype() != spec->first || t->shape() != spec->second)) {
        t = absl::DataLossError("it does not match its announced type");
      }
      if (!t.ok()) {
        TakeBulkFetches(*bulk, resp);  // do not leave the others pinned until their TTL
        return absl::Status(t.status().code(),
                            absl::StrCat("Fetched tensor '", nt.name(), "': ", t.status().message()));
      }
      step->fetched.push_back(std::move(*t));
      continue;
    }
    absl::StatusOr<Tensor> t = DecodeTensor(nt.tensor());
    if (!t.ok()) return absl::DataLossError(absl::StrCat("Fetched tensor '", nt.name(), "': ", t.status().message()));
    step->fetched.push_back(std::move(*t));
  }
  return absl::OkStatus();
}

absl::Status LocalMaster::CloseSession(const std::string& handle) {
  absl::StatusOr<LocalMasterLease> lease = Lease();
  if (!lease.ok()) return absl::OkStatus();  // a master that is gone has nothing to close
  return lease->master()->CloseSession(handle);
}

absl::Status LocalMaster::Reset(const proto::ResetRequest& req) {
  ASSIGN_OR_RETURN(LocalMasterLease lease, Lease());
  return lease.master()->Reset(req);
}

absl::Status LocalMaster::ListDevices(proto::ListDevicesResponse* resp) {
  ASSIGN_OR_RETURN(LocalMasterLease lease, Lease());
  return lease.master()->ListDevices(resp);
}

}  // namespace distflow
