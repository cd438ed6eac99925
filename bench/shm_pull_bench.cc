// Same-host shared memory against TCP and memcpy, in one run (bench/run_shm_bench.sh):
//
//   memcpy      64 MiB copied between two buffers reused across rounds: the
//               machine's copy bandwidth, the ceiling of any transport here
//   alloc+copy  the same into a fresh tensor each round (Tensor::Allocate:
//               its pages fault in on first touch), the ceiling of a pull,
//               which receives into a new tensor
//   bulk shm    a BulkClient fetch of a 64 MiB offer through shared memory
//               (a direct read of the offer's memory, process_vm_readv)
//   bulk mapped the same as a mapped get (the default): the offer lies in
//               a shared block, copied once out of the client's mapping
//   bulk ring   the same through the ring (a tensor outside a block);
//               for all three, the process's CPU time per fetch too (server
//               and client threads: both are in this process)
//   bulk tcp    the same fetch over the loopback TCP bulk port
//   pull shm    the ps -> worker pull of a 64 MiB variable in a step (1 ps +
//               1 worker, real gRPC servers in this process, shared memory
//               on), minus the same step with the sum on the ps (no transfer)
//   pull tcp    the same with ServerOptions::shared_memory off
//
// Rounds alternate them all so that the load of a shared machine hits all
// alike; medians. MB = 10^6 bytes.
//
//   shm_pull_bench [MiB=64] [rounds=15]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes_copied.h"
#include "bulk/bulk_transfer.h"
#include "distflow/distflow.h"
#include "server/grpc_server.h"

namespace distflow {
namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "shm_pull_bench: %s\n", what.c_str());
  std::exit(1);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double Seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// 1 ps + 1 worker in this process; a variable of `n` floats on the ps.
struct Pull {
  std::vector<std::unique_ptr<Server>> servers;
  std::unique_ptr<Session> sess;
  Output on_worker, on_ps;

  Pull(int64_t n, bool shm) {
    auto spec = MakeLocalClusterSpec(1, 1);
    if (!spec.ok()) Die(std::string(spec.status().message()));
    ServerOptions options;
    options.shared_memory = shm;
    auto started = StartLocalCluster(*spec, options);
    if (!started.ok()) Die(std::string(started.status().message()));
    servers = std::move(*started);
    std::string target;
    for (auto& s : servers)
      if (s->task_name() == "/job:worker/replica:0/task:0") target = s->target();
    Scope root = Scope::NewRootScope();
    auto ps = root.WithDevice("/job:ps/task:0");
    auto v = ops::MakeVariable(ps.WithOpName("big"), ops::Fill(ps, {n}, ops::Const(ps, 1.0f)));
    // Slicing one element on the worker pulls the whole variable but costs
    // no arithmetic there, so the step is the transfer.
    on_worker = ops::Slice(root.WithDevice("/job:worker/task:0"), v, {0}, {1});
    on_ps = ops::Slice(ps, v, {0}, {1});
    SessionOptions o;
    o.wait_for_cluster_ms = 30000;
    sess = std::make_unique<Session>(target, o);
    if (!sess->Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok()) Die("initializing the variable failed");
    Step(on_worker);
  }
  void Step(const Output& o) {
    auto out = sess->Run({o});
    if (!out.ok()) Die(std::string(out.status().message()));
    if ((*out)[0].flat<float>()[0] != 1.0f) Die("wrong value pulled");
  }
  uint64_t ShmBytesServed() {
    for (auto& s : servers)
      if (s->task_name() == "/job:ps/replica:0/task:0") return s->impl()->bulk_shm_bytes_served();
    return 0;
  }
};

