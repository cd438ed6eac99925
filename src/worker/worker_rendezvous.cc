#include "worker/worker_rendezvous.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace distflow {
namespace {
constexpr size_t kMaxAbortedSteps = 4096;
}

absl::Status WorkerRendezvous::Send(int64_t step_id, const std::string& key, const Tensor& value) {
  Waiter w;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_.ok()) return closed_;
    auto ab = aborted_.find(step_id);
    if (ab != aborted_.end()) return ab->second;
    Slot& slot = table_[{step_id, key}];
    if (slot.waiters.empty()) {
      slot.values.push_back(value);
      return absl::OkStatus();
    }
    w = std::move(slot.waiters.front());
    slot.waiters.pop_front();
    if (slot.Empty()) table_.erase({step_id, key});
  }
  if (w.cm != nullptr && w.token >= 0) w.cm->Deregister(w.token);
  w.done(absl::OkStatus(), value);
  return absl::OkStatus();
}

void WorkerRendezvous::RecvAsync(int64_t step_id, const std::string& key, const std::string& send_task,
                                 CancellationManager* cm, DoneCallback done) {
  if (send_task == local_task_ || send_task.empty()) {
    RecvLocalAsync(step_id, key, cm, std::move(done));
    return;
  }
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    id = next_waiter_id_++;
    remote_pending_[id] = {step_id, key + " from " + send_task};
  }
  remote_(send_task, step_id, key, cm, [this, id, done = std::move(done)](absl::Status s, Tensor t) {
    {
      absl::MutexLock lock(&mu_);
      remote_pending_.erase(id);
    }
    done(std::move(s), std::move(t));
  });
}

void WorkerRendezvous::RecvBundleAsync(int64_t step_id, const std::string& key, const std::vector<std::string>& bundle,
                                       const std::string& send_task, CancellationManager* cm, DoneCallback done) {
  if (send_task == local_task_ || send_task.empty() || bundle.size() < 2 || !remote_bundle_) {
    RecvAsync(step_id, key, send_task, cm, std::move(done));
    return;
  }
  RecvBundleImpl(step_id, key, bundle, {}, send_task, cm, std::move(done));
}

void WorkerRendezvous::RecvBundlePushingAsync(int64_t step_id, const std::string& key,
                                              const std::vector<std::string>& bundle,
                                              const std::vector<std::string>& push, const std::string& send_task,
                                              CancellationManager* cm, DoneCallback done) {
  if (push.empty()) {
    RecvBundleAsync(step_id, key, bundle, send_task, cm, std::move(done));
    return;
  }
  if (send_task == local_task_ || send_task.empty() || !remote_bundle_ ||
      std::find(bundle.begin(), bundle.end(), key) == bundle.end()) {
    done(absl::FailedPreconditionError(absl::StrCat("Receive of '", key, "' from ", send_task, " on ", local_task_,
                                                    " was to carry ", push.size(), " tensors ('", push.front(),
                                                    "', ...) to it, but this task has no bundle fetch to carry them")),
         Tensor());
    return;
  }
  RecvBundleImpl(step_id, key, bundle, push, send_task, cm, std::move(done));
}

void WorkerRendezvous::RecvPushedAsync(int64_t step_id, const std::string& key, const std::string& send_task,
                                       CancellationManager* cm, DoneCallback done) {
  if (pushed_) {
    pushed_(send_task, step_id, key, cm, std::move(done));
    return;
  }
  WaitForPush(step_id, key, send_task, cm, std::move(done));
}

void WorkerRendezvous::WaitForPush(int64_t step_id, const std::string& key, const std::string& send_task,
                                   CancellationManager* cm, DoneCallback done) {
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    id = next_waiter_id_++;
    remote_pending_[id] = {step_id, absl::StrCat(key, " (pushed by ", send_task, ")")};
  }
  RecvLocalAsync(step_id, key, cm, [this, id, done = std::move(done)](const absl::Status& s, const Tensor& t) {
    {
      absl::MutexLock lock(&mu_);
      remote_pending_.erase(id);
    }
    done(s, t);
  });
}

