#include "master/local_master.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "distflow/cluster_spec.h"

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
  // not one to retry, and a client that retries Unavailable stops here.
  return absl::Status(it->second.code(),
                      absl::StrCat("The server at ", address, " in this process has stopped: ", it->second.message()));
}

}  // namespace distflow
