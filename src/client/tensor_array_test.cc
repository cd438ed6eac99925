// TensorArrays (distflow/tensor_array.h) built in C++ and run in a Session:
// values of every op against plain C++, split into pieces of different
// lengths, errors naming the array, the bytes a loop of N writes copies
// (linear in N), gradients through loops that write, read and stack checked
// against finite differences, separate gradient arrays per Gradients call,
// and a loop's gradient seeing the random values its forward loop drew.
#include "distflow/tensor_array.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "base/status_macros.h"
#include "base/wait_until.h"
#include "client/gradient_test_util.h"
#include "distflow/control_flow.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/session.h"
#include "gtest/gtest.h"
#include "kernels/cpu/tensor_array.h"
#include "kernels/device.h"
#include "kernels/resource_mgr.h"
#include "runtime/local_session.h"

namespace distflow {
namespace {

using Outs = std::vector<Output>;
using StatusOrOuts = absl::StatusOr<Outs>;

Tensor Doubles(const std::vector<double>& v, const TensorShape& shape) { return Tensor::FromVector(v, shape); }

ops::TensorArrayOptions Options(bool dynamic, PartialShape element_shape = PartialShape::Unknown(),
                                std::string name = "") {
  ops::TensorArrayOptions o;
  o.dynamic_size = dynamic;
  o.element_shape = std::move(element_shape);
  o.name = std::move(name);
  return o;
}

TEST(TensorArray, WritesReadsGathersStacksAndConcatenates) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, Doubles({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})));
  auto ta = ops::TensorArray(root, DT_DOUBLE, ops::Const(root, 3));
  Output f = ops::TensorArrayUnstack(root, ta.handle, x, ta.flow);
  Output read = ops::TensorArrayRead(root, ta.handle, ops::Const(root, 2), f, DT_DOUBLE);
  Output stack = ops::TensorArrayStack(root, ta.handle, f, DT_DOUBLE);
  Output gather = ops::TensorArrayGather(root, ta.handle, ops::Const(root, {2, 0, 2}), f, DT_DOUBLE);
  auto concat = ops::TensorArrayConcat(root, ta.handle, f, DT_DOUBLE);
  Output size = ops::TensorArraySize(root, ta.handle, f);
  // Grown past its size by writes; index 1 never written reads as zeros.
  auto grown = ops::TensorArray(root, DT_DOUBLE, ops::Const(root, 0), Options(true));
  Output g = ops::TensorArrayWrite(root, grown.handle, ops::Const(root, 2), ops::Const(root, Doubles({7, 8}, {2})),
                                   grown.flow);
  g = ops::TensorArrayWrite(root, grown.handle, ops::Const(root, 0), ops::Const(root, Doubles({5, 6}, {2})), g);
  Output grown_stack = ops::TensorArrayStack(root, grown.handle, g, DT_DOUBLE);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  auto r = sess.Run({read, stack, gather, concat.first, concat.second, size, grown_stack});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].flat<double>()[0], 5);
  EXPECT_EQ((*r)[1].shape(), TensorShape({3, 2}));
  EXPECT_EQ(std::vector<double>((*r)[1].flat<double>().begin(), (*r)[1].flat<double>().end()),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(std::vector<double>((*r)[2].flat<double>().begin(), (*r)[2].flat<double>().end()),
            (std::vector<double>{5, 6, 1, 2, 5, 6}));
  EXPECT_EQ((*r)[3].shape(), TensorShape({6}));
  EXPECT_EQ(std::vector<int64_t>((*r)[4].flat<int64_t>().begin(), (*r)[4].flat<int64_t>().end()),
            (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ((*r)[5].scalar<int32_t>(), 3);
  EXPECT_EQ(std::vector<double>((*r)[6].flat<double>().begin(), (*r)[6].flat<double>().end()),
            (std::vector<double>{5, 6, 0, 0, 7, 8}));
}

TEST(TensorArray, SplitsIntoPiecesOfDifferentLengths) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Const(root, Doubles({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, TensorShape({5, 2})));
  auto ta = ops::TensorArray(root, DT_DOUBLE, ops::Const(root, 2));
  Output f = ops::TensorArraySplit(root, ta.handle, x, ops::Const(root, Tensor::FromVector<int64_t>({2, 3})), ta.flow);
  Output second = ops::TensorArrayRead(root, ta.handle, ops::Const(root, 1), f, DT_DOUBLE);
  auto concat = ops::TensorArrayConcat(root, ta.handle, f, DT_DOUBLE);
  Output stack = ops::TensorArrayStack(root, ta.handle, f, DT_DOUBLE);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  auto r = sess.Run({second, concat.first, concat.second});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].shape(), TensorShape({3, 2}));
  EXPECT_EQ((*r)[0].flat<double>()[0], 5);
  EXPECT_EQ((*r)[1].shape(), TensorShape({5, 2}));
  EXPECT_EQ((*r)[1].flat<double>()[9], 10);
  EXPECT_EQ(std::vector<int64_t>((*r)[2].flat<int64_t>().begin(), (*r)[2].flat<int64_t>().end()),
            (std::vector<int64_t>{2, 3}));
  auto bad = sess.Run({stack});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("different shapes"), std::string::npos) << bad.status();
}

