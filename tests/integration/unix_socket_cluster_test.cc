// gRPC between tasks of one host over abstract Unix-domain sockets
// (rpc/unix_socket.h) on a real in-process cluster (1 ps + 1 worker): the
// calls between the worker and the ps (RunGraph, RecvTensor both ways) go
// over the peer's socket once the caller has asked for it, as the servers
// see them arrive (distflow_rpc_server_calls_total{transport}, from the
// peer address gRPC gives each call); with DISTFLOW_UNIX_SOCKETS=0 the ps
// listens on no socket and every call stays on TCP. Training gives the
// same weights either way.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/wait_until.h"
#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"
#include "gtest/gtest.h"
#include "rpc/worker_cache.h"
#include "server/grpc_server.h"

namespace distflow {
namespace {

constexpr char kPs[] = "/job:ps/replica:0/task:0";
constexpr char kWorker[] = "/job:worker/replica:0/task:0";
constexpr int kSteps = 6;

double CallsOver(const char* transport) {
  return Metrics::Global()->GetCounter("distflow_rpc_server_calls_total", "", {{"transport", transport}})->value();
}

struct Trained {
  std::string ps_socket;                 // the ps's abstract socket, "" for none
  std::string transport;                 // how the worker dials the ps after its first steps
  double unix_calls = 0, tcp_calls = 0;  // answered during the last kSteps steps
  float w = 0;
};

// Fits w (on the ps) to y = 3x from the worker: 2 steps, then (once the
// worker's way to the ps is settled) kSteps counted ones.
void Train(bool unix_sockets, Trained* out) {
  if (unix_sockets) {
    setenv("DISTFLOW_UNIX_SOCKETS", "1", 1);
  } else {
    setenv("DISTFLOW_UNIX_SOCKETS", "0", 1);
  }
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec);
  unsetenv("DISTFLOW_UNIX_SOCKETS");
  ASSERT_TRUE(servers.ok()) << servers.status();
  Server* ps = nullptr;
  Server* worker = nullptr;
  for (auto& s : *servers) (s->task_name() == kPs ? ps : worker) = s.get();
  ASSERT_TRUE(ps != nullptr && worker != nullptr);
  out->ps_socket = ps->impl()->unix_socket();

  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice("/job:ps/task:0");
  Scope on_worker = root.WithDevice("/job:worker/task:0");
  Output w = ops::MakeVariable(on_ps.WithOpName("w"), ops::Const(on_ps, 0.5f));
  Output x = ops::Const(on_worker, {1.f, 2.f, 3.f}, TensorShape({3}));
  Output y = ops::Const(on_worker, {3.f, 6.f, 9.f}, TensorShape({3}));
  Output diff = ops::Sub(on_worker, ops::Mul(on_worker, w, x), y);
  Output loss = ops::Mean(on_worker, ops::Mul(on_worker, diff, diff), {0});
  GradientDescentOptimizer sgd(0.02);
  absl::StatusOr<Operation> train = sgd.Minimize(root, loss);
  ASSERT_TRUE(train.ok()) << train.status();
  Operation init = ops::GlobalVariablesInitializer(root);

  SessionOptions o;
  o.wait_for_cluster_ms = 20000;
  Session sess(worker->target(), o);
  ASSERT_TRUE(sess.Run({}, {}, {init}).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  // The worker calls the ps (RunGraph, its reads of w), the ps the worker
  // (its fetch of the gradient): both ways settle.
  WorkerCache* to_ps = worker->impl()->worker_cache();
  WorkerCache* to_worker = ps->impl()->worker_cache();
  const std::string settled = unix_sockets ? "unix" : "tcp";
  EXPECT_TRUE(
      WaitUntil([&] { return to_ps->TransportOf(kPs) == settled && to_worker->TransportOf(kWorker) == settled; },
                absl::Seconds(30)))
      << "the worker dials the ps over " << to_ps->TransportOf(kPs) << ", the ps the worker over "
      << to_worker->TransportOf(kWorker);
  out->transport = to_ps->TransportOf(kPs);

  const double unix_before = CallsOver("unix"), tcp_before = CallsOver("tcp");
  for (int i = 0; i < kSteps; ++i) ASSERT_TRUE(sess.Run({}, {}, {*train}).ok());
  out->unix_calls = CallsOver("unix") - unix_before;
  out->tcp_calls = CallsOver("tcp") - tcp_before;
  auto got = sess.Run({w});
  ASSERT_TRUE(got.ok()) << got.status();
  out->w = (*got)[0].scalar<float>();
}

TEST(UnixSockets, SameHostTasksCallEachOtherOverTheSocketUnlessTurnedOff) {
  Trained on, off;
  {
    SCOPED_TRACE("on");
    Train(true, &on);
  }
  {
    SCOPED_TRACE("DISTFLOW_UNIX_SOCKETS=0");
    Train(false, &off);
  }
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_FALSE(on.ps_socket.empty()) << "the ps listens on an abstract socket";
  EXPECT_EQ(on.transport, "unix");
  // Every step calls the ps at least once (RunGraph); none over TCP.
  EXPECT_GE(on.unix_calls, kSteps);
  EXPECT_EQ(on.tcp_calls, 0);

  EXPECT_EQ(off.ps_socket, "") << "turned off: no socket";
  EXPECT_EQ(off.transport, "tcp");
  EXPECT_EQ(off.unix_calls, 0);
  EXPECT_GE(off.tcp_calls, kSteps);

  EXPECT_NE(on.w, 0.5f) << "training moved w";
  EXPECT_EQ(on.w, off.w) << "the same steps give the same weights over either transport";
}

}  // namespace
}  // namespace distflow
