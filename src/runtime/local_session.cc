#include "runtime/local_session.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "runtime/function_runtime.h"

namespace distflow {

Device* LocalCpuDevice() {
  static Device* device = new Device("/job:localhost/replica:0/task:0/device:CPU:0", "CPU", nullptr);
  return device;
}

void ResetContainers(Device* device, const std::vector<std::string>& containers) {
  ResourceMgr* rm = device->resource_manager();
  std::vector<std::string> names = containers.empty() ? rm->Containers() : containers;
  for (const std::string& c : names) rm->Cleanup(c);
}

namespace {
std::atomic<int64_t> next_session_id{1};
}

LocalSession::LocalSession(SessionOptions options, Timer* timer, Device* device)
    : options_(std::move(options)), timer_(timer) {
  RegisterFunctionRuntime();  // graph functions (Call, Dataset.map) run through this runtime
  device_ = device != nullptr ? device : LocalCpuDevice();
  if (options_.session_private_variables) {
    default_container_ = absl::StrCat("_session_", next_session_id.fetch_add(1));
    private_container_ = true;
  } else {
    default_container_ = options_.default_container;
  }
  int cores = NumSchedulableCpus();
  int inter = options_.inter_op_threads > 0 ? options_.inter_op_threads : cores;
  int intra = options_.intra_op_threads > 0 ? options_.intra_op_threads : cores;
  inter_op_ = std::make_unique<ThreadPool>("df_inter", inter);
  // The calling thread joins in intra-op work, so a pool of intra - 1 threads gives `intra`-way parallelism.
  if (intra > 1) intra_op_ = std::make_unique<ThreadPool>("df_intra", intra - 1);
}

LocalSession::~LocalSession() {
  (void)Close();
  // An asynchronous step's completion may drop the last reference on one of
  // this session's own pool threads. A pool cannot join itself, so another
  // thread joins it; the current closure finishes first (it only unwinds).
  bool on_own_thread = (inter_op_ != nullptr && inter_op_->InPool()) || (intra_op_ != nullptr && intra_op_->InPool());
  if (on_own_thread) {
    std::thread([inter = std::move(inter_op_), intra = std::move(intra_op_)]() mutable {
      inter.reset();
      intra.reset();
    }).detach();
  }
}

absl::Status LocalSession::Create(const proto::GraphDef& graph) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("Session has been closed");
  if (graph_ != nullptr && graph_->num_nodes() > 0) {
    return absl::AlreadyExistsError("Session already has a graph; use Extend to add nodes");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(graph));
  graph_ = std::move(g);
  executors_.clear();
  return absl::OkStatus();
}

absl::Status LocalSession::Extend(const proto::GraphDef& graph) {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("Session has been closed");
  if (graph_ == nullptr) graph_ = std::make_unique<Graph>();
  return graph_->Extend(graph);  // all or nothing
}

int64_t LocalSession::num_cached_executors() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(executors_.size());
}

absl::StatusOr<std::shared_ptr<Executor>> LocalSession::GetExecutor(const std::vector<TensorId>& feeds,
                                                                    const std::vector<TensorId>& fetches,
                                                                    const std::vector<std::string>& targets) {
  std::vector<std::string> f, o;
  for (const TensorId& t : feeds) f.push_back(absl::StrCat(t.node, ":", t.index));
  for (const TensorId& t : fetches) o.push_back(absl::StrCat(t.node, ":", t.index));
  std::string key = absl::StrCat(absl::StrJoin(f, ","), "->", absl::StrJoin(o, ","), "/", absl::StrJoin(targets, ","));
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::FailedPreconditionError("Session has been closed");
  auto it = executors_.find(key);
  if (it != executors_.end()) return it->second;
  if (graph_ == nullptr) return absl::FailedPreconditionError("Session has no graph; call Create or Extend first");
  ExecutorOptions eo;
  eo.device = device_;
  eo.inter_op_pool = inter_op_.get();
  eo.intra_op_pool = intra_op_.get();
  eo.default_container = default_container_;
  eo.max_step_bytes = options_.max_step_bytes;
  eo.timer = timer_;
  ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::Create(*graph_, eo, &kernels_, feeds, fetches, targets));
  std::shared_ptr<Executor> shared(std::move(ex));
  executors_[key] = shared;
  return shared;
}

