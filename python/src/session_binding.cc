// Sessions, servers and cluster specs of distflow._distflow: Session.run
// (feeds lent, fetches shared with numpy, optional step trace), Server,
// local cluster specs, ShutdownCluster, and elastic membership (a worker
// joining a running job, the coordinator's member list).
#include <algorithm>
#include <tuple>

#include "conversions.h"
#include "distflow/elastic.h"

namespace distflow_py {

void BindSession(py::module_& m) {
  m.def(
      "cluster_spec", [](const py::dict& jobs) { return ClusterToPython(ClusterFromPython(jobs)); },
      "Validates a {job: [addresses] or {index: address}} dict; returns it as {job: {index: address}}.");

  py::class_<PySession>(m, "Session")
      .def(py::init([](const std::string& target, const py::dict& options) {
             auto s = std::make_unique<PySession>();
             s->session = std::make_unique<df::Session>(target, SessionOptionsFromPython(options));
             return s;
           }),
           py::arg("target") = "", py::arg("options") = py::dict())
      .def(
          "run",
          [](PySession& self, const std::vector<std::pair<df::Output, py::object>>& feeds,
             const std::vector<df::Output>& fetches, const std::vector<df::Operation>& targets, int64_t timeout_ms,
             bool trace) -> py::object {
            if (self.closed) Throw(absl::FailedPreconditionError("Attempted to use a closed Session."));
            df::FeedDict feed_dict = ToFeedDict(feeds);
            df::RunOptions options;
            options.timeout_ms = timeout_ms;
            df::StepStats stats;
            if (trace) options.trace = &stats;
            absl::StatusOr<std::vector<df::Tensor>> result;
            {
              py::gil_scoped_release release;
              result = self.session->Run(feed_dict, fetches, targets, options);
            }
            py::object values = ToNumpyList(std::move(result));
            if (!trace) return values;
            // The step's timeline (Chrome trace-event JSON) for RunMetadata.
            return py::make_tuple(values, py::bytes(df::ChromeTraceJson(stats)));
          },
          py::arg("feeds"), py::arg("fetches"), py::arg("targets"), py::arg("timeout_ms") = 0, py::arg("trace") = false)
      .def("close",
           [](PySession& self) {
             if (self.closed) return;
             self.closed = true;
             absl::Status s;
             {
               py::gil_scoped_release release;
               s = self.session->Close();
             }
             Check(s);
           })
      .def_property_readonly("closed", [](const PySession& s) { return s.closed; });

  py::class_<df::Server>(m, "Server")
      .def(py::init([](const py::dict& cluster, const std::string& job, int task, int status_port, bool shared_memory,
                       int heartbeat_timeout_ms) {
             df::ServerOptions options;
             options.status_port = status_port;
             options.shared_memory = shared_memory;
             if (heartbeat_timeout_ms > 0) {
               options.heartbeat_timeout_ms = heartbeat_timeout_ms;
               options.heartbeat_interval_ms = std::max(100, std::min(1000, heartbeat_timeout_ms / 4));
             }
             return Value(df::Server::Create(ClusterFromPython(cluster), job, task, options));
           }),
           py::arg("cluster"), py::arg("job_name"), py::arg("task_index"), py::arg("status_port") = -1,
           py::arg("shared_memory") = true, py::arg("heartbeat_timeout_ms") = 0)
      .def("start", [](df::Server& s) { Check(s.Start()); })
      .def("join", &df::Server::Join, py::call_guard<py::gil_scoped_release>())
      .def("stop", &df::Server::Stop, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("target", &df::Server::target)
      .def_property_readonly("task_name", &df::Server::task_name)
      .def_property_readonly("port", &df::Server::port)
      .def_property_readonly("status_port", &df::Server::status_port)
      .def_property_readonly("cluster", [](const df::Server& s) { return ClusterToPython(s.cluster()); });
  m.def("local_cluster_spec", [](int num_ps, int num_workers) {
    return ClusterToPython(Value(df::MakeLocalClusterSpec(num_ps, num_workers)));
  });

  m.def(
      "shutdown_cluster",
      [](const py::dict& cluster, const std::string& reason, const std::vector<std::string>& except) {
        df::ClusterSpec spec = ClusterFromPython(cluster);
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = df::ShutdownCluster(spec, reason, except);
        }
        Check(s);
      },
      py::arg("cluster"), py::arg("reason"), py::arg("except_tasks") = std::vector<std::string>());

  // Elastic membership (distflow/elastic.h): (task_index, cluster) of a
  // worker joining the running job, and the coordinator's members as
  // (task, address, state, joined) tuples.
  m.def(
      "join_cluster",
      [](const std::string& coordinator, const std::string& job, const std::string& address, double wait_secs) {
        absl::StatusOr<df::JoinedTask> joined;
        {
          py::gil_scoped_release release;
          joined = df::JoinCluster(coordinator, job, address, absl::Seconds(wait_secs));
        }
        df::JoinedTask me = Value(std::move(joined));
        return py::make_tuple(me.task_index, ClusterToPython(me.cluster));
      },
      py::arg("coordinator"), py::arg("job"), py::arg("address"), py::arg("wait_secs") = 60.0);
  // The elastic collective group (distflow/elastic.h): (generation, rank,
  // members) once rebuilt, and (waiting, gone) since the last build.
  m.def(
      "rebuild_elastic_group",
      [](df::Server& server, double timeout_secs) {
        absl::StatusOr<df::ElasticGroup> group;
        {
          py::gil_scoped_release release;
          group = df::RebuildElasticGroup(server, absl::Seconds(timeout_secs));
        }
        df::ElasticGroup g = Value(std::move(group));
        return py::make_tuple(g.generation, g.rank, g.members);
      },
      py::arg("server"), py::arg("timeout_secs") = 300.0);
  m.def("elastic_group_updates", [](df::Server& server) {
    absl::StatusOr<df::ElasticGroupChanges> changes;
    {
      py::gil_scoped_release release;
      changes = df::ElasticGroupUpdates(server);
    }
    df::ElasticGroupChanges c = Value(std::move(changes));
    return py::make_tuple(c.waiting, c.gone);
  });
  m.def("list_cluster_members", [](const std::string& coordinator) {
    absl::StatusOr<std::vector<df::ClusterMember>> members;
    {
      py::gil_scoped_release release;
      members = df::ListClusterMembers(coordinator);
    }
    std::vector<std::tuple<std::string, std::string, std::string, bool>> out;
    for (const df::ClusterMember& m : Value(std::move(members))) out.emplace_back(m.task, m.address, m.state, m.joined);
    return out;
  });
  m.def("live_worker_shard", [](const std::string& coordinator, int task_index, const std::string& job) {
    absl::StatusOr<df::WorkerShard> shard;
    {
      py::gil_scoped_release release;
      shard = df::LiveWorkerShard(coordinator, task_index, job);
    }
    df::WorkerShard s = Value(std::move(shard));
    return py::make_tuple(s.index, s.count);
  });
}

}  // namespace distflow_py
