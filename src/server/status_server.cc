#include "server/status_server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/env.h"
#include "base/logging.h"
#include "bulk/bulk_transfer.h"
#include "httplib.h"
#include "master/master.h"
#include "rpc/worker_cache.h"
#include "worker/worker.h"

namespace distflow {
namespace {

std::string Html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Duration(absl::Duration d) {
  int64_t s = absl::ToInt64Seconds(d);
  if (s < 60) return absl::StrCat(s, " s");
  if (s < 3600) return absl::StrFormat("%d min %02d s", s / 60, s % 60);
  return absl::StrFormat("%d h %02d min", s / 3600, (s % 3600) / 60);
}

std::string Bytes(double b) {
  if (b < 1024) return absl::StrFormat("%.0f B", b);
  if (b < 1024.0 * 1024) return absl::StrFormat("%.1f KiB", b / 1024);
  if (b < 1024.0 * 1024 * 1024) return absl::StrFormat("%.1f MiB", b / 1024 / 1024);
  return absl::StrFormat("%.2f GiB", b / 1024 / 1024 / 1024);
}

struct VarSummary {
  int64_t count = 0;
  int64_t initialized = 0;
  double bytes = 0;
};

VarSummary SummarizeVars(Worker* worker) {
  VarSummary v;
  for (const auto& [container, name, var] : worker->device()->resource_manager()->AllVars()) {
    ++v.count;
    absl::ReaderMutexLock lock(var->mu());
    if (var->is_initialized()) {
      ++v.initialized;
      v.bytes += static_cast<double>(var->value().TotalBytes());
    }
  }
  return v;
}

// Whether `task` answers a GetStatus call within half a second.
std::string PeerState(WorkerCache* peers, const std::string& task) {
  absl::StatusOr<proto::WorkerService::Stub*> stub = peers->Stub(task);
  if (!stub.ok()) return std::string(stub.status().message());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  proto::GetStatusRequest req;
  proto::GetStatusResponse resp;
  grpc::Status s = (*stub)->GetStatus(&ctx, req, &resp);
  if (s.ok()) return "up";
  return absl::StrCat("not answering (", s.error_message(), ")");
}

constexpr char kStyle[] =
    "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:22px 0 8px}"
    "table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left;"
    "font-size:14px}th{background:#f2f2f2}.up{color:#0a7a0a;font-weight:bold}.down{color:#b00;font-weight:bold}"
    ".err{color:#b00}.muted{color:#777;font-size:13px}svg{background:#fafafa;border:1px solid #ddd}";

}  // namespace

std::string SvgChart(const std::string& series, const std::vector<ScalarPoint>& points) {
  constexpr double kW = 640, kH = 220, kLeft = 60, kRight = 16, kTop = 14, kBottom = 30;
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  std::vector<ScalarPoint> finite;
  for (const ScalarPoint& p : points) {
    if (!std::isfinite(p.value)) continue;
    finite.push_back(p);
    xmin = std::min(xmin, static_cast<double>(p.step));
    xmax = std::max(xmax, static_cast<double>(p.step));
    ymin = std::min(ymin, p.value);
    ymax = std::max(ymax, p.value);
  }
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "data-series=\"%s\" data-points=\"%d\" role=\"img\" aria-label=\"%s by global step\">",
      kW, kH, kW, kH, Html(series), finite.size(), Html(series));
  if (finite.empty()) return out + "<text x=\"20\" y=\"30\">no points yet</text></svg>";
  if (xmax == xmin) xmax = xmin + 1;
  if (ymax == ymin) {
    ymax += 0.5;
    ymin -= 0.5;
  }
  auto X = [&](double x) { return kLeft + (x - xmin) / (xmax - xmin) * (kW - kLeft - kRight); };
  auto Y = [&](double y) { return kTop + (ymax - y) / (ymax - ymin) * (kH - kTop - kBottom); };
  // Axes and their extreme values.
  absl::StrAppendFormat(&out, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#888\"/>", kLeft,
                        kH - kBottom, kW - kRight, kH - kBottom);
  absl::StrAppendFormat(&out, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#888\"/>", kLeft, kTop,
                        kLeft, kH - kBottom);
  absl::StrAppendFormat(&out,
                        "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"end\">%.4g</text>"
                        "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"end\">%.4g</text>",
                        kLeft - 4, kTop + 8, ymax, kLeft - 4, kH - kBottom, ymin);
  absl::StrAppendFormat(&out,
                        "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">step %.0f</text>"
                        "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"end\">step %.0f</text>",
                        kLeft, kH - 10, xmin, kW - kRight, kH - 10, xmax);
  out += "<polyline fill=\"none\" stroke=\"#1f6feb\" stroke-width=\"2\" points=\"";
  for (size_t i = 0; i < finite.size(); ++i) {
    absl::StrAppendFormat(&out, "%s%.1f,%.1f", i == 0 ? "" : " ", X(static_cast<double>(finite[i].step)),
                          Y(finite[i].value));
  }
  out += "\"/></svg>";
  return out;
}

