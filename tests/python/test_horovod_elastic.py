"""Elastic all-reduce in Horovod's shape (hvd.elastic; docs/COLLECTIVES.md,
Elastic groups) with real processes: `distflow-launch --ps 0 --min_workers 2
--max_workers 3` starts two ranks and a third worker that joins the running
job; the group grows to 3 at a commit and the joiner takes rank 0's state;
then one rank is SIGKILLed while the others wait for it in a reduction; the
survivors go back to their last commit, the group shrinks to 2 and the job
finishes with equal variables on the survivors and a lower loss. The
coordinator is a task of its own, so rank 0 may die too: the survivor
goes on and a replacement joins."""
import os
import re
import signal
import sys
import time

from launched_job import LaunchedJob

SOURCE = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(SOURCE, "build"))
LAUNCH = os.path.join(BUILD, "tools", "distflow-launch")
PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "horovod_elastic_program.py")
TIMEOUT = 240  # generous: a loaded machine is slow, never wrong


def Job(launcher_args, program_args):
    """The launcher's output, read as it comes; a death is noticed after 2 s."""
    return LaunchedJob([LAUNCH] + launcher_args + ["--", sys.executable, PROGRAM] + program_args,
                       env={"DISTFLOW_HEARTBEAT_TIMEOUT_SECS": "2"})


def test_a_worker_joins_and_one_dies_and_the_survivors_finish_equal(tmp_path):
    marker = tmp_path / "join"
    job = Job(["--ps", "0", "--min_workers", "2", "--max_workers", "3"],
              ["--num-steps", "40", "--join-marker", str(marker), "--wait-join-step", "10", "--wait-join-size", "3",
               "--hold-task", "1", "--hold-step", "20"])
    deadline = time.monotonic() + TIMEOUT
    try:
        # Two ranks train; at step 10 they wait for the joiner, let go now.
        assert job.wait_for(r"task 0: waiting for a join at step 10 with 2 ranks", deadline), job.output()[-6000:]
        marker.touch()
        held = job.wait_for(r"task 1 holding at step 20, pid (\d+)", deadline)
        assert held is not None, job.output()[-6000:]
        os.kill(int(held.group(1)), signal.SIGKILL)
    except BaseException:
        job.kill()
        raise
    out = job.finish(deadline)
    assert job.proc.returncode == 0, out[-6000:]
    # Process sets (fixed lists of ranks) are refused in elastic mode, naming why.
    assert re.search(r"task 0: process set refused: .*an elastic job's ranks change", out), out[-6000:]
    assert "accepted in elastic mode" not in out, out[-6000:]
    # The group grew from 2 to 3 at the join: the joined worker (task 2)
    # trained from step 11 with rank 0's state, as rank 2 of 3.
    assert re.search(r"\[worker:0\].*task 0 rank 0 of 2 step 10\b", out), out[-6000:]
    assert re.search(r"\[worker:0\].*task 0 rank 0 of 3 step 11\b", out), out[-6000:]
    assert re.search(r"\[worker:\+1\].*task 2 rank 2 of 3 step 11\b", out), out[-6000:]
    # Task 1's death failed the others' reduction, which went back to the
    # commit at step 20 and rebuilt the group without it.
    for name in ("0", r"\+1"):
        assert re.search(rf"\[worker:{name}\].*hvd.elastic: a collective failed", out), out[-6000:]
    assert re.search(r"\[worker:0\].*task 0 rank 0 of 2 step 21\b", out), out[-6000:]
    assert re.search(r"\[worker:\+1\].*task 2 rank 1 of 2 step 21\b", out), out[-6000:]
    assert re.search(r"worker:1 killed by signal 9", out) or re.search(r"worker:1 .*signal 9", out), out[-6000:]
    # The survivors end at the same step with the same variables, and learnt.
    done = {int(m.group(1)): m for m in re.finditer(
        r"task (\d) rank \d of 2 done at step (\d+) \(global step (\d+)\): loss ([0-9.]+) -> ([0-9.]+); "
        r"variables ([0-9a-f]+)", out)}
    assert sorted(done) == [0, 2], out[-6000:]
    assert {m.group(2) for m in done.values()} == {"40"}, out[-6000:]
    assert len({m.group(3) for m in done.values()}) == 1, out[-6000:]
    assert len({m.group(6) for m in done.values()}) == 1, f"the survivors' variables differ:\n{out[-6000:]}"
    assert float(done[0].group(5)) < 0.8 * float(done[0].group(4)), out[-6000:]


