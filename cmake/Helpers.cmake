include(GoogleTest)

# distflow_hide_symbols(TARGET): the library's objects go into libdistflow.so,
# which exports what include/distflow/ marks DISTFLOW_EXPORT and nothing else
# (include/distflow/export.h). Programs keep the default visibility: abseil's
# flags tell a flag's type by the address of a template's static, which must
# be one symbol across the program and libabsl_flags.so.
function(distflow_hide_symbols name)
  set_target_properties(${name} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# distflow_library(NAME SRCS ... DEPS ...): one library per layer, linking only
# the layers below it, so a layering mistake is a link error.
function(distflow_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  distflow_hide_symbols(${name})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${name} PRIVATE ${DISTFLOW_WARNINGS} ${DISTFLOW_ARCH_FLAGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# distflow_test(NAME SRCS ... DEPS ... [TIMEOUT s]): a GoogleTest binary whose
# cases ctest runs one by one (gtest_discover_tests, listed when ctest runs),
# named NAME.Suite.Case: a failure names its case, `ctest -j2` balances the
# long cases of one binary against others, and TIMEOUT bounds each case.
# Not built in the fuzzing build, which only needs the libraries under test.
function(distflow_test name)
  if(DISTFLOW_FUZZ)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${DISTFLOW_WARNINGS} ${DISTFLOW_ARCH_FLAGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  set(timeout 300)
  if(ARG_TIMEOUT)
    set(timeout ${ARG_TIMEOUT})
  endif()
  gtest_discover_tests(${name}
    TEST_PREFIX "${name}."
    DISCOVERY_MODE PRE_TEST
    PROPERTIES TIMEOUT ${timeout})
endfunction()

function(distflow_binary name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${DISTFLOW_WARNINGS} ${DISTFLOW_ARCH_FLAGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()
