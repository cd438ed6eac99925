#!/usr/bin/env python3
"""Where the README's cluster spends its CPU: 1 ps + 3 asynchronous workers of
mnist_distributed (the book's CNN, batch 50) on this machine's loopback,
profiled over a window of global steps taken after a warm-up.

Per process (ps, worker 0..2) it reports
  * CPU ms per global step (all threads, user + system, from /proc/<pid>/task/*/stat),
  * that CPU split into groups by the symbol (and shared object) of each
    `perf record -e cpu-clock` sample taken in the window: kernels (oneDNN, its
    JIT code, OpenMP, Eigen and distflow's op kernels), copies (memcpy/memmove/
    memset and the kernel's user-copy routines, i.e. socket payload copies),
    page faults (faulting and zeroing fresh pages), (de)serialisation
    (protobuf, tensor codecs), gRPC (its libraries), syscalls and the network
    stack (other kernel time), waiting (scheduler, futex, epoll, mutex and
    OpenMP spinning: CPU spent not doing work while waiting), allocation
    (malloc/free), and the rest (executor, rendezvous, libc, ...),
  * context switches per global step (voluntary + involuntary, summed over the
    process's threads, from /proc/<pid>/task/*/status),
  * bytes copied per global step, where the process counts them
    (distflow_bytes_copied_total in /metrics).
and the CPU of each process's thread groups (threads named alike).

perf samples on-CPU time only; time a process spends blocked does not appear
in its CPU, only in the wall time of a step.

  bench/profile_cluster.sh [BUILD_DIR]   (builds, then runs this)
  /usr/bin/python3 bench/profile_cluster.py --build BUILD [--warmup 60] [--steps 300]
      [--intra_op_threads N] [--label TEXT] [--no-perf]
      [--config 'NAME::--flag=1 ENV=VALUE' ...] [--rounds N] [--local] [--ops N] [--sched]

With --config (repeatable), each round runs every configuration once, in turn
(interleaved, so a change of load hits them alike): NAME labels it, and the
words are extra flags for every task, or VAR=VALUE for their environment.
The tables of the last round and, per configuration, the medians over the
rounds of examples/s, CPU ms per global step and context switches per global
step are printed.

--local also profiles mnist_local --threads=1 each round over a window of the
same size, and --ops N prints the last round's top N symbols in CPU ms per
step side by side: the ps per global step, the workers summed (CPU per worker
step), mnist_local per step; oneDNN's JIT kernels are named through the
/tmp/perf-<pid>.map files DNNL_JIT_PROFILE=2 makes it write (removed after).
--sched records the scheduler's switches and wake-ups machine-wide in the
window: how many of the cluster's threads wanted a core over time, and per
process the time running, runnable but waiting for a core, and blocked.

Without perf (or if the kernel forbids it: perf_event_paranoid) the CPU and
context-switch columns still come from /proc.
"""

import argparse
import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
import ports  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")

GROUPS = ["kernels", "copies", "page faults", "serialisation", "gRPC", "syscalls+net", "waiting", "alloc", "other"]

KERNEL_HINTS = ("Eigen::", "dnnl", "Conv", "MaxPool", "Relu", "BiasAdd", "Apply", "Adam", "Softmax", "MatMul",
                "Sgemm", "Gemm", "Reduce", "Broadcast", "Cwise", "Binary", "Unary", "Pool", "Kernel::Compute",
                "Op::Compute", "Op<", "Functor", "gemm")
WAIT_KERNEL = ("schedule", "finish_task_switch", "pick_next", "futex", "__x64_sys_futex", "do_futex",
               "try_to_wake_up", "wake_up", "ep_poll", "do_epoll_wait", "__x64_sys_epoll", "poll_schedule",
               "queued_spin_lock", "_raw_spin_unlock_irqrestore", "switch_mm", "__switch_to", "dequeue_task",
               "enqueue_task", "update_curr", "ttwu", "select_task_rq", "psi_", "sched_", "hrtimer", "native_sched",
               "__perf_event_task_sched", "__sysvec_call_function", "do_nanosleep")
