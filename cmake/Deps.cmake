# Every dependency comes from a Debian 12 package (see scripts/install_deps.sh).
find_package(Threads REQUIRED)
find_package(absl REQUIRED)
find_package(Protobuf REQUIRED)
find_package(ZLIB REQUIRED)
find_package(gRPC CONFIG REQUIRED)
# TLS on the bulk-transfer port (gRPC brings its own TLS).
find_package(OpenSSL REQUIRED)
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
# Debian's dnnl-config.cmake insists on OpenCL (its GPU runtime); the CPU
# library needs nothing of it, so find the library and header directly.
find_library(DNNL_LIBRARY dnnl REQUIRED)
find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
add_library(distflow_dnnl INTERFACE)
target_link_libraries(distflow_dnnl INTERFACE ${DNNL_LIBRARY})
target_include_directories(distflow_dnnl SYSTEM INTERFACE ${DNNL_INCLUDE_DIR})
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
# CRC-32C for checkpoints: Intel's ISA-L (crc32_iscsi), hardware-accelerated.
find_package(PkgConfig REQUIRED)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)
# The status pages' HTTP server (its flags must match how Debian built the library).
pkg_check_modules(httplib REQUIRED IMPORTED_TARGET cpp-httplib)
