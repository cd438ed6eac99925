# What `cmake --install` and `cpack -G DEB` ship: libdistflow.so (SONAME
# libdistflow.so.MAJOR) and libdistflow.a made of every layer library, the
# public headers of include/distflow/, distflow-server and distflow-launch, a CMake
# package (find_package(distflow CONFIG)) and distflow.pc for pkg-config.
include(GNUInstallDirs)

# The layers, in link order (each links only those after it).
set(DISTFLOW_LAYERS distflow_data distflow_train distflow_client distflow_server distflow_coordination
    distflow_master distflow_worker distflow_rpc distflow_bulk distflow_placement distflow_runtime distflow_collective distflow_kernels
    distflow_record_io distflow_graph distflow_tensor distflow_cluster distflow_base distflow_rpc_proto
    distflow_proto)

# The shared library: every layer's objects; their own dependencies
# (gRPC, protobuf, abseil, oneDNN, ISA-L, cpp-httplib) as DT_NEEDED.
add_library(distflow SHARED)
foreach(layer ${DISTFLOW_LAYERS})
  target_sources(distflow PRIVATE $<TARGET_OBJECTS:${layer}>)
endforeach()
# Linking the layers too brings in their external libraries; their objects
# are already in, so nothing is taken from these archives twice.
target_link_libraries(distflow PRIVATE ${DISTFLOW_LAYERS})
# What links it (the examples, the benchmarks, distflow-server, the Python
# binding) sees the public headers only, as a program outside the tree does:
# reaching inside is a compile error, and using what is not exported a link error.
target_include_directories(distflow INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
target_link_libraries(distflow INTERFACE absl::status absl::statusor absl::strings absl::synchronization absl::time
                      absl::flat_hash_map absl::str_format Threads::Threads)
# Only distflow's own symbols are exported; what the layers link in stays private.
target_link_options(distflow PRIVATE "-Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/install/distflow.map"
                    -Wl,--no-undefined)
set_target_properties(distflow PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
                      LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/install/distflow.map)

# The static library: the layer archives merged into one.
set(DISTFLOW_STATIC ${PROJECT_BINARY_DIR}/libdistflow.a)
set(mri "create ${DISTFLOW_STATIC}\n")
foreach(layer ${DISTFLOW_LAYERS})
  string(APPEND mri "addlib $<TARGET_FILE:${layer}>\n")
endforeach()
string(APPEND mri "save\nend\n")
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/libdistflow.mri CONTENT "${mri}")
set(layer_files)
foreach(layer ${DISTFLOW_LAYERS})
  list(APPEND layer_files $<TARGET_FILE:${layer}>)
endforeach()
add_custom_command(OUTPUT ${DISTFLOW_STATIC}
  COMMAND ${CMAKE_COMMAND} -E rm -f ${DISTFLOW_STATIC}
  COMMAND ${CMAKE_AR} -M < ${PROJECT_BINARY_DIR}/libdistflow.mri
  DEPENDS ${DISTFLOW_LAYERS} ${layer_files} ${PROJECT_BINARY_DIR}/libdistflow.mri
  COMMENT "Merging the layer libraries into libdistflow.a")
add_custom_target(distflow_static ALL DEPENDS ${DISTFLOW_STATIC})

install(TARGETS distflow LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${DISTFLOW_STATIC} DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS distflow-server distflow-launch RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(distflow-server distflow-launch PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")

# Headers: the public API, include/distflow/ (and its train/ and data/),
# which includes only itself, abseil and the standard library.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/distflow/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/distflow
        FILES_MATCHING PATTERN "*.h")

# find_package(distflow CONFIG) and pkg-config.
include(CMakePackageConfigHelpers)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/install/distflowConfig.cmake.in
  ${PROJECT_BINARY_DIR}/distflowConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/distflow
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/distflowConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/distflowConfig.cmake ${PROJECT_BINARY_DIR}/distflowConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/distflow)
configure_file(${PROJECT_SOURCE_DIR}/cmake/install/distflow.pc.in ${PROJECT_BINARY_DIR}/distflow.pc.in @ONLY)
# The prefix is known only at install time (cmake --install --prefix).
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/distflow.pc.in\" pc)
  string(REPLACE \"%PREFIX%\" \"\${CMAKE_INSTALL_PREFIX}\" pc \"\${pc}\")
  file(WRITE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/distflow.pc\" \"\${pc}\")
  message(STATUS \"Installing: \$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/distflow.pc\")")

# cpack -G DEB: distflow_<version>_amd64.deb, runtime dependencies from dpkg-shlibdeps.
set(CPACK_PACKAGE_NAME distflow)
set(CPACK_PACKAGE_VENDOR "distflow maintainers")
set(CPACK_PACKAGE_CONTACT "distflow maintainers <maintainers@distflow.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed training runtime: parameter servers, workers, gRPC")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
# Building against the headers needs abseil's (the only library they include).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libabsl-dev")
# Kernels are compiled for DISTFLOW_ARCH_FLAGS (cmake/Flags.cmake). The
# default, -march=x86-64-v2, runs on any x86-64 CPU since about 2009, the hot
# loops choosing their AVX2/AVX-512 variants at run time; a -march=native
# build runs only on CPUs like the one that built it. The package says which.
if(DISTFLOW_ARCH_FLAGS MATCHES "native")
  set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}
 Built with -march=native: it runs only on CPUs with the instruction set of
 the machine that built it. For a package other machines install, configure
 with the default -DDISTFLOW_ARCH_FLAGS=-march=x86-64-v2.")
  message(STATUS "distflow: built with -march=native; a package made from this build (cpack) runs only on "
                 "CPUs like this one. The default, -DDISTFLOW_ARCH_FLAGS=-march=x86-64-v2, makes a portable package.")
else()
  set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}
 Built with ${DISTFLOW_ARCH_FLAGS}; the hot kernel loops choose AVX2 or
 AVX-512 variants at run time where the CPU has them.")
endif()
include(CPack)
