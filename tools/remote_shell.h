// Tasks on other machines for distflow-launch (--remote_shell), as
// horovodrun starts its ranks with ssh: a task whose host is not this
// machine runs through a remote shell command, by default
// `ssh -o BatchMode=yes {host}`, with {host} replaced by the task's host.
//
// The task's command reaches the remote shell as one more argument, a
// shell command line (what ssh runs on the other side); a runner that
// takes a program and its arguments instead needs a shell at the end of
// its template: `ip netns exec {host} sh -c`. That command line changes to
// the launcher's directory, sets the task's environment (DISTFLOW_CONFIG,
// a joiner's DISTFLOW_JOIN/DISTFLOW_JOIN_AS, and the launcher's own
// DISTFLOW_*, HOROVOD_* and PYTHONPATH variables: ssh does not pass the
// environment on), and runs the task beside a watchdog that reads the
// remote shell's stdin: the launcher holds its other end, so when the
// launcher stops the task, dies (even by SIGKILL), or the connection
// breaks, the watchdog sees the end of its input and stops the task
// (SIGTERM, then SIGKILL after the grace period). The task's exit status
// comes back as the remote shell's; a shell that cannot reach the host
// (ssh exits 255) looks like a task that failed, and is named as one.
//
// Thread-compatible: the functions share no state.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launcher_child.h"

namespace distflow {

// The launcher's default --remote_shell.
inline constexpr char kDefaultRemoteShell[] = "ssh -o BatchMode=yes {host}";

// True if `host` is this machine: "localhost", a loopback address, the
// wildcard address, this machine's host name, one of its interfaces'
// addresses, or a name that resolves to one of them. A name that does not
// resolve is not this machine.
bool IsLocalHost(const std::string& host);

// `s` quoted for a POSIX shell (single quotes).
std::string ShellQuote(const std::string& s);

// The variables a remote task gets besides its own: the launcher's
// DISTFLOW_*, HOROVOD_* and PYTHONPATH, except DISTFLOW_AUTH_TOKEN (a
// remote shell's command line is visible to every user of both machines;
// give remote hosts the token in a file, --auth_token_file).
std::vector<std::pair<std::string, std::string>> ForwardedEnvironment();

// The argv (/bin/sh -c ...) that runs `argv` on `host` through
// `remote_shell` with the variables of `env` set, in directory `cwd`,
// stopped `grace_secs` after SIGTERM when its stdin ends (see above).
std::vector<std::string> RemoteCommand(const std::string& remote_shell, const std::string& host,
                                       const std::vector<std::string>& argv,
                                       const std::vector<std::pair<std::string, std::string>>& env,
                                       const std::string& cwd, int grace_secs);

// Starts `argv` on `host` as a child of this process (StartChild) through
// RemoteCommand, in the launcher's directory, with DISTFLOW_CONFIG set to
// `config` unless it is empty, the variables of `env` and the forwarded
// ones; `child->in_fd` is the stdin its watchdog reads. False as
// StartChild.
bool StartRemoteChild(const std::string& remote_shell, const std::string& host, const std::vector<std::string>& argv,
                      const std::string& config, const std::vector<std::pair<std::string, std::string>>& env,
                      int grace_secs, Child* child);

// How a remote task ended (DescribeWaitStatus), with its host and remote
// shell, and what an exit status of 255 or 129..159 may mean there.
std::string DescribeRemoteEnd(int status, const std::string& host, const std::string& remote_shell);

}  // namespace distflow
