#!/usr/bin/python3
"""distflow-launch --emit: the manifests parse, describe the cluster asked
for, and the scripts inside them run: the Kubernetes container command under
sh with a pod's HOSTNAME, the SLURM batch script with stand-ins for scontrol
and srun, once with programs that print their arguments and once with the
real distflow-server and mnist_distributed on two loopback addresses.

  launch_emit_test.py --launch BIN --server BIN --mnist BIN [unittest args]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import yaml

from ports import free_port

BINS = None  # the parsed --launch/--server/--mnist


def launch(*args, code=0):
    """Runs distflow-launch; checks its exit status; returns the finished process."""
    p = subprocess.run([BINS.launch, *args], capture_output=True, text=True, timeout=60)
    if p.returncode != code:
        raise AssertionError(f"distflow-launch {' '.join(args)} exited {p.returncode}, expected {code}\n"
                             f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def write_exe(directory, name, body):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(body)
    os.chmod(path, 0o755)
    return path


# Prints its name, each argument on its own line, and DISTFLOW_CONFIG.
ECHO_ARGS = """#!/bin/sh
echo "program: $0"
for a in "$@"; do echo "arg: $a"; done
echo "config: ${DISTFLOW_CONFIG:-}"
"""

AWKWARD = "--note=it's \"quoted\" $HOME `x` \\ end"


def parse_echo(out):
    args = [l[len("arg: "):] for l in out.splitlines() if l.startswith("arg: ")]
    program = [l[len("program: "):] for l in out.splitlines() if l.startswith("program: ")]
    config = [l[len("config: "):] for l in out.splitlines() if l.startswith("config: ")]
    return program[0], args, config[0]


class Kubernetes(unittest.TestCase):
    def emit(self, *args, program=("mnist_distributed", "--train_steps=500")):
        out = launch("--emit", "kubernetes", *args, "--", *program).stdout
        docs = list(yaml.safe_load_all(out))
        self.assertNotIn(None, docs, "an empty YAML document")
        return docs

    def test_a_service_and_a_statefulset_per_job(self):
        docs = self.emit("--ps", "1", "--workers", "3")
        self.assertEqual([(d["apiVersion"], d["kind"], d["metadata"]["name"]) for d in docs],
                         [("v1", "Service", "distflow-ps"), ("apps/v1", "StatefulSet", "distflow-ps"),
                          ("v1", "Service", "distflow-worker"), ("apps/v1", "StatefulSet", "distflow-worker")])

    def test_services_are_headless_on_the_task_port(self):
        docs = self.emit("--ps", "1", "--workers", "3")
        for svc, sts in [(docs[0], docs[1]), (docs[2], docs[3])]:
            spec = svc["spec"]
            self.assertEqual(spec["clusterIP"], "None")
            self.assertIs(spec["publishNotReadyAddresses"], True)
            self.assertEqual([(p["port"], p["targetPort"]) for p in spec["ports"]], [(2222, 2222)])
            # The service selects exactly the pods of its own StatefulSet.
            self.assertEqual(spec["selector"], sts["spec"]["template"]["metadata"]["labels"])
        self.assertNotEqual(docs[0]["spec"]["selector"], docs[2]["spec"]["selector"])

    def test_statefulsets_have_the_tasks_replicas_and_grpc_probes(self):
        docs = self.emit("--ps", "2", "--workers", "3")
        for sts, job, replicas in [(docs[1], "ps", 2), (docs[3], "worker", 3)]:
            spec = sts["spec"]
            self.assertEqual(spec["serviceName"], f"distflow-{job}")
            self.assertEqual(spec["replicas"], replicas)
            self.assertEqual(spec["podManagementPolicy"], "Parallel")
            self.assertEqual(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])
            [container] = spec["template"]["spec"]["containers"]
            self.assertEqual(container["name"], job)
            self.assertEqual(container["image"], "distflow:latest")
            self.assertEqual([p["containerPort"] for p in container["ports"]], [2222])
            for probe in ("readinessProbe", "livenessProbe"):
                self.assertEqual(container[probe]["grpc"], {"port": 2222}, probe)

    def test_the_command_names_every_address_and_execs_the_program(self):
        docs = self.emit("--ps", "1", "--workers", "3")
        ps_cmd = docs[1]["spec"]["template"]["spec"]["containers"][0]["command"]
        worker_cmd = docs[3]["spec"]["template"]["spec"]["containers"][0]["command"]
        for cmd in (ps_cmd, worker_cmd):
            self.assertEqual(cmd[:2], ["/bin/sh", "-c"])
            self.assertEqual(len(cmd), 3)
            script = cmd[2]
            self.assertIn("${HOSTNAME##*-}", script)
            self.assertIn("export DISTFLOW_CONFIG=", script)
            for address in ["distflow-ps-0.distflow-ps:2222"] + [
                    f"distflow-worker-{i}.distflow-worker:2222" for i in range(3)]:
                self.assertIn(address, script)
            self.assertNotIn("distflow-worker-3.", script)
            # Kubernetes expands $(NAME) in commands itself.
            self.assertNotIn("$(", script)
            subprocess.run(["sh", "-n", "-c", script], check=True)
        self.assertIn("exec distflow-server --job_name=ps --task_index=\"$i\" --cluster_spec=", ps_cmd[2])
        self.assertIn("exec mnist_distributed --train_steps=500 --job_name=worker --task_index=\"$i\" --cluster_spec=",
                      worker_cmd[2])

    def run_pod(self, command, hostname, bin_dir):
        env = {"HOSTNAME": hostname, "PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": "/nonexistent"}
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=30)

    def test_a_pod_takes_its_task_from_its_hostname(self):
        with tempfile.TemporaryDirectory() as d:
            write_exe(d, "getent", "#!/bin/sh\nexit 0\n")  # every pod name resolves
            worker = write_exe(d, "worker_prog", ECHO_ARGS)
            ps = write_exe(d, "ps_prog", ECHO_ARGS)
            docs = self.emit("--ps", "1", "--workers", "3", "--ps_program", ps, program=(worker, AWKWARD))
            cmd = docs[3]["spec"]["template"]["spec"]["containers"][0]["command"]
            p = self.run_pod(cmd, "distflow-worker-2", d)
            self.assertEqual(p.returncode, 0, p.stderr)
            program, args, config = parse_echo(p.stdout)
            self.assertEqual(program, worker)
            spec = ("ps|distflow-ps-0.distflow-ps:2222,worker|distflow-worker-0.distflow-worker:2222;"
                    "distflow-worker-1.distflow-worker:2222;distflow-worker-2.distflow-worker:2222")
            self.assertEqual(args, [AWKWARD, "--job_name=worker", "--task_index=2", "--cluster_spec=" + spec])
            cfg = json.loads(config)
            self.assertEqual(cfg["task"], {"type": "worker", "index": 2})
            self.assertEqual(cfg["cluster"]["ps"], ["distflow-ps-0.distflow-ps:2222"])
            self.assertEqual(cfg["cluster"]["worker"][2], "distflow-worker-2.distflow-worker:2222")

            cmd = docs[1]["spec"]["template"]["spec"]["containers"][0]["command"]
            p = self.run_pod(cmd, "distflow-ps-0", d)
            self.assertEqual(p.returncode, 0, p.stderr)
            program, args, config = parse_echo(p.stdout)
            self.assertEqual(program, ps)
            self.assertEqual(args, ["--job_name=ps", "--task_index=0", "--cluster_spec=" + spec])
            self.assertEqual(json.loads(config)["task"], {"type": "ps", "index": 0})

            p = self.run_pod(cmd, "not-a-pod", d)
            self.assertEqual(p.returncode, 2)
            self.assertIn("HOSTNAME=not-a-pod does not end in a pod ordinal", p.stderr)

    def test_name_image_and_port_are_used_everywhere(self):
        docs = self.emit("--ps", "0", "--workers", "2", "--name", "run7", "--image", "registry.local/df:1.2",
                         "--base_port", "3000")
        self.assertEqual([(d["kind"], d["metadata"]["name"]) for d in docs],
                         [("Service", "run7-worker"), ("StatefulSet", "run7-worker")])
        self.assertEqual(docs[0]["spec"]["ports"][0]["port"], 3000)
        container = docs[1]["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(container["image"], "registry.local/df:1.2")
        self.assertEqual(container["livenessProbe"]["grpc"]["port"], 3000)
        self.assertIn("--cluster_spec='worker|run7-worker-0.run7-worker:3000;run7-worker-1.run7-worker:3000'",
                      container["command"][2])
        self.assertNotIn("ps|", container["command"][2])
        self.assertNotIn('"ps"', container["command"][2])

    def test_emit_file_holds_what_stdout_would(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cluster.yaml")
            p = launch("--emit", "kubernetes", "--emit_file", path, "--", "prog")
            self.assertEqual(p.stdout, "")
            with open(path) as f:
                self.assertEqual(f.read(), launch("--emit", "kubernetes", "--", "prog").stdout)


class Slurm(unittest.TestCase):
    def emit(self, *args, program=("./mnist_distributed", "--train_steps=500")):
        return launch("--emit", "slurm", *args, "--", *program).stdout

    def test_the_batch_script_asks_for_one_node_per_task(self):
        script = self.emit("--ps", "1", "--workers", "3", "--name", "mnist")
        subprocess.run(["bash", "-n", "-c", script], check=True)
        self.assertTrue(script.startswith("#!/bin/bash\n"))
        for line in ["#SBATCH --job-name=mnist", "#SBATCH --ntasks=4", "#SBATCH --nodes=4",
                     "#SBATCH --ntasks-per-node=1"]:
            self.assertIn(line + "\n", script)
        self.assertIn('scontrol show hostnames "$SLURM_JOB_NODELIST"', script)
        self.assertRegex(script, re.compile(r"^srun --ntasks=4 .*bash -c distflow_task$", re.M))
        # Both programs place themselves by rank.
        self.assertIn('exec distflow-server --job_layout=ps:1,worker:3 --cluster_spec="$DISTFLOW_CLUSTER_SPEC"', script)
        self.assertIn('exec ./mnist_distributed --train_steps=500 --job_layout=ps:1,worker:3 '
                      '--cluster_spec="$DISTFLOW_CLUSTER_SPEC"', script)

    def fake_slurm(self, d, nodes):
        """scontrol printing `nodes`; srun starting --ntasks ranks at once and logging its arguments."""
        write_exe(d, "scontrol", "#!/bin/sh\n" + "".join(f"echo {n}\n" for n in nodes))
        write_exe(d, "srun", f"""#!/bin/bash
