"""Rebuilding the collective group after a rank dies (docs/COLLECTIVES.md,
Failure): three real processes train a Horovod-style program under
distflow-launch --ps 0 --restart_on_failure; one is SIGKILLed while the
others wait for it in a reduction, the launcher restarts it, every rank
meets at the coordinator in a new generation of the group, the restarted
rank takes the survivors' variables, and training goes on to the end."""
import os
import re
import signal
import sys
import time

from launched_job import LaunchedJob

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
LAUNCH = os.path.join(BUILD, "tools", "distflow-launch")
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_recovery_program.py")
TIMEOUT = 240  # generous: a loaded machine is slow, never wrong


def Job(args, hold_rank):
    """The launcher's output, read as it comes."""
    return LaunchedJob([LAUNCH, "--ps", "0", "--workers", "3", "--restart_on_failure", "1", "--", sys.executable,
                        PROGRAM] + args)


def test_killed_rank_is_restarted_and_rejoins_with_the_survivors_variables(tmp_path):
    marker = tmp_path / "held"
    job = Job(["--num-steps", "60", "--hold-rank", "2", "--hold-step", "20", "--marker", str(marker)], 2)
    deadline = time.monotonic() + TIMEOUT
    try:
        held = job.wait_for(r"rank 2 holding at step (\d+), pid (\d+)", deadline)
        assert held is not None, job.output()[-6000:]
        killed_at = time.time()
        os.kill(int(held.group(2)), signal.SIGKILL)
    except BaseException:
        job.kill()
        raise
    out = job.finish(deadline)
    assert job.proc.returncode == 0, out[-6000:]
    # The launcher restarted rank 2, and the survivors recovered.
    assert re.search(r"worker:2.*restarting it", out), out[-6000:]
    assert len(re.findall(r"rank 2 started, pid", out)) == 2, out[-6000:]
    for rank in (0, 1):
        # The survivors' reduction failed naming the dead rank, and they recovered.
        assert re.search(rf"\[worker:{rank}\].*Step failed.*rank 2 \(/job:worker/replica:0/task:2\) failed or "
                         rf"cannot be reached", out), out[-6000:]
        assert re.search(rf"\[worker:{rank}\].*recreating the session", out), out[-6000:]
        assert re.search(rf"\[worker:{rank}\].*The model survived on its tasks", out), out[-6000:]
    # Every rank moved on from the fresh job's generation 1 to a later
    # one, with the state from rank 0 (the lowest survivor).
    for rank in range(3):
        gens = [int(g) for g in re.findall(
            rf"\[worker:{rank}\].*Collective group of 3 ranks is in generation (\d+) \(state from rank 0\)", out)]
        assert gens and max(gens) >= 2, out[-6000:]
    # The ranks end at the same step with the same variables, and learnt.
    done = {int(m.group(1)): m for m in re.finditer(
        r"rank (\d) done at step (\d+): loss ([0-9.]+) -> ([0-9.]+); variables ([0-9a-f]+)", out)}
    assert sorted(done) == [0, 1, 2], out[-6000:]
    assert {m.group(2) for m in done.values()} == {"60"}, out[-6000:]
    assert len({m.group(5) for m in done.values()}) == 1, f"the ranks' variables differ:\n{out[-6000:]}"
    assert float(done[0].group(4)) < 0.8 * float(done[0].group(3)), out[-6000:]
    # The restarted rank started from the survivors' model: its first loss
    # is already below the untrained one.
    assert float(done[2].group(3)) < float(done[0].group(3)), out[-6000:]
    after = [float(t) for t in re.findall(r"\[worker:0\].*rank 0 step \d+ at ([0-9.]+)", out) if float(t) > killed_at]
    assert after, out[-6000:]
    print(f"from rank 2's death to rank 0's next reduced step: {min(after) - killed_at:.2f} s")
