#include "launcher_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "launcher.h"

namespace distflow {

// One write per line, so lines of different tasks never mix.
void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

void Say(const std::string& line) { WriteAll(STDOUT_FILENO, absl::StrCat("[launch] ", line, "\n")); }
void Complain(const std::string& line) { WriteAll(STDERR_FILENO, absl::StrCat("[launch] ", line, "\n")); }

namespace {

// Closes the descriptors of `fds` that are open (not -1).
void CloseOpen(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
}

}  // namespace

bool StartChild(std::vector<std::string>& args, const std::string& config, Child* child,
                const std::vector<std::pair<std::string, std::string>>& env, bool stdin_pipe) {
  const std::string program = args.empty() ? std::string("(no program)") : args[0];
  // pipe2 leaves an array as it was when it fails: -1 until a pipe exists.
  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || (stdin_pipe && pipe2(in, O_CLOEXEC) != 0)) {
    const int error = errno;
    CloseOpen({out[0], out[1], err[0], err[1], in[0], in[1]});
    Complain(absl::StrCat("cannot start ", program, ": making a pipe for its output failed: ", strerror(error),
                          error == EMFILE || error == ENFILE ? " (raise the open file limit: ulimit -n)" : ""));
    return false;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    const int error = errno;
    CloseOpen({out[0], out[1], err[0], err[1], in[0], in[1]});
    Complain(absl::StrCat("cannot start ", program, ": fork failed: ", strerror(error),
                          error == EAGAIN   ? " (the process limit, ulimit -u, or the kernel's is reached)"
                          : error == ENOMEM ? " (out of memory)"
                                            : ""));
    return false;
  }
  if (pid == 0) {
    // The child: its own process group, dead when the launcher dies.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the launcher died before prctl
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    if (stdin_pipe) dup2(in[0], STDIN_FILENO);
    if (!config.empty()) setenv("DISTFLOW_CONFIG", config.c_str(), 1);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    execvp(argv[0], argv.data());
    std::string msg = absl::StrCat("cannot run ", argv[0], ": ", strerror(errno), "\n");
    ssize_t ignored = write(STDERR_FILENO, msg.data(), msg.size());
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from here, so a signal sent right away finds the group
  close(out[1]);
  close(err[1]);
  if (stdin_pipe) close(in[0]);
  child->in_fd = in[1];
  child->pid = pid;
  child->out_fd = out[0];
  child->err_fd = err[0];
  return true;
}

void PumpLines(const std::string& prefix, Stream& s) {
  char buf[65536];
  ssize_t n = read(s.fd, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (!s.partial.empty()) WriteAll(s.out_fd, absl::StrCat(prefix, s.partial, "\n"));
    s.partial.clear();
    close(s.fd);
    s.fd = -1;
    return;
  }
  s.partial.append(buf, static_cast<size_t>(n));
  size_t start = 0, nl;
  std::string lines;
  while ((nl = s.partial.find('\n', start)) != std::string::npos) {
    absl::StrAppend(&lines, prefix, absl::string_view(s.partial).substr(start, nl - start + 1));
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (s.partial.size() > (1 << 20)) {  // a line that never ends is cut, not hoarded
    absl::StrAppend(&lines, prefix, s.partial, "\n");
    s.partial.clear();
  }
  // Lines go out one write each: a write of up to PIPE_BUF bytes is atomic.
  size_t from = 0, end;
  while ((end = lines.find('\n', from)) != std::string::npos) {
    WriteAll(s.out_fd, lines.substr(from, end - from + 1));
    from = end + 1;
  }
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

}  // namespace distflow
