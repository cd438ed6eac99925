# Distributed runtime benchmarks: step latency across tasks and RecvTensor
# bandwidth, each with a baseline (bare gRPC unary call, loopback TCP) measured
# in the same run. Run them with bench/run_distributed_bench.sh.
distflow_binary(distributed_bench
  SRCS ${CMAKE_CURRENT_SOURCE_DIR}/distributed_bench.cc ${CMAKE_CURRENT_SOURCE_DIR}/transfer_bench.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/bulk_tls_bench.cc
  DEPS distflow_client distflow_distributed distflow_rpc_proto benchmark::benchmark gRPC::grpc++)

# All-reduce between processes (CollectiveReduce over the transport seam);
# bench/run_collective_bench.sh runs it beside PyTorch's gloo.
distflow_binary(collective_bench
  SRCS ${CMAKE_CURRENT_SOURCE_DIR}/collective_bench.cc
  DEPS distflow absl::flags absl::flags_parse)

# Same-host shared memory vs TCP vs memcpy for a 64 MiB ps -> worker pull;
# bench/run_shm_bench.sh runs it.
distflow_binary(shm_pull_bench
  SRCS ${CMAKE_CURRENT_SOURCE_DIR}/shm_pull_bench.cc
  DEPS distflow_client distflow_distributed)