StatusServer::StatusServer(StatusView view) : view_(std::move(view)) {}

absl::StatusOr<std::unique_ptr<StatusServer>> StatusServer::Start(StatusView view, const std::string& host, int port) {
  std::unique_ptr<StatusServer> s(new StatusServer(std::move(view)));
  s->http_ = std::make_unique<httplib::Server>();
  StatusServer* self = s.get();
  s->http_->Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->MetricsText(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s->http_->Get("/status", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->StatusHtml(), "text/html; charset=utf-8");
  });
  s->http_->Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/status"); });
  const std::string bind = host.empty() ? "127.0.0.1" : host;
  if (port == 0) {
    s->port_ = s->http_->bind_to_any_port(bind);
  } else if (s->http_->bind_to_port(bind, port)) {
    s->port_ = port;
  }
  if (s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", bind, ":", port,
                                               " for the status page (the port is taken or the address is not here)"));
  }
  // What the task holds now, computed when /metrics is read.
  const std::string task = s->view_.task;
  s->collector_ = Metrics::Global()->AddCollector([self, task](MetricWriter* w) {
    const MetricLabels t{{"task", task}};
    w->Gauge("distflow_uptime_seconds", "Seconds since this task's server started", t,
             absl::ToDoubleSeconds(self->Now() - self->view_.started));
    w->Gauge("distflow_active_sessions", "Sessions open on this task's master", t,
             static_cast<double>(self->view_.master->num_sessions()));
    VarSummary v = SummarizeVars(self->view_.worker);
    w->Gauge("distflow_variables", "Variables this task holds", t, static_cast<double>(v.count));
    w->Gauge("distflow_variables_initialized", "Variables this task holds that have a value", t,
             static_cast<double>(v.initialized));
    w->Gauge("distflow_variable_bytes", "Bytes of the variable values this task holds", t, v.bytes);
    if (self->view_.bulk != nullptr) {
      w->Counter("distflow_bulk_bytes_served_total", "Bytes this task's bulk port sent", t,
                 static_cast<double>(self->view_.bulk->bytes_served()));
      w->Counter("distflow_bulk_bytes_received_total", "Bytes this task's bulk port received", t,
                 static_cast<double>(self->view_.bulk->bytes_received()));
      w->Gauge("distflow_bulk_shared_memory",
               "1 if this task's bulk port serves peers on this host through shared memory, 0 if it is off", t,
               self->view_.bulk->shared_memory_enabled() ? 1.0 : 0.0);
      w->Counter("distflow_bulk_shm_bytes_served_total",
                 "Of the bytes this task's bulk port sent, those that went through shared memory", t,
                 static_cast<double>(self->view_.bulk->shm_bytes_served()));
      w->Counter("distflow_bulk_shm_bytes_received_total",
                 "Of the bytes this task's bulk port received, those that came through shared memory", t,
                 static_cast<double>(self->view_.bulk->shm_bytes_received()));
    }
  });
  s->thread_ = std::thread([self] { self->http_->listen_after_bind(); });
  return s;
}

StatusServer::~StatusServer() { Stop(); }

void StatusServer::Stop() {
  if (collector_ != 0) {
    Metrics::Global()->RemoveCollector(collector_);
    collector_ = 0;
  }
  if (http_ != nullptr) http_->stop();
  if (thread_.joinable()) thread_.join();
}

