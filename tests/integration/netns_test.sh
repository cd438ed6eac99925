#!/usr/bin/env bash
# Test hosts in network namespaces: the book's program (softmax), each task
# on its own "host" (a network namespace with its own address in
# 10.213.0.0/24), joined by veth pairs to a bridge that lives in a namespace
# of its own. Nothing is created in the caller's namespace and no traffic
# leaves the namespaces. The scenarios:
#   lost (default): 1 ps + 2 workers; worker 1's host goes off the network
#     (its link down) for good. The chief must declare it dead by name and
#     finish, and the ps must exit 0.
#   blip: the same for 1 s, well under the heartbeat timeout (6 s). Nobody
#     may be declared dead; both workers finish and every task exits 0.
#   vanish: 1 ps + 3 workers (4 hosts), synchronous with a backup worker (2
#     of 3 gradients per step); worker 2's host disappears (its namespace is
#     deleted with its processes). The other two finish the job, the chief
#     names worker 2 dead and does not wait for it; ps, chief and worker 1
#     exit 0.
#   pspart: 1 ps + 2 workers; the ps host and worker 1's host can no longer
#     reach each other (a blackhole route on each side) while both still
#     reach the chief and the chief reaches them. The coordinator (ps 0)
#     declares worker 1 dead by name; the chief finishes and the ps exits 0;
#     worker 1 gives up within its --recovery_timeout_secs (exit 1) naming
#     the ps it could not reach, and is not left running.
#   launch: 1 ps + 2 workers, one distflow-launch on each host with the
#     whole --cluster_spec and --this_host=<its address>: each starts only
#     its host's task; the job trains across the hosts, the chief ends it,
#     and every launcher exits 0. A --this_host that no task is on exits 2
#     naming the spec's hosts.
#   remote: distflow-launch on one host (10.213.0.1, its ps there) starts
#     the workers on the hosts a discovery script lists, through
#     --remote_shell='ip netns exec <prefix>_{host} sh -c' (each host's
#     namespace is named after its address): 10.213.0.2 and 10.213.0.3,
#     and 10.213.0.9, which has no namespace, so its remote shell fails.
#     The workers must run inside their hosts' namespaces, train and exit;
#     10.213.0.9 must be named and blacklisted; the launcher exits 0 and
#     nothing of the job is left on any host. Then the launcher is sent
#     SIGTERM while the job trains: it exits 130 and every process of the
#     job on the worker hosts is gone. Last, a --cluster_spec with two tasks
#     on the other hosts that neither serve nor write: the launcher is
#     SIGKILLed, and the remote tasks' watchdogs (their input ends) must
#     stop them within the grace period.
#
#   netns_test.sh MNIST_DISTRIBUTED_BIN [lost|blip|vanish|pspart|launch|remote] [DISTFLOW_LAUNCH_BIN]
#
# Needs root (CI runs as root); without it the test fails saying so.
# Everything it made is removed on exit, pass or fail.
set -u
BIN=${1:?usage: netns_test.sh MNIST_DISTRIBUTED_BIN [lost|blip|vanish|pspart|launch|remote] [DISTFLOW_LAUNCH_BIN]}
MODE=${2:-lost}
LAUNCH=${3:-}
HOSTS=(ps w0 w1)
EXTRA=()
STEPS=3000
case "$MODE" in
  lost | pspart) HB=3 ;;
  blip) HB=6 ;;
  # Synchronous steps are slower: fewer of them, so the scenario stays short.
  vanish) HB=3; HOSTS=(ps w0 w1 w2); EXTRA=(--sync_replicas --replicas_to_aggregate=2); STEPS=400 ;;
  launch) HB=10 ;;
  # Each host's namespace is named after its address: the remote shell's {host}.
  remote) HB=3; HOSTS=(10.213.0.1 10.213.0.2 10.213.0.3) ;;
  *) echo "FAIL: unknown scenario '$MODE' (lost, blip, vanish, pspart, launch or remote)"; exit 1 ;;
esac
P="dfns$$"  # namespace prefix, unique per run
WORK=$(mktemp -d /tmp/distflow_netns.XXXXXX)
fail() { echo "FAIL: $*"; exit 1; }

