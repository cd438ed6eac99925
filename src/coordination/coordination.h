// Failure detection, in the manner of TensorFlow 2's coordination service.
//
// One task of the cluster, the coordinator (CoordinatorTask: the task of a
// "coordinator" job, else ps 0, else the chief), keeps a
// CoordinationService. Every task's server runs a CoordinationAgent that
// sends the coordinator a heartbeat each `interval` (Heartbeat in the
// worker service) and learns from the answer what the coordinator knows of
// every task:
//
//   UNKNOWN  not heard from yet: tasks start in any order, so not dead
//   ALIVE    heard from within `timeout`
//   DEAD     heard from, then silent for longer than `timeout` (a process
//            that was killed, hangs, or is cut off); ALIVE again if it comes
//            back (a restart has a new incarnation)
//   LEFT     said goodbye (its server stopped cleanly): not a death
//
// An agent that has reached the coordinator once and then cannot for longer
// than `timeout` declares the coordinator dead itself. A process that was
// paused (SIGSTOP, swap, a long stall) heard nobody meanwhile: a gap in its
// own heartbeat loop longer than the timeout is no evidence against anyone,
// and the deadlines restart from the resume (CoordinationService::LoopRan). Each task newly dead
// is reported once to the agent's `on_dead` callback; the server then fails
// the steps that wait on it (grpc_server.cc). OrphanReason is the rule by
// which a parameter server gives up on a job whose workers are gone.
//
// The service also keeps the job's membership (membership.cc): a worker
// that is not in the cluster spec may Join a running job, gets the next task
// index of its job and the cluster as it is now, and from then on is a task
// like the others (ALIVE at once, DEAD if it stops heartbeating, LEFT when
// it says goodbye). Members lists every task with its address, so tasks
// that must reach a joined one (a ps pulling its gradients) can. A
// coordinator that restarted forgot who joined: an agent whose heartbeat
// it refuses as unknown asks to Rejoin with its address, and is taken back.
//
// It also rebuilds collective groups (group_rendezvous.cc): the ranks of a
// group meet here before their first collective and after a failure, and
// leave with the same generation and the rank whose state they take
// (proto/elastic.proto, GroupRendezvousRequest, says the rule). A
// coordinator that restarted forgot the groups: every ask and query
// carries the asker's generation, and the group resumes at the newest it
// hears, so no generation is handed out twice.
//
// Time comes from an Env (base/env.h), so tests advance a fake clock.
// Both classes are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/env.h"
#include "distflow/cluster_spec.h"
#include "proto/elastic.pb.h"
#include "proto/worker.pb.h"

namespace distflow {

class WorkerCache;

struct CoordinationOptions {
  absl::Duration interval = absl::Seconds(1);
  absl::Duration timeout = absl::Seconds(10);
  // This task's host:port: with it, a task that a restarted coordinator
  // does not know asks to rejoin ("": it does not).
  std::string address;
};

// A job whose task 0 only hosts the coordinator: distflow-launch --ps 0
// --min_workers/--max_workers runs one (elastic all-reduce has no ps, and a
// worker that hosted the membership would take it with it when it died).
inline constexpr char kCoordinatorJobName[] = "coordinator";

// The task that hosts the coordination service: task 0 of the coordinator
// job if there is one, else ps 0 if there is a ps job (it outlives the
// workers), else the chief. Canonical task names (TaskName in
// distflow/cluster_spec.h).
std::string CoordinatorTask(const ClusterSpec& cluster);
// The chief: /job:chief/task:0 if there is such a job, else worker 0, else
// the first task of the first job.
std::string ChiefTask(const ClusterSpec& cluster);

class CoordinationService {
 public:
  // `tasks`: every task of the cluster; `incarnation`: the coordinator's own.
  CoordinationService(std::vector<std::string> tasks, absl::Duration timeout, uint64_t incarnation,
                      Env* env = Env::Default());
  // Every task of `cluster`, with its address (what Join hands out).
  CoordinationService(const ClusterSpec& cluster, absl::Duration timeout, uint64_t incarnation,
                      Env* env = Env::Default());

  // A task joins `job` from `address` (host:port): its task index. The
  // next index of the job, or the index of a task with the same address
  // that is not alive (a replacement on the same address). `cluster` (may
  // be null) gets every member that is not dead or gone, the joiner
  // included. InvalidArgument for a malformed job or address;
  // FailedPrecondition if a live task already has the address.
  absl::StatusOr<int> Join(const std::string& job, const std::string& address, ClusterSpec* cluster);
  // Every task the service knows, in name order.
  std::vector<proto::Member> Members();

