// The executor's control-flow path on hand-built graphs: Switch/Merge
// conditionals with dead branches, while loops with frames, iterations and
// loop invariants, bounded parallel iterations, and the checks on malformed
// loops. (Loops built with the C++ builders are tested in client/.)
#include <memory>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "distflow/step_stats.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "runtime/executor.h"
#include "runtime/graph_def_builder_for_test.h"
#include "runtime/local_session.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddNode;

proto::NodeDef* AddEnter(proto::GraphDef* g, const std::string& name, const std::string& input,
                         const std::string& frame, bool constant = false, int parallel = 10) {
  proto::NodeDef* n = AddNode(g, name, "Enter", {input});
  SetAttrString(n, "frame_name", frame);
  SetAttrBool(n, "is_constant", constant);
  SetAttrInt(n, "parallel_iterations", parallel);
  return n;
}

// acc = 0; for (i = 0; i < n; ++i) acc += i;  with n fed. The Merges name the
// NextIteration nodes added after them (back edges).
proto::GraphDef SumLoop(int parallel) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "n", DT_INT32, PartialShape({}));
  AddConst(&g, "i0", Tensor::Scalar<int32_t>(0));
  AddConst(&g, "acc0", Tensor::Scalar<int32_t>(0));
  AddEnter(&g, "enter_i", "i0", "L", false, parallel);
  AddEnter(&g, "enter_acc", "acc0", "L", false, parallel);
  AddEnter(&g, "enter_n", "n", "L", true, parallel);
  AddNode(&g, "merge_i", "Merge", {"enter_i", "next_i"});
  AddNode(&g, "merge_acc", "Merge", {"enter_acc", "next_acc"});
  AddNode(&g, "less", "Less", {"merge_i", "enter_n"});
  AddNode(&g, "cond", "LoopCond", {"less"});
  AddNode(&g, "switch_i", "Switch", {"merge_i", "cond"});
  AddNode(&g, "switch_acc", "Switch", {"merge_acc", "cond"});
  AddNode(&g, "exit_i", "Exit", {"switch_i:0"});
  AddNode(&g, "exit_acc", "Exit", {"switch_acc:0"});
  AddNode(&g, "body_i", "Identity", {"switch_i:1"});
  AddConst(&g, "one", Tensor::Scalar<int32_t>(1))->add_input("^body_i");
  AddNode(&g, "i1", "Add", {"body_i", "one"});
  AddNode(&g, "acc1", "Add", {"switch_acc:1", "body_i"});
  AddNode(&g, "next_i", "NextIteration", {"i1"});
  AddNode(&g, "next_acc", "NextIteration", {"acc1"});
  return g;
}

struct Built {
  std::unique_ptr<Graph> graph;
  KernelCache kernels;
  std::unique_ptr<Executor> executor;
};

absl::Status Build(const proto::GraphDef& def, const std::vector<TensorId>& feeds, const std::vector<TensorId>& fetches,
                   ThreadPool* pool, Built* b) {
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(def));
  b->graph = std::move(g);
  ExecutorOptions eo;
  eo.device = LocalCpuDevice();
  eo.inter_op_pool = pool;
  ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::Create(*b->graph, eo, &b->kernels, feeds, fetches, {}));
  b->executor = std::move(ex);
  return absl::OkStatus();
}

TEST(ExecutorControlFlow, SwitchMergeTakesOneBranch) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "x", DT_FLOAT, PartialShape({2}));
  test::AddPlaceholder(&g, "pred", DT_BOOL, PartialShape({}));
  AddNode(&g, "sw", "Switch", {"x", "pred"});
  AddNode(&g, "neg", "Neg", {"sw:0"});
  AddNode(&g, "dbl", "Add", {"sw:1", "sw:1"});
  AddNode(&g, "dbl2", "Mul", {"dbl", "dbl"});  // dead inputs keep a whole branch dead
  AddNode(&g, "m", "Merge", {"neg", "dbl2"});
  Built b;
  ASSERT_TRUE(Build(g, {{"x", 0}, {"pred", 0}}, {{"m", 0}, {"m", 1}}, nullptr, &b).ok());
  Tensor x = Tensor::FromVector<float>({1.5f, -2.0f});
  auto t = b.executor->Run({}, {x, Tensor::Scalar<bool>(true)});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({9.0f, 16.0f}), (*t)[0]);
  EXPECT_TENSOR_EQ(Tensor::Scalar<int32_t>(1), (*t)[1]);
  auto f = b.executor->Run({}, {x, Tensor::Scalar<bool>(false)});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({-1.5f, 2.0f}), (*f)[0]);
  EXPECT_TENSOR_EQ(Tensor::Scalar<int32_t>(0), (*f)[1]);
}

