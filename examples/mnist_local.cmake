# The book's CNN trained in one process (examples/mnist_local.cc).
distflow_binary(mnist_local SRCS ${CMAKE_CURRENT_SOURCE_DIR}/mnist_local.cc
  DEPS distflow absl::flags absl::flags_parse)
# A shortened run that still proves learning (chance is 0.10): 300 steps gave
# 0.773-0.785 test accuracy over seeds 1-4 (about 20-30 s on 2 busy cores);
# the full 5000-step run reaches 0.88 (docs/PERFORMANCE.md).
add_test(NAME example_mnist_local
         COMMAND mnist_local --steps=300 --print_every=100 --threads=2 --seed=1 --min_accuracy=0.7)
set_tests_properties(example_mnist_local PROPERTIES TIMEOUT 180)