cleanup() {
  for h in "${HOSTS[@]}" br; do
    local ns="${P}_$h"
    ip netns list 2>/dev/null | grep -qw "$ns" || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  local left
  left=$(ip netns list 2>/dev/null | grep -c "^${P}_")
  [ "$left" = 0 ] || echo "WARNING: $left namespace(s) of this test are left"
  rm -rf "$WORK"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || fail "creating network namespaces needs root (this test runs as uid $(id -u))"
command -v ip >/dev/null || fail "the ip tool (iproute2) is missing"

ip netns add "${P}_br" || fail "cannot create a network namespace (ip netns add)"
ip -n "${P}_br" link add br0 type bridge || fail "cannot create a bridge in ${P}_br"
ip -n "${P}_br" link set br0 up
i=1
for h in "${HOSTS[@]}"; do
  ns="${P}_$h"
  ip netns add "$ns" || fail "cannot create namespace $ns"
  # The pair is made inside the host's namespace, its peer moved straight
  # into the bridge's: neither end is ever in the caller's namespace.
  ip -n "$ns" link add eth0 type veth peer name "v$i" netns "${P}_br" || fail "cannot create a veth pair for $h"
  ip -n "$ns" addr add "10.213.0.$i/24" dev eth0
  ip -n "$ns" link set lo up
  ip -n "$ns" link set eth0 up
  ip -n "${P}_br" link set "v$i" master br0
  ip -n "${P}_br" link set "v$i" up
  i=$((i + 1))
done

SPEC="ps|10.213.0.1:2222,worker|10.213.0.2:2222;10.213.0.3:2222"
[ "$MODE" = vanish ] && SPEC="$SPEC;10.213.0.4:2222"
run() {  # host job task steps [flags...]
  local host=$1 job=$2 task=$3 steps=$4
  shift 4
  ip netns exec "${P}_$host" "$BIN" --cluster_spec="$SPEC" --job_name="$job" --task_index="$task" --model=softmax \
    --learning_rate=0.003 --train_steps="$steps" --logdir="$WORK/logs" --save_checkpoint_steps=50 --print_every=500 \
    --progress=false --wait_for_workers_secs=60 --heartbeat_timeout_secs=$HB ${EXTRA[@]+"${EXTRA[@]}"} "$@" >"$WORK/$host.log" 2>&1 &
}
wait_for() {  # pid seconds -> exit code, or 124 on timeout
  for _ in $(seq 1 $(($2 * 10))); do
    kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }
    sleep 0.1
  done
  return 124
}
if [ "$MODE" = remote ]; then
  [ -x "$LAUNCH" ] || fail "remote needs the distflow-launch binary as the third argument"
  printf '10.213.0.2\n10.213.0.3\n10.213.0.9\n' >"$WORK/hosts"
  job_pids() {  # the processes on the worker hosts
    ip netns pids "${P}_10.213.0.2" 2>/dev/null
    ip netns pids "${P}_10.213.0.3" 2>/dev/null
  }
  start_launcher() {  # log steps min max heartbeat_timeout: the launcher in 10.213.0.1's namespace, its pid in LP
    ip netns exec "${P}_10.213.0.1" "$LAUNCH" --ps 1 --min_workers "$3" --max_workers "$4" --host 10.213.0.1 \
      --host_discovery_script "cat $WORK/hosts" --discovery_interval_secs 1 --grace_secs 5 \
      --remote_shell "ip netns exec ${P}_{host} sh -c" -- "$BIN" --model=softmax --learning_rate=0.003 \
      --train_steps="$2" --print_every=500 --progress=false --wait_for_workers_secs=60 --heartbeat_timeout_secs="$5" \
      >"$WORK/$1" 2>&1 &
    LP=$!
  }
  gone_within() {  # seconds: every process on the worker hosts ended within them
    for _ in $(seq 1 $(($1 * 10))); do
      [ -z "$(job_pids)" ] && return 0
      sleep 0.1
    done
    return 1
  }
  status=0
  # 0. Bad remote shells exit 2 before anything starts, naming the fix.
  ip netns exec "${P}_10.213.0.1" "$LAUNCH" --remote_shell= --cluster_spec="worker|10.213.0.2:2222" -- /bin/true \
    >"$WORK/bad.log" 2>&1; rc=$?
  [ $rc = 2 ] && grep -q "task worker:0 is on 10.213.0.2, which is not this machine, and --remote_shell is empty" \
    "$WORK/bad.log" || { cat "$WORK/bad.log"; echo "FAIL: an empty --remote_shell with a remote task exited $rc"; status=1; }
  "$LAUNCH" --remote_shell=ssh --cluster_spec="worker|10.213.0.2:2222" -- /bin/true >"$WORK/bad.log" 2>&1; rc=$?
  [ $rc = 2 ] && grep -q "remote_shell='ssh' has no {host}" "$WORK/bad.log" ||
    { cat "$WORK/bad.log"; echo "FAIL: a --remote_shell without {host} exited $rc"; status=1; }
  # 1. The job across the hosts, a failing host blacklisted.
  start_launcher run.log 1500 2 3 $HB
  in_ns2=0 in_ns3=0
  for _ in $(seq 1 2000); do
    kill -0 $LP 2>/dev/null || break
    [ -n "$(ip netns pids "${P}_10.213.0.2")" ] && in_ns2=1
    [ -n "$(ip netns pids "${P}_10.213.0.3")" ] && in_ns3=1
    sleep 0.1
  done
  wait_for $LP 30; rc=$?
  L="$WORK/run.log"
  [ $rc = 0 ] || { cat "$L"; echo "FAIL: the launcher exited $rc"; status=1; }
  [ $in_ns2$in_ns3 = 11 ] || { echo "FAIL: no process ran in the namespaces of 10.213.0.2 ($in_ns2) and 10.213.0.3 ($in_ns3)"; status=1; }
  grep -q "cluster ps|10.213.0.1:[0-9]*,worker|10.213.0.2:[0-9]*;10.213.0.3:[0-9]*" "$L" ||
    { cat "$L"; echo "FAIL: the spec's workers were not placed on 10.213.0.2 and 10.213.0.3"; status=1; }
  for w in "0 10.213.0.2" "1 10.213.0.3"; do
    set -- $w
    grep -q "^\[worker:$1\] .*Started server for /job:worker/replica:0/task:$1 on $2:" "$L" ||
      { cat "$L"; echo "FAIL: worker $1 did not serve on its host's address $2"; status=1; }
  done
  grep -q "^\[worker:0\] Test-Accuracy" "$L" || { cat "$L"; echo "FAIL: the chief (on 10.213.0.2) did not finish training with its output prefixed"; status=1; }
  grep -q "^\[worker:1\] Worker : 1, Step:" "$L" || { cat "$L"; echo "FAIL: worker 1 (on 10.213.0.3) did not train"; status=1; }
  grep -q "worker:+1 exited with status 255 (started on 10.213.0.9 through --remote_shell='ip netns exec ${P}_{host} sh -c'" "$L" ||
    { cat "$L"; echo "FAIL: the worker whose remote shell failed on 10.213.0.9 was not named with its host"; status=1; }
  grep -q "Cannot open network namespace \"${P}_10.213.0.9\"" "$L" ||
    { cat "$L"; echo "FAIL: the remote shell's own error was not shown"; status=1; }
  grep -q "host 10.213.0.9 is blacklisted" "$L" || { cat "$L"; echo "FAIL: 10.213.0.9 was not blacklisted"; status=1; }
  grep -q "\[launch\] every task finished" "$L" || { cat "$L"; echo "FAIL: the launcher did not see every task finish"; status=1; }
  gone_within 10 || { echo "FAIL: processes left on the worker hosts after the job: $(job_pids)"; status=1; }
  # 2. SIGTERM, then 3. SIGKILL to the launcher while the job trains.
  # 2. SIGTERM to the launcher while the job trains: it stops every task,
  # on every host. The workers would give up by themselves once the ps (on
  # the launcher's host) has been silent for their heartbeat timeout: a long
  # one here, so that it is the launcher that stops them.
  start_launcher TERM.log 1000000 2 2 120
  for _ in $(seq 1 1200); do grep -q "^\[worker:1\] Worker : 1, Step:" "$WORK/TERM.log" && break; kill -0 $LP 2>/dev/null || break; sleep 0.1; done
  if grep -q "^\[worker:1\] Worker : 1, Step:" "$WORK/TERM.log"; then
    [ -n "$(job_pids)" ] || { echo "FAIL: no process of the job on the worker hosts before SIGTERM"; status=1; }
    kill -TERM $LP
    wait_for $LP 30; rc=$?
    [ $rc = 130 ] || { cat "$WORK/TERM.log"; echo "FAIL: the launcher exited $rc after SIGTERM, not 130"; status=1; }
    gone_within 10 || { cat "$WORK/TERM.log"; echo "FAIL: after SIGTERM to the launcher, processes were left on the worker hosts: $(job_pids)"; status=1; }
  else
    cat "$WORK/TERM.log"; echo "FAIL: the job did not train before SIGTERM"; status=1; kill -9 $LP 2>/dev/null
  fi
  # 3. SIGKILL to the launcher of a --cluster_spec over two other hosts whose
  # tasks neither serve nor write (so no broken pipe or lost peer ends
  # them): only the watchdogs, seeing their input end, can stop them.
  ip netns exec "${P}_10.213.0.1" "$LAUNCH" --cluster_spec="worker|10.213.0.2:2222;10.213.0.3:2222" --grace_secs 5 \
    --remote_shell "ip netns exec ${P}_{host} sh -c" -- sh -c 'exec sleep 600' silent >"$WORK/KILL.log" 2>&1 &
  LP=$!
  for _ in $(seq 1 300); do
    [ -n "$(ip netns pids "${P}_10.213.0.2")" ] && [ -n "$(ip netns pids "${P}_10.213.0.3")" ] && break
    sleep 0.1
  done
  if [ -n "$(ip netns pids "${P}_10.213.0.2")" ] && [ -n "$(ip netns pids "${P}_10.213.0.3")" ]; then
    kill -KILL $LP
    wait_for $LP 10 >/dev/null 2>&1
    gone_within 10 || { cat "$WORK/KILL.log"; echo "FAIL: after SIGKILL to the launcher, its remote tasks were left running: $(job_pids)"; status=1; }
  else
    cat "$WORK/KILL.log"; echo "FAIL: the --cluster_spec tasks did not start on 10.213.0.2 and 10.213.0.3"; status=1; kill -9 $LP 2>/dev/null
  fi
  grep -q "started 2 tasks: worker:0 (10.213.0.2:2222" "$WORK/KILL.log" ||
    { cat "$WORK/KILL.log"; echo "FAIL: the launcher did not start the spec's two remote tasks"; status=1; }
  [ $status = 0 ] && echo "PASS: workers started through the remote shell trained on their hosts; the failing host was blacklisted; nothing was left after the end, a SIGTERM or a SIGKILL"
  exit $status