def test_worker_0_dies_and_the_others_go_on_with_a_replacement(tmp_path):
    """The coordinator is a task of its own (job "coordinator"), not worker
    0: rank 0 is SIGKILLed while rank 1 waits for it in a reduction; rank 1
    goes back to its last commit, the launcher starts a worker that joins
    in its place, and the two finish with equal variables."""
    job = Job(["--ps", "0", "--min_workers", "2", "--max_workers", "2", "--restart_on_failure", "1"],
              ["--num-steps", "25", "--wait-join-step", "15", "--wait-join-size", "2", "--hold-task", "0",
               "--hold-step", "12"])
    deadline = time.monotonic() + TIMEOUT
    try:
        held = job.wait_for(r"task 0 holding at step 12, pid (\d+)", deadline)
        assert held is not None, job.output()[-6000:]
        os.kill(int(held.group(1)), signal.SIGKILL)
    except BaseException:
        job.kill()
        raise
    out = job.finish(deadline)
    assert job.proc.returncode == 0, out[-6000:]
    assert re.search(r"\[launch\] cluster .*coordinator\|127\.0\.0\.1:\d+", out), out[-6000:]
    assert re.search(r"worker:0 was killed by signal 9 .*; a new worker joins the job in its place", out), out[-6000:]
    # The coordinator (not a rank) declared worker 0 dead and rebuilt the group.
    assert re.search(r"\[coordinator:0\].*/job:worker/replica:0/task:0 is declared dead", out), out[-6000:]
    assert re.search(r"\[worker:1\].*hvd.elastic: a collective failed", out), out[-6000:]
    # Task 1, the oldest survivor, is rank 0 from then on; the replacement
    # (task 2) joined through the coordinator and trained as rank 1 of 2.
    assert re.search(r"\[worker:1\].*task 1 rank 0 of [12] step 11\b", out), out[-6000:]
    assert re.search(r"\[worker:\+1\].*task 2 rank 1 of 2 step \d+", out), out[-6000:]
    done = {int(m.group(1)): m for m in re.finditer(
        r"task (\d) rank \d of 2 done at step (\d+) \(global step (\d+)\): loss ([0-9.]+) -> ([0-9.]+); "
        r"variables ([0-9a-f]+)", out)}
    assert sorted(done) == [1, 2], out[-6000:]
    assert {m.group(2) for m in done.values()} == {"25"}, out[-6000:]
    assert len({m.group(3) for m in done.values()}) == 1, out[-6000:]
    assert len({m.group(6) for m in done.values()}) == 1, f"the survivors' variables differ:\n{out[-6000:]}"
    assert float(done[1].group(5)) < 0.8 * float(done[1].group(4)), out[-6000:]
    assert "every task finished" in out, out[-6000:]


def test_a_restarted_coordinator_resumes_above_the_groups_generation(tmp_path):
    """The coordinator task is SIGKILLed while two ranks train (they wait
    for a join, committing); the launcher restarts it, the ranks' heartbeats
    and queries bring it back up to date (their generation included), a
    worker joins through it, and the group of 3 built there is in a newer
    generation than any before: the job finishes with equal variables."""
    marker = tmp_path / "join"
    job = Job(["--ps", "0", "--min_workers", "2", "--max_workers", "3", "--restart_on_failure", "1"],
              ["--num-steps", "30", "--join-marker", str(marker), "--wait-join-step", "10", "--wait-join-size", "3"])
    deadline = time.monotonic() + TIMEOUT
    try:
        started = job.wait_for(r"\[launch\] started .*coordinator:0 \(127\.0\.0\.1:\d+, pid (\d+)\)", deadline)
        assert started is not None, job.output()[-6000:]
        assert job.wait_for(r"task 0: waiting for a join at step 10 with 2 ranks", deadline), job.output()[-6000:]
        assert job.wait_for(r"\[coordinator:0\].*built: generation 1\b", deadline), job.output()[-6000:]
        os.kill(int(started.group(1)), signal.SIGKILL)
        assert job.wait_for(r"coordinator:0 was killed by signal 9 .*; restarting it \(1 of 1\)", deadline), \
            job.output()[-6000:]
        # The restarted coordinator has heard the ranks' generation before the joiner comes.
        assert job.wait_for(r"\[coordinator:0\].*resumes the elastic collective group of job 'worker' at generation 1\b",
                            deadline), job.output()[-6000:]
        marker.touch()
    except BaseException:
        job.kill()
        raise
    out = job.finish(deadline)
    assert job.proc.returncode == 0, out[-6000:]
    restart = out.index("restarting it (1 of 1)")
    # The group grew to 3 through the restarted coordinator, in generation 2 (never 1 again).
    built = re.findall(r"\[coordinator:0\].*built: generation (\d+), 3 rank", out[restart:])
    assert built and min(int(g) for g in built) >= 2, out[-6000:]
    assert not re.search(r"built: generation 1\b", out[restart:]), out[-6000:]
    assert re.search(r"\[worker:\+1\].*task 2 rank 2 of 3 step \d+", out), out[-6000:]
    done = {int(m.group(1)): m for m in re.finditer(
        r"task (\d) rank \d of 3 done at step (\d+) \(global step (\d+)\): loss ([0-9.]+) -> ([0-9.]+); "
        r"variables ([0-9a-f]+)", out)}
    assert sorted(done) == [0, 1, 2], out[-6000:]
    assert {m.group(2) for m in done.values()} == {"30"}, out[-6000:]
    assert len({m.group(6) for m in done.values()}) == 1, f"the ranks' variables differ:\n{out[-6000:]}"
    assert float(done[0].group(5)) < 0.8 * float(done[0].group(4)), out[-6000:]
    assert "every task finished" in out, out[-6000:]
