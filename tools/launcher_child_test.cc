// StartChild when it cannot start a task: every descriptor it opened is
// closed again and the error names the program. Each case runs in a child
// process of the test, whose limits it lowers to make the pipe or the fork
// fail, and reports back through its exit status and stderr.
#include "launcher_child.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace distflow {
namespace {

// The descriptors this process has open.
int OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (readdir(dir) != nullptr) ++n;
  closedir(dir);
  return n - 3;  // ".", ".." and the directory's own descriptor
}

// Runs `body` in a child process with its stderr captured; the child's exit
// status (or -1 if it did not exit) and what it wrote on stderr.
std::pair<int, std::string> InChild(const std::function<int()>& body) {
  int captured[2];
  if (pipe(captured) != 0) return {-1, "pipe failed"};
  const pid_t pid = fork();
  if (pid == 0) {
    close(captured[0]);
    dup2(captured[1], STDERR_FILENO);
    close(captured[1]);
    _exit(body());
  }
  close(captured[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(captured[0], buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(captured[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return {-1, text};
  return {WEXITSTATUS(status), text};
}

// Exit statuses of the cases' children.
constexpr int kOk = 0, kStarted = 1, kLeaked = 2, kSetupFailed = 3;

// StartChild of /bin/true, which must fail; kLeaked if it left a
// descriptor open.
int StartMustFailWithoutLeaking() {
  const int before = OpenDescriptors();
  std::vector<std::string> argv = {"/bin/true"};
  Child child;
  if (StartChild(argv, "", &child, {}, /*stdin_pipe=*/true)) return kStarted;
  return OpenDescriptors() == before ? kOk : kLeaked;
}

TEST(StartChild, ClosesItsPipesAndNamesTheProgramWhenForkFails) {
  auto [code, err] = InChild([] {
    // No process may be created: a user other than root (whose limit the
    // kernel ignores) with RLIMIT_NPROC at 0.
    if (getuid() == 0 && setuid(65534) != 0) return kSetupFailed;
    const rlimit none{0, 0};
    if (setrlimit(RLIMIT_NPROC, &none) != 0) return kSetupFailed;
    return StartMustFailWithoutLeaking();
  });
  EXPECT_EQ(code, kOk) << err;
  EXPECT_NE(err.find("cannot start /bin/true: fork failed: "), std::string::npos) << err;
}

TEST(StartChild, ClosesThePipesItMadeWhenALaterPipeCannotBeMade) {
  auto [code, err] = InChild([] {
    // Every descriptor below the limit taken but two: the output pipe is
    // made, the error pipe is not.
    rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) != 0) return kSetupFailed;
    files.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) return kSetupFailed;
    std::vector<int> taken;
    for (int fd; (fd = dup(STDIN_FILENO)) >= 0;) taken.push_back(fd);
    if (taken.size() < 2) return kSetupFailed;
    close(taken.back());
    taken.pop_back();
    close(taken.back());
    taken.pop_back();
    return StartMustFailWithoutLeaking();
  });
  EXPECT_EQ(code, kOk) << err;
  EXPECT_NE(err.find("cannot start /bin/true: making a pipe for its output failed: Too many open files (raise the "
                     "open file limit: ulimit -n)"),
            std::string::npos)
      << err;
}

}  // namespace
}  // namespace distflow
