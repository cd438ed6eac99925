# The distributed runtime: rendezvous, worker, master, placement, server,
# and the client side of grpc:// sessions.
distflow_library(distflow_distributed
  SRCS ${CMAKE_CURRENT_SOURCE_DIR}/tensor_transfer.cc ${CMAKE_CURRENT_SOURCE_DIR}/bulk_transfer.cc ${CMAKE_CURRENT_SOURCE_DIR}/bulk_client.cc ${CMAKE_CURRENT_SOURCE_DIR}/bulk_tls.cc ${CMAKE_CURRENT_SOURCE_DIR}/worker_rendezvous.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/grpc_status.cc ${CMAKE_CURRENT_SOURCE_DIR}/worker_cache.cc ${CMAKE_CURRENT_SOURCE_DIR}/worker.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/worker_interface.cc ${CMAKE_CURRENT_SOURCE_DIR}/local_worker.cc ${CMAKE_CURRENT_SOURCE_DIR}/grpc_remote_worker.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/grpc_worker_service.cc ${CMAKE_CURRENT_SOURCE_DIR}/grpc_master_service.cc ${CMAKE_CURRENT_SOURCE_DIR}/step_tensor_codec.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/placement.cc ${CMAKE_CURRENT_SOURCE_DIR}/partition.cc ${CMAKE_CURRENT_SOURCE_DIR}/master.cc ${CMAKE_CURRENT_SOURCE_DIR}/master_session.cc ${CMAKE_CURRENT_SOURCE_DIR}/master_step.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/local_master.cc ${CMAKE_CURRENT_SOURCE_DIR}/grpc_server.cc ${CMAKE_CURRENT_SOURCE_DIR}/server.cc ${CMAKE_CURRENT_SOURCE_DIR}/grpc_session.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/step_stats_proto.cc ${CMAKE_CURRENT_SOURCE_DIR}/rpc_metrics.cc ${CMAKE_CURRENT_SOURCE_DIR}/status_server.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/auth.cc ${CMAKE_CURRENT_SOURCE_DIR}/ask_tasks.cc ${CMAKE_CURRENT_SOURCE_DIR}/coordination.cc
  DEPS distflow_runtime distflow_cluster distflow_rpc_proto gRPC::grpc++ PkgConfig::httplib OpenSSL::SSL)

distflow_test(distributed_test
  SRCS ${CMAKE_CURRENT_SOURCE_DIR}/tensor_transfer_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/bulk_transfer_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/placement_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/local_master_test.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/worker_rendezvous_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/auth_test.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/worker_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/coordination_test.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/grpc_status_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/worker_cache_test.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/worker_interface_test.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/server_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/grpc_session_test.cc
       ${CMAKE_CURRENT_SOURCE_DIR}/master_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/ask_tasks_test.cc
  DEPS distflow_distributed distflow_tensor_testutil)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # gRPC's generated service templates (worker.grpc.pb.h) hide overloads of
  # their own virtual methods; not the project's to fix.
  target_compile_options(distflow_distributed PRIVATE -Wno-overloaded-virtual)
endif()
