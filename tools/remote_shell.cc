#include "remote_shell.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

extern char** environ;

namespace distflow {

namespace {

// This machine's interface addresses, as text.
std::set<std::string> InterfaceAddresses() {
  std::set<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {0};
    if (i->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, text, sizeof(text));
    } else {
      continue;
    }
    out.insert(text);
  }
  freeifaddrs(list);
  return out;
}

bool LocalAddress(const std::string& ip, const std::set<std::string>& interfaces) {
  return absl::StartsWith(ip, "127.") || ip == "0.0.0.0" || ip == "::1" || ip == "::" || interfaces.count(ip) > 0;
}

}  // namespace

bool IsLocalHost(const std::string& host) {
  if (host.empty() || host == "localhost") return true;
  const std::set<std::string> interfaces = InterfaceAddresses();
  in6_addr scratch;
  if (inet_pton(AF_INET, host.c_str(), &scratch) == 1 || inet_pton(AF_INET6, host.c_str(), &scratch) == 1) {
    return LocalAddress(host, interfaces);
  }
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) == 0 && host == name) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool local = false;
  for (addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {0};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof(text));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof(text));
    } else {
      continue;
    }
    local = LocalAddress(text, interfaces);
  }
  freeaddrinfo(found);
  return local;
}

std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

std::vector<std::pair<std::string, std::string>> ForwardedEnvironment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (name == "DISTFLOW_AUTH_TOKEN" || name == "DISTFLOW_CONFIG") continue;
    if (absl::StartsWith(name, "DISTFLOW_") || absl::StartsWith(name, "HOROVOD_") || name == "PYTHONPATH") {
      out.emplace_back(name, entry.substr(eq + 1));
    }
  }
  return out;
}

std::vector<std::string> RemoteCommand(const std::string& remote_shell, const std::string& host,
                                       const std::vector<std::string>& argv,
                                       const std::vector<std::pair<std::string, std::string>>& env,
                                       const std::string& cwd, int grace_secs) {
  std::vector<std::string> words;
  for (const auto& [name, value] : env) words.push_back(ShellQuote(absl::StrCat(name, "=", value)));
  for (const std::string& a : argv) words.push_back(ShellQuote(a));
  // The task in the background, its stdin closed; the watchdog reads the
  // remote shell's stdin (kept on fd 3: an asynchronous command's stdin is
  // /dev/null) and stops the task when it ends.
  const std::string script =
      absl::StrCat("cd ", ShellQuote(cwd), " || { echo \"distflow-launch: no directory \"", ShellQuote(cwd),
                   "\" on $(hostname)\" >&2; exit 126; }\n",  //
                   "exec 3<&0\n",                             //
                   "env ", absl::StrJoin(words, " "), " </dev/null 3<&- &\n", "p=$!\n",
                   "{ while read -r _; do :; done; kill -TERM $p; n=0; while [ $n -lt ", grace_secs,
                   " ] && kill -0 $p; do sleep 1; n=$((n + 1)); done; kill -KILL $p; } <&3 >/dev/null 2>&1 &\n",
                   "w=$!\n", "exec 3<&-\n", "wait $p\n", "s=$?\n", "kill $w 2>/dev/null\n", "exit $s\n");
  const std::string shell = absl::StrReplaceAll(remote_shell, {{"{host}", ShellQuote(host)}});
  return {"/bin/sh", "-c", absl::StrCat(shell, " ", ShellQuote(script))};
}

bool StartRemoteChild(const std::string& remote_shell, const std::string& host, const std::vector<std::string>& argv,
                      const std::string& config, const std::vector<std::pair<std::string, std::string>>& env,
                      int grace_secs, Child* child) {
  // Everything the task needs travels in its command line: the remote
  // shell passes no environment on.
  std::vector<std::pair<std::string, std::string>> all = ForwardedEnvironment();
  if (!config.empty()) all.emplace_back("DISTFLOW_CONFIG", config);
  all.insert(all.end(), env.begin(), env.end());
  char cwd[4096];
  std::vector<std::string> command =
      RemoteCommand(remote_shell, host, argv, all, getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "/", grace_secs);
  return StartChild(command, "", child, {}, /*stdin_pipe=*/true);
}

std::string DescribeRemoteEnd(int status, const std::string& host, const std::string& remote_shell) {
  std::string how =
      absl::StrCat(DescribeWaitStatus(status), " (started on ", host, " through --remote_shell='", remote_shell, "'");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 255) {
    absl::StrAppend(&how, "; 255 is also what ssh and ip netns exec exit with when they cannot reach the host");
  } else if (WIFEXITED(status) && WEXITSTATUS(status) > 128 && WEXITSTATUS(status) < 160) {
    absl::StrAppend(&how, "; on its host it was killed by signal ", WEXITSTATUS(status) - 128);
  }
  return how + ")";
}

}  // namespace distflow