fi
if [ "$MODE" = launch ]; then
  [ -x "$LAUNCH" ] || fail "launch needs the distflow-launch binary as the third argument"
  "$LAUNCH" --cluster_spec="$SPEC" --this_host=10.213.0.9 -- "$BIN" >"$WORK/nohost.log" 2>&1
  rc=$?
  [ $rc = 2 ] || { cat "$WORK/nohost.log"; fail "--this_host with no task on it exited $rc, not 2"; }
  grep -q "no task of --cluster_spec is on --this_host=10.213.0.9; its hosts are: 10.213.0.1, 10.213.0.2, 10.213.0.3" \
    "$WORK/nohost.log" || { cat "$WORK/nohost.log"; fail "--this_host with no task on it did not name the hosts"; }
  i=1
  for h in ps w0 w1; do
    ip netns exec "${P}_$h" "$LAUNCH" --cluster_spec="$SPEC" --this_host="10.213.0.$i" --ps_program="$BIN" -- \
      "$BIN" --model=softmax --learning_rate=0.003 --train_steps=600 --print_every=500 --progress=false \
      --wait_for_workers_secs=60 >"$WORK/$h.log" 2>&1 &
    eval "L_$h=\$!"
    i=$((i + 1))
  done
  status=0
  for h in w0 w1 ps; do
    eval "pid=\$L_$h"
    wait_for "$pid" 200; rc=$?
    if [ $rc != 0 ]; then echo "--- $h"; cat "$WORK/$h.log"; echo "FAIL: the launcher on $h exited $rc"; status=1; fi
    grep -q "\[launch\] started 1 tasks" "$WORK/$h.log" ||
      { echo "--- $h"; cat "$WORK/$h.log"; echo "FAIL: the launcher on $h did not start exactly its one task"; status=1; }
  done
  grep -q "Test-Accuracy" "$WORK/w0.log" || { echo "FAIL: the chief did not finish training"; status=1; }
  grep -q "All 2 workers are done" "$WORK/w0.log" || { echo "FAIL: the chief did not see both workers done"; status=1; }
  grep -q "ps 0: the cluster was shut down" "$WORK/ps.log" || { echo "FAIL: the ps was not ended by the chief"; status=1; }
  [ $status = 0 ] && echo "PASS: one launcher per host ran the job across 3 hosts; every launcher exited 0"
  exit $status
