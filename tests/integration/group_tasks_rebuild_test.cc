// A collective group across jobs (group_tasks: worker 1, the ps and worker 0,
// in rank order) rebuilt after a member dies and comes back, between real
// servers in the test process, each member stepping under its own
// MonitoredSession as a between-graph program does. Every step reduces the
// members' inputs and broadcasts from the group's root, the rank whose state
// the others take.
//
// Worker 1 (rank 0) dies after a first step in generation 1. The ps's next
// run fails naming it; worker 0's next step, still in generation 1, cannot
// finish: the ps aborted its run of that generation (its message is
// refused, not paired), and a worker 1 already back has none (its wait is
// ended by the group having moved on). Its MonitoredSession recovers and
// waits for the group; worker 1 comes back as a new server with a new
// MonitoredSession.
// The three meet at the coordinator: one new generation on every member, its
// root the ps (rank 1, the lowest of the ranks that kept their state) when
// one round did it, and the retried step's values are the new inputs' alone
// (the old generation's inputs, stale on purpose, are nowhere in them).
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "collective/collective_executor_impl.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "server/grpc_server.h"

namespace distflow {
namespace {

const std::vector<std::string> kGroup = {"/job:worker/task:1", "/job:ps/task:0", "/job:worker/task:0"};
constexpr int kRanks = 3;
constexpr int kDies = 0;      // worker 1
constexpr int kPs = 1;        // the ps
constexpr int kSurvivor = 2;  // worker 0

// Rank r's input at step k: different for every rank and step.
Tensor Input(int rank, int step) {
  return Tensor::FromVector<float>({100.f * static_cast<float>(step) + static_cast<float>(rank + 1),
                                    100.f * static_cast<float>(step) + 10.f * static_cast<float>(rank + 1)});
}

class GroupTasksRebuildTest : public ::testing::Test {
 protected:
  struct Member {
    Scope root = Scope::NewRootScope();
    Output x, sum, from_root;
    std::unique_ptr<MonitoredSession> session;
  };

  void SetUp() override {
    absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 2);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<std::vector<std::unique_ptr<Server>>> servers = StartLocalCluster(*spec);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    for (int r = 0; r < kRanks; ++r) Build(r);
  }
  void TearDown() override {
    for (Member& m : members_) m.session.reset();  // before the servers
  }

  std::unique_ptr<Server>* ServerOf(int rank) {
    const std::string name = rank == kPs ? TaskName("ps", 0) : TaskName("worker", rank == kDies ? 1 : 0);
    for (auto& s : servers_)
      if (s != nullptr && s->task_name() == name) return &s;
    return nullptr;
  }

  // Rank r's graph: its input, the group's sum, and the root's sum + input.
  void Build(int rank) {
    Member& m = members_[static_cast<size_t>(rank)];
    Scope s = m.root.WithDevice(kGroup[static_cast<size_t>(rank)]);
    m.x = ops::Placeholder(s.WithOpName("x"), DT_FLOAT, {2});
    ops::Attrs attrs = {{"group_size", kRanks}, {"group_key", 5}, {"timeout_seconds", 20.0}, {"group_tasks", kGroup}};
    ops::Attrs reduce = attrs, bcast = attrs;
    reduce.insert(reduce.end(), {{"instance_key", 1}, {"merge_op", "Add"}, {"final_op", "Id"}});
    bcast.insert(bcast.end(), {{"instance_key", 2}, {"shape", PartialShape({2})}, {"from_group_root", true}});
    m.sum = Output(ops::Raw(s.WithOpName("sum"), "CollectiveReduce", {m.x}, reduce), 0, s);
    m.from_root =
        Output(ops::Raw(s.WithOpName("from_root"), "CollectiveBcastSend", {ops::Add(s, m.sum, m.x)}, bcast), 0, s);
    ASSERT_TRUE(m.root.ok()) << m.root.status();
  }

  absl::Status Open(int rank) {
    Member& m = members_[static_cast<size_t>(rank)];
    SupervisorOptions o;
    o.session_options.wait_for_cluster_ms = 20000;
    o.session_options.device_filters = {kGroup[static_cast<size_t>(rank)]};
    o.recovery_wait = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<MonitoredSession>> s =
        MonitoredSession::Create(m.root, (*ServerOf(rank))->target(), o);
    if (!s.ok()) return s.status();
    m.session = std::move(*s);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Tensor>> Step(int rank, int step) {
    Member& m = members_[static_cast<size_t>(rank)];
    return m.session->Run({{m.x, Input(rank, step)}}, {m.sum, m.from_root});
  }

  // Every rank's output of `step` (run on `ranks` at once): the sum of the
  // step's inputs, and `root`'s sum + input.
  void ExpectStep(const std::vector<absl::StatusOr<std::vector<Tensor>>>& out, int step, int root) {
    float sum[2] = {0, 0};
    for (int r = 0; r < kRanks; ++r) {
      for (int i = 0; i < 2; ++i) sum[i] += Input(r, step).flat<float>()[static_cast<size_t>(i)];
    }
    for (int r = 0; r < kRanks; ++r) {
      const auto& o = out[static_cast<size_t>(r)];
      if (!o.ok()) {
        ADD_FAILURE() << "rank " << r << ", step " << step << ": " << o.status();
        continue;
      }
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ((*o)[0].flat<float>()[static_cast<size_t>(i)], sum[i]) << "rank " << r << ", step " << step;
        EXPECT_EQ((*o)[1].flat<float>()[static_cast<size_t>(i)],
                  sum[i] + Input(root, step).flat<float>()[static_cast<size_t>(i)])
            << "rank " << r << ", step " << step << ": not rank " << root << "'s value";
      }
    }
  }