COPY_KERNEL = ("_copy_from_iter", "_copy_to_iter", "copy_user", "_copy_to_user", "_copy_from_user", "copyin", "copyout", "rep_movs", "memcpy",
               "copy_page_", "skb_copy_datagram", "simple_copy_to_iter", "__skb_datagram_iter", "memmove")
FAULT_KERNEL = ("clear_page", "page_fault", "handle_mm_fault", "do_anonymous_page", "__handle_mm_fault",
                "alloc_pages", "get_page_from_freelist", "rmqueue", "zap_", "unmap", "free_pages", "free_unref",
                "release_pages", "lru_", "folio", "mmap", "munmap", "mprotect", "do_user_addr_fault", "memcg",
                "__mod_", "charge")


KERNEL_SKIP = ("pvm_irq_enable", "__raw_callee_save_pvm_irq_enable", "_raw_spin_unlock_irqrestore",
               "_raw_spin_unlock_irq", "_raw_spin_unlock", "native_irq_enable", "__local_bh_enable_ip",
               "irq_exit", "__irq_exit_rcu", "asm_sysvec", "sysvec_")


def classify_kernel(frames):
    """The group of a sample taken in the kernel, from its call chain (leaf first).

    On this VM the sampling interrupt lands where interrupts are re-enabled
    (pvm_irq_enable), so the leaf says little: the first frame up the chain
    that names a copy, a fault or a wait decides."""
    for sym, dso in frames:
        if not dso.startswith("[kernel"):
            break
        if any(sym.startswith(k) for k in KERNEL_SKIP):
            continue
        if any(k in sym for k in COPY_KERNEL):
            return "copies"
        if any(k in sym for k in FAULT_KERNEL):
            return "page faults"
        if any(k in sym for k in WAIT_KERNEL):
            return "waiting"
    return "syscalls+net"


def classify(frames):
    """The group of one sample, from its leaf symbol and shared object (and
    its kernel call chain for a sample taken in the kernel)."""
    s, d = frames[0] if frames else ("", "")
    if d.startswith("[kernel"):
        return classify_kernel(frames)
    base = os.path.basename(d)
    if re.search(r"mem(cpy|move|set)|__memmove|__memcpy|__memset|wmemset", s):
        return "copies"
    if "libgomp" in base:
        return "waiting" if re.search(r"barrier|wait|spin|futex|do_wait", s) else "kernels"
    if "libprotobuf" in base or "google::protobuf" in s or re.search(r"proto::|Serialize|Parse|Encode|Decode|Gather", s):
        return "serialisation"
    if re.search(r"libgrpc|libgpr|libupb|libaddress_sorting|libcares|libre2", base) or s.startswith("grpc"):
        return "gRPC"
    if "libdnnl" in base or base.startswith("perf-") or base in ("[unknown]", "//anon", "[anon]"):
        return "kernels"  # oneDNN's JIT code: no symbol, or perf-<pid>.map
    if re.search(r"malloc|free|_int_|tcache|arena|operator new|operator delete|cfree|sysmalloc|aligned_alloc", s):
        return "alloc"
    if re.search(r"pthread_cond|__lll_lock|futex|sched_yield|epoll_wait|absl::.*(Mutex|CondVar|Waiter|Spin)|"
                 r"synchronization_internal|__pthread_mutex|pthread_mutex", s):
        return "waiting"
    if any(k in s for k in KERNEL_HINTS):
        return "kernels"
    if re.search(r"__libc_(send|recv|read|write)|__send|__recv|sendmsg|recvmsg|__write|__read|\bsend\b|\brecv\b", s):
        return "syscalls+net"
    return "other"


