"""SIGTERM for programs that train in a MonitoredTrainingSession or a
Supervisor's managed_session (what Kubernetes, SLURM and distflow-launch
send on scale-down or preemption). In synchronous training the chief
runs its last step again (bounded) so that a step the workers began
completes (Supervisor._finish_sync_steps).

While such a session is open, the first SIGTERM only sets a flag (Python
runs the handler once the step in progress returns, so that step
finishes); the session then stops after it: a worker leaves the job (it
counts itself done and its server says goodbye), the chief also asks every
worker to stop after its step, saves its last checkpoint, waits a bounded
time for the workers and ends the cluster. The handler resets itself: a
second SIGTERM kills at once. A program that installed its own SIGTERM
handler keeps it (nothing is installed then), and the handler is put back
when the last session closes. Main thread only; not for other threads."""
import signal
import threading

_received = False
_sessions = set()


def _on_sigterm(signum, frame):
    global _received
    _received = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills


def install(session):
    """Watches for SIGTERM while `session` is open; False if the program
    handles SIGTERM itself or this is not the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if not _sessions:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False
        signal.signal(signal.SIGTERM, _on_sigterm)
    _sessions.add(session)
    return True


def uninstall(session):
    """`session` closed: the default SIGTERM action is back once none is open."""
    if session not in _sessions:
        return
    _sessions.discard(session)
    if not _sessions and threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def received():
    """Whether a SIGTERM arrived while a session watched for it."""
    return _received