TEST(TensorArray, BadIndicesAreErrorsNamingTheArray) {
  Scope root = Scope::NewRootScope();
  auto ta =
      ops::TensorArray(root, DT_FLOAT, ops::Const(root, 2), Options(false, PartialShape::Unknown(), "my_outputs"));
  Output past = ops::TensorArrayWrite(root, ta.handle, ops::Const(root, 5), ops::Const(root, 1.0f), ta.flow);
  Output unknown = ops::TensorArrayRead(root, ta.handle, ops::Const(root, 0), ta.flow, DT_FLOAT);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  auto r = sess.Run({past});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'my_outputs' has size 2"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("dynamic_size"), std::string::npos) << r.status();
  r = sess.Run({unknown});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not been written"), std::string::npos) << r.status();
}

TEST(TensorArray, AnIndexTakesOneWriteAsInTensorFlow) {
  Scope root = Scope::NewRootScope();
  auto ta = ops::TensorArray(root, DT_DOUBLE, ops::Const(root, 3), Options(false, PartialShape::Unknown(), "twice"));
  Output f = ops::TensorArrayWrite(root, ta.handle, ops::Const(root, 1), ops::Const(root, 1.0), ta.flow);
  Output again = ops::TensorArrayWrite(root, ta.handle, ops::Const(root, 1), ops::Const(root, 2.0), f);
  Output other = ops::TensorArrayWrite(root, ta.handle, ops::Const(root, 2), ops::Const(root, 3.0), f);
  Output stack = ops::TensorArrayStack(root, ta.handle, other, DT_DOUBLE);
  Output scattered =
      ops::TensorArrayScatter(root, ta.handle, ops::Const(root, {0, 1}), ops::Const(root, Doubles({4, 5}, {2})), f);
  ASSERT_TRUE(root.ok()) << root.status();
  Session sess;
  for (const Output& twice : {again, scattered}) {
    auto r = sess.Run({twice});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("TensorArray 'twice': cannot write index 1: it has already been written"),
              std::string::npos)
        << r.status();
  }
  // Index 0, never written, reads as zeros: the written elements share the shape [].
  auto r = sess.Run({stack});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(std::vector<double>((*r)[0].flat<double>().begin(), (*r)[0].flat<double>().end()),
            (std::vector<double>{0, 1, 3}));
}

// out[t] = x * (t + 1) for t < n in a loop, stacked, and d(sum out^2)/dx.
struct WriteLoop {
  Output x, stacked, grad;
};
WriteLoop BuildWriteLoop(const Scope& root, int n, int64_t width) {
  WriteLoop w;
  w.x = ops::Placeholder(root, DT_DOUBLE, PartialShape({width}));
  auto ta = ops::TensorArray(root, DT_DOUBLE, ops::Const(root, n), Options(false, PartialShape({width})));
  ops::WhileOptions opts;
  opts.invariants = {ta.handle, w.x};
  auto out = ops::WhileLoop(
      root, {ops::Const(root, 0), ta.flow},
      [n](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(c, v[0], ops::Const(c, n)); },
      [](const Scope& b, const Outs& v) -> StatusOrOuts {
        Output scale = ops::Cast(b, ops::Add(b, v[0], ops::Const(b, 1)), DT_DOUBLE);
        return Outs{ops::Add(b, v[0], ops::Const(b, 1)),
                    ops::TensorArrayWrite(b, v[2], v[0], ops::Mul(b, v[3], scale), v[1])};
      },
      opts);
  EXPECT_TRUE(out.ok()) << out.status();
  w.stacked = ops::TensorArrayStack(root, ta.handle, (*out)[1], DT_DOUBLE, PartialShape({width}));
  auto g = Gradients(root, {ops::Sum(root, ops::Square(root, w.stacked), {0, 1})}, {w.x});
  EXPECT_TRUE(g.ok()) << g.status();
  w.grad = (*g)[0];
  return w;
}