def op_key(frames):
    """A short name for what one sample was doing: the oneDNN JIT kernel (named
    through perf-<pid>.map, which DNNL_JIT_PROFILE=2 makes oneDNN write), the
    distflow kernel (its functor or lambda's class), or the leaf symbol; a
    sample in the kernel is named by its group."""
    s, d = frames[0] if frames else ("", "")
    if d.startswith("[kernel"):
        return "[kernel: " + classify_kernel(frames) + "]"
    if os.path.basename(d).startswith("perf-") or d in ("[unknown]", "//anon", "[anon]"):
        return "oneDNN JIT: " + (re.sub(r"\[unknown\]", "unnamed", s) or "unnamed")
    for sym, _ in frames[:4]:
        m = re.search(r"distflow::\(anonymous namespace\)::(\w+)", sym)
        if m and m.group(1) not in ("Shard", "ParallelForImpl"):
            return m.group(1)
    return re.sub(r"\(.*", "", s)[:80] or d


def thread_group(comm):
    """Threads named alike form a group: 'df_inter' for 'df_inter3'; gRPC's event-engine threads as 'grpc'."""
    c = re.sub(r"[-_:]?\d+$", "", comm.strip())
    if c.startswith(("grpc", "default-execu", "resolver-exec", "timer_manager", "event_engine", "grpc_global_tim")):
        return "grpc"
    return c or comm


def read_threads(pid):
    """{tid: (comm, cpu_ticks(user, sys), ctxsw(vol, invol))} of a live process."""
    out = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
            with open(f"{base}/{tid}/status") as f:
                status = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        utime, stime = int(fields[11]), int(fields[12])
        vol = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        invol = int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        out[tid] = (comm, (utime, stime), (vol, invol))
    return out


def scrape(port):
    """Metric lines of a task's /metrics page: {name{labels}: value} ({} if it does not answer)."""
    for _ in range(3):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
            break
        except OSError:
            time.sleep(0.5)
    else:
        return {}
    vals = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, _, v = line.rpartition(" ")
        try:
            vals[key] = float(v)
        except ValueError:
            pass
    return vals


def metric_sum(vals, name, label_filter=""):
    return sum(v for k, v in vals.items() if k.split("{")[0] == name and label_filter in k)


def log_steps(logs, workers):
    """(global step, workers that have printed a step): each worker prints the
    global step whenever it crosses a multiple of --print_every (10 here)."""
    best, training = 0, 0
    for i in range(workers):
        try:
            with open(os.path.join(logs, f"worker{i}.log"), errors="replace") as f:
                found = [int(x) for x in re.findall(r"Step: (\d+)", f.read())]
        except OSError:
            found = []
        if found:
            training += 1
            best = max(best, max(found))
    return best, training


def start_cluster(args, logs):
    names = ["ps"] + [f"worker {i}" for i in range(args.workers)]
    addrs = [ports.free_port() for _ in names]
    status = [ports.free_port() for _ in names]
    spec = f"ps|127.0.0.1:{addrs[0]},worker|" + ";".join(f"127.0.0.1:{a}" for a in addrs[1:])
    binary = os.path.join(args.build, "examples", "mnist_distributed")
    common = [binary, f"--cluster_spec={spec}", "--model=cnn", "--batch_size=50", "--print_every=10",
              "--progress=false", f"--train_steps={args.warmup + args.steps + args.tail}"]
    if args.intra_op_threads is not None:
        common.append(f"--intra_op_threads={args.intra_op_threads}")
    env = dict(os.environ)
    if args.perf:
        env.setdefault("DNNL_JIT_PROFILE", "2")  # oneDNN names its JIT code in /tmp/perf-<pid>.map
    for word in args.extra:
        if word.startswith("--"):
            common.append(word)
        else:
            k, _, v = word.partition("=")
            env[k] = v
    procs = []
    for i, name in enumerate(names):
        job = ["--job_name=ps", "--task_index=0"] if i == 0 else ["--job_name=worker", f"--task_index={i - 1}",
                                                                   "--wait_for_workers_secs=60"]
        log = open(os.path.join(logs, name.replace(" ", "") + ".log"), "w")
        procs.append(subprocess.Popen(common + job + [f"--status_port={status[i]}"], stdout=log,
                                      stderr=subprocess.STDOUT, env=env))
    return names, procs, status