TEST(ExecutorControlFlow, FetchingADeadTensorIsAnError) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "pred", DT_BOOL, PartialShape({}));
  AddConst(&g, "x", Tensor::Scalar<float>(1));
  AddNode(&g, "sw", "Switch", {"x", "pred"});
  AddNode(&g, "taken_if_true", "Neg", {"sw:1"});
  Built b;
  ASSERT_TRUE(Build(g, {{"pred", 0}}, {{"taken_if_true", 0}}, nullptr, &b).ok());
  auto ok = b.executor->Run({}, {Tensor::Scalar<bool>(true)});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(-1), (*ok)[0]);
  auto dead = b.executor->Run({}, {Tensor::Scalar<bool>(false)});
  ASSERT_FALSE(dead.ok());
  EXPECT_NE(dead.status().message().find("'taken_if_true:0' (Neg) is dead"), std::string::npos) << dead.status();
}

TEST(ExecutorControlFlow, WhileLoopSumsWithLoopInvariant) {
  ThreadPool pool("cf", 3);
  for (int parallel : {1, 2, 10}) {
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
      Built b;
      absl::Status st = Build(SumLoop(parallel), {{"n", 0}}, {{"exit_acc", 0}, {"exit_i", 0}}, p, &b);
      ASSERT_TRUE(st.ok()) << st;
      for (int n : {0, 1, 7, 300}) {
        auto out = b.executor->Run({}, {Tensor::Scalar<int32_t>(n)});
        ASSERT_TRUE(out.ok()) << out.status();
        EXPECT_EQ((*out)[0].scalar<int32_t>(), n * (n - 1) / 2) << "n=" << n << " parallel=" << parallel;
        EXPECT_EQ((*out)[1].scalar<int32_t>(), n);
      }
    }
  }
}

// Whether some iteration k > 0 started (its Merge ran) before iteration k-1
// finished its body (acc1 and i1 ended): iterations overlapped.
bool IterationsOverlap(int parallel) {
  // The sum's body is a chain of six adds (acc += 6i), longer than the counter's.
  proto::GraphDef g = SumLoop(parallel);
  for (int k = 2; k <= 6; ++k) AddNode(&g, "acc" + std::to_string(k), "Add", {"acc" + std::to_string(k - 1), "body_i"});
  for (proto::NodeDef& n : *g.mutable_node()) {
    if (n.name() == "next_acc") n.set_input(0, "acc6");
  }
  Built b;
  EXPECT_TRUE(Build(g, {{"n", 0}}, {{"exit_acc", 0}}, nullptr, &b).ok());
  StepStatsCollector stats;
  StepOptions so;
  so.stats = &stats;
  auto out = b.executor->Run(so, {Tensor::Scalar<int32_t>(20)});
  EXPECT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 6 * 190);
  // The records come in the order the nodes finished (one thread runs them all).
  std::vector<std::string> order;
  for (const NodeExecStats& n : stats.Take()) order.push_back(n.node);
  int merges = 0, bodies_done = 0;
  for (const std::string& n : order) {
    if (n == "merge_i") {
      ++merges;
      if (merges - 1 > bodies_done) return true;  // iteration merges-1 began before iteration merges-2's body ended
    }
    if (n == "acc6") ++bodies_done;
  }
  return false;
}

TEST(ExecutorControlFlow, ParallelIterationsBoundsIterationsInFlight) {
  EXPECT_FALSE(IterationsOverlap(1)) << "with parallel_iterations=1 an iteration starts only after the previous ended";
  EXPECT_TRUE(IterationsOverlap(10)) << "with room, the counter's next iteration starts before the sum's body ends";
}

