// Helpers for tests that run the real binaries as separate processes: start
// one with its output in a log file, wait for it (bounded), read its output.
// Not thread-safe across tests; each test owns its Procs.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace distflow {
namespace subprocess {

struct Proc {
  pid_t pid = -1;
  std::string out_path;
};

// A fresh path under /tmp for this test process, tagged `tag`.
std::string TempPath(const std::string& tag);
// Starts `argv` with stdout and stderr sent to a log file; `env` adds variables.
Proc Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
// Waits up to `seconds` for the process; returns its exit code (128 + N for
// signal N), or -1 on timeout (then kills it).
int Wait(Proc& p, int seconds);
// Stops `p` with SIGSTOP and returns once the kernel shows it stopped
// (state T in /proc/PID/stat): a signal is delivered asynchronously, so
// without this the process may still run (send a heartbeat, answer a call)
// after kill() returns. False if it did not stop within `seconds`.
bool StopProcess(const Proc& p, int seconds = 60);
// Continues `p` (SIGCONT) and returns once it is no longer stopped; false
// if it still was after `seconds`.
bool ContinueProcess(const Proc& p, int seconds = 60);
// What the process has written so far.
std::string Output(const Proc& p);
// Whether `p`'s output holds `text` within `seconds`.
bool WaitForOutput(const Proc& p, const std::string& text, int seconds);
// A TCP port nothing listens on now.
int FreePort();
// A CA and a certificate it signed for localhost / 127.0.0.1 (server and
// client use), made with the openssl tool in `dir`: ca.pem, node.pem,
// node.key. With `prefix`, the files are named prefix_*. False if openssl failed.
bool MakeCertificates(const std::string& dir, const std::string& prefix);
// GET http://127.0.0.1:`port`/metrics as a scraper would: the whole response
// ("" if nothing answers).
std::string ScrapeMetrics(int port);
// The value of the sample `name{labels}` in a metrics page, -1 if absent.
double MetricValue(const std::string& page, const std::string& sample);
// The number right after `label`'s first occurrence in `text` (a process's
// output), -1 if absent or not a number.
double NumberAfter(const std::string& text, const std::string& label);

}  // namespace subprocess
}  // namespace distflow