  GroupState StateOf(int rank) {
    CollectiveParams p;
    p.group_size = kRanks;
    p.member_tasks = kGroup;
    return (*ServerOf(rank))->impl()->worker()->collective()->StateOf(p);
  }

  std::vector<std::unique_ptr<Server>> servers_;
  Member members_[kRanks];
};

TEST_F(GroupTasksRebuildTest, AMemberThatDiesAndComesBackRejoinsInANewGeneration) {
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(Open(r).ok()) << "rank " << r;
  std::vector<absl::StatusOr<std::vector<Tensor>>> out(kRanks, absl::UnknownError("did not run"));
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = Step(r, 1); });
    for (auto& t : threads) t.join();
  }
  ExpectStep(out, 1, /*root=*/0);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(StateOf(r).generation, 1) << "rank " << r << ": a fresh group starts in generation 1";
  }

  // Worker 1 dies.
  members_[kDies].session.reset();
  const ClusterSpec cluster = (*ServerOf(kPs))->cluster();
  ServerOf(kDies)->reset();

  // The ps's next run fails naming the dead member (its input, stale on
  // purpose, must never reach a later generation).
  {
    Member& ps = members_[kPs];
    absl::StatusOr<std::vector<Tensor>> stale =
        ps.session->raw_session()->Run({{ps.x, Tensor::FromVector<float>({-1000.f, -1000.f})}}, {ps.sum});
    ASSERT_FALSE(stale.ok()) << "the ps reduced without worker 1";
    EXPECT_TRUE(absl::StrContains(stale.status().message(), "rank 0 (/job:worker/replica:0/task:1)")) << stale.status();
  }

  // Step 2 on the survivors: worker 0's first attempt is of generation 1,
  // which the ps has left, and fails; its MonitoredSession recovers and
  // waits for the group with the ps.
  out.assign(kRanks, absl::UnknownError("did not run"));
  std::vector<std::thread> threads;
  for (int r : {kPs, kSurvivor}) threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = Step(r, 2); });

  // Worker 1 comes back on its address: a new server and session.
  absl::StatusOr<std::unique_ptr<Server>> again = Server::Create(cluster, "worker", 1);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->Start().ok());
  servers_.push_back(std::move(*again));
  ASSERT_TRUE(Open(kDies).ok());
  EXPECT_EQ(StateOf(kDies).generation, 0) << "the restarted member has no group yet";
  threads.emplace_back([&] { out[kDies] = Step(kDies, 2); });
  for (auto& t : threads) t.join();

  // Every member in one new generation with one root, whose value the
  // broadcast gave. One round makes generation 2, rooted at the ps (rank 0
  // restarted: the ps is the lowest rank that kept its state); a peer's
  // channel that had not yet reconnected to the restarted member fails the
  // first run of it and makes another round, rooted at rank 0.
  const GroupState built = StateOf(kPs);
  for (int r = 0; r < kRanks; ++r) {
    const GroupState g = StateOf(r);
    EXPECT_EQ(g.generation, built.generation) << "rank " << r;
    EXPECT_EQ(g.root, built.root) << "rank " << r;
  }
  EXPECT_GE(built.generation, 2);
  if (built.generation == 2) {
    EXPECT_EQ(built.root, kPs) << "the state comes from the lowest rank that kept it";
  }
  ExpectStep(out, 2, built.root);
  EXPECT_GE(members_[kSurvivor].session->recoveries(), 1)
      << "worker 0's step of the old generation should have failed and been recovered";

  // The group goes on in generation 2.
  out.assign(kRanks, absl::UnknownError("did not run"));
  threads.clear();
  for (int r = 0; r < kRanks; ++r) threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = Step(r, 3); });
  for (auto& t : threads) t.join();
  const GroupState last = StateOf(kPs);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(StateOf(r).generation, last.generation) << "rank " << r;
  ExpectStep(out, 3, last.root);
}

}  // namespace
}  // namespace distflow
