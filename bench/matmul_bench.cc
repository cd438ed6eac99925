// MatMul float32 throughput: our kernel through the kernel registry and
// OpKernelContext (what the executor does per step) against oneDNN called
// directly (dnnl_sgemm and the cached matmul primitive), at 1 and 2 threads.
//
// Arguments: {n, threads}; the product is n x n x n. Counter GFLOP/s = 2n^3/t.
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "graph/attr_value.h"
#include "kernels/cpu/gemm.h"
#include "kernels/device.h"
#include "kernels/kernel_registry.h"
#include "oneapi/dnnl/dnnl.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace distflow {
namespace {

Tensor RandomSquare(int64_t n, unsigned seed) {
  Tensor t(DT_FLOAT, TensorShape({n, n}));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& x : t.flat<float>()) x = d(gen);
  return t;
}

void SetFlops(benchmark::State& state, int64_t n) {
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// An intra-op pool giving `threads` parallelism (the caller helps), or none.
std::unique_ptr<ThreadPool> PoolFor(int threads) {
  return threads > 1 ? std::make_unique<ThreadPool>("bench", threads - 1) : nullptr;
}

void BM_DistflowMatMul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  std::unique_ptr<ThreadPool> pool = PoolFor(threads);
  Device device("/job:localhost/replica:0/task:0/device:CPU:0", kCpu, pool.get());
  proto::NodeDef def;
  def.set_name("matmul");
  def.set_op("MatMul");
  SetAttrType(&def, "T", DT_FLOAT);
  SetAttrBool(&def, "transpose_a", false);
  SetAttrBool(&def, "transpose_b", false);
  auto kernel = KernelRegistry::Global()->CreateKernel(def, {DT_FLOAT, DT_FLOAT}, {DT_FLOAT}, &device);
  if (!kernel.ok()) {
    state.SkipWithError(kernel.status().ToString().c_str());
    return;
  }
  Tensor a = RandomSquare(n, 1), b = RandomSquare(n, 2);
  for (auto _ : state) {
    OpKernelContext::Params p;
    p.device = &device;
    p.kernel = kernel->get();
    p.inputs = {a, b};
    p.intra_op_pool = pool.get();
    OpKernelContext ctx(std::move(p));
    absl::Status s = (*kernel)->Compute(&ctx);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(ctx.output(0).raw_data());
  }
  SetFlops(state, n);
}

// Our gemm.h wrapper with either threading strategy (0: OpenMP, 1: our pool).
void BM_GemmWrapper(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::unique_ptr<ThreadPool> pool = PoolFor(static_cast<int>(state.range(1)));
  const GemmThreading mode = state.range(2) == 0 ? GemmThreading::kOmp : GemmThreading::kPool;
  Tensor a = RandomSquare(n, 1), b = RandomSquare(n, 2);
  std::vector<float> c(static_cast<size_t>(n * n));
  for (auto _ : state) {
    absl::Status s = Sgemm(false, false, n, n, n, 1.0f, a.flat<float>().data(), n, b.flat<float>().data(), n, 0.0f,
                           c.data(), n, pool.get(), mode);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, n);
}

void BM_OneDnnSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  Tensor a = RandomSquare(n, 1), b = RandomSquare(n, 2);
  std::vector<float> c(static_cast<size_t>(n * n));
  ScopedOmpThreads omp(threads);
  for (auto _ : state) {
    dnnl_status_t s =
        dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.flat<float>().data(), n, b.flat<float>().data(), n, 0.0f, c.data(), n);
    if (s != dnnl_success) {
      state.SkipWithError("dnnl_sgemm failed");
      return;
    }
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, n);
}

void BM_OneDnnMatmulPrimitive(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  Tensor a = RandomSquare(n, 1), b = RandomSquare(n, 2);
  std::vector<float> c(static_cast<size_t>(n * n));
  ScopedOmpThreads omp(threads);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc md({n, n}, dt::f32, tag::ab);
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), engine));  // created once
  dnnl::memory am(md, engine, a.flat<float>().data()), bm(md, engine, b.flat<float>().data()), cm(md, engine, c.data());
  for (auto _ : state) {
    prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, n);
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {256, 1024}) {
    for (int64_t t : {1, 2}) b->Args({n, t});
  }
  b->ArgNames({"n", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_DistflowMatMul)->Apply(Sizes);
BENCHMARK(BM_GemmWrapper)
    ->ArgsProduct({{256, 1024}, {2}, {0, 1}})
    ->ArgNames({"n", "threads", "pool"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OneDnnSgemm)->Apply(Sizes);
BENCHMARK(BM_OneDnnMatmulPrimitive)->Apply(Sizes);

}  // namespace
}  // namespace distflow

BENCHMARK_MAIN();
