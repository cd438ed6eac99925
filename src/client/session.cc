#include "distflow/session.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "client/graph_state.h"
#include "runtime/local_session.h"
#include "runtime/session_factory.h"

namespace distflow {

struct Session::Impl {
  // Sends the nodes added since the last call to the session.
  absl::Status Sync(const std::shared_ptr<GraphState>& graph);

  absl::Status init_status;
  std::unique_ptr<SessionInterface> session;
  absl::Mutex mu;
  std::shared_ptr<GraphState> graph_ ABSL_GUARDED_BY(mu);
  int sent_nodes_ ABSL_GUARDED_BY(mu) = 0;
};

// The session's kind comes from its target (runtime/session_factory.h): in
// process, or a transport the program registered.
Session::Session(const std::string& target, SessionOptions options) : impl_(std::make_unique<Impl>()) {
  absl::StatusOr<std::unique_ptr<SessionInterface>> s = NewSession(target, std::move(options));
  if (s.ok()) {
    impl_->session = std::move(*s);
  } else {
    impl_->init_status = s.status();
  }
}

Session::~Session() = default;

absl::Status Session::Impl::Sync(const std::shared_ptr<GraphState>& graph) {
  absl::MutexLock lock(&mu);
  if (graph_ == nullptr) graph_ = graph;
  if (graph_ != graph) {
    return absl::InvalidArgumentError("This session runs another graph; create one Session per graph");
  }
  proto::GraphDef delta;
  int n = 0;
  {
    // Only to copy the new nodes: the Extend below may wait minutes for the
    // cluster, and other threads may go on adding ops meanwhile.
    absl::MutexLock glock(&graph->mu);
    if (!graph->status.ok()) {
      return absl::Status(graph->status.code(),
                          absl::StrCat("The graph could not be built: ", graph->status.message()));
    }
    n = graph->graph.num_nodes();
    for (int i = sent_nodes_; i < n; ++i) *delta.add_node() = graph->graph.node(i)->def();
  }
  if (delta.node_size() == 0) return absl::OkStatus();
  RETURN_IF_ERROR(session->Extend(delta));
  sent_nodes_ = n;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> Session::Run(const std::vector<Output>& fetches) { return Run({}, fetches, {}); }

absl::StatusOr<std::vector<Tensor>> Session::Run(const FeedDict& feeds, const std::vector<Output>& fetches,
                                                 const std::vector<Operation>& targets, const RunOptions& options) {
  if (!impl_->init_status.ok()) return impl_->init_status;
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
  RETURN_IF_ERROR(impl_->Sync(graph));
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
  return impl_->session->Run(options, f, o, t);
}

absl::Status Session::Close() {
  if (impl_->session) return impl_->session->Close();
  return absl::OkStatus();
}

absl::Status Session::Reset(const std::vector<std::string>& containers) {
  if (!impl_->init_status.ok()) return impl_->init_status;
  return impl_->session->Reset(containers);
}

}  // namespace distflow
