// The seed's first program: with a server running
//   distflow-server --cluster_spec='local|localhost:2222' --job_name=local --task_index=0
// this prints "Hello, distributed TensorFlow!".
#include <cstdio>

#include "distflow/distflow.h"

namespace df = distflow;

int main(int argc, char** argv) {
  std::string target = argc > 1 ? argv[1] : "grpc://localhost:2222";
  df::Scope root = df::Scope::NewRootScope();
  auto c = df::ops::Const(root, "Hello, distributed TensorFlow!");
  df::SessionOptions options;
  options.wait_for_cluster_ms = 30000;
  df::Session sess(target, options);
  auto out = sess.Run({c});
  if (!out.ok()) {
    std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", (*out)[0].scalar<std::string>().c_str());
  return 0;
}