  // Takes back `task`, serving on `address`, that had joined the job
  // before this service started (the coordinator restarted): a joined
  // member, alive from now. OK if the service knows the task already.
  // InvalidArgument for a malformed name or address; FailedPrecondition if
  // a live task holds the address.
  absl::Status Rejoin(const std::string& task, const std::string& address);

  // One rank's ask to (re)build its collective group; `resp->done` once
  // every rank of the group has asked (elastic.proto says the rule; group
  // size 0 is the elastic group of the job's live tasks).
  // InvalidArgument for a rank outside the group (elastic: a task the
  // service does not know) or a malformed group across jobs.
  absl::Status GroupRendezvous(const proto::GroupRendezvousRequest& req, proto::GroupRendezvousResponse* resp);

  // Records the sender's heartbeat, then answers with every task's health.
  // InvalidArgument for a task that is not in the cluster.
  absl::Status Heartbeat(const proto::HeartbeatRequest& req, proto::HeartbeatResponse* resp);
  // Declares dead every ALIVE task silent for longer than the timeout.
  void Check();
  // The coordinator's own heartbeat loop (its CoordinationAgent's thread)
  // ran, and runs every `interval`. From the first call on, a gap in that
  // loop is watched for: when the loop has not run for longer than
  // interval + timeout, this process was paused (SIGSTOP, swapped out, a
  // long stall) and heard nobody in that gap, so the tasks' silence then is
  // no evidence: the next check (whichever call makes it) restarts every
  // live task's deadline from the resume instead of declaring it dead.
  // Without calls (tests driving the service alone) time is not watched.
  void LoopRan(absl::Duration interval);
  void Snapshot(proto::HeartbeatResponse* resp);

