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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "benchmark/benchmark.h"
#include "distflow/distflow.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/byte_buffer.h"
#include "proto/worker.grpc.pb.h"

namespace distflow {
namespace {

constexpr int64_t kMiB = 1 << 20;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "distributed_bench: %s\n", what.c_str());
  std::abort();
}

// ---------------------------------------------------------------------------
// The cluster: 1 ps + 1 worker in this process, started once.

struct Cluster {
  std::vector<std::unique_ptr<Server>> servers;
  std::string worker_target;  // grpc://127.0.0.1:PORT
  std::string worker_address;  // 127.0.0.1:PORT
};

Cluster& GetCluster() {
  static Cluster* cluster = [] {
    // DISTFLOW_BENCH_WORKER=127.0.0.1:PORT: use a cluster of separate
    // distflow-server processes (1 ps + 1 worker, started by the script)
    // instead of servers inside this process.
    if (const char* w = std::getenv("DISTFLOW_BENCH_WORKER"); w != nullptr && *w != '\0') {
      auto* c = new Cluster;
      c->worker_address = w;
      c->worker_target = std::string("grpc://") + w;
      return c;
    }
    auto spec = MakeLocalClusterSpec(1, 1);
    if (!spec.ok()) Die(spec.status().ToString());
    auto servers = StartLocalCluster(*spec);
    if (!servers.ok()) Die(servers.status().ToString());
    auto* c = new Cluster;
    c->servers = std::move(*servers);
    for (auto& s : c->servers)
      if (s->task_name() == "/job:worker/replica:0/task:0") c->worker_target = s->target();
    if (c->worker_target.empty()) Die("no worker task in the local cluster");
    c->worker_address = c->worker_target.substr(std::string("grpc://").size());
    return c;
  }();
  return *cluster;
}

// The client as if in another process: its steps reach the master over gRPC.
SessionOptions Options() {
  SessionOptions o;
  o.wait_for_cluster_ms = 20000;
  o.in_process_master = false;
  return o;
}

void CheckRun(const absl::StatusOr<std::vector<Tensor>>& out, benchmark::State& state) {
  if (!out.ok()) state.SkipWithError(std::string(out.status().message()).c_str());
}

// Voluntary + involuntary context switches of the whole process so far: the
// per-step difference counts thread hand-offs (a blocked thread woken by another).
int64_t ContextSwitches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

// Runs `step` per iteration and reports context switches per step.
template <typename Fn>
void TimeSteps(benchmark::State& state, Fn step) {
  int64_t csw0 = ContextSwitches();
  for (auto _ : state) step();
  state.counters["csw_per_step"] =
      benchmark::Counter(static_cast<double>(ContextSwitches() - csw0) / static_cast<double>(std::max<int64_t>(1, state.iterations())));
}

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
  auto median = [](std::vector<double> x) {
    if (x.empty()) return 0.0;
    std::nth_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(x.size() / 2), x.end());
    return x[x.size() / 2];
  };
  double r = median(rpc_us), st = median(step_us), lst = median(local_us);
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

// ---------------------------------------------------------------------------
// (b) Tensor transfer.

// One float Variable of `mib` MiB on ps, filled with ones, and two consumers.
struct PullGraph {
  std::unique_ptr<Session> sess;
  Output sum_on_worker, sum_on_ps;
};

PullGraph& GetPullGraph(int64_t mib) {
  static std::map<int64_t, std::unique_ptr<PullGraph>> graphs;
  auto& g = graphs[mib];
  if (g != nullptr) return *g;
  g = std::make_unique<PullGraph>();
  Cluster& c = GetCluster();
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto worker = root.WithDevice("/job:worker/task:0");
  const int64_t n = mib * kMiB / 4;
  auto v = ops::MakeVariable(ps.WithOpName("big_" + std::to_string(mib)), ops::Fill(ps, {n}, ops::Const(ps, 1.0f)));
  g->sum_on_worker = ops::Sum(worker, v, {0});
  g->sum_on_ps = ops::Sum(ps, v, {0});
  auto init = ops::GlobalVariablesInitializer(root);
  g->sess = std::make_unique<Session>(c.worker_target, Options());
  if (!g->sess->Run({}, {}, {init}).ok()) Die("init of the big variable failed");
  for (const Output& o : {g->sum_on_worker, g->sum_on_ps}) {
    auto out = g->sess->Run({o});
    if (!out.ok()) Die(std::string(out.status().message()));
    if ((*out)[0].scalar<float>() <= 0.0f) Die("wrong sum");
  }
  return *g;
}

