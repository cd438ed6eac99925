# distflow_library(NAME SRCS ... DEPS ...): one library per layer, linking only
# the layers below it, so a layering mistake is a link error.
function(distflow_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${name} PRIVATE ${DISTFLOW_WARNINGS} ${DISTFLOW_ARCH_FLAGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# distflow_test(NAME SRCS ... DEPS ...): a GoogleTest binary registered with ctest.
# Not built in the fuzzing build, which only needs the libraries under test.
function(distflow_test name)
  if(DISTFLOW_FUZZ)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${DISTFLOW_WARNINGS} ${DISTFLOW_ARCH_FLAGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(ARG_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  else()
    set_tests_properties(${name} PROPERTIES TIMEOUT 300)
  endif()
endfunction()

function(distflow_binary name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${DISTFLOW_WARNINGS} ${DISTFLOW_ARCH_FLAGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()