TEST(ExecutorControlFlow, LoopGraphSurvivesGraphDefRoundTrip) {
  auto g = Graph::FromGraphDef(SumLoop(10));
  ASSERT_TRUE(g.ok()) << g.status();
  const Node* merge = (*g)->FindNode("merge_acc");
  ASSERT_NE(merge, nullptr);
  EXPECT_EQ(merge->input(1).node->name(), "next_acc") << "the back edge is connected";
  proto::GraphDef again;
  (*g)->ToGraphDef(&again);
  auto g2 = Graph::FromGraphDef(again);
  ASSERT_TRUE(g2.ok()) << g2.status();
  EXPECT_EQ((*g2)->FindNode("merge_i")->input(1).node->name(), "next_i");
  // A real cycle (not through NextIteration) is still rejected.
  proto::GraphDef cyc;
  AddNode(&cyc, "a", "Identity", {"b"});
  AddNode(&cyc, "b", "Identity", {"a"});
  EXPECT_FALSE(Graph::FromGraphDef(cyc).ok());
}

TEST(ExecutorControlFlow, LoopInUntakenBranchIsDeadNotHung) {
  // if (pred) { sum loop over n } else { -1 }: the loop's Enters are dead
  // when pred is false, and its Exit reaches the Merge dead.
  proto::GraphDef g = SumLoop(4);
  test::AddPlaceholder(&g, "pred", DT_BOOL, PartialShape({}));
  AddConst(&g, "minus_one", Tensor::Scalar<int32_t>(-1));
  AddNode(&g, "gate", "Switch", {"n", "pred"});
  AddNode(&g, "other", "Identity", {"gate:0"});
  AddNode(&g, "neg1", "Add", {"other", "minus_one"});
  AddNode(&g, "result", "Merge", {"neg1", "exit_acc"});
  // The loop's inputs, its constants included, hang off the taken side.
  AddNode(&g, "pivot", "Identity", {"gate:1"});
  for (proto::NodeDef& n : *g.mutable_node()) {
    if (n.name() == "enter_n") n.set_input(0, "pivot");
    if (n.name() == "i0" || n.name() == "acc0") n.add_input("^pivot");
  }
  Built b;
  absl::Status st = Build(g, {{"n", 0}, {"pred", 0}}, {{"result", 0}}, nullptr, &b);
  ASSERT_TRUE(st.ok()) << st;
  auto taken = b.executor->Run({}, {Tensor::Scalar<int32_t>(5), Tensor::Scalar<bool>(true)});
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ((*taken)[0].scalar<int32_t>(), 10);
  auto untaken = b.executor->Run({}, {Tensor::Scalar<int32_t>(5), Tensor::Scalar<bool>(false)});
  ASSERT_TRUE(untaken.ok()) << untaken.status();
  EXPECT_EQ((*untaken)[0].scalar<int32_t>(), 4);
}

TEST(ExecutorControlFlow, RejectsMalformedLoops) {
  {
    proto::GraphDef g;
    AddConst(&g, "x", Tensor::Scalar<float>(1));
    AddNode(&g, "stray_exit", "Exit", {"x"});
    Built b;
    absl::Status st = Build(g, {}, {{"stray_exit", 0}}, nullptr, &b);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("'stray_exit' (Exit): it is not inside a while loop"), std::string::npos) << st;
  }
  {
    // The body reads n directly instead of through an Enter.
    proto::GraphDef g = SumLoop(10);
    for (proto::NodeDef& n : *g.mutable_node()) {
      if (n.name() == "less") n.set_input(1, "n");
    }
    Built b;
    absl::Status st = Build(g, {{"n", 0}}, {{"exit_acc", 0}}, nullptr, &b);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("'less' (Less): its inputs come from different frames"), std::string::npos) << st;
    EXPECT_NE(st.message().find("loop frame 'L'"), std::string::npos) << st;
  }
  {
    Built b;
    absl::Status st = Build(SumLoop(10), {{"n", 0}}, {{"acc1", 0}}, nullptr, &b);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("'acc1' (Add): cannot be fetched"), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace distflow