def wait_steps(logs, workers, procs, target, timeout):
    """Waits until every worker trains and the global step reaches `target`; returns (step, time)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"a task ended before the window closed (logs in {logs})")
        g, training = log_steps(logs, workers)
        if g >= target and training == workers:
            return g, time.time()
        time.sleep(0.02)
    raise RuntimeError(f"timed out waiting for global step {target}")


def perf_samples(data):
    """[(pid, comm, frames)] of a perf.data file recorded with -g; frames are (symbol, dso), leaf first."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "pid,comm,ip,sym,dso"], capture_output=True, text=True,
                         errors="replace").stdout
    samples = []
    head = re.compile(r"^(\S.*?)\s+(\d+)\s*$")
    frame = re.compile(r"^\s+[0-9a-f]+\s+(.*)\s+\(([^()]*)\)\s*$")
    cur = None
    for line in out.splitlines():
        m = head.match(line)
        if m:
            cur = (int(m.group(2)), m.group(1).strip(), [])
            samples.append(cur)
            continue
        m = frame.match(line)
        if m and cur is not None:
            cur[2].append((re.sub(r"\+0x[0-9a-f]+$", "", m.group(1)), m.group(2)))
    return samples


SWITCH = re.compile(r"^\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch:.*prev_pid=(\d+) .*prev_state=(\S+) "
                    r"==> .*next_pid=(\d+)")
WAKE = re.compile(r"^\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:sched_wakeup(?:_new)?:.* pid=(\d+) ")


