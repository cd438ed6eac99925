// The gRPC calls one training step of the README's job makes, on a real
// in-process cluster (1 ps + 1 worker, gRPC on loopback, shared memory for
// the large tensors): the graph of examples/mnist_distributed.cc (the book's
// CNN, Adam, the global step, the job's stop flag read after the step, a
// MonitoredSession), asynchronous, with its variable prefetching and with
// deferred updates too. Calls are counted as the servers answer them
// (distflow_rpc_server_handled_total), over several steps after the first
// (which plans the step), so a call still in flight at either end moves the
// average by a fraction only. docs/PERFORMANCE.md, "gRPC calls per worker
// step", explains each call.
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/metrics.h"
#include "distflow/distflow.h"
#include "distflow/train/defer_updates.h"
#include "distflow/train/layers.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/prefetch.h"
#include "distflow/train/replica_device_setter.h"
#include "distflow/train/supervisor.h"
#include "gtest/gtest.h"
#include "worker/read_prefetcher.h"

namespace distflow {
namespace {

// Calls of `method` ("RunGraph") this process's servers answered.
double Answered(const std::string& method) {
  return Metrics::Global()
      ->GetCounter("distflow_rpc_server_handled_total", "",
                   {{"method", "/distflow.proto.WorkerService/" + method}, {"code", "OK"}})
      ->value();
}

struct Calls {
  double run_graph = 0, recv_tensor = 0;
  double prefetched = 0;  // variable reads answered from the previous step
};

struct Mode {
  bool prefetch = false, defer = false;
};

class StepCalls : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = MakeLocalClusterSpec(1, 1);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    auto servers = StartLocalCluster(spec_);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    for (auto& s : servers_)
      if (s->task_name() == "/job:worker/replica:0/task:0") target_ = s->target();
    ASSERT_FALSE(target_.empty());
  }

  // The README job's worker graph and steps; the calls per step over
  // `steps` steps after the first two.
  Calls PerStep(Mode mode, int steps = 10) {
    Scope root = Scope::NewRootScope();
    const std::string worker_device = "/job:worker/task:0";
    Scope s = root.WithDeviceFunction(ReplicaDeviceSetter(spec_, worker_device));
    Output global_step = CreateGlobalStep(s);
    ops::VariableOptions counter;
    counter.trainable = false;
    Scope flag_scope = root.WithDevice("/job:ps/task:0");
    Output stop = ops::MakeVariable(flag_scope.WithOpName("stop_workers"), ops::Const(flag_scope, int64_t{0}), counter);
    Output images = ops::Placeholder(s.WithOpName("x-input"), DT_FLOAT, {-1, 784});
    Output labels = ops::Placeholder(s.WithOpName("y-input"), DT_INT32, {-1});
    // examples/mnist_distributed_common.cc's Network("cnn").
    Output net = ops::Reshape(s, images, {-1, 28, 28, 1});
    net = layers::conv2d(s, net, 32, {5, 5}, 1, "SAME", layers::kRelu, "conv1");
    net = layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool1");
    net = layers::conv2d(s, net, 64, {5, 5}, 1, "SAME", layers::kRelu, "conv2");
    net = layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool2");
    net = layers::flatten(s, net, "flatten");
    net = layers::fully_connected(s, net, 500, layers::kRelu, "fully_connected");
    Output logits = layers::fully_connected(s, net, 10, layers::kNoActivation, "pred");
    auto xent = ops::Raw(s, "SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
    Output loss = ops::Mean(s, Output(xent, 0, s), {0});
    AdamOptimizer adam(1e-4);
    absl::StatusOr<Operation> train = adam.Minimize(root, loss, &global_step);
    EXPECT_TRUE(train.ok()) << train.status();
    if (!train.ok()) return {};
    Operation step = mode.defer ? DeferVariableUpdates(s, *train) : *train;
    if (mode.prefetch) step = PrefetchVariableReads(s, step);
    Output correct = ops::Equal(s, ops::ArgMax(s, logits, 1), ops::Cast(s, labels, DT_INT64));
    Output accuracy = ops::Mean(s, ops::Cast(s, correct, DT_FLOAT), {0});
    // As the example reads it: on the ps unless the step defers.
    Output stop_seen = ops::Identity((mode.defer ? s : flag_scope).WithControlDependencies({*train}), stop);
    EXPECT_TRUE(root.ok()) << root.status();

    SupervisorOptions sv;
    sv.is_chief = true;
    sv.global_step = global_step;
    sv.coordination_vars = {stop};
    sv.session_options.wait_for_cluster_ms = 60000;
    sv.session_options.device_filters = {"/job:ps", worker_device};
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<StopAtStepHook>(1000));
    auto session = MonitoredSession::Create(root, target_, sv, std::move(hooks));
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return {};
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> pixel(0, 1);
    Tensor x(DT_FLOAT, TensorShape({50, 784}));
    Tensor y(DT_INT32, TensorShape({50}));
    for (int64_t i = 0; i < x.NumElements(); ++i) x.flat<float>()[i] = pixel(rng);
    for (int64_t i = 0; i < y.NumElements(); ++i) y.flat<int32_t>()[i] = static_cast<int32_t>(i % 10);
    auto run = [&] {
      auto out = (*session)->Run({{images, x}, {labels, y}}, {accuracy, stop_seen}, {step});
      EXPECT_TRUE(out.ok()) << out.status();
      return out.ok();
    };
    for (int i = 0; i < 2; ++i)
      if (!run()) return {};
    const double run_graph = Answered("RunGraph"), recv = Answered("RecvTensor");
    const double prefetched = ReadPrefetcher::PrefetchedTotal();
    for (int i = 0; i < steps; ++i)
      if (!run()) return {};
    Calls c{(Answered("RunGraph") - run_graph) / steps, (Answered("RecvTensor") - recv) / steps,
            (ReadPrefetcher::PrefetchedTotal() - prefetched) / steps};
    std::printf("prefetch %d, defer %d: per step %.2f RunGraph, %.2f RecvTensor, %.2f prefetched reads\n",
                mode.prefetch, mode.defer, c.run_graph, c.recv_tensor, c.prefetched);
    EXPECT_GE((*session)->global_step(), steps) << "the steps trained";
    EXPECT_TRUE((*session)->Close().ok());
    return c;
  }

