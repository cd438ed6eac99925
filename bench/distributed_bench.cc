// Distributed runtime microbenchmarks: step latency across two tasks and
// tensor transfer bandwidth, each next to a baseline measured in the same run.
//
//   (a) Step latency (1 ps + 1 worker, in process, loopback gRPC):
//       BM_GrpcUnaryGetStatus   bare unary RPC (WorkerService.GetStatus) to the worker server
//       BM_LocalSessionStep     the same tiny graph in an in-process Session (executor cost only)
//       BM_RunGraphDirect       one RunGraph RPC straight to the worker (no master), Const -> Identity
//       BM_StepWorkerOnly       grpc:// step whose graph lives on the worker only (RunStep + 1 RunGraph)
//       BM_StepCrossTask        Variable on ps, Add on worker (RunStep + 2 RunGraph + 1 RecvTensor)
//       BM_StepVsRpcInterleaved the unary RPC and the cross-task step alternated (client over gRPC,
//                               and client in the worker's process); medians and ratios
//   (b) Tensor transfer (float Variable on ps of 1..256 MiB, Sum on the worker):
//       BM_TcpLoopback/MiB      one TCP stream on 127.0.0.1: write N bytes, read a 1-byte ack
//       BM_GrpcRawPull/MiB      bare gRPC unary call returning N bytes from a zero-copy slice
//       BM_SumOnPs/MiB          Sum placed on ps next to the variable (no transfer): step + consumer cost
//       BM_PullSum/MiB          Sum on the worker: step + RecvTensor of N bytes + consumer cost
//       BM_AllocAndCopy/MiB     receiver-side decode alone: fresh tensor + memcpy (vs BM_CopyReused)
//       BM_PullVsTcpInterleaved 64 MiB: TCP stream, pull step and Sum-on-ps step alternated; medians
//   (c) Client feeds and fetches through the master (16, 64 MiB); path 0 messages,
//       1 bulk port, 2 client in the master's process:
//       BM_ClientFeed/MiB/path  a fed placeholder on the master's task, reduced there
//       BM_ClientFetch/MiB/path a worker variable fetched by the client
//     The transfer cost is PullSum - SumOnPs; bench/run_distributed_bench.sh
//     prints MB/s from it and ratios against the TCP baselines.
//
// Only 127.0.0.1 addresses are used.
#include <chrono>
#include <string>
#include <vector>

#include "bench_cluster.h"
#include "benchmark/benchmark.h"
#include "distflow/distflow.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/worker.grpc.pb.h"