echo "$@" > {d}/srun_args
n=1
while [ $# -gt 0 ]; do
  case "$1" in --ntasks=*) n="${{1#--ntasks=}}"; shift;; --*) shift;; *) break;; esac
done
pids=()
for ((r = 0; r < n; r++)); do SLURM_PROCID=$r "$@" > {d}/rank$r.out 2>&1 & pids+=($!); done
rc=0
for p in "${{pids[@]}}"; do wait "$p" || rc=$?; done
exit $rc
""")

    def run_script(self, d, script, nodes, timeout=60):
        path = write_exe(d, "job.sbatch", script)
        env = dict(os.environ, PATH=f"{d}:{os.environ['PATH']}", SLURM_JOB_NODELIST="n[1-4]")
        self.fake_slurm(d, nodes)
        return subprocess.run(["bash", path], capture_output=True, text=True, env=env, timeout=timeout)

    def rank_output(self, d, r):
        with open(os.path.join(d, f"rank{r}.out")) as f:
            return f.read()

    def test_each_rank_runs_its_program_with_the_layout(self):
        with tempfile.TemporaryDirectory() as d:
            ps = write_exe(d, "ps_prog", ECHO_ARGS)
            worker = write_exe(d, "worker_prog", ECHO_ARGS)
            script = self.emit("--ps", "1", "--workers", "3", "--ps_program", ps, program=(worker, AWKWARD))
            p = self.run_script(d, script, ["n1", "n2", "n3", "n4"])
            self.assertEqual(p.returncode, 0, p.stderr)
            spec = "ps|n1:2222,worker|n2:2222;n3:2222;n4:2222"
            self.assertIn("distflow: cluster " + spec, p.stdout)
            with open(os.path.join(d, "srun_args")) as f:
                self.assertTrue(f.read().startswith("--ntasks=4 --ntasks-per-node=1"))
            cluster = {"ps": ["n1:2222"], "worker": ["n2:2222", "n3:2222", "n4:2222"]}
            program, args, config = parse_echo(self.rank_output(d, 0))
            self.assertEqual((program, args), (ps, ["--job_layout=ps:1,worker:3", "--cluster_spec=" + spec]))
            self.assertEqual(json.loads(config), {"cluster": cluster, "task": {"type": "ps", "index": 0}})
            for r in (1, 2, 3):
                program, args, config = parse_echo(self.rank_output(d, r))
                self.assertEqual((program, args),
                                 (worker, [AWKWARD, "--job_layout=ps:1,worker:3", "--cluster_spec=" + spec]))
                self.assertEqual(json.loads(config), {"cluster": cluster, "task": {"type": "worker", "index": r - 1}})

    def test_without_a_ps_every_rank_is_a_worker(self):
        """--ps 0 (Horovod-style all-reduce): no ps program anywhere; rank r
        is worker r, in its flags and in DISTFLOW_CONFIG (what hvd.init()
        reads)."""
        with tempfile.TemporaryDirectory() as d:
            worker = write_exe(d, "worker_prog", ECHO_ARGS)
            script = self.emit("--ps", "0", "--workers", "3", program=(worker, AWKWARD))
            self.assertIn("#SBATCH --ntasks=3\n", script)
            self.assertIn("# What every rank runs: the program.", script)
            self.assertNotIn("distflow-server", script)
            self.assertNotIn("ps|", script)
            p = self.run_script(d, script, ["n1", "n2", "n3"])
            self.assertEqual(p.returncode, 0, p.stderr)
            spec = "worker|n1:2222;n2:2222;n3:2222"
            self.assertIn("distflow: cluster " + spec, p.stdout)
            for r in (0, 1, 2):
                program, args, config = parse_echo(self.rank_output(d, r))
                self.assertEqual((program, args), (worker, [AWKWARD, "--job_layout=worker:3", "--cluster_spec=" + spec]))
                self.assertEqual(json.loads(config), {"cluster": {"worker": ["n1:2222", "n2:2222", "n3:2222"]},
                                                      "task": {"type": "worker", "index": r}})

    def test_all_reduce_training_without_a_ps_on_two_loopback_nodes(self):
        """The emitted --ps 0 script runs mnist_distributed --all_reduce on
        two nodes: both ranks train and end with the same variables."""
        port = free_port("127.0.0.1", "127.0.0.2")
        with tempfile.TemporaryDirectory() as d:
            script = self.emit("--ps", "0", "--workers", "2", "--base_port", str(port),
                               program=(BINS.mnist, "--all_reduce", "--model=softmax", "--train_steps=20",
                                        "--learning_rate=0.003", "--print_every=1000", "--progress=false"))
            p = self.run_script(d, script, ["127.0.0.1", "127.0.0.2"], timeout=240)
            outs = [self.rank_output(d, r) for r in (0, 1)]
            self.assertEqual(p.returncode, 0, f"{p.stderr}\nrank 0:\n{outs[0]}\nrank 1:\n{outs[1]}")
            sums = [re.findall(r"variables checksum ([0-9a-f]+)", o) for o in outs]
            self.assertTrue(sums[0] and sums[0] == sums[1], f"rank 0:\n{outs[0]}\nrank 1:\n{outs[1]}")

    def test_too_few_nodes_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            script = self.emit("--ps", "1", "--workers", "3", program=("/bin/true",))
            p = self.run_script(d, script, ["n1", "n2"])
            self.assertEqual(p.returncode, 2)
            self.assertIn("the allocation has 2 nodes; ps:1,worker:3 needs 4", p.stderr)

    def test_the_real_programs_train_on_two_loopback_nodes(self):
        port = free_port("127.0.0.1", "127.0.0.2")
        with tempfile.TemporaryDirectory() as d:
            script = self.emit("--ps", "1", "--workers", "1", "--base_port", str(port), "--ps_program", BINS.server,
                               program=(BINS.mnist, "--model=softmax", "--train_steps=30", "--learning_rate=0.003",
                                        "--print_every=1000", "--wait_for_workers_secs=20", "--progress=false"))
            p = self.run_script(d, script, ["127.0.0.1", "127.0.0.2"], timeout=240)
            ps_out, chief_out = self.rank_output(d, 0), self.rank_output(d, 1)
            self.assertEqual(p.returncode, 0, f"{p.stderr}\nps:\n{ps_out}\nchief:\n{chief_out}")
            self.assertIn("placed by --job_layout=ps:1,worker:1 with SLURM_PROCID=1", chief_out)
            self.assertIn("Test-Accuracy", chief_out)
            self.assertIn("placed by --job_layout=ps:1,worker:1 with SLURM_PROCID=0", ps_out)


class BadInput(unittest.TestCase):
    def assert_rejected(self, args, message):
        p = launch(*args, code=2)
        self.assertIn(message, p.stderr)
        self.assertEqual(p.stdout, "")

    def test_bad_command_lines_exit_two_naming_the_problem(self):
        self.assert_rejected(["--emit", "k8s", "--", "prog"], "--emit=k8s is not a cluster manager")
        self.assert_rejected(["--emit", "slurm", "--workers", "0", "--", "prog"], "need ps >= 0 and workers >= 1")
        self.assert_rejected(["--emit", "kubernetes", "--ps", "-1", "--", "prog"], "need ps >= 0 and workers >= 1")
        self.assert_rejected(["--emit", "kubernetes", "--name", "My_Job", "--", "prog"], "--name=My_Job is not a DNS label")
        self.assert_rejected(["--emit", "kubernetes", "--name", "x" * 60, "--", "prog"], "63 characters")
        self.assert_rejected(["--emit", "slurm", "--base_port", "70000", "--", "prog"], "--base_port=70000 is not a port")
        self.assert_rejected(["--emit", "slurm", "--cluster_spec=worker|a:1", "--", "prog"], "drop --cluster_spec")
        self.assert_rejected(["--emit", "slurm"], "no program")
        self.assert_rejected(["--emit_file", "/tmp/x.yaml", "--", "prog"], "--emit_file needs --emit")
        self.assert_rejected(["--emit", "slurm", "--emit_file", "/nonexistent/dir/job.sbatch", "--", "prog"],
                             "cannot write --emit_file=/nonexistent/dir/job.sbatch")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--launch", required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--mnist", required=True)
    BINS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