int Main(int argc, char** argv) {
  const int64_t mib = argc > 1 ? std::atoll(argv[1]) : 64;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  const size_t n = static_cast<size_t>(mib) << 20;
  auto server = BulkServer::Start("127.0.0.1");
  if (!server.ok()) Die(std::string(server.status().message()));
  if (absl::Status s = (*server)->EnableSharedMemory(); !s.ok()) Die(std::string(s.message()));
  // Allocated once shared memory is on: in a shared block, as a task's tensors are.
  Tensor src = Tensor::Allocate(DT_UINT8, TensorShape({static_cast<int64_t>(n)})).value();
  std::memset(src.raw_data(), 1, n);
  std::vector<char> dst(n, 0);
  BulkClient shm_client, tcp_client, mapped_client, ring_client;
  shm_client.set_shared_memory(true);
  shm_client.set_shm_direct_read(true);
  mapped_client.set_shared_memory(true);
  mapped_client.set_shm_direct_read(false);
  ring_client.set_shared_memory(true);
  ring_client.set_shm_direct_read(false);
  ring_client.set_shm_mapped_reads(false);
  auto fetch = [&](BulkClient& c) {
    absl::Status s = c.Fetch("127.0.0.1", (*server)->port(), (*server)->Offer(src), dst.data(), n, nullptr);
    if (!s.ok()) Die(std::string(s.message()));
  };
  Pull pull_shm(static_cast<int64_t>(n / 4), true), pull_tcp(static_cast<int64_t>(n / 4), false);
  fetch(shm_client);  // warm: connections, rings, pages
  fetch(tcp_client);
  fetch(ring_client);
  const double mapped_before = BytesCopiedCounter("shm_mapped")->value();
  fetch(mapped_client);
  if (BytesCopiedCounter("shm_mapped")->value() - mapped_before != static_cast<double>(n))
    std::printf("tensor blocks are off here (DISTFLOW_SHM_TENSORS=0?): bulk mapped is the ring too\n");
  if (!shm_client.shm_direct_read()) std::printf("direct reads are not allowed here: bulk shm is the ring too\n");

  std::vector<double> cpu_shm, cpu_ring, t_ring, cpu_mapped, t_mapped;
  std::vector<double> t_copy, t_alloc, t_shm, t_tcp, t_pull_shm, t_pull_tcp, t_base_shm, t_base_tcp;
  for (int r = 0; r < rounds; ++r) {
    t_copy.push_back(Seconds([&] { std::memcpy(dst.data(), src.raw_data(), n); }));
    t_alloc.push_back(Seconds([&] {
      Tensor fresh = Tensor::Allocate(DT_UINT8, src.shape()).value();
      std::memcpy(fresh.raw_data(), src.raw_data(), n);
    }));
    double c0 = CpuSeconds();
    t_shm.push_back(Seconds([&] { fetch(shm_client); }));
    cpu_shm.push_back(CpuSeconds() - c0);
    c0 = CpuSeconds();
    t_mapped.push_back(Seconds([&] { fetch(mapped_client); }));
    cpu_mapped.push_back(CpuSeconds() - c0);
    c0 = CpuSeconds();
    t_ring.push_back(Seconds([&] { fetch(ring_client); }));
    cpu_ring.push_back(CpuSeconds() - c0);
    t_tcp.push_back(Seconds([&] { fetch(tcp_client); }));
    t_pull_shm.push_back(Seconds([&] { pull_shm.Step(pull_shm.on_worker); }));
    t_base_shm.push_back(Seconds([&] { pull_shm.Step(pull_shm.on_ps); }));
    t_pull_tcp.push_back(Seconds([&] { pull_tcp.Step(pull_tcp.on_worker); }));
    t_base_tcp.push_back(Seconds([&] { pull_tcp.Step(pull_tcp.on_ps); }));
  }
  if ((*server)->shm_bytes_served() != static_cast<uint64_t>(3 * rounds + 3) * n) Die("a shm fetch went over TCP");
  if (pull_shm.ShmBytesServed() == 0 || pull_tcp.ShmBytesServed() != 0) Die("the pulls took the wrong path");
  const double mb = static_cast<double>(n) / 1e6;
  const double copy = mb / Median(t_copy);
  auto row = [&](const char* name, double secs) {
    const double bw = secs > 0 ? mb / secs : 0;
    std::printf("%-11s %8.3f ms  %8.0f MB/s  %5.2f x memcpy\n", name, secs * 1e3, bw, bw / copy);
  };
  std::printf("%lld MiB, %d rounds, medians\n", static_cast<long long>(mib), rounds);
  row("memcpy", Median(t_copy));
  row("alloc+copy", Median(t_alloc));
  row("bulk shm", Median(t_shm));
  row("bulk mapped", Median(t_mapped));
  row("bulk ring", Median(t_ring));
  row("bulk tcp", Median(t_tcp));
  row("pull shm", Median(t_pull_shm) - Median(t_base_shm));
  row("pull tcp", Median(t_pull_tcp) - Median(t_base_tcp));
  std::printf(
      "CPU per fetch, all threads: bulk shm %.3f ms (%.2f x ring), bulk mapped %.3f ms (%.2f x ring), "
      "bulk ring %.3f ms\n",
      Median(cpu_shm) * 1e3, Median(cpu_shm) / Median(cpu_ring), Median(cpu_mapped) * 1e3,
      Median(cpu_mapped) / Median(cpu_ring), Median(cpu_ring) * 1e3);
  std::printf("bulk shm / tcp: %.2f x; pull shm / tcp: %.2f x\n", Median(t_tcp) / Median(t_shm),
              (Median(t_pull_tcp) - Median(t_base_tcp)) / (Median(t_pull_shm) - Median(t_base_shm)));
  return 0;
}

}  // namespace
}  // namespace distflow

int main(int argc, char** argv) { return distflow::Main(argc, argv); }
