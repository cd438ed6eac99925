#include "collective/stall_check.h"

#include <cstdlib>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/env.h"
#include "base/logging.h"
#include "base/timer.h"

namespace distflow {
namespace {

// A run's channel that counts, per peer, the receives still waiting and
// whether anything has arrived from it in this run.
class StallWatch final : public CollectiveChannel, public std::enable_shared_from_this<StallWatch> {
 public:
  StallWatch(std::shared_ptr<CollectiveChannel> inner, std::string what, StallCheckOptions options)
      : inner_(std::move(inner)),
        what_(std::move(what)),
        options_(std::move(options)),
        start_micros_(Env::Default()->NowMicros()),
        waiting_(static_cast<size_t>(inner_->size()), 0),
        heard_(static_cast<size_t>(inner_->size()), false) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string RankName(int r) const override { return inner_->RankName(r); }
  absl::Status Send(int to, const std::string& tag, const Tensor& value) override {
    return inner_->Send(to, tag, value);
  }
  void Abort(const absl::Status& status) override { inner_->Abort(status); }

  void RecvAsync(int from, const std::string& tag, RecvCallback done) override {
    {
      absl::MutexLock lock(&mu_);
      ++waiting_[static_cast<size_t>(from)];
    }
    inner_->RecvAsync(from, tag, [self = shared_from_this(), from, done = std::move(done)](absl::Status s, Tensor t) {
      {
        absl::MutexLock lock(&self->mu_);
        --self->waiting_[static_cast<size_t>(from)];
        if (s.ok()) self->heard_[static_cast<size_t>(from)] = true;
      }
      done(std::move(s), std::move(t));
    });
  }

  // Sends this rank's announcement to every rank (for the ring: but the
  // next), and receives one from every rank (but the previous); see
  // stall_check.h.
  void AnnounceJoin(bool ring) {
    const int n = size(), me = rank();
    for (int r = 0; r < n; ++r) {
      if (r == me || (ring && r == (me + 1) % n)) continue;
      // A failed send fails the run's own sends too; nothing to do here.
      (void)inner_->Send(r, kJoinedTag, Tensor(DT_INT32, TensorShape({0})));
    }
    for (int r = 0; r < n; ++r) {
      if (r == me || (ring && r == (me + n - 1) % n)) continue;
      RecvAsync(r, kJoinedTag, [](absl::Status, Tensor) {});  // counted in heard_
    }
  }

  void Schedule() {
    const Timer::Id id = Timer::Global()->After(options_.interval, [self = shared_from_this()] { self->Check(); });
    {
      absl::MutexLock lock(&mu_);
      if (!stopped_) {
        timer_ = id;
        return;
      }
    }
    Timer::Global()->Cancel(id);  // the run ended meanwhile
  }

  void Stop() {
    Timer::Id id = 0;
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      id = timer_;
      timer_ = 0;
    }
    if (id != 0) Timer::Global()->Cancel(id);
  }

 private:
  void Check() {
    std::string message;
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      timer_ = 0;
      message = Describe();
    }
    if (options_.report) {
      options_.report(message);
    } else {
      LOG(WARNING) << message;
    }
    Schedule();
  }

  std::string Describe() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> absent, behind;
    for (int r = 0; r < size(); ++r) {
      if (r == rank() || waiting_[static_cast<size_t>(r)] == 0) continue;
      (heard_[static_cast<size_t>(r)] ? behind : absent).push_back(RankName(r));
    }
    const double secs = static_cast<double>(Env::Default()->NowMicros() - start_micros_) / 1e6;
    std::string out =
        absl::StrCat("Stall check: ", what_, " has waited ", absl::SixDigits(secs), " s for other ranks of its group.");
    if (!absent.empty()) absl::StrAppend(&out, " Not joined yet: ", absl::StrJoin(absent, ", "), ".");
    if (!behind.empty()) {
      absl::StrAppend(&out, " Joined, but not yet sent the next part (waiting on another rank?): ",
                      absl::StrJoin(behind, ", "), ".");
    }
    if (absent.empty() && behind.empty()) absl::StrAppend(&out, " It is not waiting for a rank at this moment.");
    absl::StrAppend(&out,
                    " Ranks that run different collectives, or only some of them, deadlock; the run goes on waiting "
                    "(DISTFLOW_STALL_CHECK_SECS or HOROVOD_STALL_CHECK_TIME_SECONDS set this check's interval, 0 "
                    "turns it off).");
    return out;
  }

  const std::shared_ptr<CollectiveChannel> inner_;
  const std::string what_;
  const StallCheckOptions options_;
  const int64_t start_micros_;
  absl::Mutex mu_;
  std::vector<int> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> heard_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  Timer::Id timer_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::StatusOr<absl::Duration> ParseSeconds(const char* name, const char* raw) {
  double secs = 0;
  if (!absl::SimpleAtod(raw, &secs) || !(secs >= 0) || secs > 1e9) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is '", raw,
                                                   "'; it must be a number of seconds, 0 or more (0 turns the "
                                                   "collectives' stall check off)"));
  }
  return absl::Seconds(secs);
}

}  // namespace

absl::StatusOr<absl::Duration> StallCheckIntervalFromEnv() {
  if (const char* off = std::getenv("HOROVOD_STALL_CHECK_DISABLE"); off != nullptr && std::string(off) == "1") {
    return absl::ZeroDuration();
  }
  for (const char* name : {"DISTFLOW_STALL_CHECK_SECS", "HOROVOD_STALL_CHECK_TIME_SECONDS"}) {
    const char* raw = std::getenv(name);
    if (raw != nullptr && *raw != '\0') return ParseSeconds(name, raw);
  }
  return StallCheckOptions().interval;
}

WatchedChannel WatchForStalls(std::shared_ptr<CollectiveChannel> ch, std::string what, const StallCheckOptions& options,
                              Announce announce) {
  if (options.interval <= absl::ZeroDuration()) return {std::move(ch), [] {}};
  auto watch = std::make_shared<StallWatch>(std::move(ch), std::move(what), options);
  if (announce != Announce::kNone && watch->size() >= 3) watch->AnnounceJoin(announce == Announce::kRing);
  watch->Schedule();
  return {watch, [watch] { watch->Stop(); }};
}

}  // namespace distflow