TEST(TensorArray, ALoopOfNWritesCopiesEachElementOnce) {
  // A write stores the element; stack copies each once. With value
  // semantics every write copied the whole array (N^2 / 2 elements).
  constexpr int64_t kWidth = 256;
  std::vector<int64_t> copied;
  for (int n : {16, 64}) {
    Scope root = Scope::NewRootScope();
    WriteLoop w = BuildWriteLoop(root, n, kWidth);
    ASSERT_TRUE(root.ok()) << root.status();
    Session sess;
    Tensor x(DT_DOUBLE, TensorShape({kWidth}));
    for (int64_t i = 0; i < kWidth; ++i) x.flat<double>()[static_cast<size_t>(i)] = 0.01 * static_cast<double>(i);
    const int64_t before = TensorArray::BytesCopied();
    auto r = sess.Run({{w.x, x}}, {w.stacked, w.grad});
    ASSERT_TRUE(r.ok()) << r.status();
    copied.push_back(TensorArray::BytesCopied() - before);
    // Values: out[t] = x (t + 1); d/dx sum_t (x (t+1))^2 = 2 x sum_t (t+1)^2.
    EXPECT_DOUBLE_EQ((*r)[0].flat<double>()[static_cast<size_t>((n - 1) * kWidth + 3)], 0.03 * n);
    double sq = 0;
    for (int t = 1; t <= n; ++t) sq += t * t;
    EXPECT_NEAR((*r)[1].flat<double>()[3], 2 * 0.03 * sq, 1e-9);
  }
  const int64_t element = kWidth * static_cast<int64_t>(sizeof(double));
  EXPECT_EQ(copied[0], 16 * element);  // the stack's copy of each element, nothing per write
  EXPECT_EQ(copied[1], 4 * copied[0]);
}