absl::Time StatusServer::Now() const {
  return absl::FromUnixMicros((view_.peers != nullptr ? view_.peers->clock() : Env::Default())->NowMicros());
}

std::string StatusServer::MetricsText() const { return Metrics::Global()->PrometheusText(); }

std::string StatusServer::StatusHtml() const {
  const absl::Time now = Now();
  std::string out = absl::StrCat("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>", Html(view_.task),
                                 " - distflow</title><style>", kStyle, "</style></head><body>");
  absl::StrAppend(&out, "<h1>", Html(view_.task), "</h1><div class=\"muted\">gRPC ", Html(view_.grpc_address),
                  " &middot; up ", Duration(now - view_.started), " &middot; page made ",
                  absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", now, absl::LocalTimeZone()), "</div>");

  absl::StrAppend(&out, "<h2>Cluster</h2><table><tr><th>task</th><th>address</th><th>state</th></tr>");
  for (const auto& [job, tasks] : view_.cluster.job_map()) {
    for (const auto& [index, spec_address] : tasks) {
      const std::string name = absl::StrCat("/job:", job, "/replica:0/task:", index);
      // Where this task calls it now (a port-0 task, or one StartLocalCluster moved).
      const std::string address =
          view_.peers != nullptr ? view_.peers->AddressOf(name).value_or(spec_address) : spec_address;
      const bool self = name == view_.task;
      const std::string state = self ? "up" : PeerState(view_.peers, name);
      absl::StrAppend(&out, "<tr><td>", Html(name), self ? " (this task)" : "", "</td><td>", Html(address),
                      "</td><td class=\"", state == "up" ? "up" : "down", "\">", Html(state), "</td></tr>");
    }
  }
  out += "</table>";

  VarSummary v = SummarizeVars(view_.worker);
  absl::StrAppend(&out, "<h2>Held here</h2><table><tr><td>variables</td><td>", v.count, " (", v.initialized,
                  " with a value, ", Bytes(v.bytes), ")</td></tr><tr><td>open sessions</td><td>",
                  view_.master->num_sessions(),
                  view_.master->sessions_being_created() > 0
                      ? absl::StrCat(" (and ", view_.master->sessions_being_created(), " waiting for the cluster)")
                      : "",
                  "</td></tr>");
  if (view_.bulk != nullptr) {
    absl::StrAppend(&out, "<tr><td>bulk port ", view_.bulk->port(), "</td><td>sent ",
                    Bytes(static_cast<double>(view_.bulk->bytes_served())), ", received ",
                    Bytes(static_cast<double>(view_.bulk->bytes_received())), "; shared memory ",
                    view_.bulk->shared_memory_enabled() ? "on" : "off", "</td></tr>");
  }
  out += "</table>";

  std::map<std::string, std::vector<ScalarPoint>> series = Metrics::Global()->ScalarSeries();
  if (!series.empty()) {
    out += "<h2>Training</h2>";
    for (const auto& [name, pts] : series) {
      absl::StrAppend(&out, "<h3>", Html(name), "</h3><div class=\"muted\">", pts.size(), " points",
                      pts.empty() ? "" : absl::StrFormat(", last %.6g at step %d", pts.back().value, pts.back().step),
                      "</div>", SvgChart(name, pts));
    }
  }

  std::vector<Master::StepRecord> steps = view_.master->RecentSteps();
  absl::StrAppend(&out, "<h2>Recent steps run by this task's master</h2>");
  if (steps.empty()) {
    out += "<div class=\"muted\">none yet</div>";
  } else {
    out += "<table><tr><th>ended</th><th>seconds</th><th>status</th></tr>";
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      absl::StrAppend(&out, "<tr><td>", Duration(now - it->end), " ago</td><td>", absl::StrFormat("%.4f", it->seconds),
                      "</td><td", it->status == "OK" ? "" : " class=\"err\"", ">", Html(it->status), "</td></tr>");
    }
    out += "</table>";
  }
  out += "<p class=\"muted\">Metrics for Prometheus: <a href=\"/metrics\">/metrics</a></p></body></html>\n";
  return out;
}

}  // namespace distflow