absl::StatusOr<LocalSession::PreparedStep> LocalSession::Prepare(
    const RunOptions& options, const PartitionStep& partition, const std::vector<std::pair<std::string, Tensor>>& feeds,
    const std::vector<std::string>& fetches, const std::vector<std::string>& targets) {
  PreparedStep p;
  std::vector<TensorId> feed_ids, fetch_ids;
  for (const auto& [name, value] : feeds) {
    ASSIGN_OR_RETURN(TensorId id, ParseTensorId(name));
    feed_ids.push_back(id);
    p.feed_values.push_back(value);
  }
  for (const std::string& name : fetches) {
    ASSIGN_OR_RETURN(TensorId id, ParseTensorId(name));
    fetch_ids.push_back(id);
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Executor> ex, GetExecutor(feed_ids, fetch_ids, targets));
  p.executor = std::move(ex);
  p.step.step_id = partition.step_id;
  p.step.rendezvous = partition.rendezvous;
  p.step.cancellation = partition.cancellation;
  p.step.outputs_done = partition.outputs_done;
  if (p.step.step_id == 0) {
    absl::MutexLock lock(&mu_);
    p.step.step_id = next_step_id_++;
  }
  p.step.timeout_ms = options.timeout_ms > 0 ? options.timeout_ms : options_.operation_timeout_ms;
  return p;
}

absl::StatusOr<std::vector<Tensor>> LocalSession::Run(const RunOptions& options,
                                                      const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                      const std::vector<std::string>& fetches,
                                                      const std::vector<std::string>& targets) {
  ASSIGN_OR_RETURN(PreparedStep p, Prepare(options, PartitionStep(), feeds, fetches, targets));
  if (options.trace == nullptr) return p.executor->Run(p.step, p.feed_values);
  StepStatsCollector stats;
  p.step.stats = &stats;
  absl::StatusOr<std::vector<Tensor>> out = p.executor->Run(p.step, p.feed_values);
  options.trace->devices.push_back({device_->name(), stats.Take()});
  return out;
}

void LocalSession::RunAsync(const RunOptions& options, const std::vector<std::pair<std::string, Tensor>>& feeds,
                            const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                            Executor::DoneCallback done, const PartitionStep& partition) {
  absl::StatusOr<PreparedStep> p = Prepare(options, partition, feeds, fetches, targets);
  if (!p.ok()) {
    done(p.status());
    return;
  }
  Executor* ex = p->executor.get();
  std::shared_ptr<StepStatsCollector> stats;
  if (options.trace != nullptr) {
    stats = std::make_shared<StepStatsCollector>();
    p->step.stats = stats.get();
  }
  // The callback keeps the executor alive until the step is over.
  ex->RunAsync(p->step, std::move(p->feed_values),
               [keep = std::move(p->executor), stats, trace = options.trace, device = device_->name(),
                done = std::move(done)](absl::StatusOr<std::vector<Tensor>> r) {
                 if (trace != nullptr) trace->devices.push_back({device, stats->Take()});
                 done(std::move(r));
               });
}

absl::Status LocalSession::Close() {
  absl::MutexLock lock(&mu_);
  if (closed_) return absl::OkStatus();
  closed_ = true;
  executors_.clear();
  if (private_container_) device_->resource_manager()->Cleanup(default_container_);
  return absl::OkStatus();
}

absl::Status LocalSession::Reset(const std::vector<std::string>& containers) {
  ResetContainers(device_, containers);
  return absl::OkStatus();
}

}  // namespace distflow