TEST(TensorArray, GradientThroughALoopThatReadsWritesAndStacks) {
  // acc = sin(acc) * 0.7 + in[t]; out[t] = acc * acc; y = sum(stack(out)) + sum(acc).
  for (bool dynamic : {false, true}) {
    grad_test::CheckGradient(
        {grad_test::Random(grad_test::S({4, 3}), -1, 1, 7)},
        [dynamic](const Scope& s, const Outs& xs) {
          auto in = ops::TensorArray(s, DT_DOUBLE, ops::Const(s, 4));
          Output in_flow = ops::TensorArrayUnstack(s, in.handle, xs[0], in.flow);
          auto out =
              ops::TensorArray(s, DT_DOUBLE, ops::Const(s, dynamic ? 0 : 4), Options(dynamic, PartialShape({3})));
          ops::WhileOptions opts;
          opts.invariants = {in.handle, in_flow, out.handle};
          opts.parallel_iterations = 3;
          auto loop = ops::WhileLoop(
              s, {ops::Const(s, 0), ops::Fill(s, {3}, ops::Const(s, 0.0)), out.flow},
              [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> {
                return ops::Less(c, v[0], ops::Const(c, 4));
              },
              [](const Scope& b, const Outs& v) -> StatusOrOuts {
                Output xt = ops::TensorArrayRead(b, v[3], v[0], v[4], DT_DOUBLE, PartialShape({3}));
                Output acc = ops::Add(b, ops::Mul(b, grad_test::Op(b, "Sin", {v[1]}), ops::Const(b, 0.7)), xt);
                return Outs{ops::Add(b, v[0], ops::Const(b, 1)), acc,
                            ops::TensorArrayWrite(b, v[5], v[0], ops::Mul(b, acc, acc), v[2])};
              },
              opts);
          EXPECT_TRUE(loop.ok()) << loop.status();
          Output stacked = ops::TensorArrayStack(s, out.handle, (*loop)[2], DT_DOUBLE, PartialShape({3}));
          return ops::Add(s, ops::Sum(s, stacked, {0, 1}), ops::Sum(s, (*loop)[1], {0}));
        },
        dynamic ? "dynamic_size output array" : "fixed-size output array", grad_test::kTol,
        /*require_gradient=*/true);
  }
}

TEST(TensorArray, GradientOfALoopReadingWhatItWroteBefore) {
  // rec[0] = x[0]; rec[t] = sin(rec[t-1]) * x[t]: a dynamic_size array the
  // body reads and writes. y = sum(stack(rec)^2).
  grad_test::CheckGradient(
      {grad_test::Random(grad_test::S({4, 2}), -1, 1, 9)},
      [](const Scope& s, const Outs& xs) {
        auto in = ops::TensorArray(s, DT_DOUBLE, ops::Const(s, 4));
        Output in_flow = ops::TensorArrayUnstack(s, in.handle, xs[0], in.flow);
        auto rec = ops::TensorArray(s, DT_DOUBLE, ops::Const(s, 1), Options(true));
        Output first = ops::TensorArrayRead(s, in.handle, ops::Const(s, 0), in_flow, DT_DOUBLE, PartialShape({2}));
        Output rec_flow = ops::TensorArrayWrite(s, rec.handle, ops::Const(s, 0), first, rec.flow);
        ops::WhileOptions opts;
        opts.invariants = {in.handle, in_flow, rec.handle};
        auto loop = ops::WhileLoop(
            s, {ops::Const(s, 1), rec_flow},
            [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> {
              return ops::Less(c, v[0], ops::Const(c, 4));
            },
            [](const Scope& b, const Outs& v) -> StatusOrOuts {
              Output prev = ops::TensorArrayRead(b, v[4], ops::Sub(b, v[0], ops::Const(b, 1)), v[1], DT_DOUBLE,
                                                 PartialShape({2}));
              Output xt = ops::TensorArrayRead(b, v[2], v[0], v[3], DT_DOUBLE, PartialShape({2}));
              Output next = ops::Mul(b, grad_test::Op(b, "Sin", {prev}), xt);
              return Outs{ops::Add(b, v[0], ops::Const(b, 1)), ops::TensorArrayWrite(b, v[4], v[0], next, v[1])};
            },
            opts);
        EXPECT_TRUE(loop.ok()) << loop.status();
        Output stacked = ops::TensorArrayStack(s, rec.handle, (*loop)[1], DT_DOUBLE, PartialShape({2}));
        return ops::Sum(s, ops::Square(s, stacked), {0, 1});
      },
      "dynamic_size array read and written in the body", grad_test::kTol, /*require_gradient=*/true);
}

TEST(TensorArray, EachGradientsCallHasItsOwnGradientArray) {
  // Two Gradients calls of one loss, run in one step: a shared gradient
  // array would sum both calls' gradients into each.
  Scope root = Scope::NewRootScope();
  WriteLoop w = BuildWriteLoop(root, 3, 2);
  auto again = Gradients(root, {ops::Sum(root, ops::Square(root, w.stacked), {0, 1})}, {w.x});
  ASSERT_TRUE(again.ok()) << again.status();
  Session sess;
  auto r = sess.Run({{w.x, Doubles({0.5, -1.0}, {2})}}, {w.grad, (*again)[0]});
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR((*r)[i].flat<double>()[0], 2 * 0.5 * 14, 1e-12);  // 1 + 4 + 9 = 14
    EXPECT_NEAR((*r)[i].flat<double>()[1], 2 * -1.0 * 14, 1e-12);
  }
}

TEST(TensorArray, RunsWithTheSameStepIdDoNotFreeEachOthersArrays) {
  // Two in-process sessions share the process's device and each numbers its
  // steps from 1, so their first runs share a step container: the run that
  // ends first must leave the other's array alone.
  Scope root = Scope::NewRootScope();
  auto ta = ops::TensorArray(root, DT_DOUBLE, ops::Const(root, 1));
  Output written =
      ops::TensorArrayWrite(root, ta.handle, ops::Const(root, 0), ops::Const(root, Doubles({42}, {1})), ta.flow);
  // The read waits at a gate: an element of a queue.
  const std::vector<DataType> types = {DT_FLOAT};
  Output queue(ops::Raw(root, "FIFOQueue", {}, {{"component_types", types}}), 0, root);
  Operation gate = ops::Raw(root, "QueueDequeue", {queue}, {{"component_types", types}});
  Output read =
      ops::TensorArrayRead(root.WithControlDependencies({gate}), ta.handle, ops::Const(root, 0), written, DT_DOUBLE);
  Operation open = ops::Raw(root, "QueueEnqueue", {queue, ops::Const(root, 1.0f)}, ops::Attrs{});
  ASSERT_TRUE(root.ok()) << root.status();
  Session a, b;
  absl::StatusOr<std::vector<Tensor>> first;
  std::thread run_a([&] { first = a.Run({read}); });
  // Step 1 of session a has made its array and waits at the gate.
  ResourceMgr* rm = LocalCpuDevice()->resource_manager();
  auto holds_array = [&] {
    std::vector<std::string> c = rm->Containers();
    return std::find(c.begin(), c.end(), StepContainer(1)) != c.end();
  };
  EXPECT_TRUE(WaitUntil([&] { return StepContainerHoldersForTest(rm, 1) == 1 && holds_array(); }, absl::Seconds(30)));
  // Step 1 of session b: the same graph's write, which ends at once.
  auto second = b.Run({written});
  EXPECT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(holds_array()) << "step 1 of session b dropped the array of step 1 of session a";
  auto opened = a.Run({}, {}, {open});
  EXPECT_TRUE(opened.ok()) << opened.status();
  run_a.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)[0].flat<double>()[0], 42);
  // The last run of the id dropped the container.
  EXPECT_EQ(StepContainerHoldersForTest(rm, 1), 0);
  EXPECT_FALSE(holds_array());
}

