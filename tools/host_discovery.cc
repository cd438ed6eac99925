#include "host_discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace distflow {

absl::StatusOr<std::vector<DiscoveredHost>> ParseHostList(const std::string& text) {
  std::vector<DiscoveredHost> hosts;
  std::set<std::string> seen;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, " '", line,
                                                     "' of the host discovery script's output: ", why,
                                                     " (each line is host or host:slots, e.g. 10.0.0.7:2)"));
    };
    DiscoveredHost h;
    const size_t colon = line.rfind(':');
    h.host = std::string(colon == absl::string_view::npos ? line : line.substr(0, colon));
    if (colon != absl::string_view::npos) {
      absl::string_view slots = line.substr(colon + 1);
      if (!absl::SimpleAtoi(slots, &h.slots) || h.slots < 1 || h.slots > 1024) {
        return bad(absl::StrCat("slots '", slots, "' is not a number from 1 to 1024"));
      }
    }
    if (h.host.empty()) return bad("no host");
    for (char c : h.host) {
      if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == ',' || c == '|' || c == ';') {
        return bad(absl::StrCat("'", h.host, "' is not a host name or address"));
      }
    }
    if (!seen.insert(h.host).second) return bad(absl::StrCat("host ", h.host, " is listed twice"));
    hosts.push_back(std::move(h));
  }
  return hosts;
}

int TotalSlots(const std::vector<DiscoveredHost>& hosts) {
  int n = 0;
  for (const DiscoveredHost& h : hosts) n += h.slots;
  return n;
}

absl::StatusOr<std::vector<DiscoveredHost>> DiscoverHosts(const std::string& script, absl::Duration timeout) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  close(out[1]);
  std::string text;
  bool timed_out = false;
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline is checked above
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // EOF: the script closed its output
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (1 << 20)) {
      kill(-pid, SIGKILL);
      close(out[0]);
      waitpid(pid, nullptr, 0);
      return absl::InvalidArgumentError(absl::StrCat("the host discovery script '", script,
                                                     "' printed more than 1 MiB; it should print one line "
                                                     "per host"));
    }
  }
  close(out[0]);
  if (timed_out) kill(-pid, SIGKILL);
  // The output is closed; the script itself gets the rest of the timeout
  // (at least a second) to exit.
  int status = 0;
  const absl::Time exit_deadline = std::max(deadline, absl::Now() + absl::Seconds(1));
  pid_t got = 0;
  while ((got = waitpid(pid, &status, WNOHANG)) == 0) {
    if (absl::Now() > exit_deadline) {
      timed_out = true;
      kill(-pid, SIGKILL);
      got = waitpid(pid, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("the host discovery script '", script, "' did not finish within ",
                                                    absl::FormatDuration(timeout), "; it was killed"));
  }
  if (got != pid) {
    return absl::InternalError(absl::StrCat("waiting for the host discovery script: ", strerror(errno)));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(
        absl::StrCat("the host discovery script '", script, "' ",
                     WIFEXITED(status) ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                                       : absl::StrCat("was killed by signal ", WTERMSIG(status)),
                     WIFEXITED(status) && WEXITSTATUS(status) == 127 ? " (not found or not runnable?)" : ""));
  }
  return ParseHostList(text);
}

}  // namespace distflow