fi
run ps ps 0 0; PS=$!
# In pspart, worker 1 cannot reach the ps: it waits at most 15 s for it.
W1_FLAGS=()
[ "$MODE" = pspart ] && W1_FLAGS=(--recovery_timeout_secs=15)
run w1 worker 1 $STEPS ${W1_FLAGS[@]+"${W1_FLAGS[@]}"}; W1=$!
[ "$MODE" = vanish ] && run w2 worker 2 $STEPS
run w0 worker 0 $STEPS; W0=$!

# Worker 1's host drops off the network once training is under way.
for _ in $(seq 1 1200); do
  ls "$WORK/logs" 2>/dev/null | grep -q 'model.ckpt-[0-9]*.index' && break
  kill -0 $W0 2>/dev/null || break
  sleep 0.1
done
ls "$WORK/logs" 2>/dev/null | grep -q 'model.ckpt-[0-9]*.index' || { cat "$WORK/w0.log"; fail "no checkpoint within 120 s"; }
case "$MODE" in
  vanish)
    # The host disappears: its processes die with its namespace, its veth with them.
    for pid in $(ip netns pids "${P}_w2"); do kill -9 "$pid"; done
    ip netns del "${P}_w2" || fail "cannot delete w2's namespace"
    # The kernel frees the namespace (and the veth with it) once its last process is gone.
    for _ in $(seq 1 100); do ip -n "${P}_br" link show v4 >/dev/null 2>&1 || break; sleep 0.1; done
    ip -n "${P}_br" link show v4 >/dev/null 2>&1 && fail "w2's veth outlived its namespace by 10 s"
    ;;
  pspart)
    ip -n "${P}_w1" route add blackhole 10.213.0.1/32 || fail "cannot cut w1 off from the ps"
    ip -n "${P}_ps" route add blackhole 10.213.0.3/32 || fail "cannot cut the ps off from w1"
    ;;
  *) ip -n "${P}_w1" link set eth0 down || fail "cannot take w1's link down" ;;