 private:
  struct Task {
    proto::TaskHealth::State state = proto::TaskHealth::UNKNOWN;
    uint64_t incarnation = 0;
    int64_t last_us = 0;
    std::string job;
    int index = -1;
    std::string address;  // "" if not known (the spec was not given)
    bool joined = false;  // joined the running job
  };
  // The rendezvous of one collective group (job, its members: a process
  // set's tasks, or 0..group_size-1; or a group across jobs' tasks).
  struct GroupRound {
    std::map<int, std::pair<int64_t, uint64_t>> waiting;  // rank -> (last generation, nonce)
    int64_t generation = 0;                               // the last completed round's
    int root = 0;
    std::map<int, uint64_t> done_nonces;  // who completed it, with which ask
    std::map<int, uint64_t> probed;       // each rank's first probe (a second one is a restart)
    std::vector<int> members;             // an elastic group's last round: task indices in rank order
    // The generation was heard from a rank, not built here (this
    // coordinator restarted): `members` are the tasks heard in it since.
    bool resumed = false;
  };
  // A rank that says it is in a generation newer than any this service
  // built (the coordinator restarted and forgot the group): the group
  // resumes there, so the next round is above it and a query tells new
  // ranks from members.
  void HearGenerationLocked(const proto::GroupRendezvousRequest& req, GroupRound& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // GroupRendezvous for an elastic group (group_size 0).
  absl::Status ElasticRendezvousLocked(const proto::GroupRendezvousRequest& req, GroupRound& g,
                                       proto::GroupRendezvousResponse* resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A task of `job` with `index` that is dead or left (unknown tasks are not).
  bool GoneLocked(const std::string& job, int index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The members that are not dead or gone, with an address, as a cluster.
  absl::StatusOr<ClusterSpec> LiveClusterLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // LoopRan's rule: after a pause, restarts the live tasks' deadlines.
  void ResumedLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SnapshotLocked(int64_t now, proto::HeartbeatResponse* resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::Duration timeout_;
  const uint64_t incarnation_;
  Env* const env_;
  absl::Mutex mu_;
  std::map<std::string, Task> tasks_ ABSL_GUARDED_BY(mu_);
  // By (job, members, tasks): a group of one job is known by its job and
  // members (a process set's, or 0..n-1; none for the elastic group), a
  // group across jobs by its task names alone (its members ask from
  // different jobs).
  std::map<std::tuple<std::string, std::vector<int>, std::vector<std::string>>, GroupRound> groups_
      ABSL_GUARDED_BY(mu_);
  int64_t loop_us_ ABSL_GUARDED_BY(mu_) = 0;  // the own loop's last run (0: not watched)
  absl::Duration loop_interval_ ABSL_GUARDED_BY(mu_);
};

class CoordinationAgent {
 public:
  using DeadCallback = std::function<void(const std::string& task, const absl::Status& why)>;

  // `peers` reaches the coordinator when it is another task; `local` is the
  // service when this task is the coordinator (then `peers` is unused).
  CoordinationAgent(std::string task, uint64_t incarnation, std::string coordinator, CoordinationOptions options,
                    WorkerCache* peers, CoordinationService* local, Env* env = Env::Default());
  ~CoordinationAgent();  // Stop(false)

  // Starts the heartbeat thread. `on_dead` runs on it, once per task newly
  // declared dead (and again if it dies again after coming back); `on_tick`
  // after every heartbeat. Either may be empty.
  void Start(DeadCallback on_dead, std::function<void()> on_tick);
  // The callbacks without the thread (tests drive Tick themselves).
  void SetCallbacks(DeadCallback on_dead, std::function<void()> on_tick);
  // Stops the thread; with `leaving`, first tells the coordinator this task
  // is stopping cleanly (one try, bounded by the interval).
  void Stop(bool leaving);

  // One heartbeat and what follows from it. Tests call it directly with
  // the thread not started.
  void Tick();
  // What the thread does each interval: on the coordinator, tells the
  // service its loop ran (CoordinationService::LoopRan); elsewhere, after a
  // gap longer than interval + timeout since the last Turn, counts the
  // coordinator as reached at the resume; then Tick. Tests call it to
  // stand for the running thread.
  void Turn();

  // The last answer's view of every task (empty before the first).
  std::map<std::string, proto::TaskHealth> View() const;
  // Tasks known to be dead now, sorted (the coordinator included when it
  // cannot be reached).
  std::vector<std::string> DeadTasks() const;
  // Why steps that wait on `task` cannot finish ("" when it is not dead).
  std::string DeathMessage(const std::string& task) const;
  // Why `task` will not answer, as the coordinator recorded it in the last
  // answer: declared dead (and how long it has been silent) or left the
  // job; "" otherwise (alive, not heard from yet, or unknown). This task's
  // own verdict on an unreachable coordinator is not the coordinator's
  // word and gives "". A task that comes back is ALIVE again from the next
  // answer after its first heartbeat.
  std::string GoneReason(const std::string& task) const;
  // How long the coordinator has been unreachable after having been reached
  // (zero while it answers or before it first did).
  absl::Duration CoordinatorSilence() const;
  const std::string& coordinator() const { return coordinator_; }
  const CoordinationOptions& options() const { return options_; }

 private:
  void Loop();
  void Report(const std::vector<std::string>& newly_dead);
  // One heartbeat to the coordinator.
  absl::Status Beat(proto::HeartbeatResponse* resp);
  // Asks a coordinator that refused this task as unknown to take it back
  // (ElasticService.Rejoin); true if it did.
  bool RejoinCoordinator();

  const std::string task_;
  const uint64_t incarnation_;
  const std::string coordinator_;
  const CoordinationOptions options_;
  WorkerCache* const peers_;
  CoordinationService* const local_;
  Env* const env_;

  DeadCallback on_dead_;
  std::function<void()> on_tick_;
  std::thread thread_;
  absl::Notification stop_;

  mutable absl::Mutex mu_;
  std::map<std::string, proto::TaskHealth> view_ ABSL_GUARDED_BY(mu_);
  int64_t last_reached_us_ ABSL_GUARDED_BY(mu_) = 0;  // 0: never
  int64_t last_turn_us_ ABSL_GUARDED_BY(mu_) = 0;     // the thread's last Turn (0: none)
  bool coordinator_dead_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t coordinator_incarnation_ ABSL_GUARDED_BY(mu_) = 0;
};

// Why a parameter server should give up on its job, or "" if it should not:
//   - the chief has been dead for longer than `grace` after being declared
//     dead (it did not come back);
//   - every non-ps task is dead or left, at least one is dead, and every dead
//     one has been so for longer than `grace`;
//   - the coordinator has been unreachable for longer than timeout + grace.
std::string OrphanReason(const CoordinationAgent& agent, const std::string& chief, absl::Duration grace);

}  // namespace distflow
