// A task's process as the launcher (launcher.cc) sees it: starting it in
// its own process group, copying its output line by line with the task's
// name in front, and saying how it ended. Internal to distflow-launch.
//
// Not thread-safe: the launcher's one loop calls these.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace distflow {

// One of a task's output pipes.
struct Stream {
  int fd = -1;
  int out_fd;  // where its lines go
  std::string partial;
};

// A started task: its pid (its process group too) and the read ends of its
// stdout and stderr.
struct Child {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  int in_fd = -1;  // with `stdin_pipe`: the write end of its stdin (closing it ends its input)
};

// Starts `argv` as a child in its own process group, killed if the launcher
// dies, with DISTFLOW_CONFIG set to `config` unless it is empty and the
// variables of `env` set; its stdin is the launcher's, or with
// `stdin_pipe` a pipe whose write end is `child->in_fd` (a remote task's
// watchdog reads it: remote_shell.h). False (said on stderr, naming the
// program) if a pipe or the fork failed, with every descriptor it opened
// closed again; a program that cannot run exits 127 naming itself.
bool StartChild(std::vector<std::string>& argv, const std::string& config, Child* child,
                const std::vector<std::pair<std::string, std::string>>& env = {}, bool stdin_pipe = false);

// Reads what is there on `s` and copies its whole lines to `s.out_fd`,
// each with `prefix` in front and one write per line; at EOF, the rest too,
// and closes `s`.
void PumpLines(const std::string& prefix, Stream& s);

// How a child ended, from its wait status: "exited with status 1", "was
// killed by signal 9 (Killed)".
std::string DescribeWaitStatus(int status);

}  // namespace distflow
