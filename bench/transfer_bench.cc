// Tensor transfer benchmarks of distributed_bench (see the list in
// distributed_bench.cc): (b) pulling a float tensor from another task against
// loopback TCP and a bare gRPC pull, and (c) client feeds and fetches through
// the master over messages, the bulk port, and in process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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
#include "bench_cluster.h"
#include "benchmark/benchmark.h"
#include "distflow/distflow.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/byte_buffer.h"

namespace distflow {
namespace {

using bench::CheckRun;
using bench::Cluster;
using bench::Die;
using bench::GetCluster;
using bench::kMiB;
using bench::Median;
using bench::Options;

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

// Plain, or TLS with a client certificate (as distflow's mutual TLS).
RawServer& GetRawServer(bool tls) {
  static RawServer* servers[2] = {nullptr, nullptr};
  RawServer*& rs = servers[tls ? 1 : 0];
  if (rs == nullptr) {
    auto* r = new RawServer;
    std::shared_ptr<grpc::ServerCredentials> server_creds = grpc::InsecureServerCredentials();
    std::shared_ptr<grpc::ChannelCredentials> channel_creds = grpc::InsecureChannelCredentials();
    if (tls) {
      const bench::Pem& pem = bench::Certificates();
      grpc::SslServerCredentialsOptions so(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
      so.pem_root_certs = pem.ca;
      so.pem_key_cert_pairs.push_back({pem.key, pem.cert});
      server_creds = grpc::SslServerCredentials(so);
      grpc::SslCredentialsOptions co;
      co.pem_root_certs = pem.ca;
      co.pem_private_key = pem.key;
      co.pem_cert_chain = pem.cert;
      channel_creds = grpc::SslCredentials(co);
    }
    r->service = std::make_unique<PullService>(256 * kMiB);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", server_creds, &port);
    b.SetMaxReceiveMessageSize(-1);
    b.SetMaxSendMessageSize(-1);
    b.RegisterCallbackGenericService(r->service.get());
    r->server = b.BuildAndStart();
    if (r->server == nullptr || port == 0) Die("cannot start the raw gRPC server");
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    auto ch = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), channel_creds, args);
    r->stub = std::make_unique<grpc::GenericStub>(ch);
    rs = r;
  }
  return *rs;
}

// Args: MiB, TLS (0 or 1).
void BM_GrpcRawPull(benchmark::State& state) {
  RawServer& rs = GetRawServer(state.range(1) != 0);
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
  const double tcp = Median(tcp_s), net = Median(pull_s) - Median(base_s);
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
BENCHMARK(BM_GrpcRawPull)
    ->ArgsProduct({{1, 16, 64, 256}, {0, 1}})
    ->ArgNames({"MiB", "tls"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);
BENCHMARK(BM_SumOnPs)->Apply(TransferSizes);
BENCHMARK(BM_PullSum)->Apply(TransferSizes);
BENCHMARK(BM_AllocAndCopy)->Apply(TransferSizes);
BENCHMARK(BM_CopyReused)->Apply(TransferSizes);

}  // namespace
}  // namespace distflow
