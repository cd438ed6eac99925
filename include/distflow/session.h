// Session: runs the graph that a Scope built.
//
//   Session sess;                           // in-process ("" or "local")
//   auto out = sess.Run({hello});           // StatusOr<std::vector<Tensor>>
//   sess.Run({{x, batch}}, {loss}, {train_op});
//
// Each Run first sends the nodes added since the last Run (Extend), so a
// graph may keep growing between runs. A session runs one graph; a build
// error recorded in the scope is returned by Run, naming the node.
// Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/scope.h"
#include "distflow/session_options.h"
#include "distflow/tensor.h"

namespace distflow {

using FeedDict = std::vector<std::pair<Output, Tensor>>;

class DISTFLOW_EXPORT Session {
 public:
  // `target`: "" or "local" for in-process; "grpc://host:port" for a cluster.
  explicit Session(const std::string& target = "", SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Output>& fetches);
  absl::StatusOr<std::vector<Tensor>> Run(const FeedDict& feeds, const std::vector<Output>& fetches,
                                          const std::vector<Operation>& targets = {},
                                          const RunOptions& options = RunOptions());
  absl::Status Close();
  // Clears variable containers on every task of a cluster session (all if
  // `containers` is empty); in process, on the local device.
  absl::Status Reset(const std::vector<std::string>& containers = {});

 private:
  struct Impl;  // client/session.cc
  std::unique_ptr<Impl> impl_;
};

}  // namespace distflow