TEST(WhileLoopRandom, TheGradientUsesTheForwardLoopsDraws) {
  // acc += x * u_t with u_t = RandomUniform([3]) drawn in the body: the
  // gradient d(sum acc)/dx is sum_t u_t of the same step's draws, not of new
  // ones drawn when the body is rebuilt for the gradient.
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({3}));
  auto draws = ops::TensorArray(root, DT_FLOAT, ops::Const(root, 5), Options(false, PartialShape({3})));
  ops::WhileOptions opts;
  opts.invariants = {x, draws.handle};
  auto loop = ops::WhileLoop(
      root, {ops::Const(root, 0), ops::Fill(root, {3}, ops::Const(root, 0.0f)), draws.flow},
      [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(c, v[0], ops::Const(c, 5)); },
      [](const Scope& b, const Outs& v) -> StatusOrOuts {
        Output u = ops::RandomUniform(b, {3});
        return Outs{ops::Add(b, v[0], ops::Const(b, 1)), ops::Add(b, v[1], ops::Mul(b, v[3], u)),
                    ops::TensorArrayWrite(b, v[4], v[0], u, v[2])};
      },
      opts);
  ASSERT_TRUE(loop.ok()) << loop.status();
  Output drawn = ops::TensorArrayStack(root, draws.handle, (*loop)[2], DT_FLOAT, PartialShape({3}));
  auto g = Gradients(root, {ops::Sum(root, (*loop)[1], {0})}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  Session sess;
  for (int run = 0; run < 2; ++run) {
    auto r = sess.Run({{x, Tensor::FromVector<float>({1, 2, 3})}}, {drawn, (*g)[0]});
    ASSERT_TRUE(r.ok()) << r.status();
    for (int j = 0; j < 3; ++j) {
      float sum = 0;
      for (int t = 0; t < 5; ++t) sum += (*r)[0].flat<float>()[static_cast<size_t>(t * 3 + j)];
      EXPECT_NEAR((*r)[1].flat<float>()[static_cast<size_t>(j)], sum, 1e-5) << "run " << run << ", element " << j;
    }
  }
}

