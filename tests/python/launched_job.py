"""A program under distflow-launch, its output read as it comes: shared by
the tests that wait for a line before they act (kill a rank, let a joiner
in) and then read the whole output."""
import os
import re
import subprocess
import threading
import time


class LaunchedJob:
    """Runs `command` (the launcher and its arguments) with the test's
    environment less DISTFLOW_CONFIG, plus `env` (may be None)."""

    def __init__(self, command, env=None):
        full_env = dict(os.environ)
        full_env.pop("DISTFLOW_CONFIG", None)
        full_env.update(env or {})
        self.lines, self.cond = [], threading.Condition()
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=full_env)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def wait_for(self, pattern, deadline):
        """The first match of `pattern` in a line, waiting for it until
        `deadline` (time.monotonic()) or the end of the output."""
        seen = 0
        with self.cond:
            while time.monotonic() < deadline:
                for line in self.lines[seen:]:
                    if line is None:
                        return None
                    m = re.search(pattern, line)
                    if m:
                        return m
                seen = len(self.lines)
                self.cond.wait(1)
        return None

    def finish(self, deadline):
        """Waits for the launcher until `deadline` (time.monotonic()), kills
        it if it is still running then (its return code is then not 0), and
        returns the whole output."""
        try:
            self.proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self.reader.join(10)
        return self.output()

    def kill(self):
        """Kills the launcher (and so its tasks) if it is still running."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def output(self):
        with self.cond:
            return "".join(line for line in self.lines if line is not None)
