// Training in distflow._distflow: the C++ layers, optimizers (a constant
// or a tensor learning rate), synchronous replicas, the monitored session
// (Supervisor, MonitoredTrainingSession) and checkpoints.
#include <tuple>

#include "conversions.h"
#include "distflow/elastic.h"
#include "distflow/train/collective_all_reduce_optimizer.h"

namespace distflow_py {
namespace {

// An optimizer from its TensorFlow name and hyperparameters.
std::unique_ptr<df::Optimizer> MakeConstantRateOptimizer(const std::string& kind, const py::dict& a);

std::unique_ptr<df::Optimizer> MakeOptimizer(const std::string& kind, const py::dict& a) {
  std::unique_ptr<df::Optimizer> opt = MakeConstantRateOptimizer(kind, a);
  // A learning rate computed by the graph (tf.train.exponential_decay, ...).
  if (a.contains("learning_rate") && py::isinstance<df::Output>(a["learning_rate"])) {
    opt->SetLearningRate(a["learning_rate"].cast<df::Output>());
  }
  return opt;
}

std::unique_ptr<df::Optimizer> MakeConstantRateOptimizer(const std::string& kind, const py::dict& a) {
  auto get = [&a](const char* k, double d) {
    return a.contains(k) && !py::isinstance<df::Output>(a[k]) ? a[k].cast<double>() : d;
  };
  const double lr = get("learning_rate", 0.001);
  if (kind == "GradientDescent") return std::make_unique<df::GradientDescentOptimizer>(lr);
  if (kind == "Momentum") {
    return std::make_unique<df::MomentumOptimizer>(lr, get("momentum", 0.0),
                                                   a.contains("use_nesterov") && a["use_nesterov"].cast<bool>());
  }
  if (kind == "Adagrad") return std::make_unique<df::AdagradOptimizer>(lr, get("initial_accumulator_value", 0.1));
  if (kind == "RMSProp") {
    return std::make_unique<df::RMSPropOptimizer>(lr, get("decay", 0.9), get("momentum", 0.0), get("epsilon", 1e-10));
  }
  if (kind == "Adam" || kind == "LazyAdam") {
    auto adam = std::make_unique<df::AdamOptimizer>(lr, get("beta1", 0.9), get("beta2", 0.999), get("epsilon", 1e-8));
    adam->SetLazySparseUpdates(kind == "LazyAdam");
    return adam;
  }
  if (kind == "Ftrl") {
    absl::StatusOr<std::unique_ptr<df::FtrlOptimizer>> ftrl =
        df::FtrlOptimizer::Create(lr, get("learning_rate_power", -0.5), get("initial_accumulator_value", 0.1),
                                  get("l1_regularization_strength", 0.0), get("l2_regularization_strength", 0.0),
                                  get("l2_shrinkage_regularization_strength", 0.0));
    if (!ftrl.ok()) throw py::value_error(std::string(ftrl.status().message()));
    return std::move(*ftrl);
  }
  throw py::value_error("unknown optimizer " + kind);
}

}  // namespace

void BindTrain(py::module_& m) {
  // ---- training: layers, optimizers, the monitored session -----------------
  py::module_ layers = m.def_submodule("layers", "TF-slim layers (C++ train/layers.h)");
  layers.def(
      "conv2d",
      [](const df::Scope& s, const df::Output& x, int64_t n, std::array<int64_t, 2> kernel, int64_t stride,
         const std::string& padding, bool relu, const std::string& name) {
        return Built(s, df::layers::conv2d(s, x, n, kernel, stride, padding,
                                           relu ? df::layers::kRelu : df::layers::kNoActivation, name));
      },
      py::arg("scope"), py::arg("x"), py::arg("num_outputs"), py::arg("kernel"), py::arg("stride") = 1,
      py::arg("padding") = "SAME", py::arg("relu") = true, py::arg("name") = "Conv");
  layers.def(
      "max_pool2d",
      [](const df::Scope& s, const df::Output& x, std::array<int64_t, 2> kernel, int64_t stride,
         const std::string& padding,
         const std::string& name) { return Built(s, df::layers::max_pool2d(s, x, kernel, stride, padding, name)); },
      py::arg("scope"), py::arg("x"), py::arg("kernel"), py::arg("stride") = 2, py::arg("padding") = "VALID",
      py::arg("name") = "");
  layers.def(
      "flatten",
      [](const df::Scope& s, const df::Output& x, const std::string& name) {
        return Built(s, df::layers::flatten(s, x, name));
      },
      py::arg("scope"), py::arg("x"), py::arg("name") = "");
  layers.def(
      "fully_connected",
      [](const df::Scope& s, const df::Output& x, int64_t n, bool relu, const std::string& name) {
        return Built(s,
                     df::layers::fully_connected(s, x, n, relu ? df::layers::kRelu : df::layers::kNoActivation, name));
      },
      py::arg("scope"), py::arg("x"), py::arg("num_outputs"), py::arg("relu") = true,
      py::arg("name") = "fully_connected");

  // Optimizers: made from a name and its hyperparameters; minimize adds the
  // gradients and the update (and increments global_step, if given).
  py::class_<df::Optimizer>(m, "Optimizer")
      .def_static("create", &MakeOptimizer)
      .def("minimize",
           [](df::Optimizer& opt, const df::Scope& s, const df::Output& loss, std::optional<df::Output> global_step) {
             return ScopeValue(s, opt.Minimize(s, loss, global_step ? &*global_step : nullptr));
           })
      .def("apply_gradients",
           [](df::Optimizer& opt, const df::Scope& s, const std::vector<std::pair<df::Output, df::Output>>& gv,
              std::optional<df::Output> global_step) {
             return ScopeValue(s, opt.ApplyGradients(s, gv, global_step ? &*global_step : nullptr));
           })
      .def("compute_gradients", [](df::Optimizer& opt, const df::Scope& s, const df::Output& loss) {
        return ScopeValue(s, opt.ComputeGradients(s, loss));
      });

  // Synchronous replicas around an optimizer made like the ones above; its
  // hook goes to MonitoredSession (sync_hooks).
  py::class_<df::SyncReplicasOptimizer>(m, "SyncReplicasOptimizer")
      .def_static(
          "create",
          [](const std::string& kind, const py::dict& hyper, int replicas_to_aggregate, int total_num_replicas,
             int replica_id, double step_timeout_secs, const std::string& elastic_coordinator, int min_replicas) {
            df::SyncReplicasOptions o;
            o.replicas_to_aggregate = replicas_to_aggregate;
            o.total_num_replicas = total_num_replicas;
            o.replica_id = replica_id;
            o.step_timeout = absl::Seconds(step_timeout_secs);
            // Elastic: the count follows the workers the coordinator holds alive.
            if (!elastic_coordinator.empty()) o.live_replicas = df::LiveWorkerCounter(elastic_coordinator);
            o.min_replicas = min_replicas;
            return Value(df::SyncReplicasOptimizer::Create(MakeOptimizer(kind, hyper), o));
          },
          py::arg("kind"), py::arg("hyper"), py::arg("replicas_to_aggregate"), py::arg("total_num_replicas"),
          py::arg("replica_id"), py::arg("step_timeout_secs"), py::arg("elastic_coordinator") = "",
          py::arg("min_replicas") = 1)
      .def("minimize",
           [](df::SyncReplicasOptimizer& opt, const df::Scope& s, const df::Output& loss,
              std::optional<df::Output> global_step) {
             return ScopeValue(s, opt.Minimize(s, loss, global_step ? &*global_step : nullptr));
           })
      .def("apply_gradients",
           [](df::SyncReplicasOptimizer& opt, const df::Scope& s,
              const std::vector<std::pair<df::Output, df::Output>>& gv, std::optional<df::Output> global_step) {
             return ScopeValue(s, opt.ApplyGradients(s, gv, global_step ? &*global_step : nullptr));
           })
      .def("compute_gradients", [](df::SyncReplicasOptimizer& opt, const df::Scope& s,
                                   const df::Output& loss) { return ScopeValue(s, opt.ComputeGradients(s, loss)); })
      .def_property_readonly("steps_applied",
                             [](const df::SyncReplicasOptimizer& o) { return o.stats().steps_applied.load(); })
      .def_property_readonly(
          "stale_gradients_dropped",
          [](const df::SyncReplicasOptimizer& o) { return o.stats().stale_gradients_dropped.load(); })
      .def_property_readonly("replicas_aggregated",
                             [](const df::SyncReplicasOptimizer& o) { return o.stats().replicas_aggregated.load(); })
      .def_property_readonly("aggregation_changes",
                             [](const df::SyncReplicasOptimizer& o) { return o.stats().aggregation_changes.load(); });

  // Horovod's DistributedOptimizer: the gradients all-reduced across the
  // workers, small ones fused into buckets, or at run time with a cycle time
  // (train/collective_all_reduce_optimizer.h).
  m.def(
      "all_reduce_gradients",
      [](const df::Scope& s, const df::Optimizer::GradsAndVars& gv, int num_replicas, int rank, int64_t group_key,
         int64_t first_instance_key, bool average, double timeout_seconds, int64_t fusion_threshold_bytes,
         bool fp16_compression, std::vector<int64_t> group_members, bool adasum,
         std::optional<double> fusion_cycle_ms) {
        df::CollectiveAllReduceOptions o;
        o.fusion_cycle_ms = fusion_cycle_ms;
        o.group_members = std::move(group_members);
        o.adasum = adasum;
        o.num_replicas = num_replicas;
        o.rank = rank;
        o.group_key = group_key;
        o.first_instance_key = first_instance_key;
        o.average = average;
        o.timeout_seconds = timeout_seconds;
        o.fusion_threshold_bytes = fusion_threshold_bytes;
        o.fp16_compression = fp16_compression;
        return ScopeValue(s, df::AllReduceGradients(s, gv, o));
      },
      py::arg("scope"), py::arg("grads_and_vars"), py::arg("num_replicas"), py::arg("rank"), py::arg("group_key"),
      py::arg("first_instance_key"), py::arg("average"), py::arg("timeout_seconds"), py::arg("fusion_threshold_bytes"),
      py::arg("fp16_compression") = false, py::arg("group_members") = std::vector<int64_t>(), py::arg("adasum") = false,
      py::arg("fusion_cycle_ms") = std::nullopt);
  m.def("graph_variables", &df::GraphVariables, py::arg("scope"),
        "Every variable of the graph that has an initializer (optimizer slots too), in the order made.");

  py::class_<df::MonitoredSession>(m, "MonitoredSession")
      .def(py::init(
               [](const df::Scope& scope, const std::string& target, bool is_chief, const std::string& logdir,
                  std::optional<df::Output> global_step, std::optional<df::Operation> init_op,
                  int64_t save_checkpoint_secs, std::vector<df::Output> coordination_vars, const py::dict& options,
                  const std::vector<std::pair<df::SyncReplicasOptimizer*, bool>>& sync_hooks,
                  std::vector<df::Output> local_variables, std::optional<df::Operation> local_init_op,
                  int64_t save_checkpoint_steps, int max_to_keep, std::optional<df::Output> summary_op,
                  int64_t save_summaries_steps, int64_t save_summaries_secs, int64_t log_step_count_steps,
                  const std::vector<std::pair<df::Output, py::object>>& init_feed_dict,
                  const std::vector<std::pair<df::Output, py::object>>& local_init_feed_dict,
                  const std::vector<std::tuple<df::Output, std::string, std::vector<int64_t>, std::vector<int64_t>>>&
                      save_slices) {
                 df::SupervisorOptions o;
                 for (const auto& [var, full_name, full_shape, offset] : save_slices) {
                   o.save_slices.push_back({var, full_name, full_shape, offset});
                 }
                 o.init_feed_dict = ToFeedDict(init_feed_dict, /*lend=*/false);  // kept for recoveries
                 o.local_init_feed_dict = ToFeedDict(local_init_feed_dict, /*lend=*/false);
                 if (summary_op) o.summary_op = *summary_op;
                 o.save_summaries_steps = save_summaries_steps;
                 o.save_summaries_secs = save_summaries_secs;
                 o.log_step_count_steps = log_step_count_steps;
                 o.local_variables = std::move(local_variables);
                 if (local_init_op) o.local_init_op = *local_init_op;
                 o.save_checkpoint_steps = save_checkpoint_steps;
                 o.max_to_keep = max_to_keep;
                 o.is_chief = is_chief;
                 o.logdir = logdir;
                 if (global_step) o.global_step = *global_step;
                 if (init_op) o.init_op = *init_op;
                 o.save_checkpoint_secs = save_checkpoint_secs;
                 o.coordination_vars = std::move(coordination_vars);
                 o.session_options = SessionOptionsFromPython(options);
                 std::vector<std::unique_ptr<df::SessionRunHook>> hooks;
                 for (const auto& [sync, is_chief_hook] : sync_hooks)
                   hooks.push_back(sync->MakeSessionRunHook(is_chief_hook));
                 absl::StatusOr<std::unique_ptr<df::MonitoredSession>> s;
                 {
                   py::gil_scoped_release release;
                   s = df::MonitoredSession::Create(scope, target, o, std::move(hooks));
                 }
                 return ScopeValue(scope, std::move(s));
               }),
           py::arg("scope"), py::arg("target"), py::arg("is_chief"), py::arg("logdir"), py::arg("global_step"),
           py::arg("init_op"), py::arg("save_checkpoint_secs"), py::arg("coordination_vars"), py::arg("options"),
           py::arg("sync_hooks") = std::vector<std::pair<df::SyncReplicasOptimizer*, bool>>{},
           py::arg("local_variables") = std::vector<df::Output>{}, py::arg("local_init_op") = std::nullopt,
           py::arg("save_checkpoint_steps") = 0, py::arg("max_to_keep") = 5, py::arg("summary_op") = std::nullopt,
           py::arg("save_summaries_steps") = 100, py::arg("save_summaries_secs") = 0,
           py::arg("log_step_count_steps") = 100,
           py::arg("init_feed_dict") = std::vector<std::pair<df::Output, py::object>>{},
           py::arg("local_init_feed_dict") = std::vector<std::pair<df::Output, py::object>>{},
           py::arg("save_slices") =
               std::vector<std::tuple<df::Output, std::string, std::vector<int64_t>, std::vector<int64_t>>>{},
           py::keep_alive<1, 11>())  // the optimizers outlive their hooks
      .def(
          "run",
          [](df::MonitoredSession& self, const std::vector<std::pair<df::Output, py::object>>& feeds,
             const std::vector<df::Output>& fetches, const std::vector<df::Operation>& targets, bool trace,
             int64_t timeout_ms) -> py::object {
            df::FeedDict feed_dict = ToFeedDict(feeds);
            df::RunOptions options;
            df::StepStats stats;
            if (trace) options.trace = &stats;
            if (timeout_ms > 0) options.timeout_ms = timeout_ms;
            absl::StatusOr<std::vector<df::Tensor>> result;
            {
              py::gil_scoped_release release;
              result = self.Run(feed_dict, fetches, targets, options);
            }
            py::object values = ToNumpyList(std::move(result));
            if (!trace) return values;
            return py::make_tuple(values, py::bytes(df::ChromeTraceJson(stats)));
          },
          py::arg("feeds"), py::arg("fetches"), py::arg("targets"), py::arg("trace") = false, py::arg("timeout_ms") = 0)
      // A run of the current session without the hooks (no summary or step
      // counting): the Supervisor's own bookkeeping.
      .def("run_raw",
           [](df::MonitoredSession& self, const std::vector<std::pair<df::Output, py::object>>& feeds,
              const std::vector<df::Output>& fetches, const std::vector<df::Operation>& targets) {
             df::FeedDict feed_dict = ToFeedDict(feeds);
             absl::StatusOr<std::vector<df::Tensor>> result;
             {
               py::gil_scoped_release release;
               result = self.raw_session()->Run(feed_dict, fetches, targets);
             }
             return ToNumpyList(std::move(result));
           })
      .def("should_stop", &df::MonitoredSession::ShouldStop)
      .def("request_stop", &df::MonitoredSession::RequestStop)
      .def("close",
           [](df::MonitoredSession& self) {
             absl::Status s;
             {
               py::gil_scoped_release release;
               s = self.Close();
             }
             Check(s);
           })
      .def_property_readonly("global_step", &df::MonitoredSession::global_step)
      .def_property_readonly("restored_from", &df::MonitoredSession::restored_from);

  // Checkpoints: each task holding variables writes its own shard.
  py::class_<df::Saver>(m, "Saver")
      .def(py::init(
               [](const df::Scope& scope, const std::vector<df::Output>& var_list, int max_to_keep,
                  const std::string& basename, const std::vector<df::Output>& exclude, bool allow_extra,
                  const std::vector<std::tuple<df::Output, std::string, std::vector<int64_t>, std::vector<int64_t>>>&
                      slices) {
                 df::SaverOptions o;
                 for (const auto& [var, full_name, full_shape, offset] : slices) {
                   o.slices.push_back({var, full_name, full_shape, offset});
                 }
                 o.allow_extra_in_checkpoint = allow_extra;
                 o.var_list = var_list;
                 o.exclude = exclude;
                 o.max_to_keep = max_to_keep;
                 o.basename = basename;
                 return ScopeValue(scope, df::Saver::Create(scope, o));
               }),
           py::arg("scope"), py::arg("var_list"), py::arg("max_to_keep"), py::arg("basename"),
           py::arg("exclude") = std::vector<df::Output>{}, py::arg("allow_extra") = false,
           py::arg("slices") =
               std::vector<std::tuple<df::Output, std::string, std::vector<int64_t>, std::vector<int64_t>>>{})
      .def("save",
           [](df::Saver& self, PySession& sess, const std::string& logdir, std::optional<int64_t> step) {
             if (sess.closed) Throw(absl::FailedPreconditionError("Attempted to use a closed Session."));
             absl::StatusOr<std::string> prefix;
             {
               py::gil_scoped_release release;
               prefix = step ? self.Save(sess.session.get(), logdir, *step)
                             : self.SaveUnnumbered(sess.session.get(), logdir);
             }
             return Value(std::move(prefix));
           })
      .def("restore",
           [](df::Saver& self, PySession& sess, const std::string& prefix) {
             if (sess.closed) Throw(absl::FailedPreconditionError("Attempted to use a closed Session."));
             absl::Status s;
             {
               py::gil_scoped_release release;
               s = self.Restore(sess.session.get(), prefix);
             }
             Check(s);
           })
      // The same through a monitored session (a Supervisor's saver.save(sess, ...)).
      .def("save",
           [](df::Saver& self, df::MonitoredSession& sess, const std::string& logdir, std::optional<int64_t> step) {
             absl::StatusOr<std::string> prefix;
             {
               py::gil_scoped_release release;
               prefix = step ? self.Save(sess.raw_session(), logdir, *step)
                             : self.SaveUnnumbered(sess.raw_session(), logdir);
             }
             return Value(std::move(prefix));
           })
      .def("restore", [](df::Saver& self, df::MonitoredSession& sess, const std::string& prefix) {
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = self.Restore(sess.raw_session(), prefix);
        }
        Check(s);
      });
  // Tensors of a checkpoint whose names start with one of `prefixes`, as numpy arrays.
  m.def("read_checkpoint_tensors", [](const std::string& prefix, const std::vector<std::string>& prefixes) {
    auto want = [&prefixes](const std::string& name) {
      for (const std::string& p : prefixes) {
        if (name.rfind(p, 0) == 0) return true;
      }
      return false;
    };
    absl::StatusOr<std::map<std::string, df::Tensor>> tensors;
    {
      py::gil_scoped_release release;
      tensors = df::ReadCheckpointTensors(prefix, want);
    }
    py::dict out;
    for (auto& [name, t] : Value(std::move(tensors))) out[py::str(name)] = TensorToNumpy(t);
    return out;
  });
  m.def("latest_checkpoint", [](const std::string& logdir) -> py::object {
    absl::StatusOr<std::string> p = df::LatestCheckpoint(logdir);
    if (absl::IsNotFound(p.status())) return py::none();
    return py::str(Value(std::move(p)));
  });
}

}  // namespace distflow_py
