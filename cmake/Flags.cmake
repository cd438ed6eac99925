# Compiler flags, in one file. Change optimisation here and nowhere else.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
# Every layer's objects also go into libdistflow.so (cmake/Install.cmake).
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# The instruction set project code is compiled for. The default is a portable
# baseline every x86-64 CPU since about 2009 runs (x86-64-v2: SSE4.2,
# POPCNT), so the library, distflow-server and the Python package built here
# run on other machines too (the Debian package and `pip install` use it).
# The hot element-wise loops reach AVX2/AVX-512 speed anyway: they are also
# compiled for those and chosen at start-up (src/kernels/cpu/isa_dispatch.h);
# oneDNN picks its own at run time. -DDISTFLOW_ARCH_FLAGS=-march=native
# builds everything for this CPU alone (no dispatch; the binaries may die with
# SIGILL elsewhere), which bench/run_portable_bench.sh compares against.
set(DISTFLOW_ARCH_FLAGS "-march=x86-64-v2" CACHE STRING "Instruction-set flags for project code")
set(CMAKE_CXX_FLAGS_RELEASE "-O2 -DNDEBUG")
# Kernels need full loop vectorisation: GCC 12's -O2 only vectorises loops
# its "very cheap" cost model accepts (trip counts known to fit the vector
# width), which leaves channel loops, masks and reductions scalar.
set(DISTFLOW_KERNEL_OPT_FLAGS "-O3" CACHE STRING "Extra optimisation flags for the CPU kernels")

# A checking build: -DDISTFLOW_SANITIZE=address,undefined (see README, "Sanitizers").
set(DISTFLOW_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined (empty: none)")
if(DISTFLOW_SANITIZE)
  add_compile_options(-fsanitize=${DISTFLOW_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${DISTFLOW_SANITIZE})
endif()

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
endif()

# Warnings as errors on project code only (generated protobuf code is exempt).
set(DISTFLOW_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 reports false positives inside Eigen's AVX-512 intrinsics.
  list(APPEND DISTFLOW_WARNINGS -Wno-maybe-uninitialized)
endif()