TEST(WhileLoopRandom, ADrawInACondBranchIsReplayedForTheGradient) {
  // acc += cond(t < 3, x * u_t, x * 2) with u_t = RandomUniform([3]) drawn
  // in the true branch: d(sum acc)/dx = sum of u_t over t < 3 of the same
  // step (plus 2 for t = 3, 4), not of new draws.
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({3}));
  auto draws = ops::TensorArray(root, DT_FLOAT, ops::Const(root, 5), Options(false, PartialShape({3})));
  ops::WhileOptions opts;
  opts.invariants = {x, draws.handle};
  auto loop = ops::WhileLoop(
      root, {ops::Const(root, 0), ops::Fill(root, {3}, ops::Const(root, 0.0f)), draws.flow},
      [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(c, v[0], ops::Const(c, 5)); },
      [](const Scope& b, const Outs& v) -> StatusOrOuts {
        auto picked = ops::Cond(
            b, ops::Less(b, v[0], ops::Const(b, 3)), {v[3]},
            [](const Scope& s, const Outs& in) -> StatusOrOuts {
              Output u = ops::RandomUniform(s, {3});
              return Outs{ops::Mul(s, in[0], u), u};
            },
            [](const Scope& s, const Outs& in) -> StatusOrOuts {
              return Outs{ops::Mul(s, in[0], ops::Const(s, 2.0f)), ops::Fill(s, {3}, ops::Const(s, 0.0f))};
            });
        RETURN_IF_ERROR(picked.status());
        return Outs{ops::Add(b, v[0], ops::Const(b, 1)), ops::Add(b, v[1], (*picked)[0]),
                    ops::TensorArrayWrite(b, v[4], v[0], (*picked)[1], v[2])};
      },
      opts);
  ASSERT_TRUE(loop.ok()) << loop.status();
  Output drawn = ops::TensorArrayStack(root, draws.handle, (*loop)[2], DT_FLOAT, PartialShape({3}));
  auto g = Gradients(root, {ops::Sum(root, (*loop)[1], {0})}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  Session sess;
  for (int run = 0; run < 2; ++run) {
    auto r = sess.Run({{x, Tensor::FromVector<float>({1, 2, 3})}}, {drawn, (*g)[0]});
    ASSERT_TRUE(r.ok()) << r.status();
    for (int j = 0; j < 3; ++j) {
      float sum = 2 * 2;  // t = 3, 4
      for (int t = 0; t < 3; ++t) sum += (*r)[0].flat<float>()[static_cast<size_t>(t * 3 + j)];
      EXPECT_NEAR((*r)[1].flat<float>()[static_cast<size_t>(j)], sum, 1e-5) << "run " << run << ", element " << j;
    }
  }
}

TEST(WhileLoopRandom, ADrawInANestedLoopIsReplayedForTheOuterLoopsGradient) {
  // for t < 3: for j < 2: acc += x * u with u = RandomUniform([3]) drawn in
  // the inner body: d(sum acc)/dx is the sum of the six draws of the same
  // step, though the outer loop's gradient rebuilds the inner loop.
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({3}));
  auto draws = ops::TensorArray(root, DT_FLOAT, ops::Const(root, 6), Options(false, PartialShape({3})));
  ops::WhileOptions outer;
  outer.invariants = {x, draws.handle};
  auto loop = ops::WhileLoop(
      root, {ops::Const(root, 0), ops::Fill(root, {3}, ops::Const(root, 0.0f)), draws.flow},
      [](const Scope& c, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(c, v[0], ops::Const(c, 3)); },
      [](const Scope& b, const Outs& v) -> StatusOrOuts {
        ops::WhileOptions inner;
        inner.name = "inner";
        inner.invariants = {v[3], v[4], v[0]};
        auto in = ops::WhileLoop(
            b, {ops::Const(b, 0), v[1], v[2]},
            [](const Scope& c, const Outs& w) -> absl::StatusOr<Output> {
              return ops::Less(c, w[0], ops::Const(c, 2));
            },
            [](const Scope& d, const Outs& w) -> StatusOrOuts {
              Output u = ops::RandomUniform(d, {3});
              Output index = ops::Add(d, ops::Mul(d, w[5], ops::Const(d, 2)), w[0]);
              return Outs{ops::Add(d, w[0], ops::Const(d, 1)), ops::Add(d, w[1], ops::Mul(d, w[3], u)),
                          ops::TensorArrayWrite(d, w[4], index, u, w[2])};
            },
            inner);
        RETURN_IF_ERROR(in.status());
        return Outs{ops::Add(b, v[0], ops::Const(b, 1)), (*in)[1], (*in)[2]};
      },
      outer);
  ASSERT_TRUE(loop.ok()) << loop.status();
  Output drawn = ops::TensorArrayStack(root, draws.handle, (*loop)[2], DT_FLOAT, PartialShape({3}));
  auto g = Gradients(root, {ops::Sum(root, (*loop)[1], {0})}, {x});
  ASSERT_TRUE(g.ok()) << g.status();
  Session sess;
  for (int run = 0; run < 2; ++run) {
    auto r = sess.Run({{x, Tensor::FromVector<float>({1, 2, 3})}}, {drawn, (*g)[0]});
    ASSERT_TRUE(r.ok()) << r.status();
    for (int j = 0; j < 3; ++j) {
      float sum = 0;
      for (int t = 0; t < 6; ++t) sum += (*r)[0].flat<float>()[static_cast<size_t>(t * 3 + j)];
      EXPECT_NEAR((*r)[1].flat<float>()[static_cast<size_t>(j)], sum, 1e-5) << "run " << run << ", element " << j;
    }
  }
}

}  // namespace
}  // namespace distflow
