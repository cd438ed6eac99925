#include "client/session.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distributed/grpc_session.h"

namespace distflow {

Session::Session(const std::string& target, SessionOptions options) {
  if (target.empty() || target == "local") {
    impl_ = std::make_unique<LocalSession>(std::move(options));
  } else if (absl::StartsWith(target, "grpc://")) {
    absl::StatusOr<std::unique_ptr<GrpcSession>> g = GrpcSession::Create(target, std::move(options));
    if (g.ok()) {
      impl_ = std::move(*g);
    } else {
      init_status_ = g.status();
    }
  } else {
    init_status_ = absl::InvalidArgumentError(
        absl::StrCat("Unknown session target '", target, "'; expected \"\", \"local\" or \"grpc://host:port\""));
  }
}

Session::~Session() = default;

absl::Status Session::Sync(const std::shared_ptr<GraphState>& graph) {
  absl::MutexLock lock(&mu_);
  if (graph_ == nullptr) graph_ = graph;
  if (graph_ != graph) {
    return absl::InvalidArgumentError("This session runs another graph; create one Session per graph");
  }
  proto::GraphDef delta;
  {
    absl::MutexLock glock(&graph->mu);
    if (!graph->status.ok()) {
      return absl::Status(graph->status.code(),
                          absl::StrCat("The graph could not be built: ", graph->status.message()));
    }
    int n = graph->graph.num_nodes();
    for (int i = sent_nodes_; i < n; ++i) *delta.add_node() = graph->graph.node(i)->def();
    if (delta.node_size() == 0) return absl::OkStatus();
    absl::Status s = impl_->Extend(delta);
    if (!s.ok()) return s;
    sent_nodes_ = n;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Session::Run(const std::vector<Output>& fetches) { return Run({}, fetches, {}); }

absl::StatusOr<std::vector<Tensor>> Session::Run(const FeedDict& feeds, const std::vector<Output>& fetches,
                                                 const std::vector<Operation>& targets, const RunOptions& options) {
  if (!init_status_.ok()) return init_status_;
  std::shared_ptr<GraphState> graph;
  auto take = [&](const std::shared_ptr<GraphState>& g) {
    if (graph == nullptr && g != nullptr) graph = g;
  };
  for (const Output& o : fetches) take(o.op().graph_state());
  for (const Operation& o : targets) take(o.graph_state());
  for (const auto& [o, t] : feeds) take(o.op().graph_state());
  if (graph == nullptr) {
    bool any = !fetches.empty() || !targets.empty() || !feeds.empty();
    if (!any) return std::vector<Tensor>();
    // Every handle is invalid: report why from the scope they came from.
    for (const Output& o : fetches) {
      absl::Status s = o.scope().status();
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat("The graph could not be built: ", s.message()));
    }
    return absl::InvalidArgumentError("Run was given only invalid outputs (an earlier op failed to build)");
  }
  absl::Status synced = Sync(graph);
  if (!synced.ok()) return synced;
  std::vector<std::pair<std::string, Tensor>> f;
  std::vector<std::string> o, t;
  for (const auto& [out, value] : feeds) {
    if (!out.ok()) return absl::InvalidArgumentError("Feed of an invalid output");
    f.emplace_back(out.name(), value);
  }
  for (const Output& out : fetches) {
    if (!out.ok()) return absl::InvalidArgumentError("Fetch of an invalid output");
    o.push_back(out.name());
  }
  for (const Operation& op : targets) {
    if (!op.ok()) return absl::InvalidArgumentError("Target is an invalid operation");
    t.push_back(op.name());
  }
  return impl_->Run(options, f, o, t);
}

absl::Status Session::Close() {
  if (impl_) return impl_->Close();
  return absl::OkStatus();
}

absl::Status Session::Reset(const std::vector<std::string>& containers) {
  if (!init_status_.ok()) return init_status_;
  if (auto* g = dynamic_cast<GrpcSession*>(impl_.get())) return g->Reset(containers);
  auto* l = static_cast<LocalSession*>(impl_.get());
  ResetContainers(l->device(), containers);
  return absl::OkStatus();
}

}  // namespace distflow