void WorkerRendezvous::CollectPush(int64_t step_id, const std::vector<std::string>& push, CancellationManager* cm,
                                   std::function<void(std::vector<PushedTensor>)> fetch, FetchDone failed) {
  struct Collect {
    absl::Mutex mu;
    std::vector<PushedTensor> tensors ABSL_GUARDED_BY(mu);
    size_t left ABSL_GUARDED_BY(mu) = 0;
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  auto c = std::make_shared<Collect>();
  {
    absl::MutexLock lock(&c->mu);
    c->tensors.resize(push.size());
    c->left = push.size();
  }
  for (size_t i = 0; i < push.size(); ++i) {
    RecvLocalAsync(step_id, push[i], cm, [c, i, key = push[i], fetch, failed](const absl::Status& s, const Tensor& t) {
      std::vector<PushedTensor> all;
      absl::Status status;
      {
        absl::MutexLock lock(&c->mu);
        c->tensors[i].key = key;
        c->tensors[i].value = t;
        if (!s.ok() && c->status.ok()) c->status = s;
        if (--c->left > 0) return;
        all = std::move(c->tensors);
        status = c->status;
      }
      if (status.ok()) {
        fetch(std::move(all));
      } else {
        failed(status, {});
      }
    });
  }
}

void WorkerRendezvous::RecvBundleImpl(int64_t step_id, const std::string& key, const std::vector<std::string>& bundle,
                                      const std::vector<std::string>& push, const std::string& send_task,
                                      CancellationManager* cm, DoneCallback done) {
  bool first = false;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    // An aborted or closed step fails in RecvLocalAsync below.
    if (closed_.ok() && aborted_.find(step_id) == aborted_.end()) {
      auto it = table_.find({step_id, key});
      // Neither fetching nor fetched (nor taken: each key is received once a step).
      first = it == table_.end() || (it->second.values.empty() && !it->second.fetching);
      if (first) {
        for (const std::string& k : bundle) table_[{step_id, k}].fetching = true;
        id = next_waiter_id_++;
        remote_pending_[id] = {step_id, absl::StrCat(bundle.size(), " tensors ('", key, "', ...) from ", send_task)};
      }
    }
  }
  if (first) {
    // The fetch holds the step's cancellation manager (`cm`) until its
    // callback returns, but nothing else of the step waits for it: an
    // aborted step fails every receive at once and would end, freeing `cm`,
    // with the fetch still in flight. So the first receive ends only once
    // both its own value (or error) and the fetch's callback are in.
    struct Gate {
      absl::Mutex mu;
      int left ABSL_GUARDED_BY(mu) = 2;
      absl::Status status ABSL_GUARDED_BY(mu);
      Tensor value ABSL_GUARDED_BY(mu);
      DoneCallback done;
    };
    auto gate = std::make_shared<Gate>();
    gate->done = std::move(done);
    auto arrive = [gate] {
      absl::Status s;
      Tensor v;
      {
        absl::MutexLock lock(&gate->mu);
        if (--gate->left > 0) return;
        s = std::move(gate->status);
        v = std::move(gate->value);
      }
      gate->done(s, std::move(v));
    };
    FetchDone fetched = [this, id, step_id, bundle, arrive, cm](absl::Status s, std::vector<Tensor> tensors) {
      if (s.ok() && tensors.size() != bundle.size()) {
        s = absl::InternalError(absl::StrCat("A bundle of ", bundle.size(), " tensors brought ", tensors.size()));
      }
      std::vector<std::pair<Waiter, Tensor>> ready;
      {
        // One critical section: a receive of the bundle never
        // sees it neither fetching nor fetched.
        absl::MutexLock lock(&mu_);
        remote_pending_.erase(id);
        const bool open = closed_.ok() && aborted_.find(step_id) == aborted_.end();
        for (size_t i = 0; i < bundle.size(); ++i) {
          auto it = table_.find({step_id, bundle[i]});
          if (it == table_.end()) continue;
          Slot& slot = it->second;
          slot.fetching = false;
          if (s.ok() && open) {
            if (slot.waiters.empty()) {
              slot.values.push_back(std::move(tensors[i]));
            } else {
              ready.emplace_back(std::move(slot.waiters.front()), std::move(tensors[i]));
              slot.waiters.pop_front();
            }
          }
          if (slot.Empty()) table_.erase(it);
        }
      }
      for (auto& [w, value] : ready) {
        if (w.cm != nullptr && w.token >= 0) w.cm->Deregister(w.token);
        w.done(absl::OkStatus(), std::move(value));
      }
      if (!s.ok()) {
        // Cancelled because this task's own step failed: abort with that
        // root cause (a bad id in a Gather), not with the cancellation,
        // so the peers that wait for this step's tensors report it. The
        // step, and `cm`, outlive this callback (the gate above).
        const bool ours = absl::IsCancelled(s) && cm != nullptr && cm->IsCancelled() && !cm->reason().ok();
        AbortStep(step_id, ours ? cm->reason() : s);
      }
      arrive();
    };
    if (push.empty()) {
      remote_bundle_(send_task, step_id, bundle, {}, cm, std::move(fetched));
    } else {
      CollectPush(
          step_id, push, cm,
          [this, send_task, step_id, bundle, cm, fetched](std::vector<PushedTensor> pushed) {
            remote_bundle_(send_task, step_id, bundle, std::move(pushed), cm, fetched);
          },
          fetched);
    }
    RecvLocalAsync(step_id, key, cm, [gate, arrive](const absl::Status& s, const Tensor& t) {
      {
        absl::MutexLock lock(&gate->mu);
        gate->status = s;
        gate->value = t;
      }
      arrive();
    });
    return;
  }
  RecvLocalAsync(step_id, key, cm, std::move(done));
}

