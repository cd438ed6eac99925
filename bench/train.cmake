# One training step of the book's CNN and of a small MLP, through the whole
# stack (bench/train_bench.cc); run with bench/run_train_bench.sh, which also
# times the same CNN step in PyTorch (bench/pytorch_cnn.py).
distflow_binary(train_bench
  SRCS ${CMAKE_CURRENT_SOURCE_DIR}/train_bench.cc
  DEPS distflow benchmark::benchmark)
