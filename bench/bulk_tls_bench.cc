// Bulk transfer with and without TLS, part of distributed_bench: a fetch of
// N MiB from a BulkServer over loopback (bulk_transfer.h), plain and over
// TLS (bulk_tls.h). Its baseline is BM_GrpcRawPull/tls:1 in
// transfer_bench.cc, the path tensors took under TLS before the bulk port
// spoke it. Certificates are made with the openssl tool on first use.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/env.h"
#include "bench_cluster.h"
#include "benchmark/benchmark.h"
#include "bulk/bulk_tls.h"
#include "bulk/bulk_transfer.h"

namespace distflow {
namespace bench {

const Pem& Certificates() {
  static Pem* pem = [] {
    char tmpl[] = "/tmp/distflow_bulk_tls_bench_XXXXXX";
    if (mkdtemp(tmpl) == nullptr) Die("mkdtemp failed");
    const std::string d = tmpl;
    const std::string cmd =
        "set -e; cd '" + d +
        "'; openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca "
        "2>/dev/null; openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj /CN=localhost "
        "2>/dev/null; printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext.cnf; openssl x509 -req -in "
        "node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem -days 2 -extfile ext.cnf 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) Die("openssl failed");
    auto read = [&](const char* f) {
      absl::StatusOr<std::string> s = Env::Default()->ReadFile(d + "/" + f);
      if (!s.ok()) Die(std::string(s.status().message()));
      return *s;
    };
    return new Pem{read("node.pem"), read("node.key"), read("ca.pem")};
  }();
  return *pem;
}

namespace {

struct BulkPair {
  std::unique_ptr<BulkServer> server;
  std::unique_ptr<BulkClient> client;
  Tensor tensor;  // 256 MiB, offered again for every fetch
};

BulkPair& GetBulkPair(bool tls) {
  static BulkPair* pairs[2] = {nullptr, nullptr};
  BulkPair*& p = pairs[tls ? 1 : 0];
  if (p == nullptr) {
    std::shared_ptr<const BulkTls> t;
    if (tls) {
      const Pem& pem = Certificates();
      absl::StatusOr<std::shared_ptr<const BulkTls>> made = BulkTls::Create(pem.cert, pem.key, pem.ca);
      if (!made.ok()) Die(std::string(made.status().message()));
      t = *made;
    }
    p = new BulkPair;
    auto server = BulkServer::Start("127.0.0.1", absl::Seconds(120), 0, "", t);
    if (!server.ok()) Die(std::string(server.status().message()));
    p->server = std::move(*server);
    p->client = std::make_unique<BulkClient>(BulkClient::kClientIdleTimeout, "", t);
    p->tensor = Tensor(DT_UINT8, TensorShape({256 * kMiB}));
    std::memset(p->tensor.raw_data(), 1, 256 * kMiB);
  }
  return *p;
}

// Args: MiB, TLS (0 or 1).
void BM_BulkFetch(benchmark::State& state) {
  BulkPair& p = GetBulkPair(state.range(1) != 0);
  const uint64_t n = static_cast<uint64_t>(state.range(0) * kMiB);
  Tensor src(DT_UINT8, TensorShape({static_cast<int64_t>(n)}));
  std::memset(src.raw_data(), 1, n);
  std::vector<char> dst(n);
  for (auto _ : state) {
    const uint64_t ticket = p.server->Offer(src);
    absl::Status s = p.client->Fetch("127.0.0.1", p.server->port(), ticket, dst.data(), n, nullptr);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}

BENCHMARK(BM_BulkFetch)
    ->ArgsProduct({{1, 16, 64}, {0, 1}})
    ->ArgNames({"MiB", "tls"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

}  // namespace
}  // namespace bench
}  // namespace distflow
