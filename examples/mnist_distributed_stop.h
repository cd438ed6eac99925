// SIGTERM handling of the book's distributed example: the first SIGTERM
// (what Kubernetes, SLURM and distflow-launch send on scale-down) only sets a
// flag the training loop polls, so the current step finishes, and starts an
// alarm of --stop_grace_secs after which the process exits 1 saying it did not
// stop in time. The handler resets itself: a second SIGTERM kills at once.
// Async-signal-safe; install once, from main's thread.
#pragma once

namespace mnist_distributed {

// Installs the handlers; `grace_secs` (at least 1) is the time from the SIGTERM to the forced exit.
void StopCleanlyOnSigterm(int grace_secs);

// Whether a SIGTERM arrived since StopCleanlyOnSigterm.
bool SigtermReceived();

}  // namespace mnist_distributed