esac

if [ "$MODE" = blip ]; then
  # The outage itself, not a wait for a condition: the link stays down 1 s,
  # far below the heartbeat timeout (${HB} s) on a slow machine or a fast one.
  sleep 1
  ip -n "${P}_w1" link set eth0 up || fail "cannot bring w1's link back up"
  wait_for $W0 200; rc0=$?
  wait_for $W1 60; rc1=$?
  wait_for $PS 30; rcps=$?
  status=0
  for t in "w0 $rc0" "w1 $rc1" "ps $rcps"; do
    set -- $t
    if [ "$2" != 0 ]; then echo "--- $1"; cat "$WORK/$1.log"; echo "FAIL: $1 exited $2"; status=1; fi
  done
  for h in ps w0 w1; do
    if grep -q "declared dead" "$WORK/$h.log"; then
      echo "--- $h"; cat "$WORK/$h.log"; echo "FAIL: $h declared a task dead after a 1 s blip (timeout ${HB} s)"; status=1
    fi
  done
  grep -q "All 2 workers are done" "$WORK/w0.log" || { echo "FAIL: the chief did not see both workers done"; status=1; }
  [ $status = 0 ] && echo "PASS: a 1 s link blip of worker 1's host: nobody declared dead, every task exited 0"
  exit $status
