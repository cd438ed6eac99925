#include "mnist_distributed_stop.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

namespace mnist_distributed {
namespace {

volatile std::sig_atomic_t sigterm_received = 0;
unsigned stop_grace_secs = 25;  // set before the handler is installed

void OnSigterm(int) {
  sigterm_received = 1;
  alarm(stop_grace_secs);
}

void OnStopGraceOver(int) {
  static const char kMessage[] =
      "mnist_distributed: not stopped within --stop_grace_secs of the SIGTERM (a step waits for a task that is "
      "gone?); exiting\n";
  (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  _exit(1);
}

}  // namespace

void StopCleanlyOnSigterm(int grace_secs) {
  stop_grace_secs = static_cast<unsigned>(std::max(1, grace_secs));
  struct sigaction sa = {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = OnStopGraceOver;
  sigaction(SIGALRM, &sa, nullptr);
  sa.sa_handler = OnSigterm;
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  sigaction(SIGTERM, &sa, nullptr);
}

bool SigtermReceived() { return sigterm_received != 0; }

}  // namespace mnist_distributed