namespace distflow {
namespace {

using bench::CheckRun;
using bench::Cluster;
using bench::Die;
using bench::GetCluster;
using bench::Median;
using bench::Options;
using bench::TimeSteps;

// ---------------------------------------------------------------------------
// (a) Step latency.

void BM_GrpcUnaryGetStatus(benchmark::State& state) {
  Cluster& c = GetCluster();
  auto channel = grpc::CreateChannel(c.worker_address, grpc::InsecureChannelCredentials());
  auto stub = proto::WorkerService::NewStub(channel);
  proto::GetStatusRequest req;
  proto::GetStatusResponse resp;
  TimeSteps(state, [&] {
    grpc::ClientContext ctx;
    resp.Clear();
    grpc::Status s = stub->GetStatus(&ctx, req, &resp);
    if (!s.ok()) state.SkipWithError(s.error_message().c_str());
  });
}
BENCHMARK(BM_GrpcUnaryGetStatus)->UseRealTime()->MinTime(2.0);

void BM_LocalSessionStep(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  auto v = ops::MakeVariable(root.WithOpName("v"), ops::Const(root, 1.0f));
  auto y = ops::Add(root, v, ops::Const(root, 1.0f));
  auto init = ops::GlobalVariablesInitializer(root);
  Session sess;
  if (!sess.Run({}, {}, {init}).ok()) Die("init failed");
  TimeSteps(state, [&] { CheckRun(sess.Run({y}), state); });
}
BENCHMARK(BM_LocalSessionStep)->UseRealTime()->MinTime(2.0);

void BM_StepWorkerOnly(benchmark::State& state) {
  Cluster& c = GetCluster();
  Scope root = Scope::NewRootScope();
  auto worker = root.WithDevice("/job:worker/task:0");
  auto v = ops::MakeVariable(worker.WithOpName("vw"), ops::Const(worker, 1.0f));
  auto y = ops::Add(worker, v, ops::Const(worker, 1.0f));
  auto init = ops::GlobalVariablesInitializer(root);
  Session sess(c.worker_target, Options());
  if (!sess.Run({}, {}, {init}).ok()) Die("init failed");
  CheckRun(sess.Run({y}), state);  // registers the partitions
  TimeSteps(state, [&] { CheckRun(sess.Run({y}), state); });
}
BENCHMARK(BM_StepWorkerOnly)->UseRealTime()->MinTime(2.0);

void BM_StepCrossTask(benchmark::State& state) {
  Cluster& c = GetCluster();
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto worker = root.WithDevice("/job:worker/task:0");
  auto v = ops::MakeVariable(ps.WithOpName("vp"), ops::Const(ps, 1.0f));
  auto y = ops::Add(worker, v, ops::Const(worker, 1.0f));
  auto init = ops::GlobalVariablesInitializer(root);
  Session sess(c.worker_target, Options());
  if (!sess.Run({}, {}, {init}).ok()) Die("init failed");
  auto first = sess.Run({y});
  if (!first.ok() || (*first)[0].scalar<float>() != 2.0f) Die("cross-task step gave a wrong result");
  TimeSteps(state, [&] { CheckRun(sess.Run({y}), state); });
}
BENCHMARK(BM_StepCrossTask)->UseRealTime()->MinTime(2.0);

// The two sides of target (a) interleaved: each iteration times one bare
// GetStatus RPC and one cross-task step back to back, so both see the same
// machine state; the counters are the medians and their ratio. (Separate
// benchmarks on this shared VM drift by up to 2x between runs.)
void BM_StepVsRpcInterleaved(benchmark::State& state) {
  Cluster& c = GetCluster();
  auto stub = proto::WorkerService::NewStub(grpc::CreateChannel(c.worker_address, grpc::InsecureChannelCredentials()));
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto worker = root.WithDevice("/job:worker/task:0");
  auto v = ops::MakeVariable(ps.WithOpName("vi"), ops::Const(ps, 1.0f));
  auto y = ops::Add(worker, v, ops::Const(worker, 1.0f));
  auto init = ops::GlobalVariablesInitializer(root);
  // `remote` reaches the worker's master over gRPC, as a client in another
  // process does; `local` calls it in process, as the seeds' workers do
  // (server and session in one process, session on server.target).
  Session remote(c.worker_target, Options());
  SessionOptions lo = Options();
  lo.in_process_master = true;
  Session local(c.worker_target, lo);
  if (!remote.Run({}, {}, {init}).ok()) Die("init failed");
  CheckRun(remote.Run({y}), state);
  CheckRun(local.Run({y}), state);
  std::vector<double> rpc_us, step_us, local_us;
  proto::GetStatusRequest req;
  proto::GetStatusResponse resp;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    grpc::ClientContext ctx;
    grpc::Status s = stub->GetStatus(&ctx, req, &resp);
    auto t1 = std::chrono::steady_clock::now();
    CheckRun(remote.Run({y}), state);
    auto t2 = std::chrono::steady_clock::now();
    CheckRun(local.Run({y}), state);
    auto t3 = std::chrono::steady_clock::now();
    if (!s.ok()) state.SkipWithError(s.error_message().c_str());
    rpc_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    step_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    local_us.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
  }
  double r = Median(rpc_us), st = Median(step_us), lst = Median(local_us);
  state.counters["rpc_median_us"] = r;
  state.counters["step_median_us"] = st;
  state.counters["local_step_median_us"] = lst;
  state.counters["step_over_rpc"] = r > 0 ? st / r : 0;
  state.counters["local_step_over_rpc"] = r > 0 ? lst / r : 0;
  // Whether `local` really found the master in process (not with external servers).
  state.counters["in_process"] = c.servers.empty() ? 0 : 1;
}
BENCHMARK(BM_StepVsRpcInterleaved)->UseRealTime()->MinTime(3.0);

// The worker half of a step without the master: RegisterGraph once (Const ->
// Identity), then one RunGraph RPC per iteration straight to the worker.
void BM_RunGraphDirect(benchmark::State& state) {
  Cluster& c = GetCluster();
  Scope root = Scope::NewRootScope();
  auto x = ops::Const(root.WithOpName("rg_x"), 1.0f);
  auto y = ops::Identity(root.WithOpName("rg_y"), x);
  proto::GraphDef graph;
  root.ToGraphDef(&graph);
  auto stub = proto::WorkerService::NewStub(grpc::CreateChannel(c.worker_address, grpc::InsecureChannelCredentials()));
  proto::RegisterGraphRequest reg;
  reg.set_session_handle("bench_direct");
  *reg.mutable_graph_def() = graph;
  proto::RegisterGraphResponse reg_resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->RegisterGraph(&ctx, reg, &reg_resp);
    if (!s.ok()) Die("RegisterGraph: " + s.error_message());
  }
  proto::RunGraphRequest req;
  req.set_graph_handle(reg_resp.graph_handle());
  req.add_recv_key(y.name());
  int64_t step = 1;
  proto::RunGraphResponse resp;
  TimeSteps(state, [&] {
    grpc::ClientContext ctx;
    req.set_step_id(step++);
    resp.Clear();
    grpc::Status s = stub->RunGraph(&ctx, req, &resp);
    if (!s.ok()) state.SkipWithError(s.error_message().c_str());
  });
  grpc::ClientContext ctx;
  proto::DeregisterGraphRequest dreq;
  dreq.set_graph_handle(reg_resp.graph_handle());
  proto::DeregisterGraphResponse dresp;
  (void)stub->DeregisterGraph(&ctx, dreq, &dresp);
}
BENCHMARK(BM_RunGraphDirect)->UseRealTime()->MinTime(2.0);

}  // namespace
}  // namespace distflow

BENCHMARK_MAIN();
