#include "worker/read_prefetcher.h"

#include <optional>
#include <vector>

#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "placement/partition.h"

namespace distflow {
namespace {

// A partition with one marked receive ("w") and one plain one ("x").
std::shared_ptr<ReadPrefetcher> Prefetcher() {
  proto::GraphDef g;
  proto::NodeDef* w = g.add_node();
  w->set_name("w_recv");
  w->set_op("_Recv");
  SetAttrString(w, "key", "w;0;/job:ps/replica:0/task:0/device:CPU:0;/job:worker/replica:0/task:0/device:CPU:0");
  SetAttrBool(w, kPrefetchRecvAttr, true);
  proto::NodeDef* x = g.add_node();
  x->set_name("x_recv");
  x->set_op("_Recv");
  SetAttrString(x, "key", "x;0;/job:ps/replica:0/task:0/device:CPU:0;/job:worker/replica:0/task:0/device:CPU:0");
  return ReadPrefetcher::ForGraph(g);
}
const std::string kW = "w;0;/job:ps/replica:0/task:0/device:CPU:0;/job:worker/replica:0/task:0/device:CPU:0";

// One run's receive of kW: its own fetch is held until Answer().
struct OneRun {
  Rendezvous::DoneCallback answer;  // the run's own fetch, not answered yet
  std::optional<absl::Status> status;
  float value = -1;
  void Answer(absl::Status s, float v) {
    Rendezvous::DoneCallback a = std::move(answer);
    Tensor t = s.ok() ? Tensor::Scalar<float>(v) : Tensor();
    a(std::move(s), std::move(t));
  }
};

void Start(ReadPrefetcher& p, int64_t run, OneRun* r, std::shared_ptr<CancellationManager> cm = nullptr) {
  p.Recv(
      run, kW, [r](Rendezvous::DoneCallback got) { r->answer = std::move(got); }, std::move(cm),
      [r](absl::Status s, Tensor t) {
        r->status = s;
        if (s.ok()) r->value = t.scalar<float>();
      });
}

TEST(ReadPrefetcher, OnlyMarkedReceivesAreCovered) {
  std::shared_ptr<ReadPrefetcher> p = Prefetcher();
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->Covers(kW));
  EXPECT_FALSE(p->Covers("x;0;/job:ps/replica:0/task:0/device:CPU:0;/job:worker/replica:0/task:0/device:CPU:0"));
  EXPECT_EQ(ReadPrefetcher::ForGraph(proto::GraphDef()), nullptr);
}

// Run k gets the value run k - 1 received, never an older one: at most one step stale.
TEST(ReadPrefetcher, ARunGetsThePreviousRunsValueWhileItsOwnTravels) {
  std::shared_ptr<ReadPrefetcher> p = Prefetcher();
  const double before = ReadPrefetcher::PrefetchedTotal();
  OneRun r1, r2, r3;
  Start(*p, 1, &r1);
  EXPECT_FALSE(r1.status.has_value()) << "the first run has nothing to reuse: it waits for its own value";
  r1.Answer(absl::OkStatus(), 10);
  ASSERT_TRUE(r1.status.has_value());
  EXPECT_EQ(r1.value, 10);
  Start(*p, 2, &r2);
  ASSERT_TRUE(r2.status.has_value()) << "run 2 is answered at once, with run 1's value";
  EXPECT_EQ(r2.value, 10);
  Start(*p, 3, &r3);
  EXPECT_FALSE(r3.status.has_value()) << "run 2's own value is still in flight: run 3 waits for it";
  r2.Answer(absl::OkStatus(), 20);
  ASSERT_TRUE(r3.status.has_value());
  EXPECT_EQ(r3.value, 20) << "run 3 gets run 2's value, not run 1's";
  r3.Answer(absl::OkStatus(), 30);
  EXPECT_EQ(ReadPrefetcher::PrefetchedTotal() - before, 2);
}

// A gap in the run numbers (another partition ran on the task in between)
// means the previous value may be older than one step: read afresh.
TEST(ReadPrefetcher, AfterAnotherRunOrAFailureARunWaitsForItsOwnValue) {
  std::shared_ptr<ReadPrefetcher> p = Prefetcher();
  OneRun r1, r3, r4, r5;
  Start(*p, 1, &r1);
  r1.Answer(absl::OkStatus(), 10);
  Start(*p, 3, &r3);
  EXPECT_FALSE(r3.status.has_value()) << "run 2 was another partition's: run 1's value is two runs old";
  r3.Answer(absl::OkStatus(), 30);
  EXPECT_EQ(r3.value, 30);
  Start(*p, 4, &r4);
  EXPECT_EQ(r4.value, 30);
  r4.Answer(absl::UnavailableError("the ps went away"), 0);
  ASSERT_TRUE(r4.status.has_value());
  EXPECT_TRUE(r4.status->ok()) << "run 4 used run 3's value; its own failure is the next run's concern";
  Start(*p, 5, &r5);
  EXPECT_FALSE(r5.status.has_value()) << "run 4's receive failed: run 5 waits for its own";
  r5.Answer(absl::OkStatus(), 50);
  ASSERT_TRUE(r5.status.has_value());
  EXPECT_EQ(r5.value, 50);
}

TEST(ReadPrefetcher, CancellingARunEndsItsWaitAtOnce) {
  std::shared_ptr<ReadPrefetcher> p = Prefetcher();
  OneRun r1, r2;
  Start(*p, 1, &r1);
  auto cm = std::make_shared<CancellationManager>();
  Start(*p, 2, &r2, cm);
  EXPECT_FALSE(r2.status.has_value());
  cm->StartCancel(absl::CancelledError("step aborted"));
  ASSERT_TRUE(r2.status.has_value());
  EXPECT_TRUE(absl::IsCancelled(*r2.status)) << *r2.status;
  r1.Answer(absl::OkStatus(), 10);  // too late for run 2: its done is not called again
  EXPECT_TRUE(absl::IsCancelled(*r2.status));
  EXPECT_EQ(r1.value, 10);
  r2.Answer(absl::CancelledError("step aborted"), 0);
}

}  // namespace
}  // namespace distflow
