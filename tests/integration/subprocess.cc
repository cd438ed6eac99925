#include "subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/env.h"
#include "base/wait_until.h"

extern char** environ;

namespace distflow {
namespace subprocess {

std::string TempPath(const std::string& tag) {
  static int n = 0;
  return absl::StrCat("/tmp/distflow_proc_", getpid(), "_", n++, "_", tag, ".log");
}

Proc Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  Proc p;
  p.out_path = TempPath("out");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, p.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) env_store.emplace_back(*e);
  for (const std::string& e : env) env_store.push_back(e);
  std::vector<char*> envp;
  for (std::string& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  if (posix_spawn(&p.pid, args[0], &fa, nullptr, args.data(), envp.data()) != 0) p.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return p;
}

int Wait(Proc& p, int seconds) {
  int status = 0;
  const bool exited = WaitUntil([&] { return waitpid(p.pid, &status, WNOHANG) == p.pid; }, absl::Seconds(seconds),
                                absl::Milliseconds(50));
  if (exited) {
    p.pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  kill(p.pid, SIGKILL);
  waitpid(p.pid, nullptr, 0);
  p.pid = -1;
  return -1;
}

namespace {

// The state letter of /proc/PID/stat ("pid (comm) S ..."; comm may hold
// spaces and parentheses, so read after the last ')'), or '?'.
char ProcState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

bool Stopped(pid_t pid) {
  const char s = ProcState(pid);
  return s == 'T' || s == 't';
}

}  // namespace

bool StopProcess(const Proc& p, int seconds) {
  if (p.pid <= 0 || kill(p.pid, SIGSTOP) != 0) return false;
  return WaitUntil([&] { return Stopped(p.pid); }, absl::Seconds(seconds), absl::Milliseconds(5));
}

bool ContinueProcess(const Proc& p, int seconds) {
  if (p.pid <= 0 || kill(p.pid, SIGCONT) != 0) return false;
  return WaitUntil([&] { return !Stopped(p.pid); }, absl::Seconds(seconds), absl::Milliseconds(5));
}

std::string Output(const Proc& p) {
  std::ifstream in(p.out_path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitForOutput(const Proc& p, const std::string& text, int seconds) {
  return WaitUntil([&] { return Output(p).find(text) != std::string::npos; }, absl::Seconds(seconds),
                   absl::Milliseconds(100));
}

bool MakeCertificates(const std::string& dir, const std::string& prefix) {
  const std::string cmd = absl::StrCat(
      "set -e; mkdir -p '", dir, "'; cd '", dir, "';", "openssl req -x509 -newkey rsa:2048 -nodes -keyout ", prefix,
      "ca.key -out ", prefix, "ca.pem -days 2 -subj /CN=distflow-test-ca 2>/dev/null;",
      "openssl req -newkey rsa:2048 -nodes -keyout ", prefix, "node.key -out ", prefix,
      "node.csr -subj /CN=localhost 2>/dev/null;",
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ", prefix,
      "ext.cnf;", "openssl x509 -req -in ", prefix, "node.csr -CA ", prefix, "ca.pem -CAkey ", prefix,
      "ca.key -CAcreateserial -out ", prefix, "node.pem -days 2 -extfile ", prefix, "ext.cnf 2>/dev/null");
  return std::system(cmd.c_str()) == 0;
}

int FreePort() { return Env::Default()->PickUnusedPort().value_or(0); }

std::string ScrapeMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t r; (r = read(fd, buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(r));
    }
  }
  if (fd >= 0) close(fd);
  return text;
}

double MetricValue(const std::string& page, const std::string& sample) {
  const size_t at = page.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(page.c_str() + at + 1 + sample.size() + 1, nullptr);
}

double NumberAfter(const std::string& text, const std::string& label) {
  size_t at = text.find(label);
  if (at == std::string::npos) return -1;
  at += label.size();
  const size_t end = text.find_first_not_of("0123456789.", at);
  double v = -1;
  return absl::SimpleAtod(text.substr(at, end - at), &v) ? v : -1;
}

}  // namespace subprocess
}  // namespace distflow