fi
if [ "$MODE" = vanish ]; then
  wait_for $W0 200; rc0=$?
  wait_for $W1 60; rc1=$?
  wait_for $PS 30; rcps=$?
  status=0
  for t in "w0 $rc0" "w1 $rc1" "ps $rcps"; do
    set -- $t
    if [ "$2" != 0 ]; then echo "--- $1"; cat "$WORK/$1.log"; echo "FAIL: $1 exited $2"; status=1; fi
  done
  grep "declared dead" "$WORK/w0.log" | grep -q "/job:worker/replica:0/task:2" ||
    { echo "--- chief"; cat "$WORK/w0.log"; echo "FAIL: the chief did not name worker 2 as declared dead"; status=1; }
  grep -q "Test-Accuracy" "$WORK/w0.log" || { echo "FAIL: the chief did not finish training"; status=1; }
  grep -q "2 of 3 workers reported done" "$WORK/w0.log" ||
    { echo "--- chief"; cat "$WORK/w0.log"; echo "FAIL: the chief did not report 2 of 3 workers done"; status=1; }
  [ $status = 0 ] && echo "PASS: w2's host vanished during sync training with a backup worker; the job finished"
  exit $status
fi
if [ "$MODE" = pspart ]; then
  wait_for $W0 200; rc0=$?
  wait_for $PS 30; rcps=$?
  wait_for $W1 60; rc1=$?
  status=0
  for t in "w0 $rc0" "ps $rcps"; do
    set -- $t
    if [ "$2" != 0 ]; then echo "--- $1"; cat "$WORK/$1.log"; echo "FAIL: $1 exited $2"; status=1; fi
  done
  cat "$WORK/ps.log" "$WORK/w0.log" | grep "declared dead" | grep -q "/job:worker/replica:0/task:1" ||
    { echo "--- ps"; cat "$WORK/ps.log"; echo "FAIL: worker 1 was not declared dead by name"; status=1; }
  grep -q "Test-Accuracy" "$WORK/w0.log" || { echo "--- chief"; cat "$WORK/w0.log"; echo "FAIL: the chief did not finish training"; status=1; }
  if [ "$rc1" = 124 ]; then
    echo "--- w1"; cat "$WORK/w1.log"; echo "FAIL: worker 1 was still running 60 s after the ps exited"; status=1
  elif [ "$rc1" = 0 ]; then
    echo "--- w1"; cat "$WORK/w1.log"; echo "FAIL: worker 1 exited 0 although it could not reach the ps"; status=1
  elif ! grep -q "/job:ps" "$WORK/w1.log"; then
    echo "--- w1"; cat "$WORK/w1.log"; echo "FAIL: worker 1 exited $rc1 without naming the ps"; status=1
  fi
  [ $status = 0 ] && echo "PASS: the ps and worker 1 partitioned: worker 1 declared dead and gave up naming the ps; the job finished"
  exit $status
fi
wait_for $W0 200; rc0=$?
wait_for $PS 30; rcps=$?
status=0
if [ $rc0 != 0 ]; then echo "--- chief"; cat "$WORK/w0.log"; echo "FAIL: the chief exited $rc0"; status=1; fi
if [ $rcps != 0 ]; then echo "--- ps"; cat "$WORK/ps.log"; echo "FAIL: the ps exited $rcps"; status=1; fi
if ! grep -q "declared dead" "$WORK/w0.log" || ! grep "declared dead" "$WORK/w0.log" | grep -q "/job:worker/replica:0/task:1"; then
  echo "--- chief"; cat "$WORK/w0.log"; echo "FAIL: the chief did not name /job:worker/replica:0/task:1 as declared dead"; status=1
fi
grep -q "Test-Accuracy" "$WORK/w0.log" || { echo "FAIL: the chief did not finish training"; status=1; }
grep -q "1 of 2 workers reported done" "$WORK/w0.log" || { echo "FAIL: the chief did not report 1 of 2 workers done"; status=1; }
[ $status = 0 ] && echo "PASS: the chief named the lost host's task and finished; the ps exited 0"
exit $status