void BM_SumOnPs(benchmark::State& state) {
  PullGraph& g = GetPullGraph(state.range(0));
  for (auto _ : state) CheckRun(g.sess->Run({g.sum_on_ps}), state);
  state.SetBytesProcessed(state.iterations() * state.range(0) * kMiB);
}

void BM_PullSum(benchmark::State& state) {
  PullGraph& g = GetPullGraph(state.range(0));
  for (auto _ : state) CheckRun(g.sess->Run({g.sum_on_worker}), state);
  state.SetBytesProcessed(state.iterations() * state.range(0) * kMiB);
}

// A generic gRPC service answering every call with `size` bytes (an 8-byte
// little-endian request) from one static buffer, zero-copy: what a perfect
// RecvTensor could do on the same gRPC stack.
class PullService : public grpc::CallbackGenericService {
 public:
  explicit PullService(size_t max) : data_(max, 1) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Reactor(this);
  }

 private:
  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    explicit Reactor(PullService* svc) : svc_(svc) { StartRead(&req_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      std::vector<grpc::Slice> slices;
      (void)req_.Dump(&slices);
      uint64_t n = 0;
      size_t got = 0;
      for (const grpc::Slice& s : slices)
        for (size_t i = 0; i < s.size() && got < 8; ++i, ++got) n |= static_cast<uint64_t>(s.begin()[i]) << (8 * got);
      n = std::min<uint64_t>(n, svc_->data_.size());
      grpc::Slice body(svc_->data_.data(), n, grpc::Slice::STATIC_SLICE);
      resp_ = grpc::ByteBuffer(&body, 1);
      StartWriteAndFinish(&resp_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    PullService* svc_;
    grpc::ByteBuffer req_, resp_;
  };
  std::vector<char> data_;
};

struct RawServer {
  std::unique_ptr<PullService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::GenericStub> stub;
};

RawServer& GetRawServer() {
  static RawServer* rs = [] {
    auto* r = new RawServer;
    r->service = std::make_unique<PullService>(256 * kMiB);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.SetMaxReceiveMessageSize(-1);
    b.SetMaxSendMessageSize(-1);
    b.RegisterCallbackGenericService(r->service.get());
    r->server = b.BuildAndStart();
    if (r->server == nullptr || port == 0) Die("cannot start the raw gRPC server");
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    auto ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
    r->stub = std::make_unique<grpc::GenericStub>(ch);
    return r;
  }();
  return *rs;
}

void BM_GrpcRawPull(benchmark::State& state) {
  RawServer& rs = GetRawServer();
  const uint64_t n = static_cast<uint64_t>(state.range(0)) * kMiB;
  char req_bytes[8];
  for (int i = 0; i < 8; ++i) req_bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  for (auto _ : state) {
    grpc::Slice s(req_bytes, 8);
    grpc::ByteBuffer req(&s, 1), resp;
    grpc::ClientContext ctx;
    absl::Notification done;
    grpc::Status st;
    rs.stub->UnaryCall(&ctx, "/bench.Pull/Get", grpc::StubOptions(), &req, &resp, [&](grpc::Status x) {
      st = x;
      done.Notify();
    });
    done.WaitForNotification();
    if (!st.ok() || resp.Length() != n) {
      state.SkipWithError(st.ok() ? "short response" : st.error_message().c_str());
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

// One TCP stream over 127.0.0.1: the client writes N bytes, the server reads
// them all and answers with one byte.
class TcpSink {
 public:
  TcpSink() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listen_fd_, 1) != 0) {
      Die("tcp bind/listen failed");
    }
    socklen_t len = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    client_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    std::thread acceptor([this] { server_fd_ = accept(listen_fd_, nullptr, nullptr); });
    if (connect(client_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Die("tcp connect failed");
    acceptor.join();
    int one = 1;
    setsockopt(client_fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(server_fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    server_ = std::thread([this] { Serve(); });
  }

  // Sends `n` bytes from `buf` and waits for the ack.
  bool Transfer(const char* buf, uint64_t n) {
    uint64_t header = n;
    if (!WriteAll(client_fd_, reinterpret_cast<const char*>(&header), 8)) return false;
    if (!WriteAll(client_fd_, buf, n)) return false;
    char ack;
    return ReadAll(client_fd_, &ack, 1);
  }

 private:
  static bool WriteAll(int fd, const char* p, uint64_t n) {
    while (n > 0) {
      ssize_t w = write(fd, p, n);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<uint64_t>(w);
    }
    return true;
  }
  static bool ReadAll(int fd, char* p, uint64_t n) {
    while (n > 0) {
      ssize_t r = read(fd, p, n);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<uint64_t>(r);
    }
    return true;
  }
  void Serve() {
    std::vector<char> sink(4 * kMiB);
    for (;;) {
      uint64_t n = 0;
      if (!ReadAll(server_fd_, reinterpret_cast<char*>(&n), 8)) return;
      while (n > 0) {
        ssize_t r = read(server_fd_, sink.data(), std::min<uint64_t>(n, sink.size()));
        if (r <= 0) return;
        n -= static_cast<uint64_t>(r);
      }
      char ack = 1;
      if (!WriteAll(server_fd_, &ack, 1)) return;
    }
  }

  int listen_fd_ = -1, client_fd_ = -1, server_fd_ = -1;
  std::thread server_;
};

void BM_TcpLoopback(benchmark::State& state) {
  static TcpSink* sink = new TcpSink;
  static std::vector<char>* buf = new std::vector<char>(256 * kMiB, 1);
  const uint64_t n = static_cast<uint64_t>(state.range(0)) * kMiB;
  for (auto _ : state) {
    if (!sink->Transfer(buf->data(), n)) {
      state.SkipWithError("tcp transfer failed");
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

// The 64 MiB pull, the same step with Sum on ps (no transfer) and a 64 MiB
// TCP stream, alternated so that machine load hits all three alike; medians.
void BM_PullVsTcpInterleaved(benchmark::State& state) {
  const int64_t mib = state.range(0);
  const uint64_t n = static_cast<uint64_t>(mib) * kMiB;
  PullGraph& g = GetPullGraph(mib);
  static TcpSink* sink = new TcpSink;
  static std::vector<char>* buf = new std::vector<char>(256 * kMiB, 1);
  std::vector<double> tcp_s, pull_s, base_s;
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    if (!sink->Transfer(buf->data(), n)) {
      state.SkipWithError("tcp transfer failed");
      break;
    }
    auto t1 = std::chrono::steady_clock::now();
    CheckRun(g.sess->Run({g.sum_on_worker}), state);
    auto t2 = std::chrono::steady_clock::now();
    CheckRun(g.sess->Run({g.sum_on_ps}), state);
    auto t3 = std::chrono::steady_clock::now();
    tcp_s.push_back(secs(t0, t1));
    pull_s.push_back(secs(t1, t2));
    base_s.push_back(secs(t2, t3));
  }
  auto median = [](std::vector<double> x) {
    if (x.empty()) return 0.0;
    std::nth_element(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(x.size() / 2), x.end());
    return x[x.size() / 2];
  };
  const double tcp = median(tcp_s), net = median(pull_s) - median(base_s);
  state.counters["tcp_MBps"] = tcp > 0 ? static_cast<double>(n) / tcp / 1e6 : 0;
  state.counters["xfer_MBps"] = net > 0 ? static_cast<double>(n) / net / 1e6 : 0;
  state.counters["xfer_over_tcp"] = net > 0 && tcp > 0 ? tcp / net : 0;
}
BENCHMARK(BM_PullVsTcpInterleaved)->Arg(64)->ArgName("MiB")->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(3.0);

// The receiver's decode step in isolation: a fresh tensor per transfer
// (Tensor::Allocate, i.e. aligned_alloc; above glibc's mmap threshold that is a
// fresh mmap whose pages fault in on first touch) plus one memcpy, against a
// memcpy into a buffer reused across iterations.
void BM_AllocAndCopy(benchmark::State& state) {
  const int64_t n = state.range(0) * kMiB;
  static std::vector<char>* src = new std::vector<char>(256 * kMiB, 1);
  for (auto _ : state) {
    absl::StatusOr<Tensor> t = Tensor::Allocate(DT_FLOAT, TensorShape({n / 4}));
    if (!t.ok()) Die("allocation failed");
    std::memcpy(t->raw_data(), src->data(), static_cast<size_t>(n));
    benchmark::DoNotOptimize(t->raw_data());
  }
  state.SetBytesProcessed(state.iterations() * n);
}

void BM_CopyReused(benchmark::State& state) {
  const int64_t n = state.range(0) * kMiB;
  static std::vector<char>* src = new std::vector<char>(256 * kMiB, 1);
  std::vector<char> dst(static_cast<size_t>(n), 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src->data(), static_cast<size_t>(n));
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * n);
}

// (c) Client feeds and fetches through the master: a float tensor of N MiB
// fed to a placeholder on the master's own task (reduced by Sum there), or a
// worker variable of N MiB fetched. path:0 sends them inside protobuf
// messages (a session created with DISTFLOW_BULK_TRANSFER=0), path:1 over
// the master's bulk port, path:2 from a client in the master's own process
// (in-process master: tensors handed over without a copy).
struct ClientIo {
  std::unique_ptr<Session> sess;
  Output x, sum, var;
};

ClientIo& GetClientIo(int64_t mib, int path) {
  static std::map<std::pair<int64_t, int>, std::unique_ptr<ClientIo>> cache;
  auto& io = cache[{mib, path}];
  if (io != nullptr) return *io;
  io = std::make_unique<ClientIo>();
  Cluster& c = GetCluster();
  Scope root = Scope::NewRootScope();
  auto worker = root.WithDevice("/job:worker/task:0");
  const std::string tag = std::to_string(mib) + "_" + std::to_string(path);
  io->x = ops::Placeholder(worker.WithOpName("cio_x_" + tag), DT_FLOAT);
  io->sum = ops::Sum(worker, io->x, {0});
  const int64_t n = mib * kMiB / 4;
  io->var = ops::MakeVariable(worker.WithOpName("cio_v_" + tag), ops::Fill(worker, {n}, ops::Const(worker, 1.0f)));
  auto init = ops::GlobalVariablesInitializer(root);
  if (path == 0) setenv("DISTFLOW_BULK_TRANSFER", "0", 1);  // read when the session is created
  SessionOptions o = Options();
  o.in_process_master = path == 2;
  io->sess = std::make_unique<Session>(c.worker_target, o);
  if (!io->sess->Run({}, {}, {init}).ok()) Die("init of the client-io variable failed");
  unsetenv("DISTFLOW_BULK_TRANSFER");
  return *io;
}

void BM_ClientFeed(benchmark::State& state) {
  const int64_t mib = state.range(0);
  ClientIo& io = GetClientIo(mib, static_cast<int>(state.range(1)));
  Tensor feed = Tensor::Allocate(DT_FLOAT, TensorShape({mib * kMiB / 4})).value();
  for (float& v : feed.flat<float>()) v = 1.0f;
  for (auto _ : state) CheckRun(io.sess->Run({{io.x, feed}}, {io.sum}), state);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * mib * kMiB);
}

void BM_ClientFetch(benchmark::State& state) {
  const int64_t mib = state.range(0);
  ClientIo& io = GetClientIo(mib, static_cast<int>(state.range(1)));
  for (auto _ : state) CheckRun(io.sess->Run({io.var}), state);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * mib * kMiB);
}

void ClientIoSizes(benchmark::internal::Benchmark* b) {
  for (int64_t mib : {16, 64})
    for (int path : {0, 1, 2}) b->Args({mib, path});
  b->ArgNames({"MiB", "path"})->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}
BENCHMARK(BM_ClientFeed)->Apply(ClientIoSizes);
BENCHMARK(BM_ClientFetch)->Apply(ClientIoSizes);

void TransferSizes(benchmark::internal::Benchmark* b) {
  for (int64_t mib : {1, 16, 64, 256}) b->Arg(mib);
  b->ArgName("MiB")->UseRealTime()->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

BENCHMARK(BM_TcpLoopback)->Apply(TransferSizes);
BENCHMARK(BM_GrpcRawPull)->Apply(TransferSizes);
BENCHMARK(BM_SumOnPs)->Apply(TransferSizes);
BENCHMARK(BM_PullSum)->Apply(TransferSizes);
BENCHMARK(BM_AllocAndCopy)->Apply(TransferSizes);
BENCHMARK(BM_CopyReused)->Apply(TransferSizes);

}  // namespace
}  // namespace distflow

BENCHMARK_MAIN();