  ClusterSpec spec_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::string target_;
};

// Without prefetching: the ps's RunGraph; the ps's fetch of the small
// gradients, which carries the variables' values to the worker (a push: the
// largest, fully_connected's 6.3 MB weights, as a bulk ticket), and its
// fetch of the large gradient, kept apart so it leaves as soon as backprop
// makes it. The stop flag, read on the ps, waits for the updates there.
TEST_F(StepCalls, AStepOfTheReadmeJobMakesOneRunGraphAndTwoReceives) {
  Calls c = PerStep({});
  EXPECT_NEAR(c.run_graph, 1, 0.3) << "the ps's partition; the worker's own runs in memory";
  EXPECT_NEAR(c.recv_tensor, 2, 0.3);
  EXPECT_EQ(c.prefetched, 0);
}

// Prefetched, the 8 variables still ride with the gradients' fetch (one
// step's values answer the next step's reads): no call of their own. The
// marker NoOp the step runs after `train` takes no token either.
TEST_F(StepCalls, PrefetchedReadsRideWithThePsFetchOfTheGradients) {
  Calls c = PerStep({.prefetch = true});
  EXPECT_EQ(c.prefetched, 8) << "every weight of the CNN is prefetched";
  EXPECT_NEAR(c.run_graph, 1, 0.3);
  EXPECT_NEAR(c.recv_tensor, 2, 0.3);
}

// Deferring: the worker's step waits for no token from the updates.
TEST_F(StepCalls, ADeferringStepMakesOneRunGraphAndTwoReceives) {
  Calls c = PerStep({.prefetch = true, .defer = true});
  EXPECT_EQ(c.prefetched, 8);
  EXPECT_NEAR(c.run_graph, 1, 0.3);
  EXPECT_NEAR(c.recv_tensor, 2, 0.3);
}

}  // namespace
}  // namespace distflow