def sched_demand(data, owner, nprocs):
    """From a system-wide record of sched_switch/sched_wakeup: how many of the
    cluster's threads wanted a core (running or runnable) over time, and per
    process the time with at least one thread running, with some runnable but
    none running (waiting for a core: the load's), and with none runnable
    (blocked: waiting for a peer, the network or a lock). owner: {tid: process index}.
    Returns ({demand: seconds}, [(running, runnable only, blocked) seconds per process], window seconds)."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "tid,cpu,time,event,trace"], capture_output=True,
                         text=True, errors="replace").stdout
    state = {}  # tid -> "run" | "rq" (absent: asleep)
    hist = collections.Counter()
    per = [[0.0, 0.0, 0.0] for _ in range(nprocs)]
    t_prev = t_first = None
    for line in out.splitlines():
        m = SWITCH.match(line)
        w = None if m else WAKE.match(line)
        if not m and not w:
            continue
        t = float((m or w).group(3))
        if t_prev is not None:
            dt = t - t_prev
            hist[len(state)] += dt
            for i in range(nprocs):
                sts = [v for tid, v in state.items() if owner[tid] == i]
                if "run" in sts:
                    per[i][0] += dt
                elif sts:
                    per[i][1] += dt
                else:
                    per[i][2] += dt
        else:
            t_first = t
        t_prev = t
        if m:
            prev, pstate, nxt = int(m.group(4)), m.group(5), int(m.group(6))
            if prev in owner:
                if pstate.startswith("R"):
                    state[prev] = "rq"
                else:
                    state.pop(prev, None)
            if nxt in owner:
                state[nxt] = "run"
        else:
            tid = int(w.group(4))
            if tid in owner and state.get(tid) != "run":
                state[tid] = "rq"
    return hist, per, (t_prev - t_first) if t_prev is not None else 0.0


def remove_perf_map(pid):
    try:
        os.remove(f"/tmp/perf-{pid}.map")
    except OSError:
        pass


def profile_once(args, logs):
    names, procs, status = start_cluster(args, logs)
    perf = None
    try:
        g0, t0 = wait_steps(logs, args.workers, procs, args.warmup, timeout=900)
        pids = [p.pid for p in procs]
        before = {pid: read_threads(pid) for pid in pids}
        m_before = [scrape(p) for p in status]
        if args.perf:
            data = os.path.join(logs, "perf.data")
            perf = subprocess.Popen(["perf", "record", "-q", "-F", str(args.freq), "-e", "cpu-clock", "-g", "-o", data,
                                     "-p", ",".join(map(str, pids))], stdout=subprocess.DEVNULL,
                                    stderr=open(os.path.join(logs, "perf.err"), "w"))
        if args.sched:
            sched = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "sched:sched_switch", "-e",
                                      "sched:sched_wakeup", "-e", "sched:sched_wakeup_new", "-o",
                                      os.path.join(logs, "sched.data")], stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(logs, "perf_sched.err"), "w"))
        g1, t1 = wait_steps(logs, args.workers, procs, g0 + args.steps, timeout=1800)
        after = {pid: read_threads(pid) for pid in pids}  # before anything else: tasks end soon after
        if args.sched:
            sched.send_signal(signal.SIGINT)
            sched.wait(timeout=300)
        if perf is not None:
            perf.send_signal(signal.SIGINT)
        m_after = [scrape(p) for p in status]
        if perf is not None:
            perf.wait(timeout=300)
        load = os.getloadavg()
    finally:
        for p in procs:
            try:
                p.wait(timeout=300)
            except subprocess.TimeoutExpired:
                p.kill()
    steps = g1 - g0
    result = {"steps": steps, "wall": t1 - t0, "load": load, "procs": []}
    if args.sched:
        owner = {int(tid): i for i, pid in enumerate(pids) for tid in list(before[pid]) + list(after[pid])}
        result["sched"] = sched_demand(os.path.join(logs, "sched.data"), owner, len(pids))
    samples = perf_samples(os.path.join(logs, "perf.data")) if args.perf else []
    for pid in pids:
        remove_perf_map(pid)
    for i, pid in enumerate(pids):
        cpu = [0, 0]
        cs = [0, 0]
        groups = collections.Counter()
        for tid, (comm, ticks, sw) in after[pid].items():
            b = before[pid].get(tid, (comm, (0, 0), (0, 0)))
            du, ds = ticks[0] - b[1][0], ticks[1] - b[1][1]
            cpu[0] += du
            cpu[1] += ds
            cs[0] += sw[0] - b[2][0]
            cs[1] += sw[1] - b[2][1]
            groups[thread_group(comm)] += du + ds
        cats, ops = collections.Counter(), collections.Counter()
        for spid, _, frames in samples:
            if spid == pid:
                cats[classify(frames)] += 1
                ops[op_key(frames)] += 1
        copied = (metric_sum(m_after[i], "distflow_bytes_copied_total") -
                  metric_sum(m_before[i], "distflow_bytes_copied_total"))
        result["procs"].append({
            "name": names[i], "cpu_ms": 1000.0 * (cpu[0] + cpu[1]) / CLK_TCK / steps,
            "sys_frac": cpu[1] / max(1, cpu[0] + cpu[1]), "cs": (cs[0] + cs[1]) / steps, "vol": cs[0] / steps,
            "cats": cats, "ops": ops, "threads": groups, "copied": copied / steps,
            "copied_known": any(k.startswith("distflow_bytes_copied_total") for k in m_after[i])})
    return result


def profile_local(args, logs):
    """mnist_local --threads=1 over the same window: --warmup steps, then --steps profiled."""
    binary = os.path.join(args.build, "examples", "mnist_local")
    log_path = os.path.join(logs, "local.log")
    env = dict(os.environ)
    if args.perf:
        env.setdefault("DNNL_JIT_PROFILE", "2")
    for word in args.extra:
        if not word.startswith("--"):
            k, _, v = word.partition("=")
            env[k] = v
    proc = subprocess.Popen([binary, "--threads=1", "--print_every=10",
                             f"--steps={args.warmup + args.steps + args.tail}"], stdout=open(log_path, "w"),
                            stderr=subprocess.STDOUT, env=env)

    def step():
        with open(log_path, errors="replace") as f:
            found = [int(x) for x in re.findall(r"^step\s+(\d+)", f.read(), re.M)]
        return max(found) if found else 0

    def wait(target):
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mnist_local ended before the window closed (log in {log_path})")
            g = step()
            if g >= target:
                return g, time.time()
            time.sleep(0.02)

    perf = None
    try:
        g0, t0 = wait(args.warmup)
        before = read_threads(proc.pid)
        if args.perf:
            perf = subprocess.Popen(["perf", "record", "-q", "-F", str(args.freq), "-e", "cpu-clock", "-g", "-o",
                                     os.path.join(logs, "perf_local.data"), "-p", str(proc.pid)],
                                    stdout=subprocess.DEVNULL, stderr=open(os.path.join(logs, "perf.err"), "w"))
        g1, t1 = wait(g0 + args.steps)
        after = read_threads(proc.pid)
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=300)
    finally:
        proc.kill()
        proc.wait()
    steps = g1 - g0
    cpu, cs, groups = [0, 0], [0, 0], collections.Counter()
    for tid, (comm, ticks, sw) in after.items():
        b = before.get(tid, (comm, (0, 0), (0, 0)))
        cpu[0] += ticks[0] - b[1][0]
        cpu[1] += ticks[1] - b[1][1]
        cs[0] += sw[0] - b[2][0]
        cs[1] += sw[1] - b[2][1]
        groups[thread_group(comm)] += ticks[0] - b[1][0] + ticks[1] - b[1][1]
    cats, ops = collections.Counter(), collections.Counter()
    for _, _, frames in (perf_samples(os.path.join(logs, "perf_local.data")) if args.perf else []):
        cats[classify(frames)] += 1
        ops[op_key(frames)] += 1
    remove_perf_map(proc.pid)
    return {"name": "mnist_local --threads=1", "cpu_ms": 1000.0 * (cpu[0] + cpu[1]) / CLK_TCK / steps,
            "sys_frac": cpu[1] / max(1, cpu[0] + cpu[1]), "cs": (cs[0] + cs[1]) / steps, "vol": cs[0] / steps,
            "cats": cats, "ops": ops, "threads": groups, "copied": 0, "copied_known": False,
            "wall_ms": 1000.0 * (t1 - t0) / steps}


def op_ms(p):
    """{op: CPU ms per step} of one profiled process (its CPU split by its perf samples)."""
    n = sum(p["ops"].values())
    return {k: p["cpu_ms"] * v / n for k, v in p["ops"].items()} if n else {}


def ops_table(rows, top):
    """rows: (column name, {op: CPU ms per step}, total CPU ms per step); the top ops side by side."""
    keys = collections.Counter()
    for _, ms, _ in rows:
        keys.update(ms)
    shown = [k for k, _ in keys.most_common(top)]
    lines = ["| what (distflow kernel / oneDNN JIT kernel / leaf symbol) | " + " | ".join(r[0] for r in rows) + " |",
             "|---|" + "---:|" * len(rows)]
    for k in shown:
        lines.append(f"| {k} | " + " | ".join(f"{ms.get(k, 0.0):.2f}" for _, ms, _ in rows) + " |")
    lines.append("| (the rest) | " + " | ".join(f"{sum(v for k, v in ms.items() if k not in shown):.2f}"
                                               for _, ms, _ in rows) + " |")
    lines.append("| **CPU ms per step (/proc)** | " + " | ".join(f"**{t:.2f}**" for _, _, t in rows) + " |")
    return "\n".join(lines)


def report(r, args):
    steps, wall = r["steps"], r["wall"]
    lines = []
    title = f"{args.label}: " if args.label else ""
    lines.append(f"{title}{steps:.0f} global steps in {wall:.1f} s = {steps / wall:.1f} global steps/s "
                 f"({steps * 50 / wall:.0f} examples/s); load average {r['load'][0]:.1f} at the end")
    lines.append("")
    hdr = ["process", "CPU ms/step", "sys %"] + GROUPS + ["ctx sw/step (vol)", "bytes copied/step"]
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "---|" * len(hdr))
    tot_cpu = 0.0
    for p in r["procs"]:
        n = sum(p["cats"].values())
        row = [p["name"], f"{p['cpu_ms']:.1f}", f"{100 * p['sys_frac']:.0f}"]
        for g in GROUPS:
            row.append(f"{100 * p['cats'][g] / n:.1f}%" if n else "-")
        row.append(f"{p['cs']:.1f} ({p['vol']:.1f})")
        row.append(f"{p['copied'] / 1e6:.2f} MB" if p["copied_known"] else "not counted")
        lines.append("| " + " | ".join(row) + " |")
        tot_cpu += p["cpu_ms"]
    lines.append("")
    lines.append(f"All four processes: {tot_cpu:.1f} CPU ms per global step; wall {1000 * wall / steps:.1f} ms per "
                 f"global step, i.e. {tot_cpu / (1000 * wall / steps):.2f} cores busy on average.")
    lines.append("")
    lines.append("CPU ms per global step by thread group (threads named alike):")
    lines.append("")
    for p in r["procs"]:
        total = sum(p["threads"].values()) or 1
        parts = [f"{g} {p['cpu_ms'] * v / total:.1f}" for g, v in p["threads"].most_common(6) if v > 0]
        lines.append(f"- {p['name']}: " + ", ".join(parts))
    if "sched" in r:
        hist, per, span = r["sched"]
        tot = sum(hist.values()) or 1
        want = sum(min(k, 2) * v for k, v in hist.items()) / tot
        lines.append("")
        lines.append("Threads of the cluster wanting a core (running or runnable), share of the window: " +
                     ", ".join(f"{k if k < 3 else '3+'}: {100 * sum(v for kk, v in hist.items() if min(kk, 3) == k) / tot:.1f}%"
                               for k in range(4)) +
                     f"; on average {want:.2f} of the 2 cores wanted (the cores a quiet machine would keep busy).")
        lines.append("")
        lines.append("| process | running ms / global step | runnable, not running (waiting for a core) | "
                     "blocked (no thread runnable) |")
        lines.append("|---|---:|---:|---:|")
        for p, (run, rq, blk) in zip(r["procs"], per):
            lines.append(f"| {p['name']} | {1000 * run * wall / span / steps:.1f} | {1000 * rq * wall / span / steps:.1f} | "
                         f"{1000 * blk * wall / span / steps:.1f} |")
    return "\n".join(lines)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=60, help="global steps before the window")
    ap.add_argument("--steps", type=int, default=300, help="global steps in the window")
    ap.add_argument("--tail", type=int, default=150, help="global steps after the window (so no task ends inside it)")
    ap.add_argument("--intra_op_threads", type=int, default=None,
                    help="passed to every task (default: not passed, as in the README's command)")
    ap.add_argument("--freq", type=int, default=499, help="perf samples per second per CPU")
    ap.add_argument("--no-perf", dest="perf", action="store_false")
    ap.add_argument("--label", default="")
    ap.add_argument("--config", action="append", default=[], help="NAME::words (see above); repeatable")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the logs and perf.data")
    ap.add_argument("--local", action="store_true",
                    help="each round also profiles mnist_local --threads=1 over a window of the same size, and the "
                    "last round's table of top symbols compares its step with a worker's")
    ap.add_argument("--sched", action="store_true",
                    help="also record the scheduler's switches and wake-ups machine-wide in the window: how many of "
                    "the cluster's threads want a core over time, and per process running / runnable / blocked time")
    ap.add_argument("--ops", type=int, default=0, help="print the last round's N top symbols per process")
    args = ap.parse_args()
    if args.perf and shutil.which("perf") is None:
        print("perf not found (Debian: linux-perf); profiling with /proc only", file=sys.stderr)
        args.perf = False
    configs = []
    for c in args.config or [""]:
        name, _, words = c.partition("::")
        configs.append((name or args.label, words.split()))
    summary = collections.defaultdict(list)
    last_rows, local_rows = {}, []
    for rnd in range(1, args.rounds + 1):
        for name, words in configs:
            args.extra, args.label = words, name
            logs = tempfile.mkdtemp(prefix="profile_cluster_")
            try:
                r = profile_once(args, logs)
            finally:
                if args.keep:
                    print(f"(logs and perf.data in {logs})", file=sys.stderr)
                else:
                    shutil.rmtree(logs, ignore_errors=True)
            cpu = sum(p["cpu_ms"] for p in r["procs"])
            cs = sum(p["cs"] for p in r["procs"])
            ps = r["procs"][0]  # the ps is started (and listed) first
            summary[name].append((r["steps"] * 50 / r["wall"], cpu, cs, r["load"][0], ps["cpu_ms"], ps["cs"]))
            print(f"round {rnd}: {name or 'cluster'}: {r['steps'] * 50 / r['wall']:.0f} examples/s, "
                  f"{cpu:.1f} CPU ms/step, {cs:.1f} ctx sw/step; ps {ps['cpu_ms']:.1f} CPU ms/step, "
                  f"{ps['cs']:.1f} ctx sw/step", file=sys.stderr)
            if rnd == args.rounds:
                print(report(r, args))
                print()
                if args.ops:
                    workers = r["procs"][1:]
                    summed = collections.Counter()
                    for w in workers:
                        summed.update(op_ms(w))
                    last_rows[name] = [("ps, per global step", op_ms(r["procs"][0]), r["procs"][0]["cpu_ms"]),
                                       ("workers, per worker step", dict(summed), sum(w["cpu_ms"] for w in workers))]
        if args.local:
            args.extra = []
            logs = tempfile.mkdtemp(prefix="profile_local_")
            try:
                loc = profile_local(args, logs)
            finally:
                shutil.rmtree(logs, ignore_errors=True)
            local_rows.append(loc)
            print(f"round {rnd}: mnist_local --threads=1: {loc['cpu_ms']:.1f} CPU ms/step, {loc['wall_ms']:.1f} ms "
                  f"wall/step, {loc['cs']:.1f} ctx sw/step", file=sys.stderr)
    if args.local:
        loc = local_rows[-1]
        n = sum(loc["cats"].values())
        print(f"mnist_local --threads=1, median of {len(local_rows)} round(s): "
              f"{median([x['cpu_ms'] for x in local_rows]):.1f} CPU ms per step, "
              f"{median([x['wall_ms'] for x in local_rows]):.1f} ms wall per step, "
              f"{median([x['cs'] for x in local_rows]):.1f} ctx sw per step; last round's groups: " +
              ", ".join(f"{g} {100 * loc['cats'][g] / n:.1f}%" for g in GROUPS if n))
        print()
    if args.ops:
        for name, rows in last_rows.items():
            if args.local:
                rows = rows + [("mnist_local --threads=1, per step", op_ms(local_rows[-1]), local_rows[-1]["cpu_ms"])]
            print(f"Top symbols, CPU ms per step{' (' + name + ')' if name else ''}, last round:")
            print()
            print(ops_table(rows, args.ops))
            print()
    if len(configs) > 1 or args.rounds > 1:
        print(f"Medians over {args.rounds} interleaved round(s), {args.steps} global steps each:")
        print()
        print("| configuration | examples/s | CPU ms / global step (4 processes) | ctx sw / global step | "
              "ps CPU ms / global step | ps ctx sw / global step | load (1 min) |")
        print("|---|---|---|---|---|---|---|")
        for name, _ in configs:
            rows = summary[name]
            print(f"| {name or 'cluster'} | {median([x[0] for x in rows]):.0f} | {median([x[1] for x in rows]):.1f} | "
                  f"{median([x[2] for x in rows]):.1f} | {median([x[4] for x in rows]):.1f} | "
                  f"{median([x[5] for x in rows]):.1f} | {median([x[3] for x in rows]):.1f} |")


if __name__ == "__main__":
    main()