std::vector<std::string> WorkerRendezvous::Waiting(int64_t step_id) const {
  std::vector<std::string> out;
  absl::MutexLock lock(&mu_);
  for (auto it = table_.lower_bound({step_id, std::string()}); it != table_.end() && it->first.first == step_id; ++it) {
    if (!it->second.waiters.empty()) out.push_back(it->first.second + " (not sent yet)");
  }
  for (const auto& [id, entry] : remote_pending_)
    if (entry.first == step_id) out.push_back(entry.second);
  return out;
}

void WorkerRendezvous::RecvLocalAsync(int64_t step_id, const std::string& key, CancellationManager* cm,
                                      DoneCallback done) {
  Tensor value;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    auto ab = aborted_.find(step_id);
    if (!closed_.ok()) {
      error = closed_;
    } else if (ab != aborted_.end()) {
      error = ab->second;
    } else {
      Slot& slot = table_[{step_id, key}];
      if (!slot.values.empty()) {
        value = std::move(slot.values.front());
        slot.values.pop_front();
        if (slot.Empty()) table_.erase({step_id, key});
      } else {
        Waiter w;
        w.done = std::move(done);
        w.cm = cm;
        w.id = next_waiter_id_++;
        uint64_t id = w.id;
        if (cm != nullptr) {
          // On cancellation, remove this waiter (if still there) and fail it.
          w.token = cm->Register([this, step_id, key, id] {
            DoneCallback cb;
            {
              absl::MutexLock l(&mu_);
              auto it = table_.find({step_id, key});
              if (it == table_.end()) return;
              auto& ws = it->second.waiters;
              for (auto wi = ws.begin(); wi != ws.end(); ++wi) {
                if (wi->id == id) {
                  cb = std::move(wi->done);
                  ws.erase(wi);
                  break;
                }
              }
              if (it->second.Empty()) table_.erase(it);
            }
            if (cb) cb(absl::CancelledError("Recv of '" + key + "' cancelled"), Tensor());
          });
          if (w.token == CancellationManager::kInvalidToken) {
            error = absl::CancelledError("Recv of '" + key + "' cancelled");
          }
        }
        if (error.ok()) {
          slot.waiters.push_back(std::move(w));
          return;
        }
        done = std::move(w.done);
        if (slot.Empty()) table_.erase({step_id, key});
      }
    }
  }
  if (!error.ok()) {
    done(error, Tensor());
    return;
  }
  done(absl::OkStatus(), std::move(value));
}

void WorkerRendezvous::AbortStep(int64_t step_id, const absl::Status& status) {
  std::vector<Waiter> fail;
  {
    absl::MutexLock lock(&mu_);
    aborted_[step_id] = status;
    while (aborted_.size() > kMaxAbortedSteps) aborted_.erase(aborted_.begin());
    auto it = table_.lower_bound({step_id, std::string()});
    while (it != table_.end() && it->first.first == step_id) {
      for (Waiter& w : it->second.waiters) fail.push_back(std::move(w));
      it = table_.erase(it);
    }
  }
  for (Waiter& w : fail) {
    if (w.cm != nullptr && w.token >= 0) w.cm->Deregister(w.token);
    w.done(status, Tensor());
  }
}

absl::Status WorkerRendezvous::StepAborted(int64_t step_id) const {
  absl::MutexLock lock(&mu_);
  auto it = aborted_.find(step_id);
  return it == aborted_.end() ? absl::OkStatus() : it->second;
}

void WorkerRendezvous::AbortAll(const absl::Status& status) {
  std::vector<Waiter> fail;
  {
    absl::MutexLock lock(&mu_);
    closed_ = status;
    for (auto& [key, slot] : table_) {
      for (Waiter& w : slot.waiters) fail.push_back(std::move(w));
    }
    table_.clear();
  }
  for (Waiter& w : fail) {
    if (w.cm != nullptr && w.token >= 0) w.cm->Deregister(w.token);
    w.done(status, Tensor());
  }
}

size_t WorkerRendezvous::NumPendingForTest() const {
  absl::MutexLock lock(&mu_);
  return table_.size();
}

}  // namespace distflow
